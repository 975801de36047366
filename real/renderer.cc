// The deterministic renderer; see renderer.h.
#include "real/renderer.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>

namespace petrsim::real {
namespace {

// SplitMix64: a small, well-mixed deterministic stream.
struct Stream {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Uniform(double low, double high) { return low + (high - low) * static_cast<double>(Next() >> 11) * 0x1.0p-53; }
};

// Width, length, height per class (car, truck, construction vehicle, bus, trailer, barrier,
// motorcycle, bicycle, pedestrian, traffic cone), roughly nuScenes' means.
constexpr double kSizes[kRenderClasses][3] = {{1.9, 4.6, 1.7},  {2.5, 6.9, 2.8}, {2.8, 6.4, 3.2}, {2.9, 11.0, 3.5},
                                              {2.9, 12.3, 3.9}, {2.5, 0.5, 1.0}, {0.8, 2.1, 1.5}, {0.6, 1.7, 1.3},
                                              {0.7, 0.7, 1.8},  {0.4, 0.4, 1.1}};

}  // namespace

std::array<float, 3> ClassColour(uint32_t cls) {
  // Distinct hues around the colour wheel, full saturation.
  const double hue = 6.0 * (cls % kRenderClasses) / kRenderClasses;
  const double x = 1 - std::abs(std::fmod(hue, 2.0) - 1);
  std::array<double, 3> rgb{};
  switch (static_cast<int>(hue)) {
    case 0:
      rgb = {1, x, 0};
      break;
    case 1:
      rgb = {x, 1, 0};
      break;
    case 2:
      rgb = {0, 1, x};
      break;
    case 3:
      rgb = {0, x, 1};
      break;
    case 4:
      rgb = {x, 0, 1};
      break;
    default:
      rgb = {1, 0, x};
      break;
  }
  return {static_cast<float>(rgb[0]), static_cast<float>(rgb[1]), static_cast<float>(rgb[2])};
}

RenderedFrame SceneFrame(uint64_t scene_seed, uint32_t frame, uint32_t boxes, const std::vector<uint32_t>& classes) {
  Stream scene{scene_seed};
  // The ego: keyframes 0.5 s apart as in nuScenes; a speed of 0-12 m/s and a gentle turn.
  const double dt = 0.5;
  const double speed = scene.Uniform(0, 12);
  const double turn = scene.Uniform(-0.05, 0.05);  // rad per frame
  const double heading0 = scene.Uniform(-std::numbers::pi, std::numbers::pi);
  double x = 0, y = 0, heading = heading0;
  for (uint32_t f = 0; f < frame; ++f) {  // integrate the trajectory to this frame
    x += speed * dt * std::cos(heading);
    y += speed * dt * std::sin(heading);
    heading += turn;
  }
  RenderedFrame out;
  out.ego2global = RigidZ(heading, x, y, 0);
  const Mat4 global2ego = Inverse(out.ego2global);
  for (uint32_t i = 0; i < boxes; ++i) {
    Stream object{scene_seed ^ (0x5851f42d4c957f2dULL * (i + 1))};
    const uint32_t cls =
        i < classes.size() ? classes[i] % kRenderClasses : static_cast<uint32_t>(object.Next() % kRenderClasses);
    // Placed around the ego's start, within 40 m; moving slowly (parked ones stand still).
    const double angle = object.Uniform(-std::numbers::pi, std::numbers::pi);
    const double distance = object.Uniform(6, 40);
    const double moving = object.Uniform(0, 1) < 0.5 ? 1.0 : 0.0;
    const double vx = moving * object.Uniform(-3, 3), vy = moving * object.Uniform(-3, 3);
    const double yaw = object.Uniform(-std::numbers::pi, std::numbers::pi);
    const double t = dt * frame;
    const double gx = distance * std::cos(heading0 + angle) + vx * t;
    const double gy = distance * std::sin(heading0 + angle) + vy * t;
    const auto local = global2ego * std::array<double, 4>{gx, gy, 0, 1};
    RenderBox box;
    box.cls = cls;
    box.w = kSizes[cls][0];
    box.l = kSizes[cls][1];
    box.h = kSizes[cls][2];
    box.x = local[0];
    box.y = local[1];
    box.z = box.h / 2;
    box.yaw = yaw - heading;
    out.boxes.push_back(box);
  }
  return out;
}

std::vector<float> Render(const std::vector<Camera>& rig, const std::vector<RenderBox>& boxes) {
  if (rig.empty()) throw std::invalid_argument("Render: no camera");
  const int width = rig.front().width, height = rig.front().height;
  const size_t plane = static_cast<size_t>(width) * static_cast<size_t>(height);
  std::vector<float> pixels(rig.size() * 3 * plane);
  std::vector<double> depth(plane);
  for (size_t c = 0; c < rig.size(); ++c) {
    const Camera& camera = rig[c];
    if (camera.width != width || camera.height != height) throw std::invalid_argument("Render: cameras differ in size");
    float* image = pixels.data() + c * 3 * plane;
    // Background: sky above the horizon row, ground below, a vertical gradient.
    for (int row = 0; row < height; ++row) {
      const float t = static_cast<float>(row) / static_cast<float>(height);
      const std::array<float, 3> colour = row < height / 2 ? std::array<float, 3>{0.55f + 0.2f * t, 0.7f, 0.85f}
                                                           : std::array<float, 3>{0.35f * t, 0.3f * t, 0.25f * t};
      for (int col = 0; col < width; ++col) {
        for (int ch = 0; ch < 3; ++ch) image[ch * plane + static_cast<size_t>(row * width + col)] = colour[ch];
      }
    }
    std::fill(depth.begin(), depth.end(), std::numeric_limits<double>::infinity());
    const Mat4 lidar2img = camera.Lidar2Img();
    for (const RenderBox& box : boxes) {
      // The cuboid's corners; drawn when every corner is in front of the camera.
      double u_min = 1e300, u_max = -1e300, v_min = 1e300, v_max = -1e300, d_min = 1e300;
      bool in_front = true;
      for (int corner = 0; corner < 8 && in_front; ++corner) {
        const double dl = (corner & 1 ? 0.5 : -0.5) * box.l, dw = (corner & 2 ? 0.5 : -0.5) * box.w;
        const double dh = (corner & 4 ? 0.5 : -0.5) * box.h;
        const double px = box.x + dl * std::cos(box.yaw) - dw * std::sin(box.yaw);
        const double py = box.y + dl * std::sin(box.yaw) + dw * std::cos(box.yaw);
        const auto [u, v, d] = Project(lidar2img, {px, py, box.z + dh});
        if (d < 0.5) {
          in_front = false;
          break;
        }
        u_min = std::min(u_min, u);
        u_max = std::max(u_max, u);
        v_min = std::min(v_min, v);
        v_max = std::max(v_max, v);
        d_min = std::min(d_min, d);
      }
      if (!in_front) continue;
      const int c0 = std::max(0, static_cast<int>(std::floor(u_min)));
      const int c1 = std::min(width - 1, static_cast<int>(std::ceil(u_max)));
      const int r0 = std::max(0, static_cast<int>(std::floor(v_min)));
      const int r1 = std::min(height - 1, static_cast<int>(std::ceil(v_max)));
      if (c0 > c1 || r0 > r1) continue;  // outside the image
      const auto colour = ClassColour(box.cls);
      const float shade = static_cast<float>(std::clamp(1.2 - d_min / 60.0, 0.3, 1.0));  // farther is darker
      for (int row = r0; row <= r1; ++row) {
        for (int col = c0; col <= c1; ++col) {
          const size_t at = static_cast<size_t>(row * width + col);
          if (d_min >= depth[at]) continue;  // something nearer is already there
          depth[at] = d_min;
          for (int ch = 0; ch < 3; ++ch) image[ch * plane + at] = colour[ch] * shade;
        }
      }
    }
  }
  return pixels;
}

}  // namespace petrsim::real
