// Each simulated rank's main process: iterations, the plan's collectives, compute; see job_sim.h.
#include "sim/job_sim.h"

namespace petrsim::sim::internal {

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
  rank.program->SetLocalBatchHasGt(CountFed(rank, k));
  rank.stats.resample_attempts += rank.batch_extra_loads[k % rank.batches.size()];
  entry.state = BatchState::kEmpty;
  rank.iteration_compute_ns = ScalePpm(Jitter(rank.compute_jitter, step_compute_ns_), rank.slow_ppm);
  rank.phase = Phase::kRunning;
  rank.phase_since_ns = now;
  // Batch k+1 becomes the next to consume: the window admits one more batch.
  if (loader_.workers > 0) Dispatch(rank, k + 1);
  return true;
}

// Counts what batch `k` feeds (samples, resample jumps, stream breaks). Returns whether any of
// its frames has ground truth.
inline bool JobSim::CountFed(RankState& rank, uint64_t k) {
  const size_t base = (k % rank.batches.size()) * batch_size_;
  bool has_gt = false;
  for (uint32_t b = 0; b < batch_size_; ++b) {
    const int64_t fed = rank.batch_final[base + b];
    if (fed < 0) continue;
    ++rank.stats.samples;
    const SlotDraw& draw = rank.batch_draws[base + b];
    if (fed != draw.index) ++rank.stats.resample_jumps;
    const FrameInfo& frame = dataset_.frame(fed);
    if (frame.prev_exists && rank.last_fed[b] != fed - 1) ++rank.stats.stream_breaks;
    rank.last_fed[b] = fed;
    if (frame.gt_count > 0) has_gt = true;
  }
  return has_gt;
}

void JobSim::Die(RankState& rank, Cause cause, const std::string& why) {
  if (rank.phase == Phase::kDead) return;
  const int64_t now = engine_.now_ns();
  // Collectives it joined but that had not completed never complete now: its process is gone.
  net_.RankDied(rank.rank);
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

// The program's collective step, issued on the simulated network at now: waited for at once, the
// rank blocks in it until its completion returns the rank; otherwise it stays in flight until
// kWaitOutstanding. The watchdog watches every work, blocking or not, from its issue.
bool JobSim::Issue(RankState& rank, const RankProgram::Step& at, const PlanStep& step) {
  ++rank.stats.collectives;
  const std::optional<SimNet::Extension> chain = ChainExtension(rank, at, step);
  const SimNet::Posted posted =
      net_.Post(rank.rank, step, rank.iteration, /*async_op=*/!at.wait_at_once, chain ? &*chain : nullptr);
  if (posted == SimNet::Posted::kMismatch) {
    ReportDesync(rank, net_.mismatch());
    return false;
  }
  if (chain) {
    // Every rank completes the chain's steps with this one (their issues are counted here).
    PETRSIM_ASSERT(posted == SimNet::Posted::kCompleted);
    for (RankState& member : ranks_) {
      member.fused_steps = static_cast<uint32_t>(chain->extra_seqs);
      member.stats.collectives += chain->extra_seqs;
    }
  }
  const int64_t now = engine_.now_ns();
  if (at.wait_at_once) {
    rank.phase = Phase::kBlocked;
    rank.phase_since_ns = now;
  }
  // Not complete with this arrival: an armed watchdog fires no later than its deadline (issue
  // times only grow).
  if (posted == SimNet::Posted::kPending && watchdog_armed_ns_ < 0) ArmWatchdog(FireTime(now));
  return !at.wait_at_once;
}

std::optional<SimNet::Extension> JobSim::ChainExtension(const RankState& rank, const RankProgram::Step& at,
                                                        const PlanStep& step) {
  if (!options_.fuse_collective_chains || tracing_ || !at.wait_at_once ||
      at.section != RankProgram::Section::kPerIteration) {
    return std::nullopt;
  }
  const Chain& chain = chains_[plan_.Phase(at.iteration)][at.index];
  // This issue must complete the collective: every other rank waits in it.
  if (chain.steps == 0 || net_.Arrived(rank.rank, step.pg) + 1 != world_) return std::nullopt;
  const int64_t now = engine_.now_ns();
  const int64_t end = SaturatingAdd(SaturatingAdd(now, step.duration_ns), chain.duration_ns);
  if (end > options_.virtual_time_max_ns ||
      engine_.processed() + 4 * (chain.steps + 1) * world_ >= options_.events_max) {
    return std::nullopt;
  }
  // No rank or worker dies before the chain ends (a worker's death raises at the next return).
  const auto fault = std::upper_bound(fault_times_.begin(), fault_times_.end(), now - 1);
  if (fault != fault_times_.end() && *fault <= end) return std::nullopt;
  for (const RankState& member : ranks_) {
    if (member.pending_raise || net_.dead(member.rank) || net_.async_open(member.rank) != 0) return std::nullopt;
    if (chain.conditional && !member.program->local_batch_has_gt()) return std::nullopt;
    if (member.rank == rank.rank) continue;
    const RankProgram::Step& there = member.program->current();
    if (member.phase != Phase::kBlocked || there.kind != RankProgram::Kind::kCollective ||
        there.section != at.section || there.index != at.index || there.iteration != at.iteration) {
      return std::nullopt;
    }
  }
  return SimNet::Extension{chain.duration_ns, chain.steps};
}

// The members of a collective issued different ones at its sequence number: the job is over.
void JobSim::ReportDesync(const RankState& rank, const SimNet::Mismatch& mismatch) {
  const WorkRecord& issued = mismatch.issued;
  Desync desync;
  desync.process_group = process_group_names_[issued.pg];
  desync.seq = issued.seq;
  desync.first_rank = mismatch.first_rank;
  desync.first = Ref(*mismatch.first, issued.pg, issued.seq, mismatch.first_iteration);
  desync.other_rank = rank.rank;
  desync.other = Ref(*issued.step, issued.pg, issued.seq, issued.iteration);
  desync.at_ns = issued.issue_ns;
  desync_ = desync;
  if (tracing_) {
    TraceRecord record;
    record.kind = TraceKind::kDesync;
    record.rank = rank.rank;
    record.start_ns = record.end_ns = issued.issue_ns;
    record.iteration = issued.iteration;
    record.process_group = process_group_names_[issued.pg];
    record.seq = issued.seq;
    record.text = "collective mismatch";
    Trace(record);
    // The mismatched call was issued (c10d enqueues it; NCCL would pair it): record it as a
    // collective pending at the end, with this rank's own signature.
    TraceCollective(rank.rank, issued, issued.issue_ns, false);
  }
  stop_ = true;
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
  NextStep(rank);
}

void JobSim::NextStep(RankState& rank) {
  rank.program->Next();
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
  if (!ResumeFromWait(rank, now)) return;
  while (!stop_) {
    const RankProgram::Step& at = rank.program->current();
    bool go_on = true;
    switch (at.kind) {
      case RankProgram::Kind::kCollective:
        go_on = StepCollective(rank, at);
        break;
      case RankProgram::Kind::kLoadBatch:
      case RankProgram::Kind::kDone:
        go_on = StepLoadBatchOrDone(rank, at, now);
        break;
      case RankProgram::Kind::kWaitOutstanding:
        go_on = StepWaitOutstanding(rank, at);
        break;
      case RankProgram::Kind::kCheckpoint:
        go_on = StepCheckpoint(rank);
        break;
      case RankProgram::Kind::kEndIteration:
        EndIteration(rank);
        break;
    }
    if (!go_on) return;
  }
}

// A rank woken in a blocking collective or in its wait for the non-blocking ones goes on once
// what it waits for has completed. Returns false while it still waits.
inline bool JobSim::ResumeFromWait(RankState& rank, int64_t now) {
  if (rank.phase == Phase::kBlocked) {
    if (!net_.BlockedCompleted(rank.rank)) return false;
    rank.stats.collective_wait_ns += now - rank.phase_since_ns;
    if (tracing_) TraceCollective(rank.rank, net_.blocked(rank.rank), now, /*completed=*/true);
    net_.Return(rank.rank);
    rank.phase = Phase::kRunning;
    NextStep(rank);
    for (; rank.fused_steps > 0; --rank.fused_steps) NextStep(rank);
  } else if (rank.phase == Phase::kWaitOutstanding) {
    if (!net_.AllCompleted(rank.rank)) return false;
    rank.stats.collective_wait_ns += now - rank.phase_since_ns;
    rank.phase = Phase::kRunning;
  }
  return true;
}

// The compute a per-iteration collective step waits for: forward before the first step; the
// backward's share before each non-blocking (DDP bucket) step; the step's own
// compute_before_ns; a straggler's delay.
inline int64_t JobSim::ComputeBefore(const RankState& rank, const RankProgram::Step& at, const PlanStep& step,
                                     size_t phase) const {
  int64_t compute = ScalePpm(static_cast<int64_t>(step.collective->compute_before_ns()), rank.slow_ppm);
  const int64_t forward = rank.iteration_compute_ns / 3;
  const int64_t backward = rank.iteration_compute_ns - forward;
  if (at.index == 0) {
    compute = SaturatingAdd(compute, forward);
    if (stragglers_[rank.rank].first == rank.iteration) {
      compute = SaturatingAdd(compute, stragglers_[rank.rank].second);
    }
  }
  if (step.nonblocking_ordinal >= 0) {
    const int64_t j = step.nonblocking_ordinal;
    const int64_t n = nonblocking_steps_[phase];
    compute += backward * (j + 1) / n - backward * j / n;
  }
  return compute;
}

// RankProgram::Kind::kCollective. Returns false when the rank has to wait.
inline bool JobSim::StepCollective(RankState& rank, const RankProgram::Step& at) {
  if (at.section != RankProgram::Section::kPerIteration) {
    const bool startup = at.section == RankProgram::Section::kStartup;  // no compute before it
    const PlanStep& step = startup ? startup_steps_[at.index] : periodic_steps_[at.index];
    if (!Issue(rank, at, step)) return false;
    NextStep(rank);
    return true;
  }
  const size_t phase = plan_.Phase(at.iteration);
  const PlanStep& step = iteration_steps_[phase][at.index];
  if (!rank.compute_spent) {
    rank.compute_spent = true;
    const int64_t compute = ComputeBefore(rank, at, step, phase);
    if (compute > 0) {
      Compute(rank, compute);
      return false;
    }
  }
  if (at.skipped) {
    ++rank.stats.collectives_skipped;
    NextStep(rank);
    return true;
  }
  if (!Issue(rank, at, step)) return false;
  NextStep(rank);
  return true;
}

// RankProgram::Kind::kLoadBatch and kDone. Returns false when the rank has to wait (or is done).
inline bool JobSim::StepLoadBatchOrDone(RankState& rank, const RankProgram::Step& at, int64_t now) {
  if (!rank.started) {
    // The startup collectives are over: the first iteration is timed from here.
    rank.started = true;
    rank.last_iteration_end_ns = now;
  }
  if (at.kind == RankProgram::Kind::kDone) {
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
    return false;
  }
  if (!BeginIteration(rank)) return false;
  NextStep(rank);
  return true;
}

// RankProgram::Kind::kWaitOutstanding. Returns false when the rank has to wait.
inline bool JobSim::StepWaitOutstanding(RankState& rank, const RankProgram::Step& at) {
  if (!rank.compute_spent) {
    rank.compute_spent = true;
    // Without DDP buckets the backward runs after the last collective.
    const int64_t forward = rank.iteration_compute_ns / 3;
    const int64_t tail = nonblocking_steps_[plan_.Phase(at.iteration)] == 0 ? rank.iteration_compute_ns - forward : 0;
    if (tail > 0) {
      Compute(rank, tail);
      return false;
    }
  }
  if (!net_.AllCompleted(rank.rank)) {
    rank.phase = Phase::kWaitOutstanding;
    rank.phase_since_ns = engine_.now_ns();
    // Incomplete works armed the watchdog when they were issued.
    net_.WaitAll(rank.rank);
    return false;
  }
  if (tracing_) {
    for (const WorkRecord& work : net_.in_flight(rank.rank)) {
      TraceCollective(rank.rank, work, work.complete_ns, /*completed=*/true);
    }
  }
  net_.Collect(rank.rank);
  NextStep(rank);
  return true;
}

// RankProgram::Kind::kCheckpoint. Returns false while the checkpoint is being written.
inline bool JobSim::StepCheckpoint(RankState& rank) {
  if (!rank.compute_spent && checkpoint_ns_ > 0) {
    rank.compute_spent = true;
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
    return false;
  }
  NextStep(rank);
  return true;
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

}  // namespace petrsim::sim::internal
