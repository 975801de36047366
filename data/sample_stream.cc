// Sample stream generation; see sample_stream.h.
#include "data/sample_stream.h"

#include <optional>

#include "data/data_loader.h"
#include "data/numpy_random.h"
#include "data/sampler.h"

namespace petrsim {

std::string SampleStatusName(SampleStatus status) {
  switch (status) {
    case SampleStatus::kOk:
      return "ok";
    case SampleStatus::kResampled:
      return "resampled";
    case SampleStatus::kLivelock:
      return "livelock";
    case SampleStatus::kAttemptsLimit:
      return "attempts_limit";
    case SampleStatus::kError:
      return "error";
    case SampleStatus::kBlocked:
      return "blocked";
    case SampleStatus::kPadding:
      return "padding";
  }
  return "unknown";
}

namespace {

void SeedWorkers(const Scenario& scenario, uint32_t rank, std::vector<NumpyRandomState>& rngs) {
  const auto& job = scenario.job();
  rngs.clear();
  if (job.workers_per_gpu() == 0) {
    // The main process loads; its numpy RNG was seeded with the seed alone (set_random_seed).
    rngs.emplace_back(job.seed());
    return;
  }
  for (uint32_t w = 0; w < job.workers_per_gpu(); ++w) {
    rngs.emplace_back(WorkerNumpySeed(job.workers_per_gpu(), rank, w, job.seed()));
  }
}

// The row status of a sample the dataset's __getitem__ was called for, from how GetItem ended.
SampleStatus StatusOf(const GetItemResult& result) {
  switch (result.outcome) {
    case GetItemOutcome::kAccepted:
      return result.attempts == 1 ? SampleStatus::kOk : SampleStatus::kResampled;
    case GetItemOutcome::kLivelock:
      return SampleStatus::kLivelock;
    case GetItemOutcome::kAttemptsLimit:
      return SampleStatus::kAttemptsLimit;
    case GetItemOutcome::kAttemptsExhausted:
      return SampleStatus::kError;
  }
  // Unreachable for a valid outcome; kOk is what a SampleRow holds when nothing sets its status.
  return SampleStatus::kOk;
}

// What stays fixed over the whole stream, so that the per-rank loop takes one argument for it
// rather than six.
struct StreamSetup {
  const Scenario& scenario;
  const Dataset& dataset;
  const ResamplePolicy& policy;
  const DataLoaderShape& loader;
  const PipelineDraws& pipeline;
  const std::function<void(const SampleRow&)>& on_row;
};

// The rows of one rank, in order. draws and rngs are the caller's buffers, reused from rank to
// rank so that no loop allocates them again.
void StreamRank(const StreamSetup& setup, uint32_t rank, uint64_t iterations, std::vector<SlotDraw>& draws,
                std::vector<NumpyRandomState>& rngs) {
  const auto& job = setup.scenario.job();
  const DataLoaderShape& loader = setup.loader;
  const uint32_t batch = job.samples_per_gpu();
  // Each rank has its own sampler state, so memory stays bounded for long jobs.
  const auto sampler = MakeRankSampler(setup.scenario, setup.dataset, rank);
  SeedWorkers(setup.scenario, rank, rngs);
  std::vector<bool> worker_stuck(rngs.size(), false);
  std::optional<uint64_t> blocked_at;  // the first batch the main process never gets
  for (uint64_t k = 0; k < iterations; ++k) {
    if (blocked_at) {
      // Nothing past the prefetch window is dispatched, and a new epoch's iterator is never
      // created, while the main process waits for batch *blocked_at.
      if (k >= *blocked_at + loader.in_flight || loader.RestartsAt(k)) break;
    } else if (loader.RestartsAt(k) && job.workers_per_gpu() > 0) {
      // New workers, seeded again by worker_init_fn; the main process's RNG goes on.
      SeedWorkers(setup.scenario, rank, rngs);
      worker_stuck.assign(rngs.size(), false);
    }
    sampler->NextBatches(draws);
    const uint32_t worker = loader.WorkerOf(k);
    bool batch_raised = false;  // a bounded error aborts the rest of this batch's fetch
    for (uint32_t b = 0; b < batch; ++b) {
      SampleRow row;
      row.iteration = k;
      row.rank = rank;
      row.slot = b;
      row.worker = worker;
      row.index = draws[b].index;
      row.group = draws[b].group;
      if (row.index < 0) {
        row.status = SampleStatus::kPadding;
      } else if (worker_stuck[worker] || batch_raised) {
        row.status = SampleStatus::kBlocked;
      } else {
        const GetItemResult result = GetItem(setup.dataset, setup.policy, row.index, rngs[worker], setup.pipeline);
        row.final_index = result.index;
        row.attempts = result.attempts;
        row.status = StatusOf(result);
        if (result.outcome != GetItemOutcome::kAccepted) {
          // The worker never returns this batch (it spins) or raises on it (bounded): the
          // batch's later samples are not loaded and the main process never gets past it. A
          // worker that raised goes on serving its next batches; a spinning one never does.
          if (result.outcome == GetItemOutcome::kAttemptsExhausted) {
            batch_raised = true;
          } else {
            worker_stuck[worker] = true;
          }
          if (!blocked_at || k < *blocked_at) blocked_at = k;
        }
      }
      row.consumed = !blocked_at || k < *blocked_at;
      setup.on_row(row);
    }
    // Without workers the main process loaded the batch; its forward (GridMask) draws from the
    // same RNG before the next batch is loaded.
    if (job.workers_per_gpu() == 0 && !blocked_at) setup.pipeline.Forward(rngs[0]);
  }
}

}  // namespace

void GenerateSampleStream(const Scenario& scenario, const Dataset& dataset, const SampleStreamOptions& options,
                          const std::function<void(const SampleRow&)>& on_row) {
  const auto& job = scenario.job();
  std::vector<uint32_t> ranks = options.ranks;
  if (ranks.empty()) {
    for (uint32_t r = 0; r < job.world_size(); ++r) ranks.push_back(r);
  }
  const uint64_t iterations = options.iterations != 0 ? options.iterations : JobIterations(scenario, dataset);
  const auto policy = MakeResamplePolicy(scenario, dataset);
  const DataLoaderShape loader = MakeDataLoaderShape(scenario, dataset);
  const PipelineDraws pipeline(scenario);
  const StreamSetup setup{scenario, dataset, *policy, loader, pipeline, on_row};

  std::vector<SlotDraw> draws(job.samples_per_gpu());
  std::vector<NumpyRandomState> rngs;
  // Rank by rank, so that only one rank's sampler state is alive at a time.
  for (const uint32_t rank : ranks) StreamRank(setup, rank, iterations, draws, rngs);
}

}  // namespace petrsim
