// libFuzzer target: arbitrary bytes as a Python config (lexer, parser, evaluator, mmcv's
// _file2dict without bases: a `_base_` path names no file under /nonexistent) and as the Config:
// block of a training log. Any input must end in a Config or a ScenarioError: no crash, no hang,
// no unbounded allocation (the reader's limits: formats/pyconfig/limits.h).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/error.h"
#include "formats/mmcv/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const petrsim::Config config = petrsim::ReadMmcvConfigText(bytes, "/nonexistent/fuzz.py");
    (void)config.root.Repr();
  } catch (const petrsim::ScenarioError&) {
  }
  try {
    const std::string log = "2024-03-01 09:00:01,200 - mmdet - INFO - Config:\n" + std::string(bytes);
    const petrsim::Config config = petrsim::ReadConfigBlockOfLogText(log, "/nonexistent/fuzz.log");
    (void)config;
  } catch (const petrsim::ScenarioError&) {
  }
  return 0;
}
