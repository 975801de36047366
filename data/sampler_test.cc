// Samplers: golden parity with torch (DistributedSampler, the infinite group stream) and the
// structural rules of docs/reference/streampetr.md, section 4,.
#include "data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "base/error.h"
#include "tests/golden_vectors.h"
#include "tests/scenario_text.h"

namespace petrsim {
namespace {

TEST(GroupStreamTest, SlotsTakeEveryWbThElementLikeTheRealSampler) {
  // Golden: itertools.islice over concatenated torch.randperm(G) with step W*B.
  for (const auto& c : testing::RngGolden().at("infinite_group_stream")) {
    const int64_t groups = c.at("groups_num");
    const uint64_t global_batch = c.at("world_size").get<uint64_t>() * c.at("batch_size").get<uint64_t>();
    GroupStream stream(groups, c.at("seed").get<uint32_t>());
    const auto& slots = c.at("slot_groups");
    ASSERT_EQ(slots.size(), global_batch);
    for (uint64_t s = 0; s < global_batch; ++s) {
      const auto expected = slots[s].get<std::vector<int32_t>>();
      for (size_t j = 0; j < expected.size(); ++j) {
        ASSERT_EQ(stream.at(s + j * global_batch), expected[j]) << "slot " << s << " draw " << j;
      }
    }
  }
}

TEST(TorchDistributedSamplerTest, MatchesRealTorch) {
  for (const auto& c : testing::RngGolden().at("torch_distributed_sampler")) {
    const int64_t n = c.at("dataset_len");
    const uint32_t w = c.at("num_replicas");
    SCOPED_TRACE("len " + std::to_string(n) + " W " + std::to_string(w));
    const bool truncated = c.at("truncated");
    for (uint32_t rank = 0; rank < w; ++rank) {
      const auto indices =
          TorchDistributedSamplerIndices(n, w, rank, c.at("shuffle"), c.at("drop_last"), c.at("seed"), c.at("epoch"));
      const auto expected = c.at("per_rank")[rank].get<std::vector<int64_t>>();
      if (truncated) {
        ASSERT_EQ(indices.size(), c.at("per_rank_len")[rank].get<size_t>());
        EXPECT_TRUE(std::equal(expected.begin(), expected.end(), indices.begin()));
      } else {
        EXPECT_EQ(indices, expected) << "rank " << rank;
      }
    }
  }
}

const char* kSmall = R"pb(
  dataset {
    subdatasets {
      explicit {
        scenes { gt_counts: [ 1, 1, 1, 1, 1 ] }
        scenes { gt_counts: [ 1, 1, 1 ] }
        scenes { gt_counts: [ 1, 1, 1, 1, 1, 1, 1 ] }
        scenes { gt_counts: [ 1, 1 ] }
      }
    }
  }
  job { world_size: 2 samples_per_gpu: 2 iterations: 40 }
)pb";

TEST(InfiniteGroupSamplerTest, EachSlotPlaysWholeGroupsInAscendingOrder) {
  const Scenario scenario = testing::ScenarioFromText(kSmall);
  const Dataset dataset = BuildDataset(scenario, "t");
  ASSERT_EQ(dataset.groups_num(), 8);
  auto stream = std::make_shared<GroupStream>(dataset.groups_num(), 0);
  for (uint32_t rank = 0; rank < 2; ++rank) {
    InfiniteGroupSampler sampler(dataset, stream, 2, 2, rank);
    std::vector<SlotDraw> draws(2 * 60);
    sampler.NextBatches(draws);
    for (uint32_t b = 0; b < 2; ++b) {
      // Rebuild the slot's expected sequence from the stream directly.
      std::vector<int64_t> expected;
      for (uint64_t j = 0; expected.size() < 60; ++j) {
        const int32_t group = stream->at(rank * 2 + b + j * 4);
        for (const int64_t index : dataset.group_indices(group)) expected.push_back(index);
      }
      for (size_t i = 0; i < 60; ++i) {
        EXPECT_EQ(draws[i * 2 + b].index, expected[i]) << "rank " << rank << " slot " << b;
        EXPECT_EQ(draws[i * 2 + b].group, dataset.group_of(expected[i]));
      }
    }
  }
}

TEST(InfiniteGroupSamplerTest, BlockSizeDoesNotChangeTheStream) {
  const Scenario scenario = testing::ScenarioFromText(kSmall);
  const Dataset dataset = BuildDataset(scenario, "t");
  auto one = MakeRankSampler(scenario, dataset, 1);
  auto many = MakeRankSampler(scenario, dataset, 1);
  std::vector<SlotDraw> a(2 * 50), b(2);
  many->NextBatches(a);
  for (int i = 0; i < 50; ++i) {
    one->NextBatches(b);
    EXPECT_EQ(a[2 * i].index, b[0].index);
    EXPECT_EQ(a[2 * i + 1].index, b[1].index);
  }
}

TEST(DistributedGroupSamplerTest, EqualShareCoverageAndBatchesWithinOneGroup) {
  Scenario scenario = testing::ScenarioFromText(kSmall);
  scenario.mutable_sampler()->set_kind(Sampler::distributed_group);
  const Dataset dataset = BuildDataset(scenario, "t");
  // Groups have sizes 3,2,2,1,4,3,1,1; each is padded to a multiple of B*W = 4: 4*8 = 32.
  std::multiset<int64_t> all;
  std::vector<std::vector<int64_t>> per_rank;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    per_rank.push_back(DistributedGroupSamplerIndices(dataset, 2, 2, rank, 0, 3));
    EXPECT_EQ(per_rank.back().size(), 16u);
    all.insert(per_rank.back().begin(), per_rank.back().end());
  }
  EXPECT_EQ(EpochSamplesPerRank(scenario, dataset), 16u);
  for (int64_t i = 0; i < dataset.size(); ++i) EXPECT_GE(all.count(i), 1u) << i;
  // Every batch (chunk of B) comes from one group: mmdet pads and shuffles within groups.
  for (const auto& indices : per_rank) {
    for (size_t i = 0; i < indices.size(); i += 2) {
      EXPECT_EQ(dataset.group_of(indices[i]), dataset.group_of(indices[i + 1]));
    }
  }
  // Reseeded per epoch: another epoch gives another order.
  EXPECT_NE(per_rank[0], DistributedGroupSamplerIndices(dataset, 2, 2, 0, 0, 4));
}

TEST(EpochRankSamplerTest, RunsIntoTheNextEpochWithSeedPlusEpoch) {
  Scenario scenario = testing::ScenarioFromText(kSmall);
  scenario.mutable_sampler()->set_kind(Sampler::distributed);
  const Dataset dataset = BuildDataset(scenario, "t");
  // 17 frames, W=2: 9 per rank (padded), B=2: 5 batches per epoch, the last one short.
  EXPECT_EQ(IterationsPerEpoch(scenario, dataset), 5u);
  auto sampler = MakeRankSampler(scenario, dataset, 1);
  std::vector<SlotDraw> draws(2 * 10);
  sampler->NextBatches(draws);
  const auto epoch0 = TorchDistributedSamplerIndices(17, 2, 1, true, false, 0, 0);
  const auto epoch1 = TorchDistributedSamplerIndices(17, 2, 1, true, false, 0, 1);
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(draws[i].index, epoch0[i]);
  EXPECT_EQ(draws[9].index, -1);  // short last batch
  for (size_t i = 0; i < 9; ++i) EXPECT_EQ(draws[10 + i].index, epoch1[i]);
}

TEST(SamplerTest, InfiniteSamplerAssertion) {
  Scenario scenario = testing::ScenarioFromText(kSmall);
  scenario.mutable_job()->set_world_size(8);  // 8 * 2 = 16 > 8 groups
  const Dataset dataset = BuildDataset(scenario, "t");
  EXPECT_FALSE(InfiniteSamplerAssertionHolds(scenario, dataset));
  EXPECT_THROW(MakeRankSampler(scenario, dataset, 0), ScenarioError);
}

// Issue 33, point 2: epochs x the default iterations per epoch beyond kIterationsMax is refused with
// the file, the factors and where the per-epoch figure comes from; never wrapped or truncated.
TEST(SamplerTest, AJobLengthBeyondTheLimitIsRefused) {
  Scenario scenario = testing::ShippedScenario("streampetr_trainval_hang.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "t");
  scenario.mutable_job()->clear_iterations_per_epoch();
  scenario.mutable_job()->set_world_size(1);
  scenario.mutable_job()->set_samples_per_gpu(1);
  scenario.mutable_job()->set_epochs(100000);  // x 28130 = 2.8e9 > 10^9
  try {
    CheckSamplerConstructible(scenario, dataset, "s.pbtxt");
    ADD_FAILURE() << "accepted 100000 x 28130 iterations";
  } catch (const ScenarioError& error) {
    EXPECT_NE(
        std::string(error.what())
            .find("s.pbtxt: job.epochs x iterations per epoch: must be at most 1000000000 iterations, got "
                  "100000 x 28130 (iterations per epoch from StreamPETR's configs: 28130 // (1 GPUs x 1 samples))"),
        std::string::npos)
        << error.what();
  }
  EXPECT_THROW(JobIterations(scenario, dataset), ScenarioError);
  scenario.mutable_job()->set_epochs(35549);  // 35549 x 28130 = 999,993,370: the most that fit
  EXPECT_EQ(JobIterations(scenario, dataset), 999'993'370u);
}

TEST(SamplerTest, JobLengthFromEpochs) {
  Scenario scenario = testing::ShippedScenario("streampetr_trainval_hang.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "t");
  // The seed scenario states the published config's num_iters_per_epoch, 28130 // (8 GPUs x 2),
  // written for 8 GPUs whatever GPUs run it: its 4 ranks keep 1758, and 24 epochs are 42192.
  ASSERT_EQ(scenario.job().world_size(), 4u);
  EXPECT_EQ(IterationsPerEpoch(scenario, dataset), 1758u);
  EXPECT_EQ(IterationsPerEpochSource(scenario), "job.iterations_per_epoch");
  EXPECT_EQ(JobIterations(scenario, dataset), 24u * 1758u);
  // Without it, StreamPETR's formula: 28130 // (GPUs x samples per GPU), whatever the dataset
  // holds (here 34149 frames of train + val).
  scenario.mutable_job()->clear_iterations_per_epoch();
  EXPECT_EQ(IterationsPerEpoch(scenario, dataset), 28130u / (4u * 2u));
  EXPECT_EQ(IterationsPerEpochSource(scenario), "StreamPETR's configs: 28130 // (4 GPUs x 2 samples)");
  EXPECT_EQ(JobIterations(scenario, dataset), 24u * 3516u);
  scenario.mutable_job()->set_world_size(8);
  EXPECT_EQ(IterationsPerEpoch(scenario, dataset), 1758u);  // the published config's 8 GPUs
  scenario.mutable_job()->set_samples_per_gpu(1);
  EXPECT_EQ(IterationsPerEpoch(scenario, dataset), 28130u / 8u);
  scenario.mutable_job()->set_iterations_per_epoch(7);
  EXPECT_EQ(IterationsPerEpoch(scenario, dataset), 7u);
  EXPECT_EQ(IterationsPerEpochSource(scenario), "job.iterations_per_epoch");
}

}  // namespace
}  // namespace petrsim

namespace petrsim {
namespace {

TEST(GroupStreamTest, MemoryStaysBoundedOverALongJob) {
  const Scenario scenario = testing::ScenarioFromText(kSmall);
  const Dataset dataset = BuildDataset(scenario, "t");
  auto stream = std::make_shared<GroupStream>(dataset.groups_num(), 0);
  InfiniteGroupSampler rank0(dataset, stream, 2, 2, 0);
  InfiniteGroupSampler rank1(dataset, stream, 2, 2, 1);
  // Reference: rank 0 on a stream of its own.
  InfiniteGroupSampler alone0(dataset, std::make_shared<GroupStream>(dataset.groups_num(), 0), 2, 2, 0);
  std::vector<SlotDraw> draws(2 * 100), expected(2 * 100);
  for (int block = 0; block < 2000; ++block) {
    rank0.NextBatches(draws);
    alone0.NextBatches(expected);
    for (size_t i = 0; i < draws.size(); ++i) ASSERT_EQ(draws[i].index, expected[i].index);
    rank1.NextBatches(draws);
  }
  // 200,000 iterations of 4 slots read about 380,000 stream positions (groups of ~2 frames);
  // only the permutations some slot may still read are kept: here rank 0 runs 100 iterations
  // ahead of rank 1 (about 400 positions), and the buffer is trimmed once half of it is free.
  EXPECT_LE(stream->positions_held(), 2048u);
}

}  // namespace
}  // namespace petrsim
