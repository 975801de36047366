// Resample policies and the getitem loop, against numpy's draws.
#include "data/resample_policy.h"

#include <gtest/gtest.h>

#include "tests/scenario_text.h"

namespace petrsim {
namespace {

// One sub-dataset; chunks: [0,3) gt 0,2,0 | [3,5) gt 0,0 | [5,8) gt 1,1,1.
const char* kPools = R"pb(
  dataset {
    subdatasets {
      explicit {
        scenes { gt_counts: [ 0, 2, 0, 0, 0 ] }
        scenes { gt_counts: [ 1, 1, 1, 1, 1, 1 ] }
      }
    }
  }
  grouping { seq_split_num: 2 }
  job { world_size: 1 samples_per_gpu: 1 }
)pb";

struct Fixture {
  explicit Fixture(Resample::Policy policy) : scenario(testing::ScenarioFromText(kPools)) {
    scenario.mutable_resample()->set_policy(policy);
    if (policy == Resample::keep_empty) scenario.mutable_filters()->clear_filter_empty_gt();
    if (policy == Resample::bounded) scenario.mutable_resample()->set_attempts_max(5);
    dataset = BuildDataset(scenario, "t");
    policy_ = MakeResamplePolicy(scenario, dataset);
  }
  Scenario scenario;
  Dataset dataset;
  std::unique_ptr<ResamplePolicy> policy_;
};

// The Python loop written out by hand for a uniform pool [begin, begin + size): load (the
// pipeline takes `pipeline_draws`), accept a frame with GT, else np.random.choice(pool).
GetItemResult ReplayUniformLoop(const Dataset& dataset, int64_t index, int64_t begin, uint32_t size,
                                NumpyRandomState& rng, uint32_t pipeline_draws) {
  GetItemResult result;
  result.index = index;
  while (true) {
    ++result.attempts;
    rng.Discard(pipeline_draws);
    if (dataset.frame(result.index).accepted) return result;
    result.index = begin + rng.Choice(size);
  }
}

TEST(InGroupPolicyTest, DrawsFromTheChunkWithNumpyChoice) {
  Fixture f(Resample::in_group);
  NumpyRandomState rng(5), reference(5);
  const GetItemResult result = GetItem(f.dataset, *f.policy_, 0, rng, PipelineDraws());
  ASSERT_EQ(result.outcome, GetItemOutcome::kAccepted);
  EXPECT_EQ(result.index, 1);  // the only frame of [0,3) with GT
  const GetItemResult expected = ReplayUniformLoop(f.dataset, 0, 0, 3, reference, 0);
  EXPECT_EQ(result.attempts, expected.attempts);
  EXPECT_EQ(rng.Next32(), reference.Next32());  // same RNG consumption
}

TEST(InGroupPolicyTest, AllEmptyChunkIsALivelock) {
  Fixture f(Resample::in_group);
  NumpyRandomState rng(1);
  const GetItemResult result = GetItem(f.dataset, *f.policy_, 3, rng, PipelineDraws());
  EXPECT_EQ(result.outcome, GetItemOutcome::kLivelock);
  EXPECT_EQ(result.attempts, 1u);
}

TEST(InGroupPolicyTest, PipelineDrawsComeBeforeEachResampleDraw) {
  Fixture f(Resample::in_group);
  NumpyRandomState rng(9), reference(9);
  const GetItemResult result = GetItem(f.dataset, *f.policy_, 0, rng, PipelineDraws::RawOutputs(4));
  const GetItemResult expected = ReplayUniformLoop(f.dataset, 0, 0, 3, reference, 4);
  EXPECT_EQ(result.attempts, expected.attempts);
  EXPECT_EQ(rng.Next32(), reference.Next32());
}

TEST(GlobalPolicyTest, LeavesTheEmptyChunk) {
  Fixture f(Resample::global);
  EXPECT_EQ(f.policy_->Candidates(3).begin, 0);
  EXPECT_EQ(f.policy_->Candidates(3).end, f.dataset.size());
  NumpyRandomState rng(2);
  const GetItemResult result = GetItem(f.dataset, *f.policy_, 3, rng, PipelineDraws());
  EXPECT_EQ(result.outcome, GetItemOutcome::kAccepted);
  EXPECT_TRUE(f.dataset.frame(result.index).accepted);
}

TEST(InSubDatasetPolicyTest, DrawsWithinTheFramesOwnSubDataset) {
  Fixture f(Resample::in_subdataset);
  EXPECT_EQ(f.policy_->Candidates(3).begin, 0);
  EXPECT_EQ(f.policy_->Candidates(3).end, f.dataset.size());  // one sub-dataset here
  NumpyRandomState rng(4), reference(4);
  const GetItemResult result = GetItem(f.dataset, *f.policy_, 3, rng, PipelineDraws());
  const GetItemResult expected =
      ReplayUniformLoop(f.dataset, 3, 0, static_cast<uint32_t>(f.dataset.size()), reference, 0);
  EXPECT_EQ(result.index, expected.index);
  EXPECT_EQ(result.attempts, expected.attempts);
}

TEST(NextValidInGroupPolicyTest, WrapsInTheChunkThenFallsBackToTheDataset) {
  Fixture f(Resample::next_valid_in_group);
  NumpyRandomState rng(0), untouched(0);
  EXPECT_EQ(GetItem(f.dataset, *f.policy_, 2, rng, PipelineDraws()).index, 1);  // wraps within [0,3)
  EXPECT_EQ(GetItem(f.dataset, *f.policy_, 0, rng, PipelineDraws()).index, 1);
  EXPECT_EQ(GetItem(f.dataset, *f.policy_, 3, rng, PipelineDraws()).index, 5);  // [3,5) empty: next in dataset
  EXPECT_EQ(rng.Next32(), untouched.Next32());                                  // deterministic: no draws
}

TEST(BoundedPolicyTest, GivesUpAfterAttemptsMax) {
  Fixture f(Resample::bounded);
  NumpyRandomState rng(0);
  const GetItemResult result = GetItem(f.dataset, *f.policy_, 3, rng, PipelineDraws());
  EXPECT_EQ(result.outcome, GetItemOutcome::kAttemptsExhausted);
  EXPECT_EQ(result.attempts, 5u);
}

TEST(KeepEmptyPolicyTest, AcceptsEmptyFramesAsIs) {
  Fixture f(Resample::keep_empty);
  NumpyRandomState rng(0);
  const GetItemResult result = GetItem(f.dataset, *f.policy_, 3, rng, PipelineDraws());
  EXPECT_EQ(result.outcome, GetItemOutcome::kAccepted);
  EXPECT_EQ(result.index, 3);
}

TEST(DropEmptyGroupsPolicyTest, NoEmptyChunkRemains) {
  Fixture f(Resample::drop_empty_groups);
  EXPECT_EQ(f.dataset.size(), 9);  // [3,5) was dropped
  for (const auto& chunk : f.dataset.chunks()) EXPECT_GT(chunk.accepted_frames, 0u);
}

TEST(GetItemTest, OwnAttemptsLimitBoundsAPathologicalPool) {
  Fixture f(Resample::in_group);
  NumpyRandomState rng(3);
  const GetItemResult result = GetItem(f.dataset, *f.policy_, 0, rng, PipelineDraws(), /*attempts_limit=*/1);
  EXPECT_EQ(result.outcome, GetItemOutcome::kAttemptsLimit);
}

}  // namespace
}  // namespace petrsim
