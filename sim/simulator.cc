// The simulated job; see simulator.h. One JobSim object holds every rank's state and handles the
// engine's events. Each rank's main process is a small state machine driven by one kind of
// wake-up event; workers finish batches with another; collectives rendezvous in a ring of open
// instances per process group, so no event and no arrival allocates memory once the run is warm.
#include "sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>

#include "model/assert.h"
#include "model/data_loader.h"
#include "model/error.h"
#include "model/iteration_plan.h"
#include "model/numpy_random.h"
#include "model/random_streams.h"
#include "model/resample_policy.h"
#include "model/sampler.h"
#include "model/scenario_defaults.h"
#include "sim/engine.h"
#include "sim/rendezvous.h"

namespace petrsim::sim {

namespace {

enum EventKind : uint32_t {
  kRankWake = 0,        // a rank's main process goes on (compute done, collective complete, ...)
  kBatchLoaded = 1,     // a worker returns a batch (payload: batch); actor: rank
  kWatchdog = 2,        // the earliest watchdog deadline of any rank
  kRankDies = 3,        // fault: actor rank
  kWorkerDies = 4,      // fault: actor rank, payload worker
  kCollectiveDone = 5,  // a collective completes: actor group, payload seq
};

constexpr int64_t kPpm = 1'000'000;
constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
// torchrun's agent checks its workers every 5 s and tears the job down once one has exited:
// the watchdog lines of ranks whose deadline falls within that window still get printed.
constexpr int64_t kLauncherTeardownNs = 5'000'000'000LL;

// Durations saturate here, far beyond any time limit (a year is 2^55 ns), so products of
// validated factors and durations can never wrap: such a run ends as limit_reached.
constexpr int64_t kDurationCap = int64_t{1} << 61;

int64_t SaturatingAdd(int64_t a, int64_t b) { return a > kDurationCap - b ? kDurationCap : a + b; }

int64_t ScalePpm(int64_t ns, int64_t ppm) {
  if (ppm == kPpm) return ns;
  // 64-bit arithmetic while the product fits (durations below about 2.5 hours at factor 2^20
  // ppm); 128-bit beyond. Same result either way.
  if (ns >= 0 && ns < (int64_t{1} << 42) && ppm >= 0 && ppm < (int64_t{1} << 21)) {
    return ns * ppm / kPpm;
  }
  const __int128 scaled = static_cast<__int128>(ns) * ppm / kPpm;
  return scaled > kDurationCap ? kDurationCap : static_cast<int64_t>(scaled);
}

int64_t FactorPpm(double factor) { return static_cast<int64_t>(factor * kPpm + 0.5); }

uint64_t DtypeBytes(Collective::Dtype dtype) {
  switch (dtype) {
    case Collective::float16:
    case Collective::bfloat16:
      return 2;
    case Collective::float64:
    case Collective::int64:
      return 8;
    case Collective::uint8:
      return 1;
    default:
      return 4;
  }
}

// A collective of the plan, resolved once: its process group id, signature and place.
struct PlanStep {
  const Collective* collective = nullptr;
  uint32_t group = 0;
  int32_t nonblocking_ordinal = -1;  // index among the iteration's non-blocking steps
  int64_t duration_ns = 0;
  uint64_t numel_in = 0;
  uint64_t numel_out = 0;
};

using Instance = Rendezvous<PlanStep>::Instance;

struct OutstandingWork {
  uint32_t group = 0;
  uint64_t seq = 0;
  int64_t issue_ns = 0;
  int64_t complete_ns = -1;  // -1: not yet
  int64_t started_ns = -1;   // every member had joined (the transfer began); -1: not yet
  const PlanStep* step = nullptr;
  uint64_t iteration = 0;
};

enum class Phase : uint8_t {
  kStartup,          // issuing the startup collectives
  kWaitData,         // waiting for batch `iteration`
  kRunning,          // computing; a wake event is scheduled
  kBlocked,          // in a blocking collective
  kWaitOutstanding,  // waiting for its non-blocking collectives (end of backward)
  kDone,
  kDead,
};

enum class BatchState : uint8_t { kEmpty, kDispatched, kLoading, kReady, kError, kStuck };

struct BatchEntry {
  uint64_t batch = kNone;
  BatchState state = BatchState::kEmpty;
  int64_t ready_ns = 0;
  uint32_t worker = 0;
};

struct WorkerState {
  uint64_t next_batch = 0;  // the next batch assigned to it that it has not started
  bool busy = false;
  bool stuck = false;
  bool dead = false;
  int64_t slow_ppm = kPpm;
  Rng jitter{0};
};

// Where a rank is within its iteration program: startup steps, then per iteration the plan's
// steps, the wait for non-blocking work, periodic steps and the checkpoint.
enum class Stage : uint8_t { kStartup, kBegin, kPerIteration, kWaitOutstanding, kPeriodic, kCheckpoint };

struct RankState {
  uint32_t rank = 0;
  Phase phase = Phase::kStartup;
  Stage stage = Stage::kStartup;
  uint32_t step = 0;           // index within the stage
  bool compute_spent = false;  // the compute before the current step is done or scheduled
  int64_t phase_since_ns = 0;
  uint64_t iteration = 0;
  uint64_t iterations_total = 0;
  int64_t slow_ppm = kPpm;
  int64_t iteration_compute_ns = 0;
  bool local_batch_has_gt = true;
  std::vector<uint64_t> next_seq;  // per process group: the seq its next collective gets
  // The blocking collective it waits in.
  // The blocking collective it waits in (phase kBlocked); complete_ns is set when the instance
  // completes, before the rank wakes.
  OutstandingWork blocked;
  std::vector<OutstandingWork> outstanding;
  uint32_t outstanding_open = 0;
  // The data loader.
  std::unique_ptr<RankSampler> sampler;
  std::vector<SlotDraw> draws;         // scratch for one batch
  std::vector<NumpyRandomState> rngs;  // per worker (or the main process)
  std::vector<WorkerState> workers;
  std::vector<BatchEntry> batches;          // ring of in-flight batches
  std::vector<SlotDraw> batch_draws;        // ring x B: the sampler's draws
  std::vector<int64_t> batch_final;         // ring x B: what getitem returned
  std::vector<uint64_t> batch_extra_loads;  // ring: loads after the first, all slots
  bool loader_started = false;
  uint64_t epoch_start = 0;
  uint64_t epoch_end = 0;
  uint64_t dispatched_end = 0;  // batches [epoch_start, dispatched_end) dispatched
  uint64_t natural_epoch_batches = 0;
  uint64_t epoch_batches = 0;
  std::vector<int64_t> last_fed;  // per slot: the frame fed last (stream continuity)
  bool pending_raise = false;
  Cause raise_cause = Cause::kNone;
  std::string raise_why;
  Rng compute_jitter{0};
  int64_t watchdog_fire_ns = -1;
  int64_t last_iteration_end_ns = 0;
  RankStats stats;
};

class JobSim {
 public:
  JobSim(const Scenario& scenario, const Dataset& dataset, const SimOptions& options)
      : scenario_(scenario),
        dataset_(dataset),
        options_(options),
        tracing_(options.trace != nullptr),
        plan_(ExpandPlan(scenario.plan())),
        owned_policy_(options.resample_policy == nullptr ? MakeResamplePolicy(scenario, dataset) : nullptr),
        policy_(options.resample_policy != nullptr ? options.resample_policy : owned_policy_.get()),
        loader_(MakeDataLoaderShape(scenario, dataset)),
        world_(scenario.job().world_size()),
        batch_size_(scenario.job().samples_per_gpu()),
        engine_(4 * world_ + 64),
        rendezvous_(world_) {}

  SimResult Run();

 private:
  void Setup();
  PlanStep Resolve(const Collective& collective, int32_t nonblocking_ordinal);
  uint32_t GroupId(const std::string& name);
  int64_t Jitter(Rng& rng, int64_t ns) const;
  bool Handle(const Event& event);

  // Main process.
  void Advance(RankState& rank);
  bool BeginIteration(RankState& rank);
  bool Issue(RankState& rank, const PlanStep& step, uint64_t iteration);
  void Complete(uint32_t group, Instance& instance);
  void OnCollectiveDone(uint32_t group, uint64_t seq);
  void Die(RankState& rank, Cause cause, const std::string& why);
  void EndIteration(RankState& rank);
  void Compute(RankState& rank, int64_t compute_ns);

  // Data loader.
  void StartEpoch(RankState& rank);
  void Dispatch(RankState& rank, uint64_t next_to_consume);
  void StartBatch(RankState& rank, uint32_t worker, uint64_t batch);
  void OnBatchLoaded(RankState& rank, uint64_t batch);
  BatchEntry& Entry(RankState& rank, uint64_t batch) { return rank.batches[batch % rank.batches.size()]; }

  // Watchdog.
  int64_t OldestIncompleteIssue(const RankState& rank, OutstandingWork* work) const;
  int64_t FireTime(int64_t issue_ns) const;
  void ArmWatchdog(int64_t fire_ns);
  bool OnWatchdog();

  void Finish(SimResult& result, StopReason reason);
  CollectiveRef Ref(const PlanStep& step, uint32_t group, uint64_t seq, uint64_t iteration) const;
  std::string WatchdogLine(uint32_t rank, const OutstandingWork& work, int64_t fire_ns) const;
  // Records are built only when a sink listens (tracing_): the hot path pays nothing otherwise.
  void Trace(const TraceRecord& record) { options_.trace->Record(record); }
  // The loads of one getitem, kept while it runs so that only getitems that resampled are
  // traced load by load (at most kAttemptsTraced of them; the load slice counts them all).
  struct AttemptLog final : GetItemObserver {
    std::vector<std::pair<int64_t, int64_t>>* seen = nullptr;  // (index, next or -1), accepted last
    bool accepted = false;
    void Attempt(int64_t index, bool ok, int64_t next) override {
      accepted = ok;
      if (seen->size() < kAttemptsTraced) seen->emplace_back(index, next);
    }
  };
  static constexpr size_t kAttemptsTraced = 4096;
  std::vector<std::pair<int64_t, int64_t>> attempts_seen_;
  AttemptLog attempt_log_ = [this] {
    AttemptLog log;
    log.seen = &attempts_seen_;
    return log;
  }();
  // Spreads the getitem's loads evenly over [t, t + spent).
  void TraceAttempts(uint32_t rank, int32_t worker, uint64_t batch, uint32_t slot, int64_t t, int64_t spent,
                     uint64_t attempts) {
    for (size_t i = 0; i < attempts_seen_.size(); ++i) {
      const auto [index, next] = attempts_seen_[i];
      TraceRecord record;
      record.kind = TraceKind::kGetItemAttempt;
      record.rank = rank;
      record.worker = worker;
      record.start_ns = record.end_ns =
          t + static_cast<int64_t>(static_cast<double>(spent) * static_cast<double>(i) / static_cast<double>(attempts));
      record.iteration = batch;
      record.slot = slot;
      record.index = index;
      record.final_index = next;
      record.attempts = i + 1;
      record.gt_count = dataset_.frame(index).gt_count;
      record.accepted = i + 1 == attempts && attempt_log_.accepted;
      Trace(record);
    }
  }
  // A collective's slice from its issue to end_ns; non-blocking ones on the async track.
  void TraceCollective(uint32_t rank, const OutstandingWork& work, int64_t end_ns, bool completed) {
    const Collective& collective = *work.step->collective;
    TraceRecord record;
    record.kind = TraceKind::kCollective;
    record.rank = rank;
    record.worker = collective.blocking() ? kMainProcess : kAsyncCollectives;
    record.start_ns = work.issue_ns;
    record.end_ns = end_ns;
    record.iteration = work.iteration;
    record.process_group = group_names_[work.group];
    record.seq = work.seq;
    record.op = collective.op();
    record.numel = work.step->numel_in;
    record.dtype = collective.dtype();
    record.completed = completed;
    record.started_ns = work.started_ns;
    record.text = collective.name();
    Trace(record);
  }

  const Scenario& scenario_;
  const Dataset& dataset_;
  const SimOptions& options_;
  const bool tracing_;
  const ExpandedPlan plan_;
  const std::unique_ptr<ResamplePolicy> owned_policy_;
  const ResamplePolicy* const policy_;
  const DataLoaderShape loader_;
  const uint32_t world_;
  const uint32_t batch_size_;
  Engine engine_;

  std::vector<std::string> group_names_;
  Rendezvous<PlanStep> rendezvous_;
  std::vector<PlanStep> startup_steps_;
  std::vector<PlanStep> iteration_steps_;
  std::vector<PlanStep> periodic_steps_;
  std::vector<uint32_t> periodic_every_;
  uint32_t nonblocking_steps_ = 0;
  int64_t sample_load_ns_ = 0;
  int64_t step_compute_ns_ = 0;
  int64_t jitter_ppm_ = 0;
  int64_t checkpoint_ns_ = 0;
  int64_t timeout_ns_ = 0;
  int64_t poll_ns_ = 0;
  bool nccl_ = true;
  uint32_t pipeline_draws_ = 0;
  uint64_t job_iterations_ = 0;
  std::vector<RankState> ranks_;
  std::vector<uint32_t> wake_scratch_;
  std::vector<std::pair<uint64_t, int64_t>> stragglers_;  // per rank: iteration, delay (kNone)
  int64_t watchdog_armed_ns_ = -1;
  int64_t first_watchdog_ns_ = -1;
  uint32_t ranks_done_ = 0;
  std::optional<Desync> desync_;
  // Every getitem that spins forever, in the order they began (at most one per worker).
  std::vector<StuckGetitem> spins_;
  Cause first_death_cause_ = Cause::kNone;
  int64_t first_death_ns_ = -1;
  bool stop_ = false;
};

int64_t JobSim::Jitter(Rng& rng, int64_t ns) const {
  if (jitter_ppm_ == 0 || ns == 0) return ns;
  const int64_t offset = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(2 * jitter_ppm_ + 1))) - jitter_ppm_;
  return ScalePpm(ns, kPpm + offset);
}

uint32_t JobSim::GroupId(const std::string& name) {
  for (uint32_t i = 0; i < group_names_.size(); ++i) {
    if (group_names_[i] == name) return i;
  }
  group_names_.push_back(name);
  rendezvous_.AddGroup();
  return static_cast<uint32_t>(group_names_.size() - 1);
}

PlanStep JobSim::Resolve(const Collective& collective, int32_t nonblocking_ordinal) {
  PlanStep step;
  step.collective = &collective;
  step.group = GroupId(collective.process_group());
  step.nonblocking_ordinal = nonblocking_ordinal;
  const uint64_t n = world_;
  const uint64_t numel = collective.op() == Collective::barrier ? 1 : collective.numel();
  step.numel_in = numel;
  step.numel_out = numel;
  if (collective.op() == Collective::allgather) step.numel_out = numel * n;
  if (collective.op() == Collective::reduce_scatter) step.numel_out = (numel + n - 1) / n;
  // Ring model: latency per step plus bytes over the link bandwidth.
  const auto& cost = scenario_.cost();
  const uint64_t bytes = numel * DtypeBytes(collective.dtype());
  const auto transfer = [&](unsigned __int128 numerator, uint64_t denominator) {
    return static_cast<int64_t>(numerator * 1'000'000'000ULL /
                                (static_cast<unsigned __int128>(denominator) * cost.bandwidth_bytes_per_s()));
  };
  const int64_t latency = static_cast<int64_t>(cost.collective_latency_ns());
  if (n > 1) {
    switch (collective.op()) {
      case Collective::allreduce:
      case Collective::barrier:
        step.duration_ns = 2 * static_cast<int64_t>(n - 1) * latency +
                           transfer(static_cast<unsigned __int128>(2 * (n - 1)) * bytes, n);
        break;
      case Collective::broadcast:
      case Collective::reduce:
        step.duration_ns = static_cast<int64_t>(n - 1) * latency + transfer(bytes, 1);
        break;
      case Collective::allgather:
        step.duration_ns =
            static_cast<int64_t>(n - 1) * latency + transfer(static_cast<unsigned __int128>(n - 1) * bytes, 1);
        break;
      case Collective::reduce_scatter:
      case Collective::alltoall:
        step.duration_ns =
            static_cast<int64_t>(n - 1) * latency + transfer(static_cast<unsigned __int128>(n - 1) * bytes, n);
        break;
    }
  }
  return step;
}

void JobSim::Setup() {
  const auto& job = scenario_.job();
  const auto& cost = scenario_.cost();
  sample_load_ns_ = static_cast<int64_t>(cost.sample_load_ns());
  step_compute_ns_ = static_cast<int64_t>(cost.step_compute_ns());
  jitter_ppm_ = FactorPpm(cost.jitter_fraction());
  checkpoint_ns_ = static_cast<int64_t>(cost.checkpoint_ns());
  timeout_ns_ = static_cast<int64_t>(scenario_.comm().timeout_ms()) * 1'000'000;
  poll_ns_ = static_cast<int64_t>(scenario_.comm().watchdog_poll_ms()) * 1'000'000;
  nccl_ = scenario_.comm().backend() == Comm::nccl;
  pipeline_draws_ = scenario_.resample().pipeline_draws_per_attempt();

  GroupId("default_pg");
  for (const auto& c : plan_.startup) startup_steps_.push_back(Resolve(c, -1));
  for (const auto& c : plan_.per_iteration) {
    const int32_t ordinal = c.blocking() ? -1 : static_cast<int32_t>(nonblocking_steps_++);
    iteration_steps_.push_back(Resolve(c, ordinal));
  }
  for (const auto& p : plan_.periodic) {
    periodic_steps_.push_back(Resolve(p.collective(), -1));
    periodic_every_.push_back(p.every_iterations());
  }

  const SamplerFactory samplers(scenario_, dataset_);
  const std::vector<uint64_t> epoch_batches = BatchesPerEpochByRank(scenario_, dataset_);
  const uint64_t natural =
      loader_.batches_per_epoch != 0 ? loader_.batches_per_epoch : IterationsPerEpoch(scenario_, dataset_);
  job_iterations_ = JobIterations(scenario_, dataset_);
  const uint64_t job_iterations = job_iterations_;
  const uint64_t epochs = job.has_epochs() ? job.epochs() : 1;
  stragglers_.assign(world_, {kNone, 0});
  ranks_.resize(world_);
  const uint64_t ring = std::max<uint64_t>(1, loader_.in_flight);
  const uint64_t streams_root =
      options_.run_seed == 0 ? scenario_.seed() : DeriveStreamSeed(scenario_.seed(), "run", options_.run_seed);
  for (uint32_t r = 0; r < world_; ++r) {
    RankState& rank = ranks_[r];
    rank.rank = r;
    rank.stats.rank = r;
    rank.sampler = samplers.ForRank(r);
    rank.draws.resize(batch_size_);
    rank.next_seq.assign(group_names_.size(), 1);
    rank.batches.resize(ring);
    rank.batch_draws.resize(ring * batch_size_);
    rank.batch_final.resize(ring * batch_size_);
    rank.batch_extra_loads.resize(ring);
    rank.last_fed.assign(batch_size_, -1);
    rank.workers.resize(std::max<uint32_t>(1, loader_.workers));
    for (uint32_t w = 0; w < rank.workers.size(); ++w) {
      rank.workers[w].jitter = Rng(DeriveStreamSeed(streams_root, "load_jitter", r, w));
    }
    rank.compute_jitter = Rng(DeriveStreamSeed(streams_root, "compute_jitter", r));
    rank.natural_epoch_batches = natural;
    rank.epoch_batches = epoch_batches[r];
    const uint64_t fewer = natural - epoch_batches[r];
    rank.iterations_total =
        job.has_iterations() ? job_iterations : job_iterations - std::min(job_iterations, epochs * fewer);
    rank.outstanding.reserve(nonblocking_steps_ + 1);
  }
  for (const Fault& fault : scenario_.faults()) {
    if (fault.has_slow_rank()) {
      ranks_[fault.slow_rank().rank()].slow_ppm = FactorPpm(fault.slow_rank().factor());
    } else if (fault.has_slow_worker()) {
      auto& workers = ranks_[fault.slow_worker().rank()].workers;
      const uint32_t w = fault.slow_worker().worker();
      if (w < workers.size()) workers[w].slow_ppm = FactorPpm(fault.slow_worker().factor());
    } else if (fault.has_dead_worker()) {
      engine_.Schedule(static_cast<int64_t>(fault.dead_worker().at_ns()), kWorkerDies, fault.dead_worker().rank(),
                       fault.dead_worker().worker());
    } else if (fault.has_dead_rank()) {
      engine_.Schedule(static_cast<int64_t>(fault.dead_rank().at_ns()), kRankDies, fault.dead_rank().rank(), 0);
    } else if (fault.has_straggler()) {
      stragglers_[fault.straggler().rank()] = {fault.straggler().iteration(),
                                               static_cast<int64_t>(fault.straggler().delay_ns())};
    }
  }
}

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
    GetItemResult result;
    if (recorded != nullptr) {
      result.index = recorded->final_index >= 0 ? recorded->final_index : draw.index;
      result.attempts = std::max<uint64_t>(1, recorded->attempts);
      result.outcome = recorded->livelock ? GetItemOutcome::kLivelock
                       : recorded->error  ? GetItemOutcome::kAttemptsExhausted
                                          : GetItemOutcome::kAccepted;
    } else {
      result = GetItem(dataset_, *policy_, draw.index, rng, pipeline_draws_, kGetItemAttemptsLimit,
                       tracing_ ? &attempt_log_ : nullptr);
    }
    const int64_t load_ns = ScalePpm(sample_load_ns_, load_ppm);
    if (result.outcome == GetItemOutcome::kLivelock || result.outcome == GetItemOutcome::kAttemptsLimit) {
      // The worker never returns: record where it spins, and schedule nothing.
      worker.stuck = true;
      entry.state = BatchState::kStuck;
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
      return;
    }
    // Every attempt reloads the sample; jitter per attempt (one draw for the mean past 64).
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
    rank.stats.loads += result.attempts;
    const bool raised = result.outcome == GetItemOutcome::kAttemptsExhausted;
    if (tracing_ && result.attempts > 1) TraceAttempts(rank.rank, trace_worker, batch, b, t, spent, result.attempts);
    if (tracing_) {
      TraceRecord record;
      record.kind = TraceKind::kLoad;
      record.rank = rank.rank;
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
    t = SaturatingAdd(t, spent);
    if (raised) {
      // The bounded policy raises: the worker sends the exception in place of the batch.
      entry.state = BatchState::kError;
      break;
    }
    rank.batch_final[base + b] = result.index;
    rank.batch_extra_loads[batch % rank.batches.size()] += result.attempts - 1;
  }
  engine_.Schedule(t, kBatchLoaded, rank.rank, batch);
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

// ---------------------------------------------------------------------------------------------
// The main process

// Takes batch `rank.iteration` if it is there. Returns false when the rank must wait.
bool JobSim::BeginIteration(RankState& rank) {
  const int64_t now = engine_.now_ns();
  const uint64_t k = rank.iteration;
  if (!rank.loader_started || (loader_.batches_per_epoch != 0 && k == rank.epoch_end)) {
    rank.loader_started = true;
    if (loader_.batches_per_epoch != 0 && rank.epoch_batches == 0) {
      // An empty DataLoader: next() raises StopIteration at once, and again after mmcv's
      // IterLoader starts a new epoch, so the rank's training loop dies.
      Die(rank, Cause::kUnevenBatches, "StopIteration: its DataLoader has no batch (uneven_batches leaves it none)");
      return false;
    }
    StartEpoch(rank);
  }
  // Without workers, next(iterator) loads the batch in the main process, now.
  if (loader_.workers == 0) Dispatch(rank, k);
  BatchEntry& entry = Entry(rank, k);
  PETRSIM_ASSERT(entry.batch == k);
  if (entry.state != BatchState::kReady && entry.state != BatchState::kError) {
    if (rank.phase != Phase::kWaitData) {
      rank.phase = Phase::kWaitData;
      rank.phase_since_ns = now;
    }
    if (rank.workers[entry.worker].dead) {
      Die(rank, Cause::kWorkerDied,
          fmt::format("RuntimeError: DataLoader worker {} exited unexpectedly", entry.worker));
    }
    return false;
  }
  if (rank.phase == Phase::kWaitData) {
    rank.stats.data_wait_ns += now - rank.phase_since_ns;
    if (tracing_) {
      TraceRecord record;
      record.kind = TraceKind::kDataWait;
      record.rank = rank.rank;
      record.start_ns = rank.phase_since_ns;
      record.end_ns = now;
      record.iteration = k;
      Trace(record);
    }
  }
  if (entry.state == BatchState::kError) {
    Die(rank, Cause::kDatasetError,
        fmt::format("the bounded resample policy gave up on a sample of batch {} "
                    "(worker {}); the DataLoader re-raised it in the main process",
                    k, entry.worker));
    return false;
  }
  // Consume: the stream-continuity count, then the prefetch window moves by one.
  const size_t base = (k % rank.batches.size()) * batch_size_;
  rank.local_batch_has_gt = false;
  for (uint32_t b = 0; b < batch_size_; ++b) {
    const int64_t fed = rank.batch_final[base + b];
    if (fed < 0) continue;
    ++rank.stats.samples;
    const SlotDraw& draw = rank.batch_draws[base + b];
    if (fed != draw.index) ++rank.stats.resample_jumps;
    const FrameInfo& frame = dataset_.frame(fed);
    if (frame.prev_exists && rank.last_fed[b] != fed - 1) ++rank.stats.stream_breaks;
    rank.last_fed[b] = fed;
    if (frame.gt_count > 0) rank.local_batch_has_gt = true;
  }
  rank.stats.resample_attempts += rank.batch_extra_loads[k % rank.batches.size()];
  entry.state = BatchState::kEmpty;
  rank.iteration_compute_ns = ScalePpm(Jitter(rank.compute_jitter, step_compute_ns_), rank.slow_ppm);
  rank.phase = Phase::kRunning;
  rank.phase_since_ns = now;
  // Batch k+1 becomes the next to consume: the window admits one more batch.
  if (loader_.workers > 0) Dispatch(rank, k + 1);
  return true;
}

void JobSim::Die(RankState& rank, Cause cause, const std::string& why) {
  if (rank.phase == Phase::kDead) return;
  const int64_t now = engine_.now_ns();
  // Collectives it joined but that had not completed never complete now: its process is gone.
  auto withdraw = [&](uint32_t group, uint64_t seq) { rendezvous_.Withdraw(group, seq); };
  if (rank.phase == Phase::kBlocked && rank.blocked.complete_ns < 0) {
    withdraw(rank.blocked.group, rank.blocked.seq);
  }
  for (const auto& work : rank.outstanding) {
    if (work.complete_ns < 0) withdraw(work.group, work.seq);
  }
  rank.phase = Phase::kDead;
  rank.stats.died_ns = now;
  rank.stats.died_why = why;
  if (first_death_ns_ < 0) {
    first_death_ns_ = now;
    first_death_cause_ = cause;
  }
  if (tracing_) {
    TraceRecord record;
    record.kind = TraceKind::kRankDied;
    record.rank = rank.rank;
    record.start_ns = record.end_ns = now;
    record.iteration = rank.iteration;
    record.text = why;
    Trace(record);
  }
}

// Issues one collective at now. Returns true when the rank goes on at once (non-blocking, or
// a blocking one that completed with this arrival is handled by a wake event).
bool JobSim::Issue(RankState& rank, const PlanStep& step, uint64_t iteration) {
  const int64_t now = engine_.now_ns();
  const uint64_t seq = rank.next_seq[step.group]++;
  ++rank.stats.collectives;
  const CollectiveSignature signature{step.collective->op(), step.collective->dtype(), step.numel_in};
  const auto arrival = rendezvous_.Arrive(step.group, seq, rank.rank, signature, &step, iteration, now);
  Instance* instance = arrival.instance;
  if (arrival.outcome == Rendezvous<PlanStep>::Outcome::kMismatch) {
    Desync desync;
    desync.process_group = group_names_[step.group];
    desync.seq = seq;
    desync.first_rank = instance->first_rank;
    desync.first = Ref(*instance->first, step.group, seq, instance->first_iteration);
    desync.other_rank = rank.rank;
    desync.other = Ref(step, step.group, seq, iteration);
    desync.at_ns = now;
    desync_ = desync;
    if (tracing_) {
      TraceRecord record;
      record.kind = TraceKind::kDesync;
      record.rank = rank.rank;
      record.start_ns = record.end_ns = now;
      record.iteration = iteration;
      record.process_group = group_names_[step.group];
      record.seq = seq;
      record.text = "collective mismatch";
      Trace(record);
      // The mismatched call was issued (c10d enqueues it; NCCL would pair it): record it as a
      // collective pending at the end, with this rank's own signature.
      TraceCollective(rank.rank, OutstandingWork{step.group, seq, now, -1, -1, &step, iteration}, now, false);
    }
    stop_ = true;
    return false;
  }
  const bool blocking = step.collective->blocking();
  if (blocking) {
    rank.phase = Phase::kBlocked;
    rank.phase_since_ns = now;
    rank.blocked = OutstandingWork{step.group, seq, now, -1, -1, &step, iteration};
  } else {
    rank.outstanding.push_back(OutstandingWork{step.group, seq, now, -1, -1, &step, iteration});
    ++rank.outstanding_open;
  }
  if (arrival.outcome == Rendezvous<PlanStep>::Outcome::kCompleted) {
    Complete(step.group, *instance);
  } else if (watchdog_armed_ns_ < 0) {
    // The watchdog watches every work, blocking or not, from its issue. An armed watchdog
    // fires no later than this work's deadline (issue times only grow).
    ArmWatchdog(FireTime(now));
  }
  return !blocking;
}

// Every rank has arrived: the collective ends one duration after the last arrival.
// Every rank has arrived: the collective ends one duration after the last arrival. Non-blocking
// arrivals learn their completion time now; the ranks blocked in it all return at `done`
// through one event, which wakes them in arrival order (as one wake event per rank, scheduled
// back to back, would: nothing else can run between them).
void JobSim::Complete(uint32_t group, Instance& instance) {
  const int64_t done = SaturatingAdd(instance.last_arrival_ns, instance.first->duration_ns);
  bool blocked = false;
  for (const uint32_t r : instance.waiters) {
    RankState& rank = ranks_[r];
    if (rank.phase == Phase::kDead) continue;
    if (rank.phase == Phase::kBlocked && rank.blocked.group == group && rank.blocked.seq == instance.seq) {
      rank.blocked.complete_ns = done;
      rank.blocked.started_ns = instance.last_arrival_ns;
      blocked = true;
      if (options_.wake_each_rank) engine_.Schedule(done, kRankWake, r, 0);
      continue;
    }
    for (auto& work : rank.outstanding) {
      if (work.group == group && work.seq == instance.seq && work.complete_ns < 0) {
        work.complete_ns = done;
        work.started_ns = instance.last_arrival_ns;
        --rank.outstanding_open;
        if (rank.phase == Phase::kWaitOutstanding && rank.outstanding_open == 0) {
          int64_t last = done;
          for (const auto& w : rank.outstanding) last = std::max(last, w.complete_ns);
          engine_.Schedule(std::max(last, engine_.now_ns()), kRankWake, r, 0);
        }
        break;
      }
    }
  }
  if (blocked && !options_.wake_each_rank) {
    engine_.Schedule(done, kCollectiveDone, group, instance.seq);
  } else {
    rendezvous_.Close(group, instance.seq);
  }
}

void JobSim::OnCollectiveDone(uint32_t group, uint64_t seq) {
  Instance* instance = rendezvous_.Find(group, seq);
  PETRSIM_ASSERT(instance != nullptr);
  // Waking a rank may open instances of this group (and grow its ring): work from a copy.
  wake_scratch_.assign(instance->waiters.begin(), instance->waiters.end());
  rendezvous_.Close(group, seq);
  for (const uint32_t r : wake_scratch_) {
    RankState& rank = ranks_[r];
    if (rank.phase == Phase::kBlocked && rank.blocked.group == group && rank.blocked.seq == seq) {
      Advance(rank);
    }
  }
}

void JobSim::EndIteration(RankState& rank) {
  const int64_t now = engine_.now_ns();
  if (tracing_) {
    TraceRecord record;
    record.kind = TraceKind::kIteration;
    record.rank = rank.rank;
    record.start_ns = rank.last_iteration_end_ns;
    record.end_ns = now;
    record.iteration = rank.iteration;
    Trace(record);
  }
  ++rank.iteration;
  ++rank.stats.iterations_completed;
  rank.last_iteration_end_ns = now;
  rank.stage = Stage::kBegin;
  rank.step = 0;
  rank.compute_spent = false;
}

// Runs the rank's program from now until it has to wait for something. Blocking collectives
// advance their step when the rank wakes from them; everything else advances at once.
void JobSim::Advance(RankState& rank) {
  if (rank.phase == Phase::kDead || rank.phase == Phase::kDone || stop_) return;
  if (rank.pending_raise) {
    Die(rank, rank.raise_cause, rank.raise_why);
    return;
  }
  const int64_t now = engine_.now_ns();
  if (rank.phase == Phase::kBlocked) {
    if (rank.blocked.complete_ns < 0 || rank.blocked.complete_ns > now) return;
    rank.stats.collective_wait_ns += now - rank.phase_since_ns;
    if (tracing_) TraceCollective(rank.rank, rank.blocked, now, /*completed=*/true);
    rank.phase = Phase::kRunning;
    ++rank.step;
    rank.compute_spent = false;
  } else if (rank.phase == Phase::kWaitOutstanding) {
    if (rank.outstanding_open != 0) return;
    int64_t last = now;
    for (const auto& work : rank.outstanding) last = std::max(last, work.complete_ns);
    if (last > now) return;
    rank.stats.collective_wait_ns += now - rank.phase_since_ns;
    rank.phase = Phase::kRunning;
  }

  while (!stop_) {
    switch (rank.stage) {
      case Stage::kStartup:
        if (rank.step < startup_steps_.size()) {
          if (!Issue(rank, startup_steps_[rank.step], 0)) return;
          ++rank.step;
          continue;
        }
        rank.stage = Stage::kBegin;
        rank.last_iteration_end_ns = now;
        continue;

      case Stage::kBegin:
        if (rank.iteration >= rank.iterations_total) {
          rank.phase = Phase::kDone;
          rank.phase_since_ns = engine_.now_ns();
          if (tracing_) {
            TraceRecord record;
            record.kind = TraceKind::kProcessExit;
            record.rank = rank.rank;
            record.start_ns = record.end_ns = rank.phase_since_ns;
            record.iteration = rank.iteration;
            record.text = "finished its iterations (exit 0)";
            Trace(record);
          }
          ++ranks_done_;
          if (ranks_done_ == world_) stop_ = true;
          return;
        }
        if (!BeginIteration(rank)) return;
        rank.stage = Stage::kPerIteration;
        rank.step = 0;
        rank.compute_spent = false;
        continue;

      case Stage::kPerIteration: {
        if (rank.step >= iteration_steps_.size()) {
          rank.stage = Stage::kWaitOutstanding;
          rank.compute_spent = false;
          continue;
        }
        const PlanStep& step = iteration_steps_[rank.step];
        if (!rank.compute_spent) {
          rank.compute_spent = true;
          // Forward before the first step; the backward's share before each non-blocking (DDP
          // bucket) step; the step's own compute_before_ns; a straggler's delay.
          int64_t compute = ScalePpm(static_cast<int64_t>(step.collective->compute_before_ns()), rank.slow_ppm);
          const int64_t forward = rank.iteration_compute_ns / 3;
          const int64_t backward = rank.iteration_compute_ns - forward;
          if (rank.step == 0) {
            compute = SaturatingAdd(compute, forward);
            if (stragglers_[rank.rank].first == rank.iteration) {
              compute = SaturatingAdd(compute, stragglers_[rank.rank].second);
            }
          }
          if (step.nonblocking_ordinal >= 0) {
            const int64_t j = step.nonblocking_ordinal;
            const int64_t n = nonblocking_steps_;
            compute += backward * (j + 1) / n - backward * j / n;
          }
          if (compute > 0) {
            Compute(rank, compute);
            return;
          }
        }
        if (step.collective->only_when_local_batch_has_gt() && !rank.local_batch_has_gt) {
          ++rank.stats.collectives_skipped;
          ++rank.step;
          rank.compute_spent = false;
          continue;
        }
        if (!Issue(rank, step, rank.iteration)) return;
        ++rank.step;
        rank.compute_spent = false;
        continue;
      }

      case Stage::kWaitOutstanding: {
        if (!rank.compute_spent) {
          rank.compute_spent = true;
          // Without DDP buckets the backward runs after the last collective.
          const int64_t forward = rank.iteration_compute_ns / 3;
          const int64_t tail = nonblocking_steps_ == 0 ? rank.iteration_compute_ns - forward : 0;
          if (tail > 0) {
            Compute(rank, tail);
            return;
          }
        }
        int64_t last = engine_.now_ns();
        for (const auto& work : rank.outstanding) last = std::max(last, work.complete_ns);
        if (rank.outstanding_open > 0 || last > engine_.now_ns()) {
          rank.phase = Phase::kWaitOutstanding;
          rank.phase_since_ns = engine_.now_ns();
          // Incomplete works armed the watchdog when they were issued.
          if (rank.outstanding_open == 0) engine_.Schedule(last, kRankWake, rank.rank, 0);
          return;
        }
        if (tracing_) {
          for (const auto& work : rank.outstanding) {
            TraceCollective(rank.rank, work, work.complete_ns, /*completed=*/true);
          }
        }
        rank.outstanding.clear();
        rank.stage = Stage::kPeriodic;
        rank.step = 0;
        continue;
      }

      case Stage::kPeriodic:
        while (rank.step < periodic_steps_.size() && (rank.iteration + 1) % periodic_every_[rank.step] != 0) {
          ++rank.step;
        }
        if (rank.step < periodic_steps_.size()) {
          if (!Issue(rank, periodic_steps_[rank.step], rank.iteration)) return;
          ++rank.step;
          continue;
        }
        rank.stage = Stage::kCheckpoint;
        rank.compute_spent = false;
        continue;

      case Stage::kCheckpoint:
        if (!rank.compute_spent) {
          rank.compute_spent = true;
          if (rank.rank == 0 && plan_.checkpoint_interval != 0 &&
              (rank.iteration + 1) % plan_.checkpoint_interval == 0 && checkpoint_ns_ > 0) {
            if (tracing_) {
              TraceRecord record;
              record.kind = TraceKind::kCheckpoint;
              record.rank = rank.rank;
              record.start_ns = engine_.now_ns();
              record.end_ns = engine_.now_ns() + checkpoint_ns_;
              record.iteration = rank.iteration;
              Trace(record);
            }
            engine_.Schedule(engine_.now_ns() + checkpoint_ns_, kRankWake, rank.rank, 0);
            rank.phase = Phase::kRunning;
            return;
          }
        }
        EndIteration(rank);
        continue;
    }
  }
}

void JobSim::Compute(RankState& rank, int64_t compute_ns) {
  const int64_t now = engine_.now_ns();
  rank.stats.compute_ns = SaturatingAdd(rank.stats.compute_ns, compute_ns);
  if (tracing_) {
    TraceRecord record;
    record.kind = TraceKind::kCompute;
    record.rank = rank.rank;
    record.start_ns = now;
    record.end_ns = now + compute_ns;
    record.iteration = rank.iteration;
    Trace(record);
  }
  rank.phase = Phase::kRunning;
  engine_.Schedule(now + compute_ns, kRankWake, rank.rank, 0);
}

// ---------------------------------------------------------------------------------------------
// The watchdog

// NCCL: the watchdog thread wakes every poll interval (from process group creation) and aborts
// a work that has run longer than the timeout. Gloo: the waiting call itself times out.
int64_t JobSim::FireTime(int64_t issue_ns) const {
  const int64_t deadline = issue_ns + timeout_ns_;
  if (!nccl_ || poll_ns_ == 0) return deadline;
  return (deadline / poll_ns_ + 1) * poll_ns_;
}

void JobSim::ArmWatchdog(int64_t fire_ns) {
  if (watchdog_armed_ns_ >= 0 && watchdog_armed_ns_ <= fire_ns) return;
  PETRSIM_ASSERT(fire_ns >= engine_.now_ns());
  watchdog_armed_ns_ = fire_ns;
  engine_.Schedule(fire_ns, kWatchdog, 0, static_cast<uint64_t>(fire_ns));
}

// The issue time of the rank's oldest collective that has not completed, or -1.
int64_t JobSim::OldestIncompleteIssue(const RankState& rank, OutstandingWork* work) const {
  if (rank.phase == Phase::kDead || rank.phase == Phase::kDone) return -1;
  int64_t oldest = -1;
  for (const auto& w : rank.outstanding) {
    if (w.complete_ns < 0) {
      oldest = w.issue_ns;
      if (work != nullptr) *work = w;
      break;
    }
  }
  if (rank.phase == Phase::kBlocked && rank.blocked.complete_ns < 0 && (oldest < 0 || rank.blocked.issue_ns < oldest)) {
    oldest = rank.blocked.issue_ns;
    if (work != nullptr) {
      *work = rank.blocked;
    }
  }
  return oldest;
}

// Returns false when a watchdog fired: the job is over.
bool JobSim::OnWatchdog() {
  const int64_t now = engine_.now_ns();
  if (watchdog_armed_ns_ != now) return true;  // superseded by an earlier one
  watchdog_armed_ns_ = -1;
  int64_t next = -1;
  bool fired = false;
  for (const RankState& rank : ranks_) {
    const int64_t issue = OldestIncompleteIssue(rank, nullptr);
    if (issue < 0) continue;
    const int64_t fire = FireTime(issue);
    if (fire <= now) {
      fired = true;
    } else if (next < 0 || fire < next) {
      next = fire;
    }
  }
  if (fired) {
    first_watchdog_ns_ = now;
    return false;
  }
  if (next >= 0) ArmWatchdog(next);
  return true;
}

bool JobSim::Handle(const Event& event) {
  switch (event.kind) {
    case kRankWake:
      Advance(ranks_[event.actor]);
      break;
    case kBatchLoaded: {
      RankState& rank = ranks_[event.actor];
      if (rank.phase != Phase::kDead) OnBatchLoaded(rank, event.payload);
      break;
    }
    case kWatchdog:
      if (!OnWatchdog()) return false;
      break;
    case kCollectiveDone:
      OnCollectiveDone(event.actor, event.payload);
      break;
    case kRankDies:
      Die(ranks_[event.actor], Cause::kRankDied,
          fmt::format("rank {} died (fault dead_rank at {} ns)", event.actor, event.time_ns));
      break;
    case kWorkerDies: {
      RankState& rank = ranks_[event.actor];
      if (rank.phase == Phase::kDead || rank.phase == Phase::kDone) break;
      if (loader_.workers == 0) {
        // workers_per_gpu 0: the main process itself loads, so it is the one that dies.
        Die(rank, Cause::kWorkerDied,
            "the main process, which loads the data itself, died "
            "(fault dead_worker with workers_per_gpu 0)");
        break;
      }
      PETRSIM_ASSERT(event.payload < rank.workers.size());
      rank.workers[event.payload].dead = true;
      // The DataLoader's SIGCHLD handler raises in the main thread at its next Python step:
      // now if it is waiting for data, else when its current compute or collective returns.
      const std::string why =
          fmt::format("RuntimeError: DataLoader worker {} exited unexpectedly (fault dead_worker)", event.payload);
      if (rank.phase == Phase::kWaitData) {
        Die(rank, Cause::kWorkerDied, why);
      } else {
        rank.pending_raise = true;
        rank.raise_cause = Cause::kWorkerDied;
        rank.raise_why = why;
      }
      break;
    }
  }
  if (stop_) return false;
  if (options_.progress && (engine_.processed() & ((1u << 20) - 1)) == 0) {
    uint64_t done = kNone;
    for (const auto& rank : ranks_) done = std::min(done, rank.stats.iterations_completed);
    options_.progress(engine_.now_ns(), done);
  }
  return true;
}

CollectiveRef JobSim::Ref(const PlanStep& step, uint32_t group, uint64_t seq, uint64_t iteration) const {
  CollectiveRef ref;
  ref.process_group = group_names_[group];
  ref.seq = seq;
  ref.op = step.collective->op();
  ref.dtype = step.collective->dtype();
  ref.numel_in = step.numel_in;
  ref.numel_out = step.numel_out;
  ref.step = step.collective->name();
  ref.iteration = iteration;
  ref.startup = &step >= startup_steps_.data() && &step < startup_steps_.data() + startup_steps_.size();
  return ref;
}

std::string JobSim::WatchdogLine(uint32_t rank, const OutstandingWork& work, int64_t fire_ns) const {
  const uint64_t timeout_ms = scenario_.comm().timeout_ms();
  if (!nccl_) {
    return fmt::format(
        "[Rank {}] RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
        "Timed out waiting {}ms for recv operation to complete",
        rank, timeout_ms);
  }
  return fmt::format(
      "[Rank {}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={}, OpType={}, "
      "NumelIn={}, NumelOut={}, Timeout(ms)={}) ran for {} milliseconds before timing out.",
      rank, work.seq, OpTypeName(work.step->collective->op()), work.step->numel_in, work.step->numel_out, timeout_ms,
      (fire_ns - work.issue_ns) / 1'000'000);
}

SimResult JobSim::Run() {
  Setup();
  for (uint32_t r = 0; r < world_; ++r) engine_.Schedule(0, kRankWake, r, 0);
  EngineLimits limits;
  limits.events_max = options_.events_max;
  limits.time_max_ns = options_.virtual_time_max_ns;
  const StopReason reason = engine_.Run([this](const Event& e) { return Handle(e); }, limits);
  SimResult result;
  Finish(result, reason);
  return result;
}

void JobSim::Finish(SimResult& result, StopReason reason) {
  const int64_t end = engine_.now_ns();
  result.end_ns = end;
  result.events = engine_.processed();
  result.trace_hash = engine_.trace_hash();
  result.job_iterations = job_iterations_;
  result.first_watchdog_ns = first_watchdog_ns_;
  uint64_t completed = kNone;
  for (const RankState& rank : ranks_) completed = std::min(completed, rank.stats.iterations_completed);
  result.iterations_completed = completed;
  for (const RankState& rank : ranks_) {
    if (rank.stats.iterations_completed == completed) {
      result.last_iteration_end_ns = std::max(result.last_iteration_end_ns, rank.last_iteration_end_ns);
    }
  }

  // Each rank's state at the end, and the watchdog lines of ranks still waiting.
  struct Line {
    int64_t fire_ns;
    uint32_t rank;
    std::string text;
  };
  std::vector<Line> lines;
  for (RankState& rank : ranks_) {
    RankStats& stats = rank.stats;
    OutstandingWork work;
    const int64_t issue = OldestIncompleteIssue(rank, &work);
    if (issue >= 0) {
      stats.blocked_in = Ref(*work.step, work.group, work.seq, work.iteration);
      stats.blocked_since_ns = issue;
      const int64_t fire = FireTime(issue);
      stats.watchdog_fires_ns = fire;
      // Only a fired watchdog prints: ranks whose own deadline falls before the launcher has
      // torn the job down print too.
      if (first_watchdog_ns_ >= 0 && fire <= first_watchdog_ns_ + kLauncherTeardownNs) {
        lines.push_back(Line{fire, rank.rank, WatchdogLine(rank.rank, work, fire)});
      }
      // The slice of the collective that never completed.
      if (tracing_) TraceCollective(rank.rank, work, std::max(end, issue), /*completed=*/false);
    }
    switch (rank.phase) {
      case Phase::kDone:
        stats.state = "finished its iterations";
        break;
      case Phase::kDead:
        stats.state = "dead: " + stats.died_why;
        break;
      case Phase::kWaitData:
        stats.state = fmt::format("waiting for batch {}", rank.iteration);
        stats.data_wait_ns += end - rank.phase_since_ns;
        break;
      case Phase::kBlocked:
        stats.state = fmt::format("in collective {} seq {} ({}){}", group_names_[rank.blocked.group], rank.blocked.seq,
                                  rank.blocked.step->collective->name(),
                                  rank.blocked.complete_ns >= 0 ? ", complete, returning" : "");
        stats.collective_wait_ns += end - rank.phase_since_ns;
        break;
      case Phase::kWaitOutstanding:
        if (stats.blocked_in) {
          stats.state = fmt::format("in collective {} seq {} ({})", stats.blocked_in->process_group,
                                    stats.blocked_in->seq, stats.blocked_in->step);
        } else {
          stats.state = "in collective";
        }
        stats.collective_wait_ns += end - rank.phase_since_ns;
        break;
      case Phase::kRunning:
      case Phase::kStartup:
        stats.state = "computing";
        break;
    }
  }
  std::sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    return a.fire_ns != b.fire_ns ? a.fire_ns < b.fire_ns : a.rank < b.rank;
  });
  for (auto& line : lines) {
    {
      if (tracing_) {
        TraceRecord record;
        record.kind = TraceKind::kWatchdog;
        record.rank = line.rank;
        record.start_ns = record.end_ns = line.fire_ns;
        record.text = line.text;
        Trace(record);
      }
    }
    result.nccl_log.push_back(std::move(line.text));
  }

  // Totals.
  for (const RankState& rank : ranks_) {
    result.samples += rank.stats.samples;
    result.resample_attempts += rank.stats.resample_attempts;
    result.stream_breaks += rank.stats.stream_breaks;
  }
  for (StuckGetitem& stuck : spins_) {
    // Loads made by the time the run ended (the loop is not simulated, it is counted).
    const int64_t load_ns =
        ScalePpm(sample_load_ns_,
                 ScalePpm(ranks_[stuck.rank].workers[std::max(0, stuck.worker)].slow_ppm, ranks_[stuck.rank].slow_ppm));
    if (load_ns > 0 && end > stuck.since_ns) {
      stuck.attempts = std::max<uint64_t>(stuck.attempts, static_cast<uint64_t>((end - stuck.since_ns) / load_ns) + 1);
    }
    if (tracing_) {
      TraceRecord spin;
      spin.kind = TraceKind::kLoad;
      spin.rank = stuck.rank;
      spin.worker = stuck.worker;
      spin.start_ns = stuck.since_ns;
      spin.end_ns = std::max(end, stuck.since_ns);
      spin.iteration = stuck.batch;
      spin.slot = stuck.slot;
      spin.index = stuck.index;
      spin.final_index = stuck.last_index;
      spin.attempts = stuck.attempts;
      spin.completed = false;  // the worker never returned it
      spin.text = "resample loop never ends (still spinning when the run ended)";
      Trace(spin);
    }
  }
  // The spin that keeps a rank waiting: the one on the batch it waits for.
  const auto spin_blocking = [&](const RankState& rank) -> const StuckGetitem* {
    if (rank.phase != Phase::kWaitData) return nullptr;
    for (const StuckGetitem& stuck : spins_) {
      if (stuck.rank == rank.rank && stuck.batch == rank.iteration) return &stuck;
    }
    return nullptr;
  };

  // The outcome.
  uint64_t skipped = 0;
  for (const RankState& rank : ranks_) skipped += rank.stats.collectives_skipped;
  bool uneven = false;
  for (const RankState& rank : ranks_) uneven |= rank.iterations_total != ranks_[0].iterations_total;
  if (desync_) {
    result.outcome = Outcome::kDesync;
    result.cause = skipped > 0 ? Cause::kConditionalCollective : uneven ? Cause::kUnevenBatches : Cause::kNone;
    result.desync = desync_;
  } else if (ranks_done_ == world_) {
    result.outcome = Outcome::kCompleted;
  } else if (reason == StopReason::kEventsLimit || reason == StopReason::kTimeLimit) {
    result.outcome = Outcome::kLimitReached;
    result.limit_note =
        reason == StopReason::kEventsLimit
            ? fmt::format("petrsim's limit of {} events was reached", options_.events_max)
            : fmt::format("petrsim's limit of {} ns of virtual time was reached", options_.virtual_time_max_ns);
  } else {
    result.outcome = first_death_ns_ >= 0 ? Outcome::kRankDied : Outcome::kHang;
  }

  if (result.outcome == Outcome::kHang || result.outcome == Outcome::kRankDied) {
    // The collective the waiting ranks block in: the incomplete instance opened first.
    // When ranks skipped conditional collectives, the waits can form a cycle across groups
    // (a rank that skipped one on default_pg waits in a later collective on another group that
    // the others have not reached): the collective to report is the oldest one a skipping rank
    // is missing from, so the diagnosis names the rank that skipped, not the one it blocks.
    uint32_t oldest_group = 0;
    const Instance* oldest = nullptr;
    if (skipped > 0) {
      oldest = rendezvous_.OldestIncomplete(&oldest_group, [&](uint32_t g, const Instance& instance) {
        for (const RankState& rank : ranks_) {
          if (rank.stats.collectives_skipped > 0 && rank.phase != Phase::kDead && rank.next_seq[g] <= instance.seq) {
            return true;
          }
        }
        return false;
      });
    }
    // A collective that only ranks now dead had joined is not one anybody waits in: prefer the
    // oldest one a live rank has joined (found by the property suite: a rank that opened a
    // non-blocking broadcast and then died made the report name the live rank waiting elsewhere).
    if (oldest == nullptr) {
      oldest = rendezvous_.OldestIncomplete(&oldest_group, [&](uint32_t g, const Instance& instance) {
        for (const RankState& rank : ranks_) {
          if (rank.phase != Phase::kDead && rank.next_seq[g] > instance.seq) return true;
        }
        return false;
      });
    }
    if (oldest == nullptr) oldest = rendezvous_.OldestIncomplete(&oldest_group);
    if (oldest != nullptr) {
      result.collective = Ref(*oldest->first, oldest_group, oldest->seq, oldest->first_iteration);
      for (const RankState& rank : ranks_) {
        if (rank.next_seq[oldest_group] > oldest->seq && rank.phase != Phase::kDead) {
          result.waiting_ranks.push_back(rank.rank);
          result.blocked_at_ns = std::max(result.blocked_at_ns, rank.stats.blocked_since_ns);
        } else {
          result.stuck_ranks.push_back(rank.rank);
        }
      }
    } else {
      // Nobody waits in a collective (one rank, or every rank waits for data): every rank
      // still running is stuck.
      for (const RankState& rank : ranks_) {
        if (rank.phase != Phase::kDone) result.stuck_ranks.push_back(rank.rank);
      }
    }
    if (result.outcome == Outcome::kHang) {
      // The user-level cause, from what the first stuck rank that explains it is doing.
      result.cause = Cause::kNone;
      for (const uint32_t r : result.stuck_ranks) {
        const RankState& rank = ranks_[r];
        if (const StuckGetitem* stuck = spin_blocking(rank)) {
          result.cause = Cause::kSamplerLivelock;
          result.stuck = *stuck;
        } else if (rank.phase == Phase::kDone) {
          result.cause = uneven ? Cause::kUnevenBatches : skipped > 0 ? Cause::kConditionalCollective : Cause::kNone;
        } else if (rank.phase == Phase::kRunning || rank.phase == Phase::kWaitData) {
          // Still computing, or waiting for a batch a (slow) worker is still loading, when
          // the others' watchdogs fired.
          result.cause = Cause::kStragglerTimeout;
        } else if (skipped > 0) {
          result.cause = Cause::kConditionalCollective;
        }
        if (result.cause != Cause::kNone) break;
      }
      if (result.cause == Cause::kNone && skipped > 0) result.cause = Cause::kConditionalCollective;
    } else if (result.outcome == Outcome::kRankDied) {
      result.cause = first_death_cause_;
    }
  }
  for (RankState& rank : ranks_) result.ranks.push_back(rank.stats);
}

}  // namespace

SimResult Simulate(const Scenario& scenario, const Dataset& dataset, const SimOptions& options) {
  CheckSamplerConstructible(scenario, dataset, "scenario");
  JobSim job(scenario, dataset, options);
  return job.Run();
}

}  // namespace petrsim::sim
