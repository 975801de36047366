// torch.Generator + torch.randperm parity with real torch (golden vectors).
#include "data/torch_random.h"

#include <gtest/gtest.h>

#include <vector>

#include "tests/golden_vectors.h"

namespace petrsim {
namespace {

TEST(TorchRandpermTest, MatchesRealTorchForConsecutivePermutations) {
  const auto& cases = testing::RngGolden().at("torch_randperm");
  ASSERT_GE(cases.size(), 40u);
  for (const auto& c : cases) {
    const uint64_t seed = c.at("seed");
    const int64_t n = c.at("n");
    SCOPED_TRACE("seed " + std::to_string(seed) + " n " + std::to_string(n));
    TorchGenerator generator(seed);
    for (const auto& expected : c.at("perms")) {
      std::vector<int64_t> perm(n);
      TorchRandperm(generator, std::span<int64_t>(perm));
      EXPECT_EQ(perm, expected.get<std::vector<int64_t>>());
    }
  }
}

TEST(TorchRandpermTest, Int32OutputEqualsInt64Output) {
  TorchGenerator a(7), b(7);
  std::vector<int64_t> wide(1000);
  std::vector<int32_t> narrow(1000);
  TorchRandperm(a, std::span<int64_t>(wide));
  TorchRandperm(b, std::span<int32_t>(narrow));
  for (size_t i = 0; i < wide.size(); ++i) ASSERT_EQ(wide[i], narrow[i]);
}

TEST(TorchRandpermTest, SizeOneAndZeroConsumeNoDraw) {
  TorchGenerator used(3), fresh(3);
  std::vector<int64_t> one(1), none;
  TorchRandperm(used, std::span<int64_t>(one));
  TorchRandperm(used, std::span<int64_t>(none));
  EXPECT_EQ(one[0], 0);
  EXPECT_EQ(used.Random32(), fresh.Random32());
}

TEST(TorchGeneratorTest, MatchesReferenceMt19937Outputs) {
  // torch's CPU generator is MT19937 with the standard seeding: same first outputs.
  for (const auto& c : testing::RngGolden().at("mt19937_first")) {
    TorchGenerator generator(c.at("seed").get<uint64_t>());
    for (const auto& value : c.at("uint32")) EXPECT_EQ(generator.Random32(), value.get<uint32_t>());
  }
}

}  // namespace
}  // namespace petrsim
