// Semantic validation of a parsed scenario: every rule the schema comments state, checked with
// the field path, the rule and the value found (`job.world_size: must be >= 1, got 0`).
#pragma once

#include <string>
#include <vector>

#include "proto/scenario.pb.h"

namespace petrsim {

// Limits that keep every run bounded (STYLE 7). Larger inputs are rejected, not attempted.
inline constexpr uint64_t kFramesMax = 50'000'000;  // below torch randperm's small-n path
inline constexpr uint32_t kWorldSizeMax = 65536;
inline constexpr uint32_t kSamplesPerGpuMax = 256;
inline constexpr uint32_t kWorkersPerGpuMax = 256;
inline constexpr uint64_t kIterationsMax = 1'000'000'000;
inline constexpr uint32_t kFocalHeadLossTermsMax = 1000;  // StreamPETR's FocalHead logs 5
// What one step of an expanded plan holds in memory (a Collective and its strings), about; for
// the estimates in errors about sizes that would expand the plan.
inline constexpr uint64_t kPlanStepBytes = 160;

// Returns every violation as "path: rule, got value", in schema order; empty when valid.
std::vector<std::string> FindScenarioViolations(const Scenario& scenario);

// Throws ScenarioError listing every violation, each line prefixed by `display_name`.
void ValidateScenario(const Scenario& scenario, const std::string& display_name);

}  // namespace petrsim
