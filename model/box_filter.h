// mmdet3d's three box filters (reference section 2): the valid flag (lidar + radar points > 0
// with use_valid_flag, else lidar points > 0), the class list (ObjectNameFilter) and
// ObjectRangeFilter on the BEV centre (strict inequalities, as LiDARInstance3DBoxes.in_range_bev).
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
  bool Keeps(bool target_class, double x, double y, uint32_t num_lidar_pts,
             uint32_t num_radar_pts) const {
    const bool valid =
        use_valid_flag_ ? (num_lidar_pts + uint64_t{num_radar_pts}) > 0 : num_lidar_pts > 0;
    // Bitwise & rather than &&: one compare chain without branches (boxes come in random order).
    return valid & target_class & (x > range_min_) & (y > range_min_) & (x < range_max_) &
           (y < range_max_);
  }

 private:
  std::vector<std::string> classes_;
  bool use_valid_flag_;
  double range_min_;
  double range_max_;
};

}  // namespace petrsim
