// The sampler watchdog (data/sampler_watchdog.h): on the tiny scenario's empty
// chunk it fires at exactly the rank, worker, batch, slot and index `check` predicts; its
// probabilistic bound never fires on a pool that has GT; its report is in user terms.
#include "data/sampler_watchdog.h"

#include <gtest/gtest.h>

#include "check/preflight.h"
#include "data/data_loader.h"
#include "data/sampler.h"
#include "scenario/scenario_loader.h"

namespace petrsim {
namespace {

TEST(SamplerWatchdog, FiresWhereCheckPredictsTheFirstHit) {
  const Scenario scenario = LoadScenarioFile(PETRSIM_SOURCE_DIR "/scenarios/tiny.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "tiny");
  const auto policy = MakeResamplePolicy(scenario, dataset);
  const CheckReport check = RunPreflight(scenario, dataset);
  ASSERT_TRUE(check.first_hit.has_value());
  const DataLoaderShape loader = MakeDataLoaderShape(scenario, dataset);
  const uint32_t world = scenario.job().world_size(), batch_size = scenario.job().samples_per_gpu();
  std::optional<StuckGetitem> first;
  for (uint32_t rank = 0; rank < world; ++rank) {
    auto sampler = MakeRankSampler(scenario, dataset, rank);
    NumpyRandomState rng(rank);
    for (uint64_t batch = 0; batch < scenario.job().iterations(); ++batch) {
      std::vector<SlotDraw> draws(batch_size);
      sampler->NextBatches(draws);
      for (uint32_t slot = 0; slot < batch_size; ++slot) {
        const WatchedItem item = WatchedGetItem(dataset, *policy, draws[slot].index, rng, PipelineDraws(), rank,
                                                static_cast<int32_t>(loader.WorkerOf(batch)), batch, slot);
        if (!item.livelock) continue;
        EXPECT_TRUE(item.livelock->proven);
        if (!first || std::tie(batch, rank, slot) < std::tie(first->batch, first->rank, first->slot)) {
          first = item.livelock;
        }
      }
    }
  }
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->batch, check.first_hit->iteration);
  EXPECT_EQ(first->rank, check.first_hit->rank);
  EXPECT_EQ(first->slot, check.first_hit->slot);
  EXPECT_EQ(static_cast<uint32_t>(first->worker), check.first_hit->worker);
  EXPECT_EQ(first->index, check.first_hit->index);
  EXPECT_EQ(first->group, check.first_hit->group);
  EXPECT_EQ(first->scene_name, "c");
  EXPECT_EQ(first->attempts, 1u);  // proven at the first load
  const std::string line = first->Describe();
  EXPECT_NE(line.find("sub-dataset 'mini', scene 'c', its pool is frames 3..5 of the scene"), std::string::npos)
      << line;
}

TEST(SamplerWatchdog, TheBoundNeverFiresOnAPoolWithGt) {
  const Scenario scenario = LoadScenarioFile(PETRSIM_SOURCE_DIR "/scenarios/tiny.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "tiny");
  const auto policy = MakeResamplePolicy(scenario, dataset);
  // Scene "a" frame 2 has no GT; its chunk (frames 0-2) has two frames with GT.
  const int64_t empty_frame = 2;
  ASSERT_FALSE(dataset.frame(empty_frame).accepted);
  const uint64_t bound = ResampleAttemptsBound(dataset, *policy, empty_frame);
  // p = 2/3: ln(1e-12) / ln(1/3) = 25.2 -> 26 resamples, 27 loads.
  EXPECT_EQ(bound, 27u);
  for (uint32_t seed = 0; seed < 20000; ++seed) {
    NumpyRandomState rng(seed);
    const WatchedItem item = WatchedGetItem(dataset, *policy, empty_frame, rng, PipelineDraws(), 0, 0, 0, 0);
    ASSERT_FALSE(item.livelock.has_value()) << seed;
    EXPECT_TRUE(dataset.frame(item.result.index).accepted);
  }
  EXPECT_EQ(ResampleAttemptsBound(dataset, *policy, 0), 1u);  // accepted as is
}

// A pool with one good frame in thousands is slow, not stuck: its bound is large and a healthy
// getitem does not reach it (the simulator calls the same case a straggler when it passes the
// collective timeout).
TEST(SamplerWatchdog, APoolWithOneGoodFrameInThousandsIsNotFlagged) {
  Scenario scenario;
  auto* scene = scenario.mutable_dataset()->add_subdatasets()->mutable_explicit_()->add_scenes();
  scene->set_name("long");
  for (int f = 0; f < 4000; ++f) scene->add_gt_counts(f == 0 ? 3 : 0);
  scenario.mutable_grouping()->set_seq_split_num(1);
  scenario.mutable_job()->set_world_size(1);
  scenario.mutable_job()->set_samples_per_gpu(1);
  const Dataset dataset = BuildDataset(scenario, "long");
  const auto policy = MakeResamplePolicy(scenario, dataset);
  const uint64_t bound = ResampleAttemptsBound(dataset, *policy, 10);
  EXPECT_GT(bound, 100000u);  // ln(1e-12) / ln(1 - 1/4000) = 110,500
  int fired = 0;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    NumpyRandomState rng(seed);
    fired += WatchedGetItem(dataset, *policy, 10, rng, PipelineDraws(), 0, 0, 0, 0).livelock.has_value();
  }
  EXPECT_EQ(fired, 0);  // a false report has probability 1e-12 per getitem
}

}  // namespace
}  // namespace petrsim
