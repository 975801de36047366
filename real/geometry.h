// Camera and ego-motion geometry of the real backend's StreamPETR (docs/reference/streampetr.md, section 11), in
// plain C++ (no LibTorch), so the parts that are easy to get subtly wrong are tested on their
// own: the surround-camera rig and its lidar2img matrices, the PETR frustum points
// [u*d, v*d, d, 1] through inverse(lidar2img), the linear-increasing depth bins, and the
// ego-motion transform that carries the streaming memory from one frame to the next.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace petrsim::real {

// A 4x4 matrix, row-major.
struct Mat4 {
  std::array<double, 16> m{};
  static Mat4 Identity();
  double operator()(int row, int col) const { return m[static_cast<std::size_t>(row * 4 + col)]; }
  double& operator()(int row, int col) { return m[static_cast<std::size_t>(row * 4 + col)]; }
};

Mat4 operator*(const Mat4& a, const Mat4& b);
std::array<double, 4> operator*(const Mat4& a, const std::array<double, 4>& v);
// The inverse by Gauss-Jordan elimination with partial pivoting; std::invalid_argument if the
// matrix is singular (a pivot below 1e-12 of the largest entry).
Mat4 Inverse(const Mat4& a);
// A rigid transform: rotation about z by `yaw` (radians), then translation.
Mat4 RigidZ(double yaw, double x, double y, double z);

struct Camera {
  Mat4 sensor2lidar;  // camera frame (x right, y down, z forward) -> lidar frame
  double fx = 0, fy = 0, cx = 0, cy = 0;
  int width = 0, height = 0;
  // lidar frame -> image: [u*d, v*d, d, 1] = lidar2img * [x, y, z, 1].
  Mat4 Lidar2Img() const;
};

// Six surround cameras like nuScenes' (front, front-right, back-right, back, back-left,
// front-left: yaws 0, -55, -110, 180, 110, 55 degrees), 1.5 m above the lidar origin, each with
// a horizontal field of view of 70 degrees on a width x height image.
std::vector<Camera> SurroundRig(int width, int height);

// (u, v, depth) of a lidar-frame point on a camera; depth <= 0: behind it.
std::array<double, 3> Project(const Mat4& lidar2img, const std::array<double, 3>& point);
// PETR's frustum point: inverse(lidar2img) * [u*d, v*d, d, 1], back in the lidar frame.
std::array<double, 3> Unproject(const Mat4& img2lidar, double u, double v, double depth);

// PETR's linear-increasing depth bins: d_i = start + (max - start) * i (i + 1) / (n (n + 1)),
// i = 0 .. n-1.
std::vector<double> LidDepthBins(int n, double start, double max);

// The transform that carries a point from the previous frame's ego frame to the current one:
// inverse(ego2global_now) * ego2global_before. The memory's reference points go through it
// before each frame (the memory is cleared instead when prev_exists is false).
Mat4 EgoMotion(const Mat4& ego2global_before, const Mat4& ego2global_now);

}  // namespace petrsim::real
