// The real backend's first collective: c10d ProcessGroupGloo over a TCPStore on loopback.
#include "real/gloo_comm_check.h"

#include <gtest/gtest.h>

namespace petrsim::real {
namespace {

TEST(GlooCommCheckTest, AllReduceSumsAcrossRealGlooRanks) {
  const std::vector<float> results = GlooAllReduceSum(/*world_size=*/3, /*port=*/0, 30000);
  ASSERT_EQ(results.size(), 3u);
  for (const float value : results) EXPECT_FLOAT_EQ(value, 1.0f + 2.0f + 3.0f);
}

TEST(GlooCommCheckTest, ReportsTheLibTorchVersion) {
  EXPECT_FALSE(LibTorchVersion().empty());
}

}  // namespace
}  // namespace petrsim::real
