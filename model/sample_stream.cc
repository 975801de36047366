// Sample stream generation; see sample_stream.h.
#include "model/sample_stream.h"

#include <algorithm>

#include "model/numpy_random.h"
#include "model/sampler.h"

namespace petrsim {

std::string SampleStatusName(SampleStatus status) {
  switch (status) {
    case SampleStatus::kOk:
      return "ok";
    case SampleStatus::kResampled:
      return "resampled";
    case SampleStatus::kLivelock:
      return "livelock";
    case SampleStatus::kError:
      return "error";
    case SampleStatus::kBlocked:
      return "blocked";
    case SampleStatus::kPadding:
      return "padding";
  }
  return "unknown";
}

void GenerateSampleStream(const Scenario& scenario, const Dataset& dataset,
                          const SampleStreamOptions& options,
                          const std::function<void(const SampleRow&)>& on_row) {
  const auto& job = scenario.job();
  std::vector<uint32_t> ranks = options.ranks;
  if (ranks.empty()) {
    for (uint32_t r = 0; r < job.world_size(); ++r) ranks.push_back(r);
  }
  const uint64_t iterations =
      options.iterations != 0 ? options.iterations : JobIterations(scenario, dataset);
  const auto policy = MakeResamplePolicy(scenario, dataset);
  const uint32_t batch = job.samples_per_gpu();
  const uint32_t workers = std::max<uint32_t>(1, job.workers_per_gpu());
  const uint32_t pipeline_draws = scenario.resample().pipeline_draws_per_attempt();
  const SamplerFactory samplers(scenario, dataset);

  std::vector<SlotDraw> draws(batch);
  for (const uint32_t rank : ranks) {
    const auto sampler = samplers.ForRank(rank);
    std::vector<NumpyRandomState> rngs;
    for (uint32_t w = 0; w < workers; ++w) {
      // With no workers the main process loads, its numpy RNG seeded with the seed alone.
      rngs.emplace_back(job.workers_per_gpu() == 0
                            ? job.seed()
                            : WorkerNumpySeed(job.workers_per_gpu(), rank, w, job.seed()));
    }
    std::vector<bool> worker_stuck(workers, false);
    std::vector<bool> slot_stopped(batch, false);
    bool rank_failed = false;
    for (uint64_t k = 0; k < iterations && !rank_failed; ++k) {
      sampler->NextBatches(draws);
      const uint32_t worker = static_cast<uint32_t>(k % workers);
      for (uint32_t b = 0; b < batch && !rank_failed; ++b) {
        if (slot_stopped[b]) continue;
        SampleRow row;
        row.iteration = k;
        row.rank = rank;
        row.slot = b;
        row.worker = worker;
        row.index = draws[b].index;
        row.group = draws[b].group;
        if (row.index < 0) {
          row.status = SampleStatus::kPadding;
        } else if (worker_stuck[worker]) {
          row.status = SampleStatus::kBlocked;
        } else {
          const GetItemResult result =
              GetItem(dataset, *policy, row.index, rngs[worker], pipeline_draws);
          row.final_index = result.index;
          row.attempts = result.attempts;
          switch (result.outcome) {
            case GetItemOutcome::kAccepted:
              row.status = result.attempts == 1 ? SampleStatus::kOk : SampleStatus::kResampled;
              break;
            case GetItemOutcome::kLivelock:
            case GetItemOutcome::kAttemptsLimit:
              row.status = SampleStatus::kLivelock;
              slot_stopped[b] = true;
              worker_stuck[worker] = true;
              break;
            case GetItemOutcome::kAttemptsExhausted:
              row.status = SampleStatus::kError;
              rank_failed = true;
              break;
          }
        }
        on_row(row);
      }
    }
  }
}

}  // namespace petrsim
