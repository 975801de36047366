// The memory estimate that refuses runs beyond the machine (check/memory_estimate.h): the frames
// it counts, how it grows with ranks, workers and prefetch, sizes on the command line, and the
// refusal's message. bench/memory_estimate.sh compares it with measured peak RSS.
#include "check/memory_estimate.h"

#include <gtest/gtest.h>

#include "base/error.h"
#include "base/host_memory.h"
#include "tests/scenario_text.h"

namespace petrsim {
namespace {

using petrsim::testing::ScenarioFromText;

TEST(MemoryEstimate, CountsExplicitAndSyntheticFrames) {
  const Scenario scenario = ScenarioFromText(R"(
    dataset {
      subdatasets { name: "a" explicit { scenes { gt_counts: [1, 0, 2] } scenes { frames {} frames {} } } }
      subdatasets { name: "b" synthetic { scenes: 10 frames_per_scene_min: 39 frames_per_scene_max: 41 } }
    }
    job { world_size: 2 samples_per_gpu: 1 })");
  EXPECT_EQ(DatasetFramesMax(scenario), 3u + 2u + 10u * 41u);
}

TEST(MemoryEstimate, GrowsWithRanksWorkersAndPrefetch) {
  Scenario scenario = ScenarioFromText(R"(
    dataset { subdatasets { name: "a" explicit { scenes { gt_counts: [1, 1] } } } }
    job { world_size: 2 samples_per_gpu: 1 workers_per_gpu: 4 prefetch_factor: 2 })");
  const uint64_t two = EstimateRunMemory(scenario).bytes;
  scenario.mutable_job()->set_world_size(6);
  const uint64_t six = EstimateRunMemory(scenario).bytes;
  scenario.mutable_job()->set_world_size(4);
  const uint64_t ranks = EstimateRunMemory(scenario).bytes;
  EXPECT_GT(ranks, two);
  EXPECT_EQ(six - ranks, ranks - two);  // linear in the ranks
  scenario.mutable_job()->set_workers_per_gpu(8);
  EXPECT_GT(EstimateRunMemory(scenario).bytes, ranks);
  scenario.mutable_job()->set_prefetch_factor(4);
  EXPECT_GT(EstimateRunMemory(scenario).bytes, ranks);
  // The issue's case: 65,536 ranks with 256 workers each is tens of GiB, never "fits".
  scenario.mutable_job()->set_world_size(65536);
  scenario.mutable_job()->set_workers_per_gpu(256);
  scenario.mutable_job()->set_prefetch_factor(2);
  EXPECT_GT(EstimateRunMemory(scenario).bytes, uint64_t{64} << 30);
  // The check does not depend on the job's shape, only on the frames.
  EXPECT_EQ(EstimateCheckMemory(scenario).bytes, EstimateCheckMemory(ScenarioFromText(R"(
    dataset { subdatasets { name: "a" explicit { scenes { gt_counts: [1, 1] } } } }
    job { world_size: 1 samples_per_gpu: 1 })"))
                                                     .bytes);
}

TEST(MemoryEstimate, ParsesSizesAndRefusesWithTheEstimateAndTheLimit) {
  EXPECT_EQ(ParseByteSize("1234", "--memory-max"), 1234u);
  EXPECT_EQ(ParseByteSize("8G", "--memory-max"), uint64_t{8} << 30);
  EXPECT_EQ(ParseByteSize("512M", "--memory-max"), uint64_t{512} << 20);
  for (const char* bad : {"", "0", "-1", "5x", "8GB", "99999999999999999999", "20000000T"}) {
    EXPECT_THROW(ParseByteSize(bad, "--memory-max"), ScenarioError) << bad;
  }
  EXPECT_GT(DefaultMemoryMax(), 0u);
  MemoryEstimate estimate;
  estimate.bytes = uint64_t{3} << 30;
  estimate.breakdown = "what it is made of";
  EXPECT_NO_THROW(CheckMemory(estimate, uint64_t{3} << 30, "simulating it", "s.pbtxt"));
  try {
    CheckMemory(estimate, uint64_t{1} << 30, "simulating it", "s.pbtxt");
    FAIL() << "no refusal";
  } catch (const ScenarioError& error) {
    EXPECT_EQ(
        std::string(error.what())
            .find("s.pbtxt: simulating it needs about 3.0 GiB of memory (what it is made of), more than --memory-max "
                  "1.0 GiB"),
        0u)
        << error.what();
  }
}

}  // namespace
}  // namespace petrsim
