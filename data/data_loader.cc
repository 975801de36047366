// DataLoader shape; see data_loader.h.
#include "data/data_loader.h"

#include <algorithm>

#include "data/sampler.h"

namespace petrsim {

DataLoaderShape MakeDataLoaderShape(const Scenario& scenario, const Dataset& dataset) {
  const auto& job = scenario.job();
  DataLoaderShape shape;
  shape.workers = job.workers_per_gpu();
  shape.in_flight = uint64_t{job.prefetch_factor()} * job.workers_per_gpu();
  if (scenario.sampler().kind() != Sampler::infinite_group_each_sample_in_batch) {
    const uint64_t samples = EpochSamplesPerRank(scenario, dataset);
    shape.batches_per_epoch = (samples + job.samples_per_gpu() - 1) / job.samples_per_gpu();
  }
  return shape;
}

std::vector<uint64_t> BatchesPerEpochByRank(const Scenario& scenario, const Dataset& dataset) {
  const auto& job = scenario.job();
  const DataLoaderShape loader = MakeDataLoaderShape(scenario, dataset);
  const uint64_t natural =
      loader.batches_per_epoch != 0 ? loader.batches_per_epoch : IterationsPerEpoch(scenario, dataset);
  std::vector<uint64_t> batches(job.world_size(), natural);
  for (const Fault& fault : scenario.faults()) {
    if (!fault.has_uneven_batches()) continue;
    uint64_t& count = batches[fault.uneven_batches().rank()];
    count -= std::min(count, fault.uneven_batches().batches_fewer());
  }
  return batches;
}

}  // namespace petrsim
