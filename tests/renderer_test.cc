// The real backend's renderer (real/renderer.h): deterministic, boxes visible where the camera
// geometry puts them, nearer boxes in front, objects moving consistently between frames.
#include "real/renderer.h"

#include <gtest/gtest.h>

#include <cmath>

namespace petrsim::real {
namespace {

constexpr int kWidth = 64, kHeight = 40;

std::array<float, 3> Pixel(const std::vector<float>& pixels, int camera, int row, int col) {
  const size_t plane = static_cast<size_t>(kWidth * kHeight);
  const size_t base = static_cast<size_t>(camera) * 3 * plane + static_cast<size_t>(row * kWidth + col);
  return {pixels[base], pixels[base + plane], pixels[base + 2 * plane]};
}

// The colour of a class after shading: the same hue (ratios between channels).
bool SameHue(const std::array<float, 3>& pixel, const std::array<float, 3>& colour) {
  const float scale = std::max({pixel[0], pixel[1], pixel[2]}) / std::max({colour[0], colour[1], colour[2]});
  for (int i = 0; i < 3; ++i) {
    if (std::abs(pixel[i] - colour[i] * scale) > 1e-4) return false;
  }
  return scale > 0.2f;
}

TEST(Renderer, ABoxAheadIsSeenByTheFrontCameraOnly) {
  const auto rig = SurroundRig(kWidth, kHeight);
  RenderBox car;
  car.x = 15;
  car.w = 1.9;
  car.l = 4.6;
  car.h = 1.7;
  car.z = 0.85;
  car.cls = 0;
  const auto pixels = Render(rig, {car});
  ASSERT_EQ(pixels.size(), 6u * 3 * kWidth * kHeight);
  // Where the box's centre projects on the front camera, its class colour.
  const auto [u, v, d] = Project(rig[0].Lidar2Img(), {car.x, car.y, car.z});
  ASSERT_GT(d, 0);
  EXPECT_TRUE(SameHue(Pixel(pixels, 0, static_cast<int>(v), static_cast<int>(u)), ClassColour(0)));
  // The back camera shows only background there: nothing of class 0's hue anywhere.
  for (int row = 0; row < kHeight; ++row) {
    for (int col = 0; col < kWidth; ++col) EXPECT_FALSE(SameHue(Pixel(pixels, 3, row, col), ClassColour(0)));
  }
}

TEST(Renderer, TheNearerBoxIsInFront) {
  const auto rig = SurroundRig(kWidth, kHeight);
  RenderBox far_bus{30, 0, 1.75, 2.9, 11.0, 3.5, 0, 3};
  RenderBox near_cone{8, 0, 0.55, 0.4, 0.4, 1.1, 0, 9};
  const auto [u, v, d] = Project(rig[0].Lidar2Img(), {near_cone.x, near_cone.y, near_cone.z});
  for (const auto& order : {std::vector<RenderBox>{far_bus, near_cone}, std::vector<RenderBox>{near_cone, far_bus}}) {
    const auto pixels = Render(rig, order);
    EXPECT_TRUE(SameHue(Pixel(pixels, 0, static_cast<int>(v), static_cast<int>(u)), ClassColour(9)));
  }
}

TEST(Renderer, DeterministicAndConsistentOverFrames) {
  const auto a = SceneFrame(42, 7, 5);
  const auto b = SceneFrame(42, 7, 5);
  ASSERT_EQ(a.boxes.size(), 5u);
  const auto rig = SurroundRig(kWidth, kHeight);
  EXPECT_EQ(Render(rig, a.boxes), Render(rig, b.boxes));
  // Object i is the same object in every frame: its world position moves by its velocity, so
  // from frame 7 to frame 8 it moves at most 3*sqrt(2) m/s * 0.5 s in the world.
  const auto next = SceneFrame(42, 8, 5);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(a.boxes[i].cls, next.boxes[i].cls);
    const auto world_a = a.ego2global * std::array<double, 4>{a.boxes[i].x, a.boxes[i].y, 0, 1};
    const auto world_b = next.ego2global * std::array<double, 4>{next.boxes[i].x, next.boxes[i].y, 0, 1};
    EXPECT_LE(std::hypot(world_b[0] - world_a[0], world_b[1] - world_a[1]), 3 * std::sqrt(2.0) * 0.5 + 1e-9);
  }
  // A frame with fewer boxes holds the first objects of the scene, unchanged.
  const auto fewer = SceneFrame(42, 7, 2);
  EXPECT_DOUBLE_EQ(fewer.boxes[1].x, a.boxes[1].x);
  // Given classes are kept; another scene is another picture.
  EXPECT_EQ(SceneFrame(42, 7, 3, {8, 8, 8}).boxes[2].cls, 8u);
  EXPECT_NE(Render(rig, SceneFrame(43, 7, 5).boxes), Render(rig, a.boxes));
}

TEST(Renderer, MostObjectsOfAFrameAreVisibleSomewhere) {
  const auto rig = SurroundRig(kWidth, kHeight);
  int visible = 0, total = 0;
  for (uint64_t scene = 0; scene < 20; ++scene) {
    const auto frame = SceneFrame(scene, 3, 8);
    for (const RenderBox& box : frame.boxes) {
      ++total;
      bool seen = false;
      for (const Camera& camera : rig) {
        const auto [u, v, d] = Project(camera.Lidar2Img(), {box.x, box.y, box.z});
        seen |= d > 0.5 && u >= 0 && u < kWidth && v >= 0 && v < kHeight;
      }
      visible += seen;
    }
  }
  EXPECT_GT(visible, total * 9 / 10);
}

}  // namespace
}  // namespace petrsim::real
