// The simulated collective watchdog: deadlines, what fires, the lines ranks print, and the event dispatch; see
// job_sim.h.
#include "sim/job_sim.h"

#include "formats/torch_logs/watchdog_lines.h"

namespace petrsim::sim::internal {

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
int64_t JobSim::OldestIncompleteIssue(const RankState& rank, WorkRecord* work) const {
  if (rank.phase == Phase::kDead || rank.phase == Phase::kDone) return -1;
  int64_t oldest = -1;
  for (const WorkRecord& w : net_.in_flight(rank.rank)) {
    if (w.complete_ns < 0) {
      oldest = w.issue_ns;
      if (work != nullptr) *work = w;
      break;
    }
  }
  const WorkRecord& blocked = net_.blocked(rank.rank);
  if (rank.phase == Phase::kBlocked && blocked.complete_ns < 0 && (oldest < 0 || blocked.issue_ns < oldest)) {
    oldest = blocked.issue_ns;
    if (work != nullptr) *work = blocked;
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
      // SimNet's (a wait for works in flight, or wake_each_rank's return from a collective), or
      // the rank's own (compute done, a checkpoint written).
      if (!net_.OnRankWake(event.actor)) Advance(ranks_[event.actor]);
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
      net_.OnCollectiveDone(event.actor, event.payload);
      break;
    case kWorkDone:
      net_.OnWorkDone(event.actor, event.payload);
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

CollectiveRef JobSim::Ref(const PlanStep& step, uint32_t pg, uint64_t seq, uint64_t iteration) const {
  CollectiveRef ref;
  ref.process_group = process_group_names_[pg];
  ref.seq = seq;
  ref.op = step.collective->op();
  ref.dtype = step.collective->dtype();
  ref.numel_in = step.numel_in;
  ref.numel_out = step.numel_out;
  ref.step = step.collective->name();
  ref.python_frame = step.collective->python_frame();
  ref.iteration = iteration;
  ref.startup = &step >= startup_steps_.data() && &step < startup_steps_.data() + startup_steps_.size();
  return ref;
}

std::vector<std::string> JobSim::WatchdogLines(uint32_t rank, const WorkRecord& work, int64_t fire_ns) const {
  CollectiveTimeout timeout;
  timeout.backend = scenario_.comm().backend();
  timeout.version = torch_version_;
  timeout.rank = rank;
  timeout.process_group_index = work.pg;  // numbered as created (ProcessGroupNames)
  timeout.process_group = process_group_names_[work.pg];
  timeout.seq = work.seq;
  timeout.op = work.step->collective->op();
  timeout.numel = WorkNumel{work.step->numel_in, work.step->numel_out};
  timeout.timeout_ms = scenario_.comm().timeout_ms();
  timeout.ran_for_ms = static_cast<uint64_t>((fire_ns - work.issue_ns) / 1'000'000);
  timeout.last_enqueued_seq = net_.next_seq(rank, work.pg) - 1;
  timeout.last_completed_seq = work.seq - 1;
  timeout.timestamp = LogTimestampOfVirtualTime(fire_ns);
  return CollectiveTimeoutLines(timeout);
}

}  // namespace petrsim::sim::internal
