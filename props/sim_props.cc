// Properties of the simulator over generated scenarios (rapidcheck; ctest label `props`). Each
// says what it proves; a failing case is shrunk and written as a .pbtxt (scenario_gen.h).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <set>

#include "check/preflight.h"
#include "data/resample_policy.h"
#include "data/sampler.h"
#include "props/scenario_gen.h"
#include "sim/simulator.h"

namespace petrsim {
namespace {

const bool kCaseRateRegistered = props::RegisterCaseRate();

using props::CounterexampleOnFailure;
using props::GenOptions;
using props::GenScenario;
using props::TryBuild;

// A mutant policy: the real one, but it never gives up (attempts_max 0).
class ForgetfulPolicy final : public ResamplePolicy {
 public:
  explicit ForgetfulPolicy(const ResamplePolicy& real) : real_(real) {}
  IndexRange Candidates(int64_t rejected) const override { return real_.Candidates(rejected); }
  int64_t Next(int64_t rejected, NumpyRandomState& rng) const override { return real_.Next(rejected, rng); }
  uint64_t attempts_max() const override { return 0; }

 private:
  const ResamplePolicy& real_;
};

// A mutant policy: it resamples the very frame it rejected (a pool of one empty frame), so
// every rejected frame livelocks whatever `check` proved about the real policy.
class StickyPolicy final : public ResamplePolicy {
 public:
  IndexRange Candidates(int64_t rejected) const override { return {rejected, rejected + 1}; }
  int64_t Next(int64_t rejected, NumpyRandomState&) const override { return rejected; }
};

// A mutant policy with hidden state that outlives a run: every other resample takes one more
// draw from the worker's RNG, counted across runs, so a second run of the same job differs.
class StatefulPolicy final : public ResamplePolicy {
 public:
  explicit StatefulPolicy(const ResamplePolicy& real) : real_(real) {}
  IndexRange Candidates(int64_t rejected) const override { return real_.Candidates(rejected); }
  int64_t Next(int64_t rejected, NumpyRandomState& rng) const override {
    if (calls_++ % 2 == 1) rng.Discard(1);
    return real_.Next(rejected, rng);
  }
  uint64_t attempts_max() const override { return real_.attempts_max(); }

 private:
  const ResamplePolicy& real_;
  mutable uint64_t calls_ = 0;
};

// A mutant policy whose pool is off by one: it never draws the first frame of the real pool
// (when the pool has more than one), so giving that frame a GT box does not help.
class OffByOnePoolPolicy final : public ResamplePolicy {
 public:
  explicit OffByOnePoolPolicy(const ResamplePolicy& real) : real_(real) {}
  IndexRange Candidates(int64_t rejected) const override {
    IndexRange range = real_.Candidates(rejected);
    if (range.size() > 1) ++range.begin;
    return range;
  }
  int64_t Next(int64_t rejected, NumpyRandomState& rng) const override {
    const IndexRange range = Candidates(rejected);
    return range.begin + rng.Choice(static_cast<uint32_t>(range.size()));
  }
  uint64_t attempts_max() const override { return real_.attempts_max(); }

 private:
  const ResamplePolicy& real_;
};

// 1. Static vs dynamic, both directions (no faults; every sampler, policy and plan): when
// `check` finds a first hit of a livelock pool within the job, the simulated job hangs on a
// sampler livelock of exactly that rank, slot, DataLoader worker and batch, and every rank it
// names as stuck waits for a batch at that iteration; when the bounded policy gives up first,
// a rank dies of the dataset error at that iteration; when `check` finds neither (or proves
// termination), the simulated job completes every iteration.
// `mutant`: the simulation runs a policy that resamples the frame it rejected (StickyPolicy).
void CheckVerdictAgreesBody(bool mutant) {
  props::CountCase();
  const Scenario scenario = *GenScenario();
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  CounterexampleOnFailure guard(
      scenario, mutant ? "CheckVerdictAgreesWithTheSimulatedRun_mutant" : "CheckVerdictAgreesWithTheSimulatedRun");
  const CheckReport check = RunPreflight(scenario, *dataset);
  StickyPolicy sticky;
  sim::SimOptions options;
  if (mutant) options.resample_policy = &sticky;
  const sim::SimResult result = sim::Simulate(scenario, *dataset, options);
  const auto& error = check.first_bounded_error;
  if (error && (!check.first_hit || error->iteration <= check.first_hit->iteration)) {
    RC_TAG("bounded error");
    RC_ASSERT(result.outcome == Outcome::kRankDied);
    RC_ASSERT(result.cause == Cause::kDatasetError);
    RC_ASSERT(result.iterations_completed == error->iteration);
    for (const auto& rank : result.ranks) {
      if (rank.died_ns >= 0) RC_ASSERT(rank.iterations_completed == error->iteration);
    }
    return;
  }
  if (!check.first_hit) {
    RC_ASSERT(result.outcome == Outcome::kCompleted);
    RC_ASSERT(result.iterations_completed == JobIterations(scenario, *dataset));
    RC_TAG(check.terminates ? "proven" : "pool never drawn");
    return;
  }
  RC_TAG("hang");
  RC_ASSERT(result.outcome == Outcome::kHang);
  RC_ASSERT(result.cause == Cause::kSamplerLivelock);
  RC_ASSERT(result.stuck.has_value());
  RC_ASSERT(result.stuck->rank == check.first_hit->rank);
  RC_ASSERT(result.stuck->slot == check.first_hit->slot);
  RC_ASSERT(result.stuck->batch == check.first_hit->iteration);
  const uint32_t worker = result.stuck->worker < 0 ? 0 : static_cast<uint32_t>(result.stuck->worker);
  RC_ASSERT(worker == check.first_hit->worker);
  RC_ASSERT(result.iterations_completed == check.first_hit->iteration);
  // Never a diagnosis that names a healthy rank: the stuck ranks are exactly those whose
  // DataLoader is stuck before the hang's iteration is consumed.
  for (const uint32_t rank : result.stuck_ranks) {
    RC_ASSERT(result.ranks[rank].iterations_completed == check.first_hit->iteration);
    RC_ASSERT(result.ranks[rank].state.rfind("waiting for batch", 0) == 0);
  }
}

RC_GTEST_PROP(SimProps, CheckVerdictAgreesWithTheSimulatedRun, ()) { CheckVerdictAgreesBody(false); }

TEST(SimPropsMutants, StickyPolicyIsCaughtByCheckVerdict) {
  EXPECT_FALSE(rc::check("a simulation whose policy resamples the rejected frame must disagree",
                         [] { CheckVerdictAgreesBody(true); }));
}

// 2. Policies that promise termination keep it: `global` and `next_valid_in_group` (when some
// frame of the dataset has GT: with none they have nowhere to go, as documented),
// `drop_empty_groups` and `keep_empty` complete every job; `bounded` completes or its rank dies
// of the documented dataset error. Never a hang.
// `mutant`: run the job with a `bounded` policy that forgets its bound (attempts_max 0, so it
// never gives up), which the property must catch.
void TerminatingPoliciesNeverHangBody(bool mutant) {
  props::CountCase();
  Scenario scenario = *GenScenario();
  const auto policy = mutant ? Resample::bounded
                             : *rc::gen::element(Resample::global, Resample::next_valid_in_group,
                                                 Resample::drop_empty_groups, Resample::keep_empty, Resample::bounded);
  scenario.mutable_resample()->set_policy(policy);
  scenario.mutable_filters()->set_filter_empty_gt(policy != Resample::keep_empty);
  if (policy == Resample::bounded) {
    scenario.mutable_resample()->set_attempts_max(*rc::gen::inRange<uint32_t>(1, 20));
  }
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  RC_PRE((policy != Resample::global && policy != Resample::next_valid_in_group) || dataset->accepted_frames() > 0);
  CounterexampleOnFailure guard(scenario,
                                mutant ? "TerminatingPoliciesNeverHang_mutant" : "TerminatingPoliciesNeverHang");
  sim::SimOptions options;
  const auto real_policy = MakeResamplePolicy(scenario, *dataset);
  ForgetfulPolicy forgetful(*real_policy);
  if (mutant) options.resample_policy = &forgetful;
  const sim::SimResult result = sim::Simulate(scenario, *dataset, options);
  RC_TAG(Resample::Policy_Name(policy), OutcomeName(result.outcome));
  if (policy == Resample::bounded && result.outcome == Outcome::kRankDied) {
    RC_ASSERT(result.cause == Cause::kDatasetError);
    return;
  }
  RC_ASSERT(result.outcome == Outcome::kCompleted);
}

RC_GTEST_PROP(SimProps, TerminatingPoliciesNeverHang, ()) { TerminatingPoliciesNeverHangBody(false); }

TEST(SimPropsMutants, ForgetfulBoundedPolicyIsCaught) {
  EXPECT_FALSE(rc::check("a bounded policy without its bound must fail the property",
                         [] { TerminatingPoliciesNeverHangBody(true); }));
}

// 5. Determinism: the same scenario gives the same event trace twice; another jitter stream
// (run seed) moves times but never what is sampled, where the job stops, or who is blamed.
// `mutant`: the policy keeps hidden state across runs (StatefulPolicy).
void DeterminismBody(bool mutant) {
  props::CountCase();
  const Scenario scenario = *GenScenario(GenOptions{.faults = true});
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  CounterexampleOnFailure guard(
      scenario, mutant ? "SameSeedSameTrace_mutant" : "SameSeedSameTraceAndJitterNeverChangesTheSamples");
  const auto real_policy = MakeResamplePolicy(scenario, *dataset);
  StatefulPolicy stateful(*real_policy);
  sim::SimOptions options;
  if (mutant) options.resample_policy = &stateful;
  const sim::SimResult a = sim::Simulate(scenario, *dataset, options);
  const sim::SimResult b = sim::Simulate(scenario, *dataset, options);
  RC_ASSERT(a.trace_hash == b.trace_hash);
  RC_ASSERT(a.events == b.events);
  RC_ASSERT(a.end_ns == b.end_ns);
  // Faults that act at a virtual time (a death at at_ns, a slow rank) may legitimately meet
  // another batch when the times move; the rest of the comparison needs a job without them.
  for (const Fault& fault : scenario.faults()) {
    if (fault.kind_case() != Fault::kUnevenBatches) {
      RC_TAG("timed faults");
      return;
    }
  }
  sim::SimOptions other = options;
  other.run_seed = *rc::gen::inRange<uint64_t>(1, 1000);
  const sim::SimResult c = sim::Simulate(scenario, *dataset, other);
  RC_TAG(OutcomeName(a.outcome));
  RC_ASSERT(c.outcome == a.outcome);
  RC_ASSERT(c.cause == a.cause);
  RC_ASSERT(c.iterations_completed == a.iterations_completed);
  RC_ASSERT(c.stuck_ranks == a.stuck_ranks);
  if (a.outcome == Outcome::kCompleted) {
    // Every batch was consumed: the same samples, resamples and stream breaks.
    RC_ASSERT(c.samples == a.samples);
    RC_ASSERT(c.resample_attempts == a.resample_attempts);
    RC_ASSERT(c.stream_breaks == a.stream_breaks);
  }
  if (a.stuck) {
    RC_ASSERT(c.stuck.has_value());
    RC_ASSERT(c.stuck->rank == a.stuck->rank);
    RC_ASSERT(c.stuck->batch == a.stuck->batch);
    RC_ASSERT(c.stuck->slot == a.stuck->slot);
  }
}

RC_GTEST_PROP(SimProps, SameSeedSameTraceAndJitterNeverChangesTheSamples, ()) { DeterminismBody(false); }

// 5b. Chains of blocking collectives completed as one (SimOptions::fuse_collective_chains, what
// sweeps run) give the same run as one collective at a time, faults and all: only the event
// count may differ.
RC_GTEST_PROP(SimProps, FusedCollectiveChainsGiveTheSameRun, ()) {
  props::CountCase();
  const Scenario scenario = *GenScenario(GenOptions{.faults = true});
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  CounterexampleOnFailure guard(scenario, "FusedCollectiveChainsGiveTheSameRun");
  sim::SimOptions plain;
  plain.run_seed = *rc::gen::inRange<uint64_t>(0, 1000);
  sim::SimOptions fused = plain;
  fused.fuse_collective_chains = true;
  const sim::SimResult a = sim::Simulate(scenario, *dataset, plain);
  const sim::SimResult b = sim::Simulate(scenario, *dataset, fused);
  RC_TAG(b.events < a.events ? "fused" : "nothing fused");
  RC_ASSERT(b.events <= a.events);
  RC_ASSERT(a.outcome == b.outcome);
  RC_ASSERT(a.cause == b.cause);
  RC_ASSERT(a.end_ns == b.end_ns);
  RC_ASSERT(a.last_iteration_end_ns == b.last_iteration_end_ns);
  RC_ASSERT(a.iterations_completed == b.iterations_completed);
  RC_ASSERT(a.stuck_ranks == b.stuck_ranks);
  RC_ASSERT(a.waiting_ranks == b.waiting_ranks);
  RC_ASSERT(a.blocked_at_ns == b.blocked_at_ns);
  RC_ASSERT(a.first_watchdog_ns == b.first_watchdog_ns);
  RC_ASSERT(a.nccl_log == b.nccl_log);
  RC_ASSERT(a.job_log == b.job_log);
  RC_ASSERT(a.collective.has_value() == b.collective.has_value());
  if (a.collective) RC_ASSERT(a.collective->seq == b.collective->seq);
  RC_ASSERT(a.desync.has_value() == b.desync.has_value());
  RC_ASSERT(a.samples == b.samples);
  RC_ASSERT(a.resample_attempts == b.resample_attempts);
  RC_ASSERT(a.stream_breaks == b.stream_breaks);
  RC_ASSERT(a.ranks.size() == b.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    RC_ASSERT(a.ranks[r].iterations_completed == b.ranks[r].iterations_completed);
    RC_ASSERT(a.ranks[r].collective_wait_ns == b.ranks[r].collective_wait_ns);
    RC_ASSERT(a.ranks[r].data_wait_ns == b.ranks[r].data_wait_ns);
    RC_ASSERT(a.ranks[r].compute_ns == b.ranks[r].compute_ns);
    RC_ASSERT(a.ranks[r].collectives == b.ranks[r].collectives);
    RC_ASSERT(a.ranks[r].state == b.ranks[r].state);
    RC_ASSERT(a.ranks[r].died_ns == b.ranks[r].died_ns);
  }
}

TEST(SimPropsMutants, PolicyWithHiddenStateIsCaughtByDeterminism) {
  EXPECT_FALSE(rc::check("a policy with state across runs must break determinism", [] { DeterminismBody(true); }));
}

// 6. Metamorphic: giving one frame of every livelock pool a GT box removes every sampler
// livelock (the job completes, given a watchdog long enough for a pool with one good frame in
// thousands); renaming every scene changes nothing about the run.
// `mutant`: the simulation's policy never draws the first frame of a pool (OffByOnePoolPolicy).
void FillingEveryEmptyPoolBody(bool mutant) {
  props::CountCase();
  Scenario scenario = *GenScenario();
  scenario.mutable_resample()->set_policy(*rc::gen::element(Resample::in_group, Resample::in_subdataset));
  scenario.mutable_filters()->set_filter_empty_gt(true);
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  CounterexampleOnFailure guard(
      scenario, mutant ? "FillingEveryEmptyPoolRemovesTheLivelock_mutant" : "FillingEveryEmptyPoolRemovesTheLivelock");
  const CheckReport check = RunPreflight(scenario, *dataset);
  RC_TAG(check.pools.empty() ? "no pool" : "pools");

  // (Each new name its own: unnamed scenes are allowed, scenes of one name are not.)
  Scenario renamed = scenario;
  for (auto& sub : *renamed.mutable_dataset()->mutable_subdatasets()) {
    int index = 0;
    for (auto& scene : *sub.mutable_explicit_()->mutable_scenes()) {
      scene.set_name("x" + std::to_string(index++) + ":" + scene.name());
    }
  }
  const auto renamed_dataset = TryBuild(renamed);
  RC_ASSERT(renamed_dataset.has_value());
  const sim::SimResult before = sim::Simulate(scenario, *dataset, sim::SimOptions{});
  const sim::SimResult after_rename = sim::Simulate(renamed, *renamed_dataset, sim::SimOptions{});
  RC_ASSERT(before.trace_hash == after_rename.trace_hash);
  RC_ASSERT(before.outcome == after_rename.outcome);

  Scenario filled = scenario;
  for (const TrapPool& pool : check.pools) {
    auto* scene = filled.mutable_dataset()
                      ->mutable_subdatasets(static_cast<int>(pool.subdataset))
                      ->mutable_explicit_()
                      ->mutable_scenes(static_cast<int>(pool.scene_index_in_subdataset));
    scene->set_gt_counts(static_cast<int>(pool.first_frame_in_scene), 1);
  }
  // One good frame in a pool of hundreds ends the loop but may take longer than the watchdog
  // (scenarios/regressions/one_gt_frame_in_a_big_pool_still_times_out.pbtxt): the filled job
  // gets a watchdog of 10^9 ms, so only a livelock could keep it from completing.
  filled.mutable_comm()->set_timeout_ms(1'000'000'000);
  const auto filled_dataset = TryBuild(filled);
  RC_ASSERT(filled_dataset.has_value());
  const auto real_policy = MakeResamplePolicy(filled, *filled_dataset);
  OffByOnePoolPolicy off_by_one(*real_policy);
  sim::SimOptions options;
  if (mutant) options.resample_policy = &off_by_one;
  const sim::SimResult after = sim::Simulate(filled, *filled_dataset, options);
  RC_ASSERT(after.cause != Cause::kSamplerLivelock);
  RC_ASSERT(after.outcome == Outcome::kCompleted);
}

RC_GTEST_PROP(SimProps, FillingEveryEmptyPoolRemovesTheLivelock, ()) { FillingEveryEmptyPoolBody(false); }

TEST(SimPropsMutants, OffByOnePoolIsCaughtByFilling) {
  EXPECT_FALSE(rc::check("a policy that never draws a pool's first frame must keep a livelock",
                         [] { FillingEveryEmptyPoolBody(true); }));
}

// 6b. Metamorphic: renumbering the ranks consistently. When every rank does the same work
// (keep_empty: nothing is resampled; no jitter; nothing conditional), moving every planted fault
// from rank r to rank p(r) for a permutation p gives the same outcome and cause, and the stuck
// and waiting ranks move with it.
RC_GTEST_PROP(SimProps, RenumberingRanksMovesTheDiagnosis, ()) {
  props::CountCase();
  Scenario scenario = *GenScenario(GenOptions{.plans = false, .faults = true});
  scenario.clear_plan();
  scenario.mutable_resample()->set_policy(Resample::keep_empty);
  scenario.mutable_filters()->set_filter_empty_gt(false);
  scenario.mutable_cost()->set_jitter_fraction(0);
  const uint32_t world = scenario.job().world_size();
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  std::vector<uint32_t> permutation(world);
  for (uint32_t r = 0; r < world; ++r) permutation[r] = r;
  for (uint32_t r = world; r > 1; --r) {
    std::swap(permutation[r - 1], permutation[*rc::gen::inRange<uint32_t>(0, r)]);
  }
  Scenario moved = scenario;
  for (Fault& fault : *moved.mutable_faults()) {
    switch (fault.kind_case()) {
      case Fault::kSlowRank:
        fault.mutable_slow_rank()->set_rank(permutation[fault.slow_rank().rank()]);
        break;
      case Fault::kSlowWorker:
        fault.mutable_slow_worker()->set_rank(permutation[fault.slow_worker().rank()]);
        break;
      case Fault::kDeadWorker:
        fault.mutable_dead_worker()->set_rank(permutation[fault.dead_worker().rank()]);
        break;
      case Fault::kDeadRank:
        fault.mutable_dead_rank()->set_rank(permutation[fault.dead_rank().rank()]);
        break;
      case Fault::kStraggler:
        fault.mutable_straggler()->set_rank(permutation[fault.straggler().rank()]);
        break;
      case Fault::kUnevenBatches:
        fault.mutable_uneven_batches()->set_rank(permutation[fault.uneven_batches().rank()]);
        break;
      case Fault::KIND_NOT_SET:
        break;
    }
  }
  CounterexampleOnFailure guard(scenario, "RenumberingRanksMovesTheDiagnosis");
  const sim::SimResult a = sim::Simulate(scenario, *dataset, sim::SimOptions{});
  const sim::SimResult b = sim::Simulate(moved, *dataset, sim::SimOptions{});
  RC_TAG(OutcomeName(a.outcome));
  RC_ASSERT(a.outcome == b.outcome);
  RC_ASSERT(a.cause == b.cause);
  RC_ASSERT(a.iterations_completed == b.iterations_completed);
  std::set<uint32_t> stuck_moved, waiting_moved;
  for (const uint32_t r : a.stuck_ranks) stuck_moved.insert(permutation[r]);
  for (const uint32_t r : a.waiting_ranks) waiting_moved.insert(permutation[r]);
  RC_ASSERT(stuck_moved == std::set<uint32_t>(b.stuck_ranks.begin(), b.stuck_ranks.end()));
  RC_ASSERT(waiting_moved == std::set<uint32_t>(b.waiting_ranks.begin(), b.waiting_ranks.end()));
}

// 3. Collective liveness under planted faults (every fault kind, conditional collectives):
// every run either completes with every rank having issued the same collectives, or ends with
// a diagnosis whose stuck ranks are all explained (by a planted fault of that rank, by the
// sampler livelock or bounded error `check` predicts, or by a conditional collective that rank
// skipped) and whose cause is one the plant (or the sampler) implies. Never an unexplained
// hang, never a healthy rank blamed.
// `mutant`: the diagnosis names the next rank instead of the stuck one.
void EveryStopIsExplainedBody(bool mutant) {
  props::CountCase();
  const Scenario scenario = *GenScenario(GenOptions{.faults = true});
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  const std::set<uint32_t> planted = props::PlantedRanks(scenario);
  bool timing_fault = false, death_fault = false, uneven_fault = false;
  for (const Fault& fault : scenario.faults()) {
    timing_fault |= fault.has_straggler() || fault.has_slow_rank() || fault.has_slow_worker();
    death_fault |= fault.has_dead_rank() || fault.has_dead_worker();
    uneven_fault |= fault.has_uneven_batches();
  }
  bool conditional = scenario.plan().streampetr().old_code_skips_dn_without_gt();
  for (const auto& c : scenario.plan().custom().per_iteration()) {
    conditional |= c.only_when_local_batch_has_gt();
  }
  CounterexampleOnFailure guard(
      scenario, mutant ? "EveryStopIsExplainedByWhatWasPlanted_mutant" : "EveryStopIsExplainedByWhatWasPlanted");
  const CheckReport check = RunPreflight(scenario, *dataset);
  sim::SimResult result = sim::Simulate(scenario, *dataset, sim::SimOptions{});
  const uint32_t world = scenario.job().world_size();
  if (mutant) {
    for (uint32_t& rank : result.stuck_ranks) rank = (rank + 1) % world;
  }
  RC_TAG(OutcomeName(result.outcome), CauseName(result.cause));
  // Slow factors multiply (a slow worker on a slow rank can load for centuries): only they may
  // run the job past petrsim's one-year limit.
  if (result.outcome == Outcome::kLimitReached) {
    RC_ASSERT(timing_fault);
    return;
  }
  if (result.outcome == Outcome::kCompleted) {
    for (const auto& rank : result.ranks) {
      RC_ASSERT(rank.iterations_completed == result.ranks[0].iterations_completed);
      RC_ASSERT(rank.collectives == result.ranks[0].collectives);
    }
    if (!uneven_fault) RC_ASSERT(result.iterations_completed == JobIterations(scenario, *dataset));
    return;
  }
  if (result.outcome == Outcome::kDesync) {
    RC_ASSERT(result.desync.has_value());
    RC_ASSERT(conditional || uneven_fault);
    const uint32_t first = result.desync->first_rank, other = result.desync->other_rank;
    RC_ASSERT(result.ranks[first].collectives_skipped > 0 || result.ranks[other].collectives_skipped > 0 ||
              planted.count(first) > 0 || planted.count(other) > 0);
    return;
  }
  RC_ASSERT(!result.stuck_ranks.empty());
  for (const uint32_t rank : result.stuck_ranks) {
    const bool spinning =
        check.first_hit && (result.stuck ? result.stuck->rank == rank : check.first_hit->rank == rank);
    const bool waiting_on_a_spin = check.first_hit && result.ranks[rank].state.rfind("waiting for batch", 0) == 0;
    const bool skipped = result.ranks[rank].collectives_skipped > 0;
    const bool bounded_error = check.first_bounded_error.has_value();
    RC_ASSERT(planted.count(rank) > 0 || spinning || waiting_on_a_spin || (conditional && skipped) || bounded_error);
  }
  switch (result.cause) {
    case Cause::kSamplerLivelock:
      RC_ASSERT(check.first_hit.has_value());
      break;
    case Cause::kRankDied:
    case Cause::kWorkerDied:
      RC_ASSERT(death_fault);
      break;
    case Cause::kStragglerTimeout:
      RC_ASSERT(timing_fault);
      break;
    case Cause::kUnevenBatches:
      RC_ASSERT(uneven_fault);
      break;
    case Cause::kConditionalCollective:
      RC_ASSERT(conditional);
      break;
    case Cause::kDatasetError:
      RC_ASSERT(check.first_bounded_error.has_value());
      break;
    case Cause::kNone:
      RC_FAIL("a stop without a cause");
  }
}

RC_GTEST_PROP(SimProps, EveryStopIsExplainedByWhatWasPlanted, ()) { EveryStopIsExplainedBody(false); }

TEST(SimPropsMutants, DiagnosisNamingAHealthyRankIsCaught) {
  EXPECT_FALSE(rc::check("a diagnosis that names the neighbour of the stuck rank must fail",
                         [] { EveryStopIsExplainedBody(true); }));
}

}  // namespace
}  // namespace petrsim
