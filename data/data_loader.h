// How one rank's PyTorch DataLoader hands batches to its workers and how far it runs ahead
// (docs/reference/streampetr.md, section 6): batch k of an epoch goes to worker k mod num_workers, the main process
// consumes batches strictly in order, and prefetch_factor * num_workers batches are in flight,
// so while the rank is blocked on batch k nothing at or after k + prefetch_factor * num_workers
// is ever dispatched. Epoch samplers end their DataLoader iterator every epoch (mmcv IterLoader
// calls iter() again; persistent_workers is False), which starts new worker processes that
// worker_init_fn seeds again; the infinite sampler's iterator never ends.
#pragma once

#include <cstdint>
#include <vector>

#include "data/dataset.h"
#include "proto/scenario.pb.h"

namespace petrsim {

struct DataLoaderShape {
  uint32_t workers = 0;            // job.workers_per_gpu; 0: the main process loads
  uint64_t in_flight = 0;          // batches dispatched ahead of consumption (0 without workers)
  uint64_t batches_per_epoch = 0;  // the DataLoader's length; 0: infinite (never restarts)

  // The worker that loads batch `iteration` (0 when the main process loads).
  uint32_t WorkerOf(uint64_t iteration) const {
    if (workers == 0) return 0;
    const uint64_t in_epoch = batches_per_epoch == 0 ? iteration : iteration % batches_per_epoch;
    return static_cast<uint32_t>(in_epoch % workers);
  }

  // Whether a new DataLoader iterator (new, freshly seeded workers) starts at `iteration` > 0.
  bool RestartsAt(uint64_t iteration) const {
    return workers > 0 && batches_per_epoch > 0 && iteration > 0 && iteration % batches_per_epoch == 0;
  }
};

DataLoaderShape MakeDataLoaderShape(const Scenario& scenario, const Dataset& dataset);

// Batches per epoch of each rank: the DataLoader's length (epoch samplers) or the iterations
// per epoch (infinite sampler), less the scenario's uneven_batches faults.
std::vector<uint64_t> BatchesPerEpochByRank(const Scenario& scenario, const Dataset& dataset);

}  // namespace petrsim
