// What several subcommands share: a scenario file with --set overrides applied (and validated
// again), and the --set option's help.
#pragma once

#include <string>
#include <vector>

#include "proto/scenario.pb.h"

namespace CLI {
class App;
}

namespace petrsim {

inline constexpr const char* kSetHelp = "override a scenario field, e.g. --set resample.policy=global (repeatable)";

// Adds --torch-version V to `command`, the job's PyTorch release (what DDP issues and the watchdog prints depend on
// it): the same as --set comm.torch_version=V, appended to `sets`.
void AddTorchVersionOption(CLI::App& command, std::vector<std::string>& sets);

// Loads the scenario and applies the --set overrides, validating the result again.
Scenario LoadWithOverrides(const std::string& path, const std::vector<std::string>& sets);

// --memory-max's help, and its value in bytes (empty: DefaultMemoryMax()).
extern const char* const kMemoryMaxHelp;
uint64_t MemoryMax(const std::string& flag);

}  // namespace petrsim
