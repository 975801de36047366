// Scenario arguments; see scenario_args.h.
#include "cli/scenario_args.h"

#include <CLI/CLI.hpp>

#include "base/host_memory.h"
#include "check/memory_estimate.h"

#include "scenario/scenario_loader.h"
#include "scenario/scenario_override.h"
#include "scenario/scenario_validation.h"

namespace petrsim {

Scenario LoadWithOverrides(const std::string& path, const std::vector<std::string>& sets) {
  Scenario scenario = LoadScenarioFile(path);
  if (!sets.empty()) {
    ApplyOverrides(scenario, sets);
    ValidateScenario(scenario, path + " (after --set)");
  }
  return scenario;
}

void AddTorchVersionOption(CLI::App& command, std::vector<std::string>& sets) {
  command.add_option_function<std::string>(
      "--torch-version", [&sets](const std::string& version) { sets.push_back("comm.torch_version=" + version); },
      "the job's PyTorch release, e.g. 1.13 or 1.13.1+cu117 (what DDP issues and the watchdog prints depend on it; "
      "the same as --set comm.torch_version=V)");
}

const char* const kMemoryMaxHelp =
    "refuse a run whose memory estimate (from the scenario: frames, ranks, DataLoader workers, prefetch) "
    "exceeds this many bytes (K, M, G, T suffixes; default: half of this machine's memory)";

uint64_t MemoryMax(const std::string& flag) {
  return flag.empty() ? DefaultMemoryMax() : ParseByteSize(flag, "--memory-max");
}

}  // namespace petrsim
