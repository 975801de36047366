// The sampler watchdog (the real backend's, and any backend's that loads for real): every getitem of
// a DataLoader worker runs under a bound from the scenario, so a sample that can never (or
// almost surely will not) load is reported in user terms at once, instead of 30 minutes later
// by the collective watchdog. Plain C++ over data/ (no LibTorch): the same GetItem, policy and
// dataset `check` and the simulator use.
//
// The bound: when every candidate of the rejected frame's pool lacks GT, GetItem proves the
// livelock after one load. Otherwise the policy draws from a pool of n frames of which v have GT,
// so the number of resamples is geometric with p = v / n; after k = ln(1e-12) / ln(1 - p) loads
// a healthy getitem has ended with probability 1 - 1e-12, and the watchdog reports beyond that.
#pragma once

#include <cstdint>
#include <optional>

#include "data/dataset.h"
#include "data/numpy_random.h"
#include "data/resample_policy.h"
#include "data/stuck_getitem.h"

namespace petrsim {

struct WatchedItem {
  GetItemResult result;
  std::optional<StuckGetitem> livelock;  // set when the watchdog fired (since_ns left 0)
};

// The loads a getitem of `index` may take before the watchdog fires (at least 1).
uint64_t ResampleAttemptsBound(const Dataset& dataset, const ResamplePolicy& policy, int64_t index);

// GetItem under the watchdog. `rank`, `worker`, `batch`, `slot` only label the report.
WatchedItem WatchedGetItem(const Dataset& dataset, const ResamplePolicy& policy, int64_t index, NumpyRandomState& rng,
                           const PipelineDraws& pipeline, uint32_t rank, int32_t worker, uint64_t batch, uint32_t slot);

}  // namespace petrsim
