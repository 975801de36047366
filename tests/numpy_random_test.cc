// numpy legacy RandomState parity with real numpy (golden vectors).
#include "model/numpy_random.h"

#include <gtest/gtest.h>

#include "tests/golden_vectors.h"

namespace petrsim {
namespace {

TEST(NumpyRandomStateTest, ChoiceMatchesRealNumpyAcrossPoolSizes) {
  const auto& cases = testing::RngGolden().at("numpy_choice");
  ASSERT_GE(cases.size(), 6u);
  for (const auto& c : cases) {
    const uint32_t seed = c.at("seed");
    SCOPED_TRACE("seed " + std::to_string(seed));
    NumpyRandomState rng(seed);
    const auto& sizes = c.at("pool_sizes");
    const auto& draws = c.at("draws");
    ASSERT_EQ(sizes.size(), draws.size());
    for (size_t i = 0; i < sizes.size(); ++i) {
      EXPECT_EQ(rng.Choice(sizes[i].get<uint32_t>()), draws[i].get<uint32_t>()) << "draw " << i << " pool " << sizes[i];
    }
  }
}

TEST(NumpyRandomStateTest, UniformDrawsConsumeTwoOutputsEach) {
  // pipeline_draws_per_attempt models np.random.uniform calls as two 32-bit draws each.
  for (const auto& c : testing::RngGolden().at("numpy_choice_with_uniform")) {
    NumpyRandomState rng(c.at("seed").get<uint32_t>());
    const uint32_t uniforms = c.at("uniforms_per_draw");
    const uint32_t pool = c.at("pool_size");
    for (const auto& expected : c.at("draws")) {
      rng.Discard(2 * uniforms);
      EXPECT_EQ(rng.Choice(pool), expected.get<uint32_t>());
    }
  }
}

TEST(NumpyRandomStateTest, RawOutputsAreMt19937) {
  for (const auto& c : testing::RngGolden().at("mt19937_first")) {
    NumpyRandomState rng(c.at("seed").get<uint32_t>());
    for (const auto& value : c.at("uint32")) EXPECT_EQ(rng.Next32(), value.get<uint32_t>());
  }
}

TEST(NumpyRandomStateTest, PoolOfOneConsumesNoDraw) {
  NumpyRandomState used(11), fresh(11);
  EXPECT_EQ(used.Choice(1), 0u);
  EXPECT_EQ(used.Next32(), fresh.Next32());
}

TEST(NumpyRandomStateTest, WorkerSeedFollowsWorkerInitFn) {
  // worker_init_fn: num_workers * rank + worker_id + seed.
  EXPECT_EQ(WorkerNumpySeed(4, 3, 2, 0), 14u);
  EXPECT_EQ(WorkerNumpySeed(4, 0, 0, 7), 7u);
}

}  // namespace
}  // namespace petrsim
