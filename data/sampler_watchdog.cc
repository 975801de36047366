// The sampler watchdog; see sampler_watchdog.h.
#include "data/sampler_watchdog.h"

#include <algorithm>
#include <cmath>

namespace petrsim {

uint64_t ResampleAttemptsBound(const Dataset& dataset, const ResamplePolicy& policy, int64_t index) {
  if (policy.attempts_max() != 0) return policy.attempts_max();  // bounded: its own error ends it
  if (dataset.frame(index).accepted) return 1;
  const IndexRange pool = policy.Candidates(index);
  const double n = static_cast<double>(pool.size());
  const double v = static_cast<double>(dataset.accepted_in(pool.begin, pool.end));
  if (v <= 0 || n <= 0) return 1;  // GetItem proves the livelock at the first load
  const double p = v / n;
  if (p >= 1) return 2;
  const double resamples = std::ceil(std::log(1e-12) / std::log1p(-p));
  return static_cast<uint64_t>(std::min(resamples + 1, static_cast<double>(kGetItemAttemptsLimit)));
}

WatchedItem WatchedGetItem(const Dataset& dataset, const ResamplePolicy& policy, int64_t index, NumpyRandomState& rng,
                           const PipelineDraws& pipeline, uint32_t rank, int32_t worker, uint64_t batch,
                           uint32_t slot) {
  WatchedItem out;
  // One load more than the bound, so that a getitem ending exactly at the bound is not flagged.
  const uint64_t bound = ResampleAttemptsBound(dataset, policy, index) + 1;
  out.result = GetItem(dataset, policy, index, rng, pipeline, bound);
  const GetItemOutcome outcome = out.result.outcome;
  if (outcome != GetItemOutcome::kLivelock && outcome != GetItemOutcome::kAttemptsLimit) return out;
  StuckGetitem report;
  report.rank = rank;
  report.worker = worker;
  report.batch = batch;
  report.slot = slot;
  report.index = index;
  report.last_index = out.result.index;
  report.group = dataset.group_of(index);
  report.attempts = out.result.attempts;
  report.proven = outcome == GetItemOutcome::kLivelock;
  const FrameInfo& frame = dataset.frame(out.result.index);
  report.subdataset = frame.subdataset;
  report.subdataset_name = dataset.subdatasets()[frame.subdataset].name;
  report.scene = frame.scene;
  report.scene_name = dataset.scenes()[frame.scene].name;
  const IndexRange pool = policy.Candidates(out.result.index);
  report.pool_first = pool.begin;
  report.pool_last = pool.end - 1;
  report.pool_first_in_scene = dataset.frame(pool.begin).frame_in_scene;
  report.pool_last_in_scene = dataset.frame(pool.end - 1).frame_in_scene;
  out.livelock = report;
  return out;
}

}  // namespace petrsim
