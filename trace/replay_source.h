// The seam through which a recorded job drives a backend (the simulator, or the real trainer):
// its sample order and its getitem results, where recorded. replay/ reads them from traces.
#pragma once

#include <cstdint>
#include <optional>

namespace petrsim {

// What a recorded job's worker did with one batch slot (replay/ reads it from a trace).
struct RecordedLoad {
  int64_t final_index = -1;  // the index getitem returned (or was stuck on)
  uint64_t attempts = 1;     // loads, the first included
  int64_t duration_ns = -1;  // how long the loads took; -1: not recorded (the cost model's)
  bool livelock = false;     // the worker never returned (recorded spinning)
  bool error = false;        // the bounded policy gave up
};

// The seam a replay drives a backend through (replay/replay.h builds it): the recorded job's sample
// order and getitem results, where recorded. Where it says nothing, the simulator runs its own
// sampler and resample policy (with its own random draws from then on).
class ReplaySource {
 public:
  virtual ~ReplaySource() = default;
  // The index the recorded sampler gave batch `batch`'s slot `slot` of `rank`.
  virtual std::optional<int64_t> SampleIndex(uint32_t rank, uint64_t batch, uint32_t slot) const = 0;
  // What the recorded worker did with it; null: run the resample policy.
  virtual const RecordedLoad* Load(uint32_t rank, uint64_t batch, uint32_t slot) const = 0;
};

}  // namespace petrsim
