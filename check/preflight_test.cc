// `check`'s analysis: livelock pools, first hits, and the shipped scenarios' verdicts.
#include "check/preflight.h"

#include <gtest/gtest.h>

#include "data/sample_stream.h"
#include "data/sampler.h"
#include "tests/scenario_text.h"

namespace petrsim {
namespace {

// The earliest (iteration, rank, slot) at which any rank's sampler draws an index in
// [begin, end], by brute force over every rank's stream.
std::optional<SamplerHit> BruteForceFirstHit(const Scenario& scenario, const Dataset& dataset, int64_t begin,
                                             int64_t end, uint64_t iterations) {
  std::optional<SamplerHit> best;
  const uint32_t batch = scenario.job().samples_per_gpu();
  for (uint32_t rank = 0; rank < scenario.job().world_size(); ++rank) {
    auto sampler = MakeRankSampler(scenario, dataset, rank);
    std::vector<SlotDraw> draws(batch);
    for (uint64_t k = 0; k < iterations; ++k) {
      sampler->NextBatches(draws);
      for (uint32_t b = 0; b < batch; ++b) {
        if (draws[b].index < begin || draws[b].index > end) continue;
        if (!best || k < best->iteration) best = SamplerHit{k, rank, b, 0, draws[b].index, draws[b].group};
      }
    }
  }
  return best;
}

TEST(PreflightTest, SeedScenarioFindsThePlantedValHalfScene) {
  const Scenario scenario = testing::ShippedScenario("streampetr_trainval_hang.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "seed");
  const CheckReport report = RunPreflight(scenario, dataset);
  EXPECT_FALSE(report.terminates);
  EXPECT_TRUE(report.job_fails);
  ASSERT_EQ(report.pools.size(), 1u);
  const TrapPool& pool = report.pools[0];
  EXPECT_EQ(pool.kind, PoolKind::kLivelock);
  EXPECT_EQ(pool.subdataset_name, "val");
  EXPECT_EQ(pool.scene_name, "val-0110");
  EXPECT_EQ(pool.scene_index_in_subdataset, 110u);
  // The planted second half: frames ceil(n/2) .. n-1 of the scene, one chunk.
  const SceneInfo& scene = dataset.scenes()[pool.scene];
  EXPECT_EQ(pool.first_frame_in_scene, (scene.frames_given + 1) / 2);
  EXPECT_EQ(pool.last_frame_in_scene, scene.frames_given - 1);
  EXPECT_EQ(pool.first_frame, scene.begin + (scene.frames_given + 1) / 2);
  EXPECT_EQ(pool.last_frame, scene.end - 1);
  EXPECT_EQ(pool.group, dataset.group_of(pool.first_frame));
  // Val chunk g shares sampler group g with train chunk g (no flag offset): every val scene
  // before it is cut in 2 chunks, so the second half of scene 110 is val chunk 2 * 110 + 1.
  EXPECT_LT(pool.group, 300);
  EXPECT_EQ(pool.group, 2 * 110 + 1);

  ASSERT_TRUE(report.first_hit.has_value());
  const auto brute =
      BruteForceFirstHit(scenario, dataset, pool.first_frame, pool.last_frame, report.first_hit->iteration + 1);
  ASSERT_TRUE(brute.has_value());
  EXPECT_EQ(report.first_hit->iteration, brute->iteration);
  EXPECT_EQ(report.first_hit->rank, brute->rank);
  EXPECT_EQ(report.first_hit->slot, brute->slot);
  EXPECT_EQ(report.first_hit->index, brute->index);
  EXPECT_EQ(report.first_hit->worker, report.first_hit->iteration % 4);
  // The train frames of the merged group come first, so the hit is the val chunk's first frame.
  EXPECT_EQ(report.first_hit->index, pool.first_frame);
  // The scene was planted where the seed job's real log points: rank 1 is the one rank that
  // prints no watchdog timeout (tests/data/logs/seed_job_excerpt.log), so rank 1 draws it first.
  EXPECT_EQ(report.first_hit->rank, 1u);
}

TEST(PreflightTest, SampleStreamStopsWhereCheckPredicts) {
  const Scenario scenario = testing::ShippedScenario("streampetr_trainval_hang.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "seed");
  const CheckReport report = RunPreflight(scenario, dataset);
  ASSERT_TRUE(report.first_hit.has_value());
  SampleStreamOptions options;
  options.ranks = {report.first_hit->rank};
  options.iterations = report.first_hit->iteration + 1;
  std::optional<SampleRow> livelock;
  GenerateSampleStream(scenario, dataset, options, [&](const SampleRow& row) {
    if (row.status == SampleStatus::kLivelock && !livelock) livelock = row;
  });
  ASSERT_TRUE(livelock.has_value());
  EXPECT_EQ(livelock->iteration, report.first_hit->iteration);
  EXPECT_EQ(livelock->slot, report.first_hit->slot);
  EXPECT_EQ(livelock->worker, report.first_hit->worker);
  EXPECT_EQ(livelock->index, report.first_hit->index);
}

TEST(PreflightTest, EachShippedFixTerminates) {
  for (const char* name : {"streampetr_trainval_hang_global.pbtxt", "streampetr_trainval_hang_drop_empty_groups.pbtxt",
                           "streampetr_trainval_hang_keep_empty.pbtxt"}) {
    SCOPED_TRACE(name);
    const Scenario scenario = testing::ShippedScenario(name);
    const CheckReport report = RunPreflight(scenario, BuildDataset(scenario, name));
    EXPECT_TRUE(report.terminates);
    EXPECT_FALSE(report.job_fails);
    EXPECT_TRUE(report.pools.empty());
    EXPECT_FALSE(report.first_hit.has_value());
  }
}

const char* kSmall = R"pb(
  dataset {
    subdatasets {
      explicit {
        scenes { gt_counts: [ 1, 0, 1, 1 ] }
        scenes { gt_counts: [ 1, 1, 0, 0 ] }
        scenes { gt_counts: [ 2, 2, 2, 2 ] }
        scenes { gt_counts: [ 0, 0, 0, 0 ] }
      }
    }
  }
  job { world_size: 2 samples_per_gpu: 1 iterations: 100 }
)pb";

TEST(PreflightTest, FindsEveryAllEmptyChunk) {
  const Scenario scenario = testing::ScenarioFromText(kSmall);
  const CheckReport report = RunPreflight(scenario, BuildDataset(scenario, "t"));
  ASSERT_EQ(report.pools.size(), 3u);  // scene 1's second half, scene 3's two halves
  EXPECT_EQ(report.pools[0].first_frame, 6);
  EXPECT_EQ(report.pools[1].first_frame, 12);
  EXPECT_EQ(report.pools[2].first_frame, 14);
  for (const auto& pool : report.pools) EXPECT_EQ(pool.frames, 2u);
  // Every group is drawn within 100 iterations of 2 slots over 8 groups.
  for (const auto& pool : report.pools) EXPECT_TRUE(pool.first_hit.has_value());
  EXPECT_EQ(report.statistics.chunks_partly_rejected, 1u);
}

TEST(PreflightTest, PolicyVerdictsOnTheSameData) {
  struct Case {
    Resample::Policy policy;
    bool terminates;
    bool job_fails;
    size_t pools;
  };
  for (const Case& c :
       {Case{Resample::in_group, false, true, 3}, Case{Resample::global, true, false, 0},
        Case{Resample::in_subdataset, true, false, 0}, Case{Resample::next_valid_in_group, true, false, 0},
        Case{Resample::drop_empty_groups, true, false, 0}, Case{Resample::bounded, true, true, 3},
        Case{Resample::keep_empty, true, false, 0}}) {
    SCOPED_TRACE(Resample::Policy_Name(c.policy));
    Scenario scenario = testing::ScenarioFromText(kSmall);
    scenario.mutable_resample()->set_policy(c.policy);
    if (c.policy == Resample::drop_empty_groups) scenario.mutable_job()->set_world_size(1);
    const CheckReport report = RunPreflight(scenario, BuildDataset(scenario, "t"));
    EXPECT_EQ(report.terminates, c.terminates);
    EXPECT_EQ(report.job_fails, c.job_fails);
    EXPECT_EQ(report.pools.size(), c.pools);
  }
}

TEST(PreflightTest, GlobalPolicyWithNoGtAnywhereIsOneDatasetWidePool) {
  Scenario scenario = testing::ScenarioFromText(R"pb(
    dataset { subdatasets { explicit { scenes { gt_counts: [ 0, 0, 0, 0 ] } } } }
    resample { policy: global }
    job { world_size: 1 samples_per_gpu: 1 iterations: 3 }
  )pb");
  const CheckReport report = RunPreflight(scenario, BuildDataset(scenario, "t"));
  ASSERT_EQ(report.pools.size(), 1u);
  EXPECT_EQ(report.pools[0].frames, 4u);
  EXPECT_FALSE(report.terminates);
}

TEST(PreflightTest, InSubDatasetTrapsAnEmptySubDatasetWhereGlobalDoesNot) {
  Scenario scenario = testing::ScenarioFromText(R"pb(
    dataset {
      subdatasets {
        name: "train"
        explicit { scenes { gt_counts: [ 1, 1, 1, 1 ] } }
      }
      subdatasets {
        name: "val"
        explicit { scenes { gt_counts: [ 0, 0, 0, 0 ] } }
      }
    }
    resample { policy: in_subdataset }
    job { world_size: 1 samples_per_gpu: 1 iterations: 20 }
  )pb");
  const CheckReport report = RunPreflight(scenario, BuildDataset(scenario, "t"));
  ASSERT_EQ(report.pools.size(), 1u);
  EXPECT_EQ(report.pools[0].subdataset_name, "val");
  EXPECT_EQ(report.pools[0].frames, 4u);
  scenario.mutable_resample()->set_policy(Resample::global);
  EXPECT_TRUE(RunPreflight(scenario, BuildDataset(scenario, "t")).terminates);
}

TEST(PreflightTest, ReportsTheInfiniteSamplerAssertion) {
  Scenario scenario = testing::ScenarioFromText(kSmall);
  scenario.mutable_job()->set_world_size(5);  // 5 > 8 groups / 1? no: 5 * 2 = 10 > 8
  scenario.mutable_job()->set_samples_per_gpu(2);
  const CheckReport report = RunPreflight(scenario, BuildDataset(scenario, "t"));
  EXPECT_TRUE(report.sampler_assertion_fails);
  EXPECT_TRUE(report.job_fails);
  EXPECT_FALSE(report.first_hit.has_value());  // the job never gets to draw
}

TEST(PreflightTest, LivelockPoolNotDrawnWithinTheJobStillFailsTheProof) {
  Scenario scenario = testing::ScenarioFromText(kSmall);
  scenario.mutable_job()->set_iterations(1);
  const CheckReport report = RunPreflight(scenario, BuildDataset(scenario, "t"));
  EXPECT_FALSE(report.terminates);
  EXPECT_TRUE(report.job_fails);
  int hits = 0;
  for (const auto& pool : report.pools) hits += pool.first_hit.has_value();
  EXPECT_LE(hits, 2);  // one iteration, two slots
}

TEST(PreflightTest, StreamBreakStatisticsCountJumpsIntoAChunk) {
  Scenario scenario = testing::ScenarioFromText(kSmall);
  scenario.mutable_resample()->set_policy(Resample::global);
  const CheckReport report = RunPreflight(scenario, BuildDataset(scenario, "t"));
  // 7 frames without GT, each drawn once per epoch, each ends on a uniformly chosen frame with
  // GT: 9 such frames, 4 of which continue a chunk (prev_exists: indices 3, 5, 9, 11) and so
  // are fed memory from elsewhere; the other 5 start a chunk and reset it.
  EXPECT_DOUBLE_EQ(report.statistics.resample_visits_per_epoch, 7.0);
  EXPECT_DOUBLE_EQ(report.statistics.stream_breaks_per_epoch, 7.0 * 4.0 / 9.0);
  // Uniform over 16 frames of which 9 have GT: 16/9 loads after the first, per visit.
  EXPECT_NEAR(report.statistics.extra_loads_per_epoch, 7.0 * 16.0 / 9.0, 1e-9);
}

}  // namespace
}  // namespace petrsim

namespace petrsim {
namespace {

TEST(PreflightTest, BoundedIsReplayedExactlyAndAgreesWithSample) {
  // One partly empty chunk (a whole scene, seq_split_num 1): with attempts_max 2 a getitem
  // gives up when its one redraw misses, which happens with probability 7/8.
  Scenario scenario = testing::ScenarioFromText(R"pb(
    dataset {
      subdatasets {
        explicit {
          scenes { gt_counts: [ 1, 0, 0, 0, 0, 0, 0, 0 ] }
          scenes { gt_counts: [ 1, 1, 1, 1 ] }
        }
      }
    }
    grouping { seq_split_num: 1 }
    resample { policy: bounded attempts_max: 2 }
    job { world_size: 2 samples_per_gpu: 1 iterations: 50 }
  )pb");
  const Dataset dataset = BuildDataset(scenario, "t");
  const CheckReport report = RunPreflight(scenario, dataset);
  EXPECT_TRUE(report.terminates);  // bounded always ends
  EXPECT_TRUE(report.pools.empty());
  ASSERT_TRUE(report.first_bounded_error.has_value());
  EXPECT_TRUE(report.job_fails);
  EXPECT_GT(report.statistics.bounded_errors_per_epoch, 0.0);
  std::optional<SampleRow> first;
  GenerateSampleStream(scenario, dataset, {}, [&](const SampleRow& row) {
    if (row.status != SampleStatus::kError) return;
    if (!first || std::tie(row.iteration, row.rank) < std::tie(first->iteration, first->rank)) {
      first = row;
    }
  });
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(report.first_bounded_error->iteration, first->iteration);
  EXPECT_EQ(report.first_bounded_error->rank, first->rank);
  EXPECT_EQ(report.first_bounded_error->index, first->index);
}

TEST(PreflightTest, EmptyDataLoaderIsASamplerFailure) {
  Scenario scenario = testing::ScenarioFromText(R"pb(
    dataset { subdatasets { explicit { scenes { gt_counts: [ 1, 1, 1 ] } } } }
    grouping { seq_mode: false }
    sampler { kind: distributed drop_last: true }
    job { world_size: 8 samples_per_gpu: 1 }
  )pb");
  const CheckReport report = RunPreflight(scenario, BuildDataset(scenario, "t"));
  EXPECT_NE(report.sampler_failure.find("DataLoader would be empty"), std::string::npos) << report.sampler_failure;
  EXPECT_TRUE(report.job_fails);
}

TEST(PreflightTest, UnevenBatchesFaultMakesRanksDiffer) {
  Scenario scenario = testing::ScenarioFromText(R"pb(
    dataset { subdatasets { explicit { scenes { gt_counts: [ 1, 1, 1, 1, 1, 1, 1, 1 ] } } } }
    sampler { kind: distributed }
    job { world_size: 2 samples_per_gpu: 2 }
    faults { uneven_batches { rank: 1 batches_fewer: 1 } }
  )pb");
  const CheckReport report = RunPreflight(scenario, BuildDataset(scenario, "t"));
  EXPECT_EQ(report.batches_per_epoch_by_rank, (std::vector<uint64_t>{2, 1}));
  EXPECT_FALSE(report.batches_equal);
  EXPECT_TRUE(report.job_fails);
}

}  // namespace
}  // namespace petrsim
