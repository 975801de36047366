// Scene chunking as mmdet3d's _set_sequence_group_flag.
#include "data/sequence_groups.h"

#include <gtest/gtest.h>

namespace petrsim {
namespace {

using Lengths = std::vector<uint32_t>;

TEST(SceneChunkLengthsTest, ReferenceExamples) {
  // Reference section 3: 40 -> 20+20, 41 -> 21+20, 39 -> 20+19.
  EXPECT_EQ(SceneChunkLengths(40, 2), (Lengths{20, 20}));
  EXPECT_EQ(SceneChunkLengths(41, 2), (Lengths{21, 20}));
  EXPECT_EQ(SceneChunkLengths(39, 2), (Lengths{20, 19}));
}

TEST(SceneChunkLengthsTest, SplitOneIsTheWholeScene) { EXPECT_EQ(SceneChunkLengths(7, 1), (Lengths{7})); }

TEST(SceneChunkLengthsTest, ShortScenesYieldFewerChunksThanAsked) {
  // range(0, n, ceil(n/s)) + [n]: mmdet3d's assertion then rejects these scenes.
  EXPECT_EQ(SceneChunkLengths(1, 2), (Lengths{1}));
  EXPECT_EQ(SceneChunkLengths(5, 4), (Lengths{2, 2, 1}));
  EXPECT_EQ(SceneChunkLengths(3, 2), (Lengths{2, 1}));
}

TEST(SceneChunkLengthsTest, LengthsSumToTheScene) {
  for (uint32_t n = 1; n < 200; ++n) {
    for (uint32_t s = 1; s <= 8; ++s) {
      uint32_t total = 0;
      for (const uint32_t length : SceneChunkLengths(n, s)) total += length;
      EXPECT_EQ(total, n) << n << " " << s;
    }
  }
}

}  // namespace
}  // namespace petrsim
