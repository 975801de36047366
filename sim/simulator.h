// The simulated job (docs/reference/streampetr.md, sections 6-8): N ranks, each a DataLoader with W workers and a
// prefetch window, the scenario's sampler and resample policy (the very code `petrsim sample`
// runs), a training loop issuing the iteration plan's collectives, a rendezvous per process
// group with c10d sequence numbers, and a watchdog per rank. Everything runs in one thread on
// integer virtual nanoseconds; one scenario gives one run, bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/resample_policy.h"
#include "data/stuck_getitem.h"
#include "proto/scenario.pb.h"
#include "scenario/outcome.h"
#include "trace/replay_source.h"
#include "trace/trace_sink.h"

namespace petrsim::sim {

struct RankStats {
  uint32_t rank = 0;
  uint64_t iterations_completed = 0;
  uint64_t samples = 0;  // consumed by the main process
  uint64_t loads = 0;    // getitem attempts of every batch loaded, consumed or not (timing-bound)
  // Loads after the first of each getitem of the batches consumed (trained on); a spinning
  // getitem's loads are in StuckGetitem::attempts.
  uint64_t resample_attempts = 0;
  uint64_t resample_jumps = 0;       // getitems that returned another frame than asked
  uint64_t stream_breaks = 0;        // frames fed with prev_exists true after a different frame
  uint64_t collectives = 0;          // issued
  uint64_t collectives_skipped = 0;  // conditional collectives not issued (no GT)
  int64_t data_wait_ns = 0;
  int64_t collective_wait_ns = 0;
  int64_t compute_ns = 0;
  std::string state;                        // at the end: done, waiting for batch k, in collective ..., dead
  std::optional<CollectiveRef> blocked_in;  // the oldest collective not complete at the end
  int64_t blocked_since_ns = -1;
  int64_t watchdog_fires_ns = -1;  // -1: never
  int64_t died_ns = -1;
  std::string died_why;
};

struct Desync {
  std::string process_group;
  uint64_t seq = 0;
  uint32_t first_rank = 0;  // the rank whose arrival opened the collective
  CollectiveRef first;
  uint32_t other_rank = 0;  // the first rank that arrived with a different op or size
  CollectiveRef other;
  int64_t at_ns = 0;
};

struct SimResult {
  Outcome outcome = Outcome::kCompleted;
  Cause cause = Cause::kNone;
  std::string limit_note;  // kLimit: which limit
  uint64_t job_iterations = 0;
  uint64_t iterations_completed = 0;        // by every rank
  int64_t end_ns = 0;                       // virtual time the run ended
  int64_t last_iteration_end_ns = 0;        // when the last iteration completed on every rank
  std::vector<uint32_t> stuck_ranks;        // never reached the collective the others wait in
  std::vector<uint32_t> waiting_ranks;      // blocked in it
  std::optional<CollectiveRef> collective;  // the collective the waiting ranks block in
  int64_t blocked_at_ns = -1;               // when the last waiting rank blocked
  int64_t first_watchdog_ns = -1;
  // A sampler livelock: the spinning getitem of the batch the stuck rank waits for.
  std::optional<StuckGetitem> stuck;
  std::optional<Desync> desync;
  // Each firing rank's watchdog line as its PyTorch release prints it, by time then rank.
  std::vector<std::string> nccl_log;
  // Everything those ranks print for it, rank by rank in the same order (the watchdog line, the
  // follow-up lines, terminate's), and a note when the release's line numbers are not known.
  std::vector<std::string> job_log;
  std::string job_log_note;
  std::vector<RankStats> ranks;
  uint64_t samples = 0;
  uint64_t resample_attempts = 0;
  uint64_t stream_breaks = 0;
  uint64_t events = 0;
  uint64_t trace_hash = 0;
};

struct SimOptions {
  // Mixed into the roots of petrsim's cost-jitter streams: runs of one scenario that differ only
  // in run_seed see other load and compute times (sweeps vary it). 0: the scenario seed alone,
  // which is what `petrsim SCENARIO` runs. The dataset does not depend on it.
  uint64_t run_seed = 0;
  uint64_t events_max = 20'000'000'000ULL;
  int64_t virtual_time_max_ns = int64_t{365} * 24 * 3600 * 1'000'000'000LL;  // one year
  TraceSink* trace = nullptr;                                                // not owned; may be null
  // How ranks blocked in a collective return when it completes: one event that wakes them all
  // in arrival order (false, the default), or one wake event per rank, scheduled back to back
  // (true). Both give the same run (times, sequence numbers, outcome, report); only the event
  // count and trace hash differ. The test of that equality is the reason the option exists.
  bool wake_each_rank = false;
  // Runs of blocking collectives that follow one another with no compute between them (the
  // StreamPETR plan's loss all-reduces: 44 an iteration) complete as one when every rank is in
  // the first and nothing else can happen to them before the last ends: no fault due, no other
  // work in flight, no trace recorded. The run is the same (times, sequence numbers, outcome,
  // report; tests/simulator_test.cc checks); only the event count and trace hash differ, so
  // `petrsim SCENARIO` keeps it off and sweeps turn it on.
  bool fuse_collective_chains = false;
  // Replaces the scenario's resample policy (not owned; it must be built over the same
  // dataset). A seam for the property suite's mutants (a policy that forgets its bound must be
  // caught); null: the scenario's policy.
  const ResamplePolicy* resample_policy = nullptr;
  // Drives the run by a recorded job (not owned); null: the scenario alone.
  const ReplaySource* replay = nullptr;
  // Called now and then (about every million events) with the virtual time and the iterations
  // every rank has completed; for a progress bar. May be empty.
  std::function<void(int64_t now_ns, uint64_t iterations_completed)> progress;
};

// Runs the job of `scenario` over `dataset` (built from it). Throws ScenarioError where the
// Python job would fail before training (the sampler's assertion) or a limit refuses it.
SimResult Simulate(const Scenario& scenario, const Dataset& dataset, const SimOptions& options);

}  // namespace petrsim::sim
