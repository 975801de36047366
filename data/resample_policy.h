// What __getitem__ does with a frame that has no GT left (docs/reference/streampetr.md, section 2): one small type
// per policy behind one interface, and the getitem loop they all share. The loop draws from the
// worker's numpy RNG exactly as the Python job would, so resample targets replay bit for bit.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/numpy_random.h"
#include "data/pipeline_draws.h"
#include "proto/scenario.pb.h"
#include "scenario/scenario_defaults.h"  // kGetItemAttemptsLimit

namespace petrsim {

// A range of dataset indices [begin, end).
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

class ResamplePolicy {
 public:
  virtual ~ResamplePolicy() = default;
  // The indices the next attempt after rejecting `rejected` can load (the resample graph's
  // edges). Every policy's candidates form one contiguous range.
  virtual IndexRange Candidates(int64_t rejected) const = 0;
  // The next attempt after rejecting `rejected`, drawing from `rng` like the Python code.
  virtual int64_t Next(int64_t rejected, NumpyRandomState& rng) const = 0;
  // Loads (first attempt included) before the loop gives up with an error; 0: never.
  virtual uint64_t attempts_max() const { return 0; }
};

// The policy of `scenario` over `dataset` (built from the same scenario). The returned object
// keeps a reference to `dataset`.
std::unique_ptr<ResamplePolicy> MakeResamplePolicy(const Scenario& scenario, const Dataset& dataset);

enum class GetItemOutcome {
  kAccepted,           // a frame with GT (or any frame under keep_empty) was returned
  kLivelock,           // rejected, and no candidate can ever be accepted: loops forever
  kAttemptsExhausted,  // the bounded policy's error
  kAttemptsLimit,      // petrsim's own bound on one getitem was reached (STYLE 7)
};

std::string OutcomeName(GetItemOutcome outcome);

struct GetItemResult {
  int64_t index = -1;     // the index finally returned (or the last one tried)
  uint64_t attempts = 0;  // loads, the first included
  GetItemOutcome outcome = GetItemOutcome::kAccepted;
};

// Sees every load of a GetItem: the index loaded, whether it was accepted, and the index the
// loop resamples to next (-1 when it stops there).
class GetItemObserver {
 public:
  virtual ~GetItemObserver() = default;
  virtual void Attempt(int64_t index, bool accepted, int64_t next_index) = 0;
};

// Runs __getitem__(index): load (the pipeline's draws), accept or resample, until accepted,
// provably livelocked, or out of attempts.
GetItemResult GetItem(const Dataset& dataset, const ResamplePolicy& policy, int64_t index, NumpyRandomState& rng,
                      const PipelineDraws& pipeline, uint64_t attempts_limit = kGetItemAttemptsLimit,
                      GetItemObserver* observer = nullptr);

}  // namespace petrsim
