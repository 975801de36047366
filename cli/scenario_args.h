// What several subcommands share: a scenario file with --set overrides applied (and validated
// again), and the --set option's help.
#pragma once

#include <string>
#include <vector>

#include "model/scenario.pb.h"

namespace petrsim {

inline constexpr const char* kSetHelp = "override a scenario field, e.g. --set resample.policy=global (repeatable)";

// Loads the scenario and applies the --set overrides, validating the result again.
Scenario LoadWithOverrides(const std::string& path, const std::vector<std::string>& sets);

// --memory-max's help, and its value in bytes (empty: DefaultMemoryMax()).
extern const char* const kMemoryMaxHelp;
uint64_t MemoryMax(const std::string& flag);

}  // namespace petrsim
