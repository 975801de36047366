// The simulated DataLoader: epochs, the prefetch window, workers running the resample loop; see job_sim.h.
#include "sim/job_sim.h"

namespace petrsim::sim::internal {

// ---------------------------------------------------------------------------------------------
// The data loader

void JobSim::StartEpoch(RankState& rank) {
  // A new DataLoader iterator: new worker processes, seeded again by worker_init_fn.
  const auto& job = scenario_.job();
  if (rank.iteration > 0) {
    // The epoch samplers' lists are per epoch; a rank with fewer batches skips the rest of its
    // share so its next epoch starts where the sampler's does.
    for (uint64_t skip = rank.epoch_batches; skip < rank.natural_epoch_batches; ++skip) {
      rank.sampler->NextBatches(rank.draws);
    }
  }
  rank.epoch_start = rank.iteration;
  rank.epoch_end = loader_.batches_per_epoch == 0 ? kNone : rank.iteration + rank.epoch_batches;
  rank.dispatched_end = rank.iteration;
  if (job.workers_per_gpu() == 0) {
    // The main process loads: its numpy RNG was seeded once, by set_random_seed.
    if (rank.rngs.empty()) rank.rngs.emplace_back(job.seed());
  } else {
    rank.rngs.clear();
    for (uint32_t w = 0; w < job.workers_per_gpu(); ++w) {
      rank.rngs.emplace_back(WorkerNumpySeed(job.workers_per_gpu(), rank.rank, w, job.seed()));
    }
  }
  for (uint32_t w = 0; w < rank.workers.size(); ++w) {
    WorkerState& worker = rank.workers[w];
    worker.next_batch = rank.iteration + w;
    worker.busy = false;
    worker.stuck = false;
  }
  if (loader_.workers > 0) Dispatch(rank, rank.iteration);
}

// Dispatches every batch the prefetch window allows while the main process's next batch is
// `next_to_consume`: batches up to next_to_consume + prefetch_factor * workers - 1 (reference
// section 6: batch k + 2W is dispatched when batch k is consumed). Without workers the main
// process loads its next batch itself when it asks for it. Starts idle workers on theirs.
void JobSim::Dispatch(RankState& rank, uint64_t next_to_consume) {
  const uint64_t window = std::max<uint64_t>(1, loader_.in_flight);
  const uint64_t limit = std::min(rank.epoch_end, next_to_consume + window);
  while (rank.dispatched_end < limit) {
    const uint64_t batch = rank.dispatched_end++;
    BatchEntry& entry = Entry(rank, batch);
    entry.batch = batch;
    entry.state = BatchState::kDispatched;
    entry.worker = loader_.workers == 0 ? 0 : static_cast<uint32_t>((batch - rank.epoch_start) % loader_.workers);
    // The main process draws the batch's indices from the sampler when it dispatches it.
    rank.sampler->NextBatches(rank.draws);
    if (options_.replay != nullptr) {
      for (uint32_t b = 0; b < batch_size_; ++b) {
        const auto index = options_.replay->SampleIndex(rank.rank, batch, b);
        if (index && *index >= 0 && *index < dataset_.size()) {
          rank.draws[b] = SlotDraw{*index, dataset_.group_of(*index)};
        }
      }
    }
    if (tracing_) {
      for (uint32_t b = 0; b < batch_size_; ++b) {
        if (rank.draws[b].index < 0) continue;
        TraceRecord record;
        record.kind = TraceKind::kSamplerDraw;
        record.rank = rank.rank;
        record.start_ns = record.end_ns = engine_.now_ns();
        record.iteration = batch;
        record.slot = b;
        record.index = rank.draws[b].index;
        record.group = rank.draws[b].group;
        Trace(record);
      }
    }
    std::copy(rank.draws.begin(), rank.draws.end(),
              rank.batch_draws.begin() + static_cast<int64_t>((batch % rank.batches.size()) * batch_size_));
    WorkerState& worker = rank.workers[entry.worker];
    if (!worker.busy && !worker.stuck && !worker.dead && worker.next_batch == batch) {
      StartBatch(rank, entry.worker, batch);
    }
  }
}

void JobSim::StartBatch(RankState& rank, uint32_t worker_index, uint64_t batch) {
  WorkerState& worker = rank.workers[worker_index];
  BatchEntry& entry = Entry(rank, batch);
  worker.busy = true;
  entry.state = BatchState::kLoading;
  const size_t base = (batch % rank.batches.size()) * batch_size_;
  rank.batch_extra_loads[batch % rank.batches.size()] = 0;
  NumpyRandomState& rng = rank.rngs[loader_.workers == 0 ? 0 : worker_index];
  const int64_t load_ppm = ScalePpm(worker.slow_ppm, rank.slow_ppm);
  int64_t t = engine_.now_ns();
  const int32_t trace_worker = loader_.workers == 0 ? -1 : static_cast<int32_t>(worker_index);
  for (uint32_t b = 0; b < batch_size_; ++b) {
    const SlotDraw& draw = rank.batch_draws[base + b];
    rank.batch_final[base + b] = -1;
    if (draw.index < 0) continue;  // padding of a short last batch
    attempts_seen_.clear();
    const RecordedLoad* recorded = options_.replay != nullptr ? options_.replay->Load(rank.rank, batch, b) : nullptr;
    if (recorded != nullptr && (recorded->final_index >= dataset_.size() || recorded->final_index < -1)) {
      recorded = nullptr;  // not an index of this dataset: run the policy
    }
    const GetItemResult result = LoadSample(draw, recorded, rng);
    const int64_t load_ns = ScalePpm(sample_load_ns_, load_ppm);
    if (result.outcome == GetItemOutcome::kLivelock || result.outcome == GetItemOutcome::kAttemptsLimit) {
      // The worker never returns: record where it spins, and schedule nothing.
      worker.stuck = true;
      entry.state = BatchState::kStuck;
      RecordSpin(rank, trace_worker, batch, b, draw, result, t);
      return;
    }
    const int64_t spent = LoadTime(worker, recorded, result, load_ns);
    rank.stats.loads += result.attempts;
    const bool raised = result.outcome == GetItemOutcome::kAttemptsExhausted;
    if (tracing_) TraceLoad(rank.rank, trace_worker, batch, b, draw, result, t, spent, raised);
    t = SaturatingAdd(t, spent);
    if (raised) {
      // The bounded policy raises: the worker sends the exception in place of the batch.
      entry.state = BatchState::kError;
      break;
    }
    rank.batch_final[base + b] = result.index;
    rank.batch_extra_loads[batch % rank.batches.size()] += result.attempts - 1;
  }
  // Without workers the main process loaded the batch; its forward (GridMask) draws from the
  // same RNG before it loads the next one.
  if (loader_.workers == 0 && entry.state != BatchState::kError) pipeline_.Forward(rng);
  engine_.Schedule(t, kBatchLoaded, rank.rank, batch);
}

// One getitem of `draw`: as the replayed job recorded it, or run through the resample policy.
inline GetItemResult JobSim::LoadSample(const SlotDraw& draw, const RecordedLoad* recorded, NumpyRandomState& rng) {
  GetItemResult result;
  if (recorded != nullptr) {
    result.index = recorded->final_index >= 0 ? recorded->final_index : draw.index;
    result.attempts = std::max<uint64_t>(1, recorded->attempts);
    result.outcome = recorded->livelock ? GetItemOutcome::kLivelock
                     : recorded->error  ? GetItemOutcome::kAttemptsExhausted
                                        : GetItemOutcome::kAccepted;
  } else {
    result = GetItem(dataset_, *policy_, draw.index, rng, pipeline_, kGetItemAttemptsLimit,
                     tracing_ ? &attempt_log_ : nullptr);
  }
  return result;
}

// How long a getitem takes: every attempt reloads the sample; jitter per attempt (one draw for
// the mean past 64).
inline int64_t JobSim::LoadTime(WorkerState& worker, const RecordedLoad* recorded, const GetItemResult& result,
                                int64_t load_ns) {
  int64_t spent = 0;
  if (recorded != nullptr && recorded->duration_ns >= 0) {
    spent = recorded->duration_ns;  // the recorded job's own time
  } else if (result.attempts <= 64) {
    for (uint64_t a = 0; a < result.attempts; ++a) {
      spent = SaturatingAdd(spent, Jitter(worker.jitter, load_ns));
    }
  } else {
    spent = ScalePpm(Jitter(worker.jitter, load_ns),
                     static_cast<int64_t>(result.attempts) * kPpm);  // attempts <= 2^26
  }
  return spent;
}

// A getitem that never returns: where it spins (spins_), its loads, and its trace record.
void JobSim::RecordSpin(RankState& rank, int32_t trace_worker, uint64_t batch, uint32_t b, const SlotDraw& draw,
                        const GetItemResult& result, int64_t t) {
  {
    StuckGetitem stuck;
    stuck.rank = rank.rank;
    stuck.worker = trace_worker;
    stuck.batch = batch;
    stuck.slot = b;
    stuck.index = draw.index;
    stuck.last_index = result.index;
    stuck.group = draw.group;
    const FrameInfo& frame = dataset_.frame(result.index);
    const IndexRange pool = policy_->Candidates(result.index);
    stuck.subdataset = frame.subdataset;
    stuck.subdataset_name = dataset_.subdatasets()[frame.subdataset].name;
    stuck.scene = frame.scene;
    stuck.scene_name = dataset_.scenes()[frame.scene].name;
    stuck.pool_first = pool.begin;
    stuck.pool_last = pool.end - 1;
    stuck.pool_first_in_scene = dataset_.frame(pool.begin).frame_in_scene;
    stuck.pool_last_in_scene = dataset_.frame(pool.end - 1).frame_in_scene;
    stuck.since_ns = t;
    stuck.attempts = result.attempts;
    stuck.proven = result.outcome == GetItemOutcome::kLivelock;
    spins_.push_back(stuck);
  }
  rank.stats.loads += result.attempts;
  if (tracing_) {
    TraceRecord record;
    record.kind = TraceKind::kLivelock;
    record.rank = rank.rank;
    record.worker = trace_worker;
    record.start_ns = record.end_ns = t;
    record.iteration = batch;
    record.slot = b;
    record.index = draw.index;
    record.final_index = result.index;
    record.text = "resample loop never ends";
    Trace(record);
  }
}

// The trace of one getitem: its loads when it resampled, then its load slice [t, t + spent).
void JobSim::TraceLoad(uint32_t rank, int32_t trace_worker, uint64_t batch, uint32_t b, const SlotDraw& draw,
                       const GetItemResult& result, int64_t t, int64_t spent, bool raised) {
  if (result.attempts > 1) TraceAttempts(rank, trace_worker, batch, b, t, spent, result.attempts);
  TraceRecord record;
  record.kind = TraceKind::kLoad;
  record.rank = rank;
  record.worker = trace_worker;
  record.start_ns = t;
  record.end_ns = t + spent;
  record.iteration = batch;
  record.slot = b;
  record.index = draw.index;
  record.final_index = result.index;
  record.attempts = result.attempts;
  if (raised) record.text = "bounded resample gave up";
  Trace(record);
}

void JobSim::OnBatchLoaded(RankState& rank, uint64_t batch) {
  BatchEntry& entry = Entry(rank, batch);
  PETRSIM_ASSERT(entry.batch == batch);
  WorkerState& worker = rank.workers[entry.worker];
  if (worker.dead) return;  // the worker died before returning it
  if (entry.state == BatchState::kLoading) entry.state = BatchState::kReady;
  entry.ready_ns = engine_.now_ns();
  if (tracing_) {
    TraceRecord record;
    record.kind = TraceKind::kBatchReady;
    record.rank = rank.rank;
    record.worker = loader_.workers == 0 ? kMainProcess : static_cast<int32_t>(entry.worker);
    record.start_ns = record.end_ns = entry.ready_ns;
    record.iteration = batch;
    if (entry.state == BatchState::kError) record.text = "the worker sends the exception";
    Trace(record);
  }
  worker.busy = false;
  worker.next_batch += std::max<uint32_t>(1, loader_.workers);
  if (worker.next_batch < rank.dispatched_end) StartBatch(rank, entry.worker, worker.next_batch);
  if (rank.phase == Phase::kWaitData && rank.iteration == batch) Advance(rank);
}

}  // namespace petrsim::sim::internal
