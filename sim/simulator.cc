// The simulated job; see simulator.h. One JobSim object holds every rank's state and handles the
// engine's events. Each rank's main process is a small state machine driven by one kind of
// wake-up event; workers finish batches with another; collectives rendezvous in a ring of open
// instances per process group, so no event and no arrival allocates memory once the run is warm.
#include "sim/simulator.h"

#include <optional>
#include <tuple>

#include "sim/job_sim.h"

namespace petrsim::sim {
namespace internal {

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
  FinishRanks(result, end);
  FinishTotals(result, end);

  // The outcome.
  uint64_t skipped = 0;
  for (const RankState& rank : ranks_) skipped += rank.stats.collectives_skipped;
  bool uneven = false;
  for (const RankState& rank : ranks_) uneven |= rank.iterations_total != ranks_[0].iterations_total;
  FinishOutcome(result, reason, skipped, uneven);
  if (result.outcome == Outcome::kHang || result.outcome == Outcome::kRankDied) {
    FinishBlame(result, skipped);
    if (result.outcome == Outcome::kHang) {
      result.cause = HangCause(result, skipped, uneven);
    } else if (result.outcome == Outcome::kRankDied) {
      result.cause = first_death_cause_;
    }
  }
  for (RankState& rank : ranks_) result.ranks.push_back(rank.stats);
}

// Each rank's state at the end, and the watchdog lines of ranks still waiting.
void JobSim::FinishRanks(SimResult& result, int64_t end) {
  struct Line {
    int64_t fire_ns;
    uint32_t rank;
    std::vector<std::string> text;
  };
  std::vector<Line> lines;
  for (RankState& rank : ranks_) {
    RankStats& stats = rank.stats;
    WorkRecord work;
    const int64_t issue = OldestIncompleteIssue(rank, &work);
    if (issue >= 0) {
      stats.blocked_in = Ref(*work.step, work.pg, work.seq, work.iteration);
      stats.blocked_since_ns = issue;
      const int64_t fire = FireTime(issue);
      stats.watchdog_fires_ns = fire;
      // Only a fired watchdog prints: ranks whose own deadline falls before the launcher has
      // torn the job down print too.
      if (first_watchdog_ns_ >= 0 && fire <= first_watchdog_ns_ + kLauncherTeardownNs) {
        lines.push_back(Line{fire, rank.rank, WatchdogLines(rank.rank, work, fire)});
      }
      // The slice of the collective that never completed.
      if (tracing_) TraceCollective(rank.rank, work, std::max(end, issue), /*completed=*/false);
    }
    FinishRankState(rank, end);
  }
  std::sort(lines.begin(), lines.end(), [](const Line& a, const Line& b) {
    return a.fire_ns != b.fire_ns ? a.fire_ns < b.fire_ns : a.rank < b.rank;
  });
  for (auto& line : lines) {
    if (tracing_) {
      TraceRecord record;
      record.kind = TraceKind::kWatchdog;
      record.rank = line.rank;
      record.start_ns = record.end_ns = line.fire_ns;
      record.text = line.text.front();
      Trace(record);
    }
    result.nccl_log.push_back(line.text.front());
    result.job_log.insert(result.job_log.end(), line.text.begin(), line.text.end());
  }
  if (!result.job_log.empty()) result.job_log_note = watchdog_note_;
}

// What the rank was doing when the run ended (RankStats::state), and the wait it was in.
void JobSim::FinishRankState(RankState& rank, int64_t end) {
  RankStats& stats = rank.stats;
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
    case Phase::kBlocked: {
      const WorkRecord& blocked = net_.blocked(rank.rank);
      // A fused chain (fuse_collective_chains) completed its steps with the first one: the rank
      // is in the chain's last, as it would be one collective at a time.
      uint64_t seq = blocked.seq;
      const PlanStep* step = blocked.step;
      if (rank.fused_steps > 0) {
        const RankProgram::Step& first = rank.program->current();
        seq += rank.fused_steps;
        step = &iteration_steps_[plan_.Phase(first.iteration)][first.index + rank.fused_steps];
      }
      stats.state = fmt::format("in collective {} seq {} ({}){}", process_group_names_[blocked.pg], seq,
                                step->collective->name(), blocked.complete_ns >= 0 ? ", complete, returning" : "");
      stats.collective_wait_ns += end - rank.phase_since_ns;
      break;
    }
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

// The totals, and the getitems still spinning when the run ended.
void JobSim::FinishTotals(SimResult& result, int64_t end) {
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
}

void JobSim::FinishOutcome(SimResult& result, StopReason reason, uint64_t skipped, bool uneven) {
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
}

// The collective the waiting ranks block in: the incomplete instance opened first. When ranks
// skipped conditional collectives, the waits can form a cycle across groups (a rank that skipped
// one on default_pg waits in a later collective on another group that the others have not
// reached): the collective to report is one a skipping rank is missing from, so the diagnosis
// names the rank that skipped, not the one it blocks.
void JobSim::FinishBlame(SimResult& result, uint64_t skipped) {
  uint32_t oldest_group = 0;
  const Instance* oldest = skipped > 0 ? SkippedCollective(&oldest_group) : nullptr;
  // A collective that only ranks now dead had joined is not one anybody waits in: prefer the
  // oldest one a live rank has joined (found by the property suite: a rank that opened a
  // non-blocking broadcast and then died made the report name the live rank waiting elsewhere).
  if (oldest == nullptr) {
    oldest = net_.collectives().OldestIncomplete(&oldest_group, [&](uint32_t g, const Instance& instance) {
      for (const RankState& rank : ranks_) {
        if (rank.phase != Phase::kDead && net_.next_seq(rank.rank, g) > instance.seq) return true;
      }
      return false;
    });
  }
  if (oldest == nullptr) oldest = net_.collectives().OldestIncomplete(&oldest_group);
  if (oldest != nullptr) {
    result.collective = Ref(*oldest->first, oldest_group, oldest->seq, oldest->first_iteration);
    for (const RankState& rank : ranks_) {
      if (net_.next_seq(rank.rank, oldest_group) > oldest->seq && rank.phase != Phase::kDead) {
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
}

// The incomplete collective a skipping rank is missing from, or null. Several can qualify (each side of the cycle
// misses a skipping rank); which of them opened first depends on timing, which must not change the report (found by the
// property suite: a run seed changed the blamed ranks). So the choice is by who is missing: a
// collective that only skipping ranks are missing from, then the fewest missing, then the group
// and seq.
const Instance* JobSim::SkippedCollective(uint32_t* group) {
  struct Candidate {
    bool others_missing = true;
    uint32_t missing = 0;
    uint32_t group = 0;
    const Instance* instance = nullptr;
  };
  std::optional<Candidate> best;
  net_.collectives().OldestIncomplete(nullptr, [&](uint32_t g, const Instance& instance) {
    Candidate candidate{false, 0, g, &instance};
    bool skipper_missing = false;
    for (const RankState& rank : ranks_) {
      if (rank.phase == Phase::kDead || net_.next_seq(rank.rank, g) > instance.seq) continue;
      ++candidate.missing;
      if (rank.stats.collectives_skipped > 0) {
        skipper_missing = true;
      } else {
        candidate.others_missing = true;
      }
    }
    const auto key = [](const Candidate& c) {
      return std::make_tuple(c.others_missing, c.missing, c.group, c.instance->seq);
    };
    if (skipper_missing && (!best || key(candidate) < key(*best))) best = candidate;
    return false;  // visits every incomplete instance
  });
  if (!best) return nullptr;
  *group = best->group;
  return best->instance;
}

// The spin that keeps a rank waiting: the one on the batch it waits for.
const StuckGetitem* JobSim::SpinBlocking(const RankState& rank) const {
  if (rank.phase != Phase::kWaitData) return nullptr;
  for (const StuckGetitem& stuck : spins_) {
    if (stuck.rank == rank.rank && stuck.batch == rank.iteration) return &stuck;
  }
  return nullptr;
}

// A hang's user-level cause, from what the first stuck rank that explains it is doing.
Cause JobSim::HangCause(SimResult& result, uint64_t skipped, bool uneven) const {
  Cause cause = Cause::kNone;
  for (const uint32_t r : result.stuck_ranks) {
    const RankState& rank = ranks_[r];
    if (const StuckGetitem* stuck = SpinBlocking(rank)) {
      cause = Cause::kSamplerLivelock;
      result.stuck = *stuck;
    } else if (rank.phase == Phase::kDone) {
      cause = uneven ? Cause::kUnevenBatches : skipped > 0 ? Cause::kConditionalCollective : Cause::kNone;
    } else if (rank.phase == Phase::kRunning || rank.phase == Phase::kWaitData) {
      // Still computing, or waiting for a batch a (slow) worker is still loading, when
      // the others' watchdogs fired.
      cause = Cause::kStragglerTimeout;
    } else if (skipped > 0) {
      cause = Cause::kConditionalCollective;
    }
    if (cause != Cause::kNone) break;
  }
  if (cause == Cause::kNone && skipped > 0) cause = Cause::kConditionalCollective;
  return cause;
}

}  // namespace internal

SimResult Simulate(const Scenario& scenario, const Dataset& dataset, const SimOptions& options) {
  CheckSamplerConstructible(scenario, dataset, "scenario");
  internal::JobSim job(scenario, dataset, options);
  return job.Run();
}

}  // namespace petrsim::sim
