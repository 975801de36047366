// mmdet3d's three box filters (docs/reference/streampetr.md, section 2): the valid flag (lidar + radar points > 0
// with use_valid_flag, else lidar points > 0), the class list (ObjectNameFilter) and
// ObjectRangeFilter on the BEV centre (strict inequalities in float32, as
// LiDARInstance3DBoxes.in_range_bev on float32 tensors).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "proto/scenario.pb.h"

namespace petrsim {

class BoxFilter {
 public:
  explicit BoxFilter(const Filters& filters);

  // What the filters allow a class: kDropped for a class whose boxes are all dropped, else the
  // largest BEV distance a box of it may have (CircleObjectRangeFilter's, in float32; +inf when the
  // scenario has no such filter).
  static constexpr float kDropped = -1.0f;
  float ClassLimit(const std::string& name) const;

  // Whether a box survives every filter; `class_limit` is ClassLimit(its class name).
  bool Keeps(float class_limit, double x, double y, uint32_t num_lidar_pts, uint32_t num_radar_pts) const {
    const bool valid = use_valid_flag_ ? (num_lidar_pts + uint64_t{num_radar_pts}) > 0 : num_lidar_pts > 0;
    // mmdet3d compares float32 box centres with a float32 range, so we round both the same way.
    // Bitwise & rather than &&: one compare chain without branches (boxes come in random order).
    const auto fx = static_cast<float>(x);
    const auto fy = static_cast<float>(y);
    const bool kept =
        valid & (class_limit >= 0.0f) & (fx > range_min_) & (fy > range_min_) & (fx < range_max_) & (fy < range_max_);
    if (!has_circle_ || !kept) return kept;
    // numpy: sqrt(sum(center[:, :2] ** 2)) on float32, compared with the threshold as float32.
    return std::sqrt(fx * fx + fy * fy) <= class_limit;
  }

 private:
  std::vector<std::string> classes_;
  std::vector<std::pair<std::string, float>> circle_;  // CircleObjectRangeFilter's limit per class
  bool has_circle_ = false;
  bool use_valid_flag_;
  float range_min_;  // float32, like mmdet3d's pcd_range
  float range_max_;
};

}  // namespace petrsim
