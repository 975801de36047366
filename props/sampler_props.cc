// Properties of the model that `check` and `sample` rest on, over generated small datasets
// (rapidcheck; ctest label `props`). The full property suite of the props issue extends this.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "model/dataset.h"
#include "model/error.h"
#include "model/preflight.h"
#include "model/resample_policy.h"
#include "model/sample_stream.h"
#include "model/sampler.h"
#include "model/scenario_validation.h"
#include "props/scenario_gen.h"

namespace petrsim {
namespace {

const bool kCaseRateRegistered = props::RegisterCaseRate();

using props::GenScenario;
using props::TryBuild;

// Statically found pools are exactly the frames whose getitem the dynamic loop proves endless.
RC_GTEST_PROP(CheckProps, PoolsEqualDynamicLivelocks, ()) {
  props::CountCase();
  const Scenario scenario = *GenScenario();
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  const CheckReport report = RunPreflight(scenario, *dataset);
  std::set<int64_t> static_frames;
  for (const auto& pool : report.pools) {
    for (int64_t i = pool.first_frame; i <= pool.last_frame; ++i) static_frames.insert(i);
  }
  const auto policy = MakeResamplePolicy(scenario, *dataset);
  std::set<int64_t> dynamic_frames;
  for (int64_t i = 0; i < dataset->size(); ++i) {
    NumpyRandomState rng(static_cast<uint32_t>(i));
    const auto result = GetItem(*dataset, *policy, i, rng, 0);
    RC_ASSERT(result.outcome != GetItemOutcome::kAttemptsLimit);
    if (result.outcome == GetItemOutcome::kLivelock) dynamic_frames.insert(i);
    if (result.outcome == GetItemOutcome::kAccepted) RC_ASSERT(dataset->frame(result.index).accepted);
  }
  RC_ASSERT(static_frames == dynamic_frames);
  RC_ASSERT(report.terminates == static_frames.empty());
  RC_TAG(Resample::Policy_Name(scenario.resample().policy()),
         static_frames.empty() ? "terminates" : "livelock");
}

// `check`'s first hit is where `sample`'s stream first stops with a livelock marker.
RC_GTEST_PROP(CheckProps, FirstHitEqualsFirstLivelockOfTheSampleStream, ()) {
  props::CountCase();
  const Scenario scenario = *GenScenario();
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  RC_PRE(InfiniteSamplerAssertionHolds(scenario, *dataset));
  const CheckReport report = RunPreflight(scenario, *dataset);
  std::optional<SampleRow> first;
  GenerateSampleStream(scenario, *dataset, {}, [&](const SampleRow& row) {
    if (row.status != SampleStatus::kLivelock) return;
    if (!first || std::tie(row.iteration, row.rank, row.slot) <
                      std::tie(first->iteration, first->rank, first->slot)) {
      first = row;
    }
  });
  RC_ASSERT(report.first_hit.has_value() == first.has_value());
  RC_TAG(first ? "hang hit" : "no hang hit");
  if (first) {
    RC_ASSERT(report.first_hit->iteration == first->iteration);
    RC_ASSERT(report.first_hit->rank == first->rank);
    RC_ASSERT(report.first_hit->slot == first->slot);
    RC_ASSERT(report.first_hit->worker == first->worker);
  }
}

// Proven termination bounds the work: when `check` proves that every getitem ends, no getitem
// of any rank needs more loads than a bound from its pool. The policies draw uniformly from a
// pool of n frames of which v have GT (or step to the next valid frame, a pool of one), so the
// number of resamples is geometric with p = v / n and exceeds k with probability (1 - p)^k;
// k = ln(1e-12) / ln(1 - p) makes a false failure rarer than 1e-12 per getitem (below 1e-6
// for a default run of the suite). `bounded` never exceeds its attempts_max.
RC_GTEST_PROP(CheckProps, ProvenTerminationBoundsTheAttempts, ()) {
  props::CountCase();
  Scenario scenario = *GenScenario();
  if (*rc::gen::weightedElement<bool>({{1, true}, {4, false}})) {
    scenario.mutable_resample()->set_policy(Resample::bounded);
    scenario.mutable_filters()->set_filter_empty_gt(true);
    scenario.mutable_resample()->set_attempts_max(*rc::gen::inRange<uint32_t>(1, 8));
  }
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  RC_PRE(InfiniteSamplerAssertionHolds(scenario, *dataset));
  const CheckReport report = RunPreflight(scenario, *dataset);
  RC_PRE(report.terminates);
  const auto policy = MakeResamplePolicy(scenario, *dataset);
  uint64_t resampled = 0;
  GenerateSampleStream(scenario, *dataset, {}, [&](const SampleRow& row) {
    if (row.index < 0 || row.attempts == 0) return;
    if (policy->attempts_max() != 0) {
      RC_ASSERT(row.attempts <= policy->attempts_max());
      return;
    }
    RC_ASSERT(row.status != SampleStatus::kLivelock);
    if (row.attempts == 1) return;
    ++resampled;
    const IndexRange pool = policy->Candidates(row.index);
    const double n = static_cast<double>(pool.size());
    const double v = static_cast<double>(dataset->accepted_in(pool.begin, pool.end));
    RC_ASSERT(v > 0);
    const double p = v / n;
    const double resamples_max = p >= 1.0 ? 1.0 : std::ceil(std::log(1e-12) / std::log1p(-p));
    RC_ASSERT(static_cast<double>(row.attempts - 1) <= resamples_max);
  });
  RC_TAG(Resample::Policy_Name(scenario.resample().policy()), resampled > 0 ? "resampled" : "none");
}

// Mutants of the infinite sampler the next property must catch.
enum class SamplerMutant {
  kNone,
  kOffByOneRank,  // rank r builds its slots as rank r + 1 would (a global slot off by B)
  kSwappedSlots,  // slots 0 and 1 of every batch trade their draws
};

// The infinite sampler: every slot plays each group it takes completely and in ascending
// order, and global slots partition the group stream (slot s takes positions s mod W*B).
void SlotsPlayWholeGroupsInOrderBody(SamplerMutant mutant) {
  props::CountCase();
  const Scenario scenario = *GenScenario();
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  RC_PRE(InfiniteSamplerAssertionHolds(scenario, *dataset));
  const uint32_t batch = scenario.job().samples_per_gpu();
  const uint32_t world = scenario.job().world_size();
  auto stream = std::make_shared<GroupStream>(dataset->groups_num(), scenario.job().seed());
  for (uint32_t rank = 0; rank < world; ++rank) {
    const uint32_t built_as = mutant == SamplerMutant::kOffByOneRank ? (rank + 1) % world : rank;
    auto sampler = MakeRankSampler(scenario, *dataset, built_as);
    std::vector<SlotDraw> draws(batch * 80);
    sampler->NextBatches(draws);
    if (mutant == SamplerMutant::kSwappedSlots && batch >= 2) {
      for (size_t i = 0; i + 1 < draws.size(); i += batch) std::swap(draws[i], draws[i + 1]);
    }
    for (uint32_t b = 0; b < batch; ++b) {
      uint64_t taken = 0;
      size_t i = b;
      while (i < draws.size()) {
        const int64_t group = draws[i].group;
        RC_ASSERT(group == stream->at(rank * batch + b + taken * world * batch));
        for (const int64_t expected : dataset->group_indices(group)) {
          if (i >= draws.size()) break;
          RC_ASSERT(draws[i].index == expected);
          i += batch;
        }
        ++taken;
      }
    }
  }
}

RC_GTEST_PROP(SamplerProps, SlotsPlayWholeGroupsInOrder, ()) {
  SlotsPlayWholeGroupsInOrderBody(SamplerMutant::kNone);
}

// The property bites: a sampler with an off-by-one slot, or with two slots swapped, is caught.
TEST(SamplerPropsMutants, OffByOneRankIsCaught) {
  EXPECT_FALSE(rc::check("an off-by-one global slot must fail the property",
                         [] { SlotsPlayWholeGroupsInOrderBody(SamplerMutant::kOffByOneRank); }));
}
TEST(SamplerPropsMutants, SwappedSlotsAreCaught) {
  EXPECT_FALSE(rc::check("swapped slots must fail the property",
                         [] { SlotsPlayWholeGroupsInOrderBody(SamplerMutant::kSwappedSlots); }));
}

// Epoch samplers give every rank the same number of samples and cover the dataset per epoch.
RC_GTEST_PROP(SamplerProps, EpochSamplersAreEvenAndCover, ()) {
  props::CountCase();
  Scenario scenario = *GenScenario();
  scenario.mutable_sampler()->set_kind(
      *rc::gen::element(Sampler::distributed_group, Sampler::distributed));
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  const uint32_t world = scenario.job().world_size();
  const uint32_t batch = scenario.job().samples_per_gpu();
  const uint64_t epoch = *rc::gen::inRange<uint64_t>(0, 5);
  std::set<int64_t> covered;
  for (uint32_t rank = 0; rank < world; ++rank) {
    const auto indices =
        scenario.sampler().kind() == Sampler::distributed_group
            ? DistributedGroupSamplerIndices(*dataset, world, batch, rank, 0, epoch)
            : TorchDistributedSamplerIndices(dataset->size(), world, rank, true, false, 0, epoch);
    RC_ASSERT(indices.size() == EpochSamplesPerRank(scenario, *dataset));
    covered.insert(indices.begin(), indices.end());
  }
  RC_ASSERT(covered.size() == static_cast<size_t>(dataset->size()));
}

}  // namespace
}  // namespace petrsim
