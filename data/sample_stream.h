// The exact per-rank, per-slot, per-iteration sample stream of a job (what `petrsim sample`
// prints): the sampler's draws, then each DataLoader worker's __getitem__ with its own numpy RNG
// (seeded by worker_init_fn, again at every new DataLoader iterator), in the order that worker
// processes its batches. A getitem that can never end is reported with a livelock marker instead
// of looping; from then on the rank consumes nothing, and its stream ends with the last batch
// the DataLoader had dispatched (prefetch), as in the real job.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "data/dataset.h"
#include "data/resample_policy.h"
#include "proto/scenario.pb.h"

namespace petrsim {

enum class SampleStatus {
  kOk,             // the sampler's index was accepted as is
  kResampled,      // rejected, then resampled to `final_index`
  kLivelock,       // rejected, and the resample loop can never end: the worker spins forever
  kAttemptsLimit,  // petrsim's own bound on one getitem's loads was reached (not a proof)
  kError,          // the bounded policy gave up: the batch raises, the rank's job fails
  kBlocked,        // not loaded: its worker is stuck on (or failed) an earlier sample
  kPadding,        // a short last batch of an epoch has no sample in this slot
};

std::string SampleStatusName(SampleStatus status);

struct SampleRow {
  uint64_t iteration = 0;
  uint32_t rank = 0;
  uint32_t slot = 0;
  uint32_t worker = 0;       // DataLoader worker that loads this batch (0: the main process)
  int64_t index = -1;        // the sampler's index
  int64_t group = -1;        // its sampler group
  int64_t final_index = -1;  // what __getitem__ returned (== index unless resampled)
  uint64_t attempts = 0;     // loads
  SampleStatus status = SampleStatus::kOk;
  // Whether the main process gets to consume this batch (false from the first batch that never
  // completes: prefetched batches after it are loaded but never trained on).
  bool consumed = true;
};

struct SampleStreamOptions {
  std::vector<uint32_t> ranks;  // empty: every rank
  uint64_t iterations = 0;      // 0: the job length
};

// Calls `on_row` for each row, iteration-major within a rank, ranks in the given order.
// Throws ScenarioError where the Python job fails before the first batch (sampler assertion).
void GenerateSampleStream(const Scenario& scenario, const Dataset& dataset, const SampleStreamOptions& options,
                          const std::function<void(const SampleRow&)>& on_row);

}  // namespace petrsim
