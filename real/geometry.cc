// Camera and ego-motion geometry; see geometry.h.
#include "real/geometry.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <stdexcept>
#include <utility>

namespace petrsim::real {

Mat4 Mat4::Identity() {
  Mat4 out;
  for (int i = 0; i < 4; ++i) out(i, i) = 1;
  return out;
}

Mat4 operator*(const Mat4& a, const Mat4& b) {
  Mat4 out;
  for (int r = 0; r < 4; ++r) {
    for (int c = 0; c < 4; ++c) {
      double sum = 0;
      for (int k = 0; k < 4; ++k) sum += a(r, k) * b(k, c);
      out(r, c) = sum;
    }
  }
  return out;
}

std::array<double, 4> operator*(const Mat4& a, const std::array<double, 4>& v) {
  std::array<double, 4> out{};
  for (int r = 0; r < 4; ++r) {
    for (int k = 0; k < 4; ++k) out[static_cast<size_t>(r)] += a(r, k) * v[static_cast<size_t>(k)];
  }
  return out;
}

Mat4 Inverse(const Mat4& a) {
  Mat4 left = a, right = Mat4::Identity();
  double largest = 0;
  for (const double x : a.m) largest = std::max(largest, std::abs(x));
  for (int col = 0; col < 4; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 4; ++r) {
      if (std::abs(left(r, col)) > std::abs(left(pivot, col))) pivot = r;
    }
    if (std::abs(left(pivot, col)) <= 1e-12 * std::max(largest, 1e-300)) {
      throw std::invalid_argument("Inverse: the matrix is singular");
    }
    for (int c = 0; c < 4; ++c) {
      std::swap(left(col, c), left(pivot, c));
      std::swap(right(col, c), right(pivot, c));
    }
    const double scale = 1.0 / left(col, col);
    for (int c = 0; c < 4; ++c) {
      left(col, c) *= scale;
      right(col, c) *= scale;
    }
    for (int r = 0; r < 4; ++r) {
      if (r == col) continue;
      const double factor = left(r, col);
      for (int c = 0; c < 4; ++c) {
        left(r, c) -= factor * left(col, c);
        right(r, c) -= factor * right(col, c);
      }
    }
  }
  return right;
}

Mat4 RigidZ(double yaw, double x, double y, double z) {
  Mat4 out = Mat4::Identity();
  out(0, 0) = std::cos(yaw);
  out(0, 1) = -std::sin(yaw);
  out(1, 0) = std::sin(yaw);
  out(1, 1) = std::cos(yaw);
  out(0, 3) = x;
  out(1, 3) = y;
  out(2, 3) = z;
  return out;
}

Mat4 Camera::Lidar2Img() const {
  Mat4 intrinsics = Mat4::Identity();
  intrinsics(0, 0) = fx;
  intrinsics(0, 2) = cx;
  intrinsics(1, 1) = fy;
  intrinsics(1, 2) = cy;
  return intrinsics * Inverse(sensor2lidar);
}

std::vector<Camera> SurroundRig(int width, int height) {
  const double degree = std::numbers::pi / 180;
  const double f = (width / 2.0) / std::tan(35 * degree);  // 70 degrees across
  std::vector<Camera> rig;
  for (const double yaw_degrees : {0.0, -55.0, -110.0, 180.0, 110.0, 55.0}) {
    // Camera axes in the lidar frame (x forward, y left, z up): the camera looks along its z,
    // which is the lidar direction (cos yaw, sin yaw, 0); its x (right) is (sin yaw, -cos yaw, 0)
    // and its y (down) is (0, 0, -1).
    const double yaw = yaw_degrees * degree;
    Camera camera;
    Mat4& m = camera.sensor2lidar;
    m = Mat4::Identity();
    m(0, 0) = std::sin(yaw);
    m(1, 0) = -std::cos(yaw);
    m(2, 0) = 0;
    m(0, 1) = 0;
    m(1, 1) = 0;
    m(2, 1) = -1;
    m(0, 2) = std::cos(yaw);
    m(1, 2) = std::sin(yaw);
    m(2, 2) = 0;
    m(2, 3) = 1.5;
    camera.fx = camera.fy = f;
    camera.cx = width / 2.0;
    camera.cy = height / 2.0;
    camera.width = width;
    camera.height = height;
    rig.push_back(camera);
  }
  return rig;
}

std::array<double, 3> Project(const Mat4& lidar2img, const std::array<double, 3>& point) {
  const auto p = lidar2img * std::array<double, 4>{point[0], point[1], point[2], 1};
  const double d = p[2];
  if (d <= 0) return {0, 0, d};
  return {p[0] / d, p[1] / d, d};
}

std::array<double, 3> Unproject(const Mat4& img2lidar, double u, double v, double depth) {
  const auto p = img2lidar * std::array<double, 4>{u * depth, v * depth, depth, 1};
  return {p[0], p[1], p[2]};
}

std::vector<double> LidDepthBins(int n, double start, double max) {
  if (n < 1 || !(max > start)) throw std::invalid_argument("LidDepthBins: need n >= 1 and max > start");
  std::vector<double> bins(static_cast<size_t>(n));
  const double bin = (max - start) / (static_cast<double>(n) * (n + 1));
  for (int i = 0; i < n; ++i) bins[static_cast<size_t>(i)] = start + bin * i * (i + 1);
  return bins;
}

Mat4 EgoMotion(const Mat4& ego2global_before, const Mat4& ego2global_now) {
  return Inverse(ego2global_now) * ego2global_before;
}

}  // namespace petrsim::real
