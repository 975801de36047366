// The real backend's geometry (real/geometry.h): the frustum unprojection round trip, the rig,
// the depth bins and the memory's ego-motion transform (two steps equal the composed motion).
#include "real/geometry.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace petrsim::real {
namespace {

void ExpectNear(const std::array<double, 3>& a, const std::array<double, 3>& b, double tolerance) {
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(a[i], b[i], tolerance) << "component " << i;
}

TEST(Geometry, InverseTimesTheMatrixIsTheIdentity) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> value(-3, 3);
  for (int trial = 0; trial < 200; ++trial) {
    Mat4 a;
    for (double& x : a.m) x = value(rng);
    const Mat4 product = a * Inverse(a);
    for (int r = 0; r < 4; ++r) {
      for (int c = 0; c < 4; ++c) EXPECT_NEAR(product(r, c), r == c ? 1.0 : 0.0, 1e-8);
    }
  }
  Mat4 singular = Mat4::Identity();
  singular(3, 3) = 0;
  EXPECT_THROW(Inverse(singular), std::invalid_argument);
}

// A 3D point projected with lidar2img and unprojected at its depth comes back, on every camera.
TEST(Geometry, FrustumUnprojectionRoundTrip) {
  const auto rig = SurroundRig(64, 40);
  ASSERT_EQ(rig.size(), 6u);
  std::mt19937_64 rng(2);
  std::uniform_real_distribution<double> coordinate(-50, 50), height(-2, 3);
  int seen = 0;
  for (int trial = 0; trial < 5000; ++trial) {
    const std::array<double, 3> point{coordinate(rng), coordinate(rng), height(rng)};
    for (const Camera& camera : rig) {
      const Mat4 lidar2img = camera.Lidar2Img();
      const auto [u, v, d] = Project(lidar2img, point);
      if (d <= 0.1) continue;
      ++seen;
      ExpectNear(Unproject(Inverse(lidar2img), u, v, d), point, 1e-6);
    }
  }
  EXPECT_GT(seen, 5000);
}

// The front camera sees a point straight ahead at the image centre, 1.5 m above it; the back
// camera sees a point behind; every direction around the car is in some camera's image.
TEST(Geometry, TheRigLooksAllAround) {
  const auto rig = SurroundRig(64, 40);
  const auto [u, v, d] = Project(rig[0].Lidar2Img(), {10, 0, 1.5});
  EXPECT_NEAR(u, 32, 1e-9);
  EXPECT_NEAR(v, 20, 1e-9);
  EXPECT_NEAR(d, 10, 1e-9);
  EXPECT_LT(Project(rig[0].Lidar2Img(), {-10, 0, 1.5})[2], 0);
  EXPECT_GT(Project(rig[3].Lidar2Img(), {-10, 0, 1.5})[2], 0);
  for (int degree = 0; degree < 360; degree += 5) {
    const double a = degree * std::acos(-1.0) / 180;
    const std::array<double, 3> point{20 * std::cos(a), 20 * std::sin(a), 1.5};
    bool in_view = false;
    for (const Camera& camera : rig) {
      const auto [pu, pv, pd] = Project(camera.Lidar2Img(), point);
      in_view |= pd > 0 && pu >= 0 && pu < camera.width && pv >= 0 && pv < camera.height;
    }
    EXPECT_TRUE(in_view) << degree << " degrees";
  }
}

TEST(Geometry, LinearIncreasingDepthBins) {
  const auto bins = LidDepthBins(64, 1, 61.2);
  ASSERT_EQ(bins.size(), 64u);
  EXPECT_DOUBLE_EQ(bins[0], 1.0);
  for (size_t i = 1; i < bins.size(); ++i) {
    EXPECT_GT(bins[i], bins[i - 1]);
    if (i > 1) {
      EXPECT_GT(bins[i] - bins[i - 1], bins[i - 1] - bins[i - 2]);  // the spacing grows
    }
  }
  EXPECT_NEAR(bins.back(), 1 + 60.2 * 63 * 64 / (64.0 * 65), 1e-9);
  EXPECT_THROW(LidDepthBins(0, 1, 2), std::invalid_argument);
}

// Carrying memory through two frames equals carrying it through the composed motion, and a
// point fixed in the world keeps its world position.
TEST(Geometry, EgoMotionComposes) {
  const Mat4 pose0 = RigidZ(0.3, 100, 50, 0);
  const Mat4 pose1 = RigidZ(0.35, 104, 52, 0.1);
  const Mat4 pose2 = RigidZ(0.45, 108, 55, 0.2);
  const Mat4 two_steps = EgoMotion(pose1, pose2) * EgoMotion(pose0, pose1);
  const Mat4 composed = EgoMotion(pose0, pose2);
  for (int i = 0; i < 16; ++i)
    EXPECT_NEAR(two_steps.m[static_cast<size_t>(i)], composed.m[static_cast<size_t>(i)], 1e-9);
  const std::array<double, 4> in_frame0{5, -2, 0.5, 1};
  const auto world = pose0 * in_frame0;
  const auto in_frame2 = composed * in_frame0;
  const auto world_again = pose2 * in_frame2;
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(world[i], world_again[i], 1e-9);
  // No motion: the identity.
  const Mat4 still = EgoMotion(pose1, pose1);
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) EXPECT_NEAR(still(r, c), r == c ? 1.0 : 0.0, 1e-12);
  }
}

}  // namespace
}  // namespace petrsim::real
