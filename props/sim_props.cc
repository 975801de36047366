// Properties of the simulator over generated scenarios (rapidcheck; ctest label `props`). Each
// says what it proves; a failing case is shrunk and written as a .pbtxt (scenario_gen.h).
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <set>

#include "model/preflight.h"
#include "model/resample_policy.h"
#include "model/sampler.h"
#include "props/scenario_gen.h"
#include "sim/simulator.h"

namespace petrsim {
namespace {

const bool kCaseRateRegistered = props::RegisterCaseRate();

using props::CounterexampleOnFailure;
using props::GenPlan;
using props::GenScenario;
using props::TryBuild;

// A mutant policy: the real one, but it never gives up (attempts_max 0).
class ForgetfulPolicy final : public ResamplePolicy {
 public:
  explicit ForgetfulPolicy(const ResamplePolicy& real) : real_(real) {}
  IndexRange Candidates(int64_t rejected) const override { return real_.Candidates(rejected); }
  int64_t Next(int64_t rejected, NumpyRandomState& rng) const override {
    return real_.Next(rejected, rng);
  }
  uint64_t attempts_max() const override { return 0; }

 private:
  const ResamplePolicy& real_;
};

// A generated scenario, with a small custom plan half of the time.
Scenario GenSimScenario() {
  Scenario scenario = *GenScenario();
  if (*rc::gen::arbitrary<bool>()) *scenario.mutable_plan() = *GenPlan();
  return scenario;
}

// Static vs dynamic, both directions (no faults): when `check` finds a first hit of a livelock
// pool within the job, the simulated job hangs on a sampler livelock of exactly that rank,
// slot, DataLoader worker and batch, and every other rank waits; when it finds none (or proves
// termination), the simulated job completes every iteration.
RC_GTEST_PROP(SimProps, CheckVerdictAgreesWithTheSimulatedRun, ()) {
  props::CountCase();
  const Scenario scenario = GenSimScenario();
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  RC_PRE(InfiniteSamplerAssertionHolds(scenario, *dataset));
  CounterexampleOnFailure guard(scenario, "CheckVerdictAgreesWithTheSimulatedRun");
  const CheckReport check = RunPreflight(scenario, *dataset);
  const sim::SimResult result = sim::Simulate(scenario, *dataset, sim::SimOptions{});
  if (!check.first_hit) {
    RC_ASSERT(result.outcome == sim::Outcome::kCompleted);
    RC_ASSERT(result.iterations_completed == scenario.job().iterations());
    RC_TAG(check.terminates ? "proven" : "pool never drawn");
    return;
  }
  RC_TAG("hang");
  RC_ASSERT(result.outcome == sim::Outcome::kHang);
  RC_ASSERT(result.cause == sim::Cause::kSamplerLivelock);
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

// Policies that promise termination keep it: `global` and `next_valid_in_group` (when some
// frame of the dataset has GT: with none they have nowhere to go, as documented),
// `drop_empty_groups` and `keep_empty` complete every job; `bounded` completes or its rank dies
// of the documented dataset error. Never a hang.
// The property's body. `mutant`: run the job with a `bounded` policy that forgets its bound
// (attempts_max 0, so it never gives up), which the property must catch.
void TerminatingPoliciesNeverHangBody(bool mutant) {
  props::CountCase();
  Scenario scenario = GenSimScenario();
  const auto policy = mutant ? Resample::bounded
                             : *rc::gen::element(Resample::global, Resample::next_valid_in_group,
                                                 Resample::drop_empty_groups,
                                                 Resample::keep_empty, Resample::bounded);
  scenario.mutable_resample()->set_policy(policy);
  scenario.mutable_filters()->set_filter_empty_gt(policy != Resample::keep_empty);
  if (policy == Resample::bounded) {
    scenario.mutable_resample()->set_attempts_max(*rc::gen::inRange<uint32_t>(1, 20));
  }
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  RC_PRE(InfiniteSamplerAssertionHolds(scenario, *dataset));
  RC_PRE((policy != Resample::global && policy != Resample::next_valid_in_group) ||
         dataset->accepted_frames() > 0);
  CounterexampleOnFailure guard(scenario, mutant ? "TerminatingPoliciesNeverHang_mutant"
                                                 : "TerminatingPoliciesNeverHang");
  sim::SimOptions options;
  const auto real_policy = MakeResamplePolicy(scenario, *dataset);
  ForgetfulPolicy forgetful(*real_policy);
  if (mutant) options.resample_policy = &forgetful;
  const sim::SimResult result = sim::Simulate(scenario, *dataset, options);
  RC_TAG(Resample::Policy_Name(policy), sim::OutcomeName(result.outcome));
  if (policy == Resample::bounded && result.outcome == sim::Outcome::kRankDied) {
    RC_ASSERT(result.cause == sim::Cause::kDatasetError);
    return;
  }
  RC_ASSERT(result.outcome == sim::Outcome::kCompleted);
}

RC_GTEST_PROP(SimProps, TerminatingPoliciesNeverHang, ()) { TerminatingPoliciesNeverHangBody(false); }

// The property bites: a bounded policy that forgets its bound is caught.
TEST(SimPropsMutants, ForgetfulBoundedPolicyIsCaught) {
  EXPECT_FALSE(rc::check("a bounded policy without its bound must fail the property",
                         [] { TerminatingPoliciesNeverHangBody(true); }));
}

// Determinism: the same scenario gives the same event trace twice; another jitter stream (run
// seed) moves times but never what is sampled, where the job stops, or who is blamed.
RC_GTEST_PROP(SimProps, SameSeedSameTraceAndJitterNeverChangesTheSamples, ()) {
  props::CountCase();
  const Scenario scenario = GenSimScenario();
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  RC_PRE(InfiniteSamplerAssertionHolds(scenario, *dataset));
  CounterexampleOnFailure guard(scenario, "SameSeedSameTraceAndJitterNeverChangesTheSamples");
  const sim::SimResult a = sim::Simulate(scenario, *dataset, sim::SimOptions{});
  const sim::SimResult b = sim::Simulate(scenario, *dataset, sim::SimOptions{});
  RC_ASSERT(a.trace_hash == b.trace_hash);
  RC_ASSERT(a.events == b.events);
  RC_ASSERT(a.end_ns == b.end_ns);
  sim::SimOptions other;
  other.run_seed = *rc::gen::inRange<uint64_t>(1, 1000);
  const sim::SimResult c = sim::Simulate(scenario, *dataset, other);
  RC_ASSERT(c.outcome == a.outcome);
  RC_ASSERT(c.cause == a.cause);
  RC_ASSERT(c.iterations_completed == a.iterations_completed);
  RC_ASSERT(c.stuck_ranks == a.stuck_ranks);
  if (a.outcome == sim::Outcome::kCompleted) {
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

// Metamorphic: giving one frame of every livelock pool a GT box removes every sampler livelock
// (the job completes); renaming every scene changes nothing about the run.
RC_GTEST_PROP(SimProps, FillingEveryEmptyPoolRemovesTheLivelock, ()) {
  props::CountCase();
  Scenario scenario = GenSimScenario();
  scenario.mutable_resample()->set_policy(
      *rc::gen::element(Resample::in_group, Resample::in_subdataset));
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  RC_PRE(InfiniteSamplerAssertionHolds(scenario, *dataset));
  CounterexampleOnFailure guard(scenario, "FillingEveryEmptyPoolRemovesTheLivelock");
  const CheckReport check = RunPreflight(scenario, *dataset);
  RC_TAG(check.pools.empty() ? "no pool" : "pools");

  Scenario renamed = scenario;
  for (auto& sub : *renamed.mutable_dataset()->mutable_subdatasets()) {
    for (auto& scene : *sub.mutable_explicit_()->mutable_scenes()) scene.set_name("x" + scene.name());
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
  const auto filled_dataset = TryBuild(filled);
  RC_ASSERT(filled_dataset.has_value());
  const sim::SimResult after = sim::Simulate(filled, *filled_dataset, sim::SimOptions{});
  RC_ASSERT(after.cause != sim::Cause::kSamplerLivelock);
  RC_ASSERT(after.outcome == sim::Outcome::kCompleted);
}

}  // namespace
}  // namespace petrsim

namespace petrsim {
namespace {

// Collective liveness under planted faults: every run either completes (every rank finishes
// every iteration) or ends with a diagnosis whose stuck ranks are all explained, by a planted
// fault of that rank or by the sampler livelock `check` predicts, and whose cause is one the
// plant (or the sampler) implies. Never an unexplained hang, never a healthy rank blamed.
RC_GTEST_PROP(SimProps, EveryStopIsExplainedByWhatWasPlanted, ()) {
  props::CountCase();
  Scenario scenario = GenSimScenario();
  const uint32_t world = scenario.job().world_size();
  const uint32_t workers = std::max<uint32_t>(1, scenario.job().workers_per_gpu());
  std::set<uint32_t> planted;
  bool timing_fault = false, death_fault = false;
  const int faults = *rc::gen::inRange(0, 3);
  for (int i = 0; i < faults; ++i) {
    Fault* fault = scenario.add_faults();
    const uint32_t rank = *rc::gen::inRange<uint32_t>(0, world);
    const int kind = *rc::gen::inRange(0, 5);
    const uint64_t at_ns = *rc::gen::inRange<uint64_t>(0, 30) * 1'000'000'000ULL;
    switch (kind) {
      case 0:
        fault->mutable_dead_rank()->set_rank(rank);
        fault->mutable_dead_rank()->set_at_ns(at_ns);
        death_fault = true;
        break;
      case 1:
        fault->mutable_dead_worker()->set_rank(rank);
        fault->mutable_dead_worker()->set_worker(*rc::gen::inRange<uint32_t>(0, workers));
        fault->mutable_dead_worker()->set_at_ns(at_ns);
        death_fault = true;
        break;
      case 2:
        fault->mutable_straggler()->set_rank(rank);
        fault->mutable_straggler()->set_iteration(*rc::gen::inRange<uint64_t>(0, 60));
        fault->mutable_straggler()->set_delay_ns(
            *rc::gen::element<uint64_t>(1'000'000'000ULL, 3'000'000'000'000ULL));
        timing_fault = true;
        break;
      case 3:
        fault->mutable_slow_rank()->set_rank(rank);
        fault->mutable_slow_rank()->set_factor(*rc::gen::element(2.0, 5000.0));
        timing_fault = true;
        break;
      default:
        fault->mutable_slow_worker()->set_rank(rank);
        fault->mutable_slow_worker()->set_worker(*rc::gen::inRange<uint32_t>(0, workers));
        fault->mutable_slow_worker()->set_factor(*rc::gen::element(2.0, 50000.0));
        timing_fault = true;
        break;
    }
    planted.insert(rank);
  }
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  RC_PRE(InfiniteSamplerAssertionHolds(scenario, *dataset));
  CounterexampleOnFailure guard(scenario, "EveryStopIsExplainedByWhatWasPlanted");
  const CheckReport check = RunPreflight(scenario, *dataset);
  const sim::SimResult result = sim::Simulate(scenario, *dataset, sim::SimOptions{});
  RC_TAG(sim::OutcomeName(result.outcome), sim::CauseName(result.cause));
  // Slow factors multiply (a slow worker on a slow rank can load for centuries): only they may
  // run the job past petrsim's one-year limit.
  if (result.outcome == sim::Outcome::kLimitReached) {
    RC_ASSERT(timing_fault);
    return;
  }
  RC_ASSERT(result.outcome != sim::Outcome::kDesync);  // nothing conditional is generated
  if (result.outcome == sim::Outcome::kCompleted) {
    for (const auto& rank : result.ranks) {
      RC_ASSERT(rank.iterations_completed == scenario.job().iterations());
    }
    return;
  }
  RC_ASSERT(!result.stuck_ranks.empty());
  for (const uint32_t rank : result.stuck_ranks) {
    const bool livelocked = check.first_hit && result.stuck && result.stuck->rank == rank;
    const bool spinning_elsewhere = check.first_hit && check.first_hit->rank == rank;
    RC_ASSERT(planted.count(rank) > 0 || livelocked || spinning_elsewhere ||
              (result.ranks[rank].state.rfind("waiting for batch", 0) == 0 && check.first_hit));
  }
  switch (result.cause) {
    case sim::Cause::kSamplerLivelock:
      RC_ASSERT(check.first_hit.has_value());
      break;
    case sim::Cause::kRankDied:
    case sim::Cause::kWorkerDied:
      RC_ASSERT(death_fault);
      break;
    case sim::Cause::kStragglerTimeout:
      RC_ASSERT(timing_fault);
      break;
    case sim::Cause::kNone:
      RC_FAIL("a stop without a cause");
    default:
      RC_FAIL("a cause nothing planted: " + sim::CauseName(result.cause));
  }
}

}  // namespace
}  // namespace petrsim
