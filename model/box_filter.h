// mmdet3d's three box filters (reference section 2): the valid flag (lidar + radar points > 0
// with use_valid_flag, else lidar points > 0), the class list (ObjectNameFilter) and
// ObjectRangeFilter on the BEV centre (strict inequalities in float32, as
// LiDARInstance3DBoxes.in_range_bev on float32 tensors).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/scenario.pb.h"

namespace petrsim {

class BoxFilter {
 public:
  explicit BoxFilter(const Filters& filters);

  bool IsTargetClass(const std::string& name) const;

  // Whether a box survives all three filters; `target_class` is IsTargetClass(its name).
  bool Keeps(bool target_class, double x, double y, uint32_t num_lidar_pts, uint32_t num_radar_pts) const {
    const bool valid = use_valid_flag_ ? (num_lidar_pts + uint64_t{num_radar_pts}) > 0 : num_lidar_pts > 0;
    // mmdet3d compares float32 box centres with a float32 range, so we round both the same way.
    // Bitwise & rather than &&: one compare chain without branches (boxes come in random order).
    const auto fx = static_cast<float>(x);
    const auto fy = static_cast<float>(y);
    return valid & target_class & (fx > range_min_) & (fy > range_min_) & (fx < range_max_) & (fy < range_max_);
  }

 private:
  std::vector<std::string> classes_;
  bool use_valid_flag_;
  float range_min_;  // float32, like mmdet3d's pcd_range
  float range_max_;
};

}  // namespace petrsim
