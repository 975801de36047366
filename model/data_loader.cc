// DataLoader shape; see data_loader.h.
#include "model/data_loader.h"

#include "model/sampler.h"

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

}  // namespace petrsim
