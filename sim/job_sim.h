// The simulated job's inside (sim/simulator.h is its outside): the state of every rank, worker
// and collective, and JobSim, the one object that holds them and handles the engine's events.
// Its members are defined by concept: job_setup.cc (the plan resolved, ranks and workers built),
// loader.cc (DataLoader workers and the resample loop), main_process.cc (each rank's training
// loop and its collectives, issued on the simulated network of sim_backend.h), watchdog.cc
// (timeouts and the lines they print) and simulator.cc (the run, and how it ended). Internal to
// sim/.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <optional>

#include "base/assert.h"
#include "base/error.h"
#include "data/data_loader.h"
#include "data/numpy_random.h"
#include "data/pipeline_draws.h"
#include "data/random_streams.h"
#include "data/resample_policy.h"
#include "data/sampler.h"
#include "plan/iteration_plan.h"
#include "plan/rank_program.h"
#include "scenario/scenario_defaults.h"
#include "scenario/torch_version.h"
#include "sim/engine.h"
#include "sim/rendezvous.h"
#include "sim/sim_backend.h"
#include "sim/simulator.h"

namespace petrsim::sim::internal {

enum EventKind : uint32_t {
  kRankWake = 0,        // a rank's main process goes on (compute done, collective complete, ...)
  kBatchLoaded = 1,     // a worker returns a batch (payload: batch); actor: rank
  kWatchdog = 2,        // the earliest watchdog deadline of any rank
  kRankDies = 3,        // fault: actor rank
  kWorkerDies = 4,      // fault: actor rank, payload worker
  kCollectiveDone = 5,  // a collective completes: actor process group, payload seq (SimNet's)
  kWorkDone = 6,        // the seam's callback on an async work (SimNet's; the rank loop uses none)
};

constexpr int64_t kPpm = 1'000'000;
constexpr uint64_t kNone = std::numeric_limits<uint64_t>::max();
// torchrun's agent checks its workers every 5 s and tears the job down once one has exited:
// the watchdog lines of ranks whose deadline falls within that window still get printed.
constexpr int64_t kLauncherTeardownNs = 5'000'000'000LL;

// Durations saturate here, far beyond any time limit (a year is 2^55 ns), so products of
// validated factors and durations can never wrap: such a run ends as limit_reached.
constexpr int64_t kDurationCap = int64_t{1} << 61;

inline int64_t SaturatingAdd(int64_t a, int64_t b) { return a > kDurationCap - b ? kDurationCap : a + b; }

inline int64_t ScalePpm(int64_t ns, int64_t ppm) {
  if (ppm == kPpm) return ns;
  // 64-bit arithmetic while the product fits (durations below about 2.5 hours at factor 2^20
  // ppm); 128-bit beyond. Same result either way.
  if (ns >= 0 && ns < (int64_t{1} << 42) && ppm >= 0 && ppm < (int64_t{1} << 21)) {
    return ns * ppm / kPpm;
  }
  const __int128 scaled = static_cast<__int128>(ns) * ppm / kPpm;
  return scaled > kDurationCap ? kDurationCap : static_cast<int64_t>(scaled);
}

inline int64_t FactorPpm(double factor) { return static_cast<int64_t>(factor * kPpm + 0.5); }

using Instance = SimNet::Collectives::Instance;

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

struct RankState {
  uint32_t rank = 0;
  Phase phase = Phase::kStartup;
  // Where it is in the plan (plan/rank_program.h), and whether the compute before the current
  // step is done or scheduled.
  std::optional<RankProgram> program;
  bool compute_spent = false;
  bool started = false;  // the startup collectives are over
  int64_t phase_since_ns = 0;
  uint64_t iteration = 0;
  uint64_t iterations_total = 0;
  int64_t slow_ppm = kPpm;
  int64_t iteration_compute_ns = 0;
  // (Its collectives in flight are the network's, net_: the one it blocks in while phase is
  // kBlocked, and its async ones, DDP's buckets, waited for at kWaitOutstanding.)

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
  // The steps after the collective it blocks in that completed with it (fuse_collective_chains):
  // its program moves past them when it returns.
  uint32_t fused_steps = 0;
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
        plan_(ExpandPlan(scenario)),
        owned_policy_(options.resample_policy == nullptr ? MakeResamplePolicy(scenario, dataset) : nullptr),
        policy_(options.resample_policy != nullptr ? options.resample_policy : owned_policy_.get()),
        loader_(MakeDataLoaderShape(scenario, dataset)),
        world_(scenario.job().world_size()),
        batch_size_(scenario.job().samples_per_gpu()),
        engine_(4 * world_ + 64),
        net_(engine_, world_, SimEventKinds{kCollectiveDone, kRankWake, kWorkDone}, options.wake_each_rank) {}

  SimResult Run();

 private:
  void Setup();
  void ResolvePlan();
  void SetupRanks();
  void ApplyFaults();
  PlanStep Resolve(const Collective& collective, int32_t nonblocking_ordinal);
  uint32_t ProcessGroupId(const std::string& name);
  int64_t Jitter(Rng& rng, int64_t ns) const;
  bool Handle(const Event& event);

  // Main process.
  void Advance(RankState& rank);
  void Resume(uint32_t rank) { Advance(ranks_[rank]); }
  // Advance's parts: the wake from a wait, then one per RankProgram::Kind; each returns false
  // when the rank has to wait.
  bool ResumeFromWait(RankState& rank, int64_t now);
  bool StepCollective(RankState& rank, const RankProgram::Step& at);
  int64_t ComputeBefore(const RankState& rank, const RankProgram::Step& at, const PlanStep& step, size_t phase) const;
  bool StepLoadBatchOrDone(RankState& rank, const RankProgram::Step& at, int64_t now);
  bool StepWaitOutstanding(RankState& rank, const RankProgram::Step& at);
  bool StepCheckpoint(RankState& rank);
  bool BeginIteration(RankState& rank);
  bool CountFed(RankState& rank, uint64_t k);
  // The program's collective step on the simulated network, with the program's wait rule
  // (RankProgram::Step::wait_at_once). Returns false when the rank has to wait (or a desync ended
  // the job).
  bool Issue(RankState& rank, const RankProgram::Step& at, const PlanStep& step);
  // fuse_collective_chains: what `rank` completing its next collective, the first of a chain,
  // may complete with it (null: only that one): when every other rank waits in it at the same
  // step, none skips a step of the chain or has other work in flight, and no fault, limit or
  // trace can see the steps in between.
  std::optional<SimNet::Extension> ChainExtension(const RankState& rank, const RankProgram::Step& at,
                                                  const PlanStep& step);
  void ResolveChains();
  void ReportDesync(const RankState& rank, const SimNet::Mismatch& mismatch);
  void Die(RankState& rank, Cause cause, const std::string& why);
  void EndIteration(RankState& rank);
  void NextStep(RankState& rank);  // the program moves on; the next step has spent no compute
  void Compute(RankState& rank, int64_t compute_ns);

  // Data loader.
  void StartEpoch(RankState& rank);
  void Dispatch(RankState& rank, uint64_t next_to_consume);
  void StartBatch(RankState& rank, uint32_t worker, uint64_t batch);
  // StartBatch's parts.
  GetItemResult LoadSample(const SlotDraw& draw, const RecordedLoad* recorded, NumpyRandomState& rng);
  int64_t LoadTime(WorkerState& worker, const RecordedLoad* recorded, const GetItemResult& result, int64_t load_ns);
  void RecordSpin(RankState& rank, int32_t trace_worker, uint64_t batch, uint32_t b, const SlotDraw& draw,
                  const GetItemResult& result, int64_t t);
  void TraceLoad(uint32_t rank, int32_t trace_worker, uint64_t batch, uint32_t b, const SlotDraw& draw,
                 const GetItemResult& result, int64_t t, int64_t spent, bool raised);
  void OnBatchLoaded(RankState& rank, uint64_t batch);
  BatchEntry& Entry(RankState& rank, uint64_t batch) { return rank.batches[batch % rank.batches.size()]; }

  // Watchdog.
  int64_t OldestIncompleteIssue(const RankState& rank, WorkRecord* work) const;
  int64_t FireTime(int64_t issue_ns) const;
  void ArmWatchdog(int64_t fire_ns);
  bool OnWatchdog();

  void Finish(SimResult& result, StopReason reason);
  // Finish's sections.
  void FinishRanks(SimResult& result, int64_t end);
  void FinishRankState(RankState& rank, int64_t end);
  void FinishTotals(SimResult& result, int64_t end);
  void FinishOutcome(SimResult& result, StopReason reason, uint64_t skipped, bool uneven);
  void FinishBlame(SimResult& result, uint64_t skipped);
  const Instance* SkippedCollective(uint32_t* group);
  const StuckGetitem* SpinBlocking(const RankState& rank) const;
  Cause HangCause(SimResult& result, uint64_t skipped, bool uneven) const;
  CollectiveRef Ref(const PlanStep& step, uint32_t pg, uint64_t seq, uint64_t iteration) const;
  // What rank `rank` prints when its watchdog finds `work` past its timeout at `fire_ns`: the
  // watchdog line first (formats/torch_logs/watchdog_lines.h for NCCL, Gloo's one line otherwise).
  std::vector<std::string> WatchdogLines(uint32_t rank, const WorkRecord& work, int64_t fire_ns) const;
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
  void TraceCollective(uint32_t rank, const WorkRecord& work, int64_t end_ns, bool completed) {
    const Collective& collective = *work.step->collective;
    TraceRecord record;
    record.kind = TraceKind::kCollective;
    record.rank = rank;
    record.worker = collective.blocking() ? kMainProcess : kAsyncCollectives;
    record.start_ns = work.issue_ns;
    record.end_ns = end_ns;
    record.iteration = work.iteration;
    record.process_group = process_group_names_[work.pg];
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
  SimNet net_;

  std::vector<std::string> process_group_names_;
  std::vector<PlanStep> startup_steps_;
  // Per phase of the plan (ExpandedPlan::Phase).
  std::vector<std::vector<PlanStep>> iteration_steps_;
  std::vector<PlanStep> periodic_steps_;
  std::vector<uint32_t> nonblocking_steps_;  // per phase
  // fuse_collective_chains: per phase and step, the blocking collectives that follow it with no
  // compute between them on its group (a chain), and their durations; whether any is conditional.
  struct Chain {
    uint32_t steps = 0;
    int64_t duration_ns = 0;
    bool conditional = false;
  };
  std::vector<std::vector<Chain>> chains_;
  std::vector<int64_t> fault_times_;  // when a rank or worker dies, sorted
  int64_t sample_load_ns_ = 0;
  int64_t step_compute_ns_ = 0;
  int64_t jitter_ppm_ = 0;
  int64_t checkpoint_ns_ = 0;
  int64_t timeout_ns_ = 0;
  int64_t poll_ns_ = 0;
  bool nccl_ = true;
  TorchVersion torch_version_;
  std::string watchdog_note_;  // NCCL, a release whose watchdog line numbers are not known: says so
  PipelineDraws pipeline_;
  uint64_t job_iterations_ = 0;
  std::vector<RankState> ranks_;
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

}  // namespace petrsim::sim::internal
