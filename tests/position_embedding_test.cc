// PETR's frustum coordinates and the motion-aware layer norm (real/position_embedding.h): the
// tensor computation equals the double-precision unprojection of real/geometry.h pixel by
// pixel; the inverse sigmoid inverts the sigmoid; MLN starts as a plain layer norm and follows
// the motion once its weights move.
#include "real/position_embedding.h"

#include <gtest/gtest.h>

#include "real/geometry.h"

namespace petrsim::real {
namespace {

TEST(PositionEmbedding, FrustumCoordsEqualTheUnprojectionOfEveryPixel) {
  const auto rig = SurroundRig(64, 32);
  std::vector<double> flat;
  std::vector<Mat4> inverses;
  for (const Camera& camera : rig) {
    inverses.push_back(Inverse(camera.Lidar2Img()));
    flat.insert(flat.end(), inverses.back().m.begin(), inverses.back().m.end());
  }
  const auto img2lidar = torch::tensor(flat, torch::kFloat64).view({6, 4, 4});
  const auto bins = LidDepthBins(8, 1, 61.2);
  const std::array<double, 6> range = {-61.2, -61.2, -10, 61.2, 61.2, 10};
  const int64_t height = 2, width = 4;  // a stride-16 map of the 64 x 32 image
  const auto coords = FrustumCoords(img2lidar, height, width, 16, bins, range);
  ASSERT_EQ(coords.sizes(), torch::IntArrayRef({6, height, width, 8, 3}));
  for (int n = 0; n < 6; ++n) {
    for (int row = 0; row < height; ++row) {
      for (int col = 0; col < width; ++col) {
        for (int k = 0; k < 8; ++k) {
          const auto p = Unproject(inverses[static_cast<size_t>(n)], (col + 0.5) * 16, (row + 0.5) * 16,
                                   bins[static_cast<size_t>(k)]);
          for (int a = 0; a < 3; ++a) {
            const double expected = (p[static_cast<size_t>(a)] - range[static_cast<size_t>(a)]) /
                                    (range[static_cast<size_t>(a + 3)] - range[static_cast<size_t>(a)]);
            EXPECT_NEAR(coords[n][row][col][k][a].item<double>(), expected, 1e-9);
          }
        }
      }
    }
  }
}

TEST(PositionEmbedding, InverseSigmoidInvertsTheSigmoidAndClamps) {
  const auto x = torch::linspace(-6, 6, 25, torch::kFloat64);
  EXPECT_TRUE(torch::allclose(InverseSigmoid(torch::sigmoid(x)), x, 1e-6, 1e-6));
  const auto edges = InverseSigmoid(torch::tensor({-1.0, 0.0, 1.0, 2.0}, torch::kFloat64));
  EXPECT_TRUE(torch::isfinite(edges).all().item<bool>());
  EXPECT_NEAR(edges[1].item<double>(), std::log(1e-5), 1e-9);
}

TEST(PositionEmbedding, MotionLayerNormStartsAsALayerNormAndFollowsTheMotion) {
  torch::manual_seed(0);
  MotionLayerNorm mln(8, 5);
  const auto x = torch::randn({3, 8});
  const auto motion = torch::randn({3, 5});
  const auto plain = torch::layer_norm(x, {8});
  EXPECT_TRUE(torch::allclose(mln(x, motion), plain, 1e-6, 1e-6));
  {
    torch::NoGradGuard no_grad;
    mln->beta->weight.fill_(0.1);
  }
  const auto moved = mln(x, motion);
  EXPECT_TRUE(torch::allclose(moved - plain, (motion.sum(1, true) * 0.1).expand({3, 8}), 1e-5, 1e-5));
}

}  // namespace
}  // namespace petrsim::real
