// Properties of the model that `check` and `sample` rest on, over generated small datasets
// (rapidcheck; ctest label `props`). The full property suite of the props issue extends this.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "base/error.h"
#include "check/preflight.h"
#include "data/dataset.h"
#include "data/resample_policy.h"
#include "data/sample_stream.h"
#include "data/sampler.h"
#include "props/scenario_gen.h"
#include "scenario/scenario_validation.h"

namespace petrsim {
namespace {

const bool kCaseRateRegistered = props::RegisterCaseRate();

using props::GenOptions;
using props::GenScenario;
using props::TryBuild;

// Statically found livelock pools are exactly the frames whose getitem the dynamic loop proves
// endless; the bounded policy's error pools are frames whose getitem always gives up.
RC_GTEST_PROP(CheckProps, PoolsEqualDynamicLivelocks, ()) {
  props::CountCase();
  const Scenario scenario = *GenScenario();
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  props::CounterexampleOnFailure guard(scenario, "PoolsEqualDynamicLivelocks");
  const CheckReport report = RunPreflight(scenario, *dataset);
  std::set<int64_t> static_livelocks, static_errors;
  for (const auto& pool : report.pools) {
    auto& frames = pool.kind == PoolKind::kLivelock ? static_livelocks : static_errors;
    for (int64_t i = pool.first_frame; i <= pool.last_frame; ++i) frames.insert(i);
  }
  const auto policy = MakeResamplePolicy(scenario, *dataset);
  std::set<int64_t> dynamic_livelocks;
  for (int64_t i = 0; i < dataset->size(); ++i) {
    NumpyRandomState rng(static_cast<uint32_t>(i));
    const auto result = GetItem(*dataset, *policy, i, rng, PipelineDraws());
    RC_ASSERT(result.outcome != GetItemOutcome::kAttemptsLimit);
    if (result.outcome == GetItemOutcome::kLivelock) dynamic_livelocks.insert(i);
    if (result.outcome == GetItemOutcome::kAccepted) RC_ASSERT(dataset->frame(result.index).accepted);
    if (static_errors.count(i) > 0) RC_ASSERT(result.outcome == GetItemOutcome::kAttemptsExhausted);
  }
  RC_ASSERT(static_livelocks == dynamic_livelocks);
  RC_ASSERT(report.terminates == static_livelocks.empty());
  RC_TAG(Resample::Policy_Name(scenario.resample().policy()), static_livelocks.empty() ? "terminates" : "livelock");
}

// `check`'s first hit is where `sample`'s stream first stops with a livelock marker; for the
// bounded policy, its first error is the stream's first error marker.
RC_GTEST_PROP(CheckProps, FirstHitEqualsFirstLivelockOfTheSampleStream, ()) {
  props::CountCase();
  const Scenario scenario = *GenScenario();
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  props::CounterexampleOnFailure guard(scenario, "FirstHitEqualsFirstLivelockOfTheSampleStream");
  const CheckReport report = RunPreflight(scenario, *dataset);
  const bool bounded = scenario.resample().policy() == Resample::bounded;
  const SampleStatus marker = bounded ? SampleStatus::kError : SampleStatus::kLivelock;
  std::optional<SampleRow> first;
  GenerateSampleStream(scenario, *dataset, {}, [&](const SampleRow& row) {
    if (row.status != marker) return;
    if (!first || std::tie(row.iteration, row.rank, row.slot) < std::tie(first->iteration, first->rank, first->slot)) {
      first = row;
    }
  });
  const auto& hit = bounded ? report.first_bounded_error : report.first_hit;
  RC_ASSERT(hit.has_value() == first.has_value());
  RC_TAG(bounded ? "bounded" : "unbounded", first ? "hit" : "no hit");
  if (first) {
    RC_ASSERT(hit->iteration == first->iteration);
    RC_ASSERT(hit->rank == first->rank);
    RC_ASSERT(hit->slot == first->slot);
    RC_ASSERT(hit->worker == first->worker);
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
  const CheckReport report = RunPreflight(scenario, *dataset);
  RC_PRE(report.terminates);
  props::CounterexampleOnFailure guard(scenario, "ProvenTerminationBoundsTheAttempts");
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
  const Scenario scenario = *GenScenario(GenOptions{.samplers = GenOptions::Samplers::kInfinite});
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  props::CounterexampleOnFailure guard(
      scenario, mutant == SamplerMutant::kNone ? "SlotsPlayWholeGroupsInOrder" : "SlotsPlayWholeGroupsInOrder_mutant");
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

RC_GTEST_PROP(SamplerProps, SlotsPlayWholeGroupsInOrder, ()) { SlotsPlayWholeGroupsInOrderBody(SamplerMutant::kNone); }

// The property bites: a sampler with an off-by-one slot, or with two slots swapped, is caught.
TEST(SamplerPropsMutants, OffByOneRankIsCaught) {
  EXPECT_FALSE(rc::check("an off-by-one global slot must fail the property",
                         [] { SlotsPlayWholeGroupsInOrderBody(SamplerMutant::kOffByOneRank); }));
}
TEST(SamplerPropsMutants, SwappedSlotsAreCaught) {
  EXPECT_FALSE(rc::check("swapped slots must fail the property",
                         [] { SlotsPlayWholeGroupsInOrderBody(SamplerMutant::kSwappedSlots); }));
}

// The draws of every slot of every rank, `batches` batches long.
std::vector<std::vector<SlotDraw>> Draws(const Scenario& scenario, const Dataset& dataset, size_t batches) {
  SamplerFactory factory(scenario, dataset);
  std::vector<std::vector<SlotDraw>> draws;
  for (uint32_t rank = 0; rank < scenario.job().world_size(); ++rank) {
    draws.emplace_back(batches * scenario.job().samples_per_gpu());
    factory.ForRank(rank)->NextBatches(draws.back());
  }
  return draws;
}

// Per rank and slot, the sampler's stream depends only on (seed, groups, W, B): another GT
// distribution (the groups kept), other workers, prefetch, resample policy (one that keeps the
// groups), plan, job length and faults leave every draw of every slot unchanged.
// `mutant`: a sampler seeded with seed + workers_per_gpu (worker seeding leaking into it).
void SlotStreamsDependOnlyOnSeedGroupsWorldAndBatchBody(bool mutant) {
  props::CountCase();
  const Scenario scenario = *GenScenario(GenOptions{.faults = true});
  RC_PRE(scenario.resample().policy() != Resample::drop_empty_groups);
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  Scenario other = *GenScenario(GenOptions{.faults = true});
  // The same dataset shape (scenes, frames, groups), other GT counts.
  *other.mutable_dataset() = scenario.dataset();
  *other.mutable_grouping() = scenario.grouping();
  *other.mutable_sampler() = scenario.sampler();
  other.mutable_job()->set_world_size(scenario.job().world_size());
  other.mutable_job()->set_samples_per_gpu(scenario.job().samples_per_gpu());
  other.mutable_job()->set_seed(scenario.job().seed());
  other.clear_faults();
  for (auto& sub : *other.mutable_dataset()->mutable_subdatasets()) {
    for (auto& scene : *sub.mutable_explicit_()->mutable_scenes()) {
      for (auto& gt : *scene.mutable_gt_counts()) gt = *rc::gen::element<uint32_t>(0, 1, 3);
    }
  }
  if (other.resample().policy() == Resample::drop_empty_groups) {
    other.mutable_resample()->set_policy(Resample::in_group);
  }
  const auto other_dataset = TryBuild(other);
  RC_PRE(other_dataset.has_value());
  if (mutant) {
    other.mutable_job()->set_seed(other.job().seed() + other.job().workers_per_gpu());
  }
  props::CounterexampleOnFailure guard(
      scenario, mutant ? "SlotStreamsDependOnly_mutant" : "SlotStreamsDependOnlyOnSeedGroupsWorldAndBatch");
  RC_ASSERT(other_dataset->groups_num() == dataset->groups_num());
  RC_ASSERT(Draws(scenario, *dataset, 40) == Draws(other, *other_dataset, 40));
}

RC_GTEST_PROP(SamplerProps, SlotStreamsDependOnlyOnSeedGroupsWorldAndBatch, ()) {
  SlotStreamsDependOnlyOnSeedGroupsWorldAndBatchBody(false);
}

TEST(SamplerPropsMutants, SamplerSeededByWorkersIsCaught) {
  EXPECT_FALSE(rc::check("a sampler whose seed depends on the workers must fail the property",
                         [] { SlotStreamsDependOnlyOnSeedGroupsWorldAndBatchBody(true); }));
}

// Epoch samplers (mmdet DistributedGroupSampler, torch DistributedSampler) in every epoch:
// every rank gets the same number of samples, EpochSamplesPerRank; together they cover the
// dataset; the padding is at most the documented amount: mmdet pads every group to a multiple
// of W * B with frames of that group (fewer than W * B per group); torch pads the whole list to
// a multiple of W (fewer than W), or with drop_last cuts fewer than W and repeats nothing.
// And `check` says whether the ranks have the same number of batches: they do unless an
// uneven_batches fault takes some away.
// `mutant`: the last rank's list loses its last index (an off-by-one tail).
void EpochSamplersAreEvenAndCoverBody(bool mutant) {
  props::CountCase();
  const Scenario scenario = *GenScenario(GenOptions{.samplers = GenOptions::Samplers::kEpoch, .faults = true});
  const auto dataset = TryBuild(scenario);
  RC_PRE(dataset.has_value());
  props::CounterexampleOnFailure guard(scenario,
                                       mutant ? "EpochSamplersAreEvenAndCover_mutant" : "EpochSamplersAreEvenAndCover");
  const uint32_t world = scenario.job().world_size();
  const uint32_t batch = scenario.job().samples_per_gpu();
  const uint64_t epoch = *rc::gen::inRange<uint64_t>(0, 5);
  const bool mmdet = scenario.sampler().kind() == Sampler::distributed_group;
  std::vector<uint64_t> count(static_cast<size_t>(dataset->size()), 0);
  uint64_t total = 0;
  for (uint32_t rank = 0; rank < world; ++rank) {
    auto indices = mmdet ? DistributedGroupSamplerIndices(*dataset, world, batch, rank, scenario.job().seed(), epoch)
                         : TorchDistributedSamplerIndices(dataset->size(), world, rank, scenario.sampler().shuffle(),
                                                          scenario.sampler().drop_last(), scenario.job().seed(), epoch);
    if (mutant && rank + 1 == world && !indices.empty()) indices.pop_back();
    RC_ASSERT(indices.size() == EpochSamplesPerRank(scenario, *dataset));
    for (const int64_t i : indices) {
      RC_ASSERT(i >= 0 && i < dataset->size());
      ++count[static_cast<size_t>(i)];
    }
    total += indices.size();
  }
  const uint64_t n = static_cast<uint64_t>(dataset->size());
  if (mmdet) {
    const uint64_t wb = uint64_t{world} * batch;
    for (int64_t g = 0; g < dataset->groups_num(); ++g) {
      const auto& members = dataset->group_indices(g);
      uint64_t in_group = 0;
      for (const int64_t i : members) {
        RC_ASSERT(count[static_cast<size_t>(i)] >= 1);
        in_group += count[static_cast<size_t>(i)];
      }
      RC_ASSERT(in_group % wb == 0);
      RC_ASSERT(in_group - members.size() < wb);
    }
  } else if (scenario.sampler().drop_last()) {
    RC_ASSERT(total == n / world * world);
    for (const uint64_t c : count) RC_ASSERT(c <= 1);
  } else {
    RC_ASSERT(total == (n + world - 1) / world * world);
    RC_ASSERT(total - n < world);
    for (const uint64_t c : count) RC_ASSERT(c >= 1);
  }
  RC_TAG(Sampler::Kind_Name(scenario.sampler().kind()));

  const CheckReport report = RunPreflight(scenario, *dataset);
  bool uneven_fault = false;
  for (const Fault& fault : scenario.faults()) uneven_fault |= fault.has_uneven_batches();
  const auto& batches = report.batches_per_epoch_by_rank;
  RC_ASSERT(batches.size() == world);
  const bool equal = std::all_of(batches.begin(), batches.end(), [&](uint64_t b) { return b == batches[0]; });
  RC_ASSERT(report.batches_equal == equal);
  if (!uneven_fault) RC_ASSERT(equal);
}

RC_GTEST_PROP(SamplerProps, EpochSamplersAreEvenAndCover, ()) { EpochSamplersAreEvenAndCoverBody(false); }

TEST(SamplerPropsMutants, EpochSamplerWithAShortTailIsCaught) {
  EXPECT_FALSE(rc::check("an epoch sampler that loses the last index must fail the property",
                         [] { EpochSamplersAreEvenAndCoverBody(true); }));
}

// The swarm generator reaches the ends of the ranges the suite promises (a generator that
// silently stopped producing wide worlds or long plans would weaken every property).
TEST(GeneratorCoverage, ReachesEveryRangeAndKind) {
  struct Seen {
    int subdatasets = 0, scenes = 0, frames = 0, world = 0, batch = 0, workers = 0, prefetch = 0, per_iteration = 0;
    std::set<int> policies, samplers, fault_kinds, splits;
    bool periodic = false, conditional = false, empty_subdataset = false;
  };
  static Seen seen;
  seen = Seen{};
  const bool passed = rc::check([] {
    const Scenario scenario = *GenScenario(GenOptions{.faults = true});
    seen.subdatasets = std::max(seen.subdatasets, scenario.dataset().subdatasets_size());
    for (const auto& sub : scenario.dataset().subdatasets()) {
      seen.scenes = std::max(seen.scenes, sub.explicit_().scenes_size());
      bool empty = true;
      for (const auto& scene : sub.explicit_().scenes()) {
        seen.frames = std::max(seen.frames, scene.gt_counts_size());
        for (const uint32_t gt : scene.gt_counts()) empty &= gt == 0;
      }
      seen.empty_subdataset |= empty && scenario.dataset().subdatasets_size() > 1;
    }
    const auto& job = scenario.job();
    seen.world = std::max<int>(seen.world, job.world_size());
    seen.batch = std::max<int>(seen.batch, job.samples_per_gpu());
    seen.workers = std::max<int>(seen.workers, job.workers_per_gpu());
    seen.prefetch = std::max<int>(seen.prefetch, job.prefetch_factor());
    seen.per_iteration = std::max(seen.per_iteration, scenario.plan().custom().per_iteration_size());
    seen.periodic |= scenario.plan().custom().periodic_size() > 0;
    seen.conditional |= scenario.plan().streampetr().old_code_skips_dn_without_gt();
    for (const auto& c : scenario.plan().custom().per_iteration()) {
      seen.conditional |= c.only_when_local_batch_has_gt();
    }
    seen.policies.insert(scenario.resample().policy());
    seen.samplers.insert(scenario.sampler().kind());
    for (const Fault& fault : scenario.faults()) seen.fault_kinds.insert(fault.kind_case());
    const auto& grouping = scenario.grouping();
    seen.splits.insert(!grouping.seq_mode()       ? -1
                       : grouping.seq_split_all() ? 0
                                                  : static_cast<int>(grouping.seq_split_num()));
  });
  ASSERT_TRUE(passed);
  EXPECT_EQ(seen.subdatasets, 4);
  EXPECT_GE(seen.scenes, 55);
  EXPECT_GE(seen.frames, 40);
  EXPECT_GE(seen.world, 48);
  EXPECT_EQ(seen.batch, 4);
  EXPECT_EQ(seen.workers, 8);
  EXPECT_EQ(seen.prefetch, 4);
  EXPECT_GE(seen.per_iteration, 50);
  EXPECT_TRUE(seen.periodic);
  EXPECT_TRUE(seen.conditional);
  EXPECT_TRUE(seen.empty_subdataset);
  EXPECT_EQ(seen.policies.size(), 7u);
  EXPECT_EQ(seen.samplers.size(), 3u);
  EXPECT_EQ(seen.fault_kinds.size(), 6u);
  EXPECT_EQ(seen.splits, (std::set<int>{-1, 0, 1, 2, 3, 4}));
}

}  // namespace
}  // namespace petrsim
