// Deterministic synthetic sub-datasets: scenes of random length whose frames carry random boxes
// (class, BEV position, point counts), with planted empty frames, half-scenes and scenes.
// Each scene's boxes come from their own random stream, so a backend can regenerate the boxes
// of one scene (e.g. to render it) without generating the others.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/random_streams.h"
#include "model/scenario.pb.h"

namespace petrsim {

struct SyntheticBox {
  double x = 0;
  double y = 0;
  uint32_t class_index = 0;  // into SyntheticSubDataset::class_names()
  uint32_t num_lidar_pts = 0;
  uint32_t num_radar_pts = 0;
};

// What a frame was planted as.
enum class FrameFate : uint8_t { kNormal, kNoBoxes, kNoPoints };

struct SyntheticScene {
  std::vector<FrameFate> fates;  // one per frame
  uint32_t frames() const { return static_cast<uint32_t>(fates.size()); }
};

class SyntheticSubDataset {
 public:
  // `scenario` must have passed validation; subdatasets(index) must be synthetic.
  SyntheticSubDataset(const Scenario& scenario, int subdataset_index);

  const std::vector<SyntheticScene>& scenes() const { return scenes_; }
  const std::vector<std::string>& class_names() const { return class_names_; }

  // Calls on_frame(frame_in_scene, std::span<const SyntheticBox>) for each frame of `scene`.
  template <typename OnFrame>
  void ForEachFrame(uint32_t scene, OnFrame&& on_frame) const;

 private:
  const SyntheticData& data_;
  uint64_t scenario_seed_;
  int subdataset_index_;
  std::vector<std::string> class_names_;
  std::vector<double> class_cumulative_weights_;
  std::vector<SyntheticScene> scenes_;
};

template <typename OnFrame>
void SyntheticSubDataset::ForEachFrame(uint32_t scene, OnFrame&& on_frame) const {
  Rng rng(DeriveStreamSeed(scenario_seed_, "synthetic.boxes", subdataset_index_, scene));
  const double range = data_.position_range_m();
  const double no_points = data_.no_points_fraction();
  const double radar_only = no_points + data_.radar_only_fraction();
  const double total_weight = class_cumulative_weights_.back();
  std::vector<SyntheticBox> boxes;
  const auto& fates = scenes_[scene].fates;
  for (uint32_t f = 0; f < fates.size(); ++f) {
    // Every frame draws the same way whatever its fate, so planting one frame never changes the
    // boxes of another.
    const uint32_t count = rng.Poisson(data_.boxes_per_frame_mean());
    boxes.resize(count);
    for (auto& box : boxes) {
      const double pick = rng.Uniform01() * total_weight;
      uint32_t c = 0;
      while (c + 1 < class_cumulative_weights_.size() && pick >= class_cumulative_weights_[c]) ++c;
      box.class_index = c;
      box.x = rng.Uniform(-range, range);
      box.y = rng.Uniform(-range, range);
      const double kind = rng.Uniform01();
      const uint32_t lidar = 1 + static_cast<uint32_t>(rng.Below(200));
      const uint32_t radar = 1 + static_cast<uint32_t>(rng.Below(5));
      if (kind < no_points || fates[f] == FrameFate::kNoPoints) {
        box.num_lidar_pts = 0;
        box.num_radar_pts = 0;
      } else if (kind < radar_only) {
        box.num_lidar_pts = 0;
        box.num_radar_pts = radar;
      } else {
        box.num_lidar_pts = lidar;
        box.num_radar_pts = radar - 1;
      }
    }
    if (fates[f] == FrameFate::kNoBoxes) boxes.clear();
    on_frame(f, std::span<const SyntheticBox>(boxes));
  }
}

}  // namespace petrsim
