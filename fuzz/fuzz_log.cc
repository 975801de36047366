// libFuzzer target: arbitrary bytes as a training log, plain or gzip (formats/torch_logs: the
// launcher prefixes, mmcv's lines, each release's watchdog lines; streamed in windows, gzip
// inflated with its ratio limit). The reader takes files, so each input is written to one file
// of this process first. Any input must end in a TrainingLog or a ScenarioError: no crash, no
// hang, no unbounded allocation.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "base/error.h"
#include "formats/torch_logs/training_log.h"

namespace {

const std::string& InputPath() {
  static const std::string path = "/tmp/petrsim_fuzz_log_" + std::to_string(::getpid()) + ".log";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::FILE* file = std::fopen(InputPath().c_str(), "wb");
  if (file == nullptr) return 0;
  const bool written = std::fwrite(data, 1, size, file) == size;
  std::fclose(file);
  if (!written) return 0;
  try {
    const petrsim::TrainingLog log = petrsim::ReadTrainingLogs({InputPath()});
    (void)log;
  } catch (const petrsim::ScenarioError&) {
  }
  return 0;
}
