// What a simulated run or a pre-flight check of a scenario will need in memory, from the
// scenario alone (before the dataset is built), so that a run beyond the machine is refused up
// front with the estimate and the limit instead of ending in bad_alloc or the OOM killer
// (issue 15). The figures are peak RSS measured with /usr/bin/time on petrsim's own runs
// (docs/user_guide.md "Memory"), per frame of the dataset and per rank, DataLoader worker and
// prefetched batch slot; they hold for synthetic and explicit (imported) datasets alike.
#pragma once

#include <cstdint>
#include <string>

#include "base/host_memory.h"  // FormatBytes
#include "proto/scenario.pb.h"

namespace petrsim {

struct MemoryEstimate {
  uint64_t bytes = 0;
  std::string breakdown;  // "12.3 GiB: 45,000,000 frames x 64 B, 65,536 ranks x (...)"
};

// The frames the scenario's dataset holds before filtering (synthetic: at most).
uint64_t DatasetFramesMax(const Scenario& scenario);

// `petrsim SCENARIO` (one simulated run) and `petrsim check`.
MemoryEstimate EstimateRunMemory(const Scenario& scenario);
MemoryEstimate EstimateCheckMemory(const Scenario& scenario);

// Parses a --memory-max value: a whole number of bytes, or with a K, M, G or T suffix (powers
// of 1024; "8G", "512M"). Throws ScenarioError naming `option`.
uint64_t ParseByteSize(const std::string& text, const std::string& option);

// Throws ScenarioError when `estimate` exceeds `max_bytes`: "<display_name>: <what> needs about
// <estimate> of memory (<breakdown>), more than --memory-max <max>; ...".
void CheckMemory(const MemoryEstimate& estimate, uint64_t max_bytes, const std::string& what,
                 const std::string& display_name);

}  // namespace petrsim
