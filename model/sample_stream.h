// The exact per-rank, per-slot, per-iteration sample stream of a job (what `petrsim sample`
// prints): the sampler's draws, then each DataLoader worker's __getitem__ with its own numpy RNG
// (seeded by worker_init_fn), in the order that worker processes its batches. A slot whose
// getitem can never end stops with a livelock marker instead of looping.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "model/dataset.h"
#include "model/resample_policy.h"
#include "model/scenario.pb.h"

namespace petrsim {

enum class SampleStatus {
  kOk,         // the sampler's index was accepted as is
  kResampled,  // rejected, then resampled to `final_index`
  kLivelock,   // rejected, and the resample loop can never end: this slot stops here
  kError,      // the bounded policy gave up (the rank's job fails): this rank stops here
  kBlocked,    // the worker of this batch is stuck in an earlier livelock: never loaded
  kPadding,    // a short last batch of an epoch has no sample in this slot
};

std::string SampleStatusName(SampleStatus status);

struct SampleRow {
  uint64_t iteration = 0;
  uint32_t rank = 0;
  uint32_t slot = 0;
  uint32_t worker = 0;  // DataLoader worker that loads this batch (iteration mod workers)
  int64_t index = -1;   // the sampler's index
  int64_t group = -1;   // its sampler group
  int64_t final_index = -1;  // what __getitem__ returned (== index unless resampled)
  uint64_t attempts = 0;     // loads
  SampleStatus status = SampleStatus::kOk;
};

struct SampleStreamOptions {
  std::vector<uint32_t> ranks;  // empty: every rank
  uint64_t iterations = 0;      // 0: the job length
};

// Calls `on_row` for each row, iteration-major within a rank, ranks in the given order.
// Throws ScenarioError where the Python job fails before the first batch (sampler assertion).
void GenerateSampleStream(const Scenario& scenario, const Dataset& dataset,
                          const SampleStreamOptions& options,
                          const std::function<void(const SampleRow&)>& on_row);

}  // namespace petrsim
