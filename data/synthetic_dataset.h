// Deterministic synthetic sub-datasets: scenes of random length whose frames carry random boxes
// (class, BEV position, point counts), with planted empty frames, half-scenes and scenes.
// Each scene's boxes come from their own random stream, so a backend can regenerate the boxes
// of one scene (e.g. to render it) without generating the others.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/random_streams.h"
#include "proto/scenario.pb.h"

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
  PoissonSampler box_count_;
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
    // boxes of another. Two 64-bit draws per box (this loop dominates building a nuScenes-sized
    // dataset): x and y take 32 bits each; the class 26 bits, the point kind 26 bits and the
    // point counts the last 12.
    const uint32_t count = box_count_.Sample(rng);
    boxes.resize(count);
    for (auto& box : boxes) {
      const uint64_t position = rng.Next();
      const uint64_t attributes = rng.Next();
      box.x = -range + 2.0 * range * static_cast<double>(position >> 32) * 0x1.0p-32;
      box.y = -range + 2.0 * range * static_cast<double>(position & 0xFFFFFFFFu) * 0x1.0p-32;
      // Branch-free on purpose: the draws are random, so branches here mispredict.
      const double pick = static_cast<double>(attributes >> 38) * 0x1.0p-26 * total_weight;
      uint32_t c = 0;
      for (size_t k = 0; k + 1 < class_cumulative_weights_.size(); ++k) {
        c += pick >= class_cumulative_weights_[k];
      }
      box.class_index = c;
      const double kind = static_cast<double>((attributes >> 12) & 0x3FFFFFFu) * 0x1.0p-26;
      const auto lidar = static_cast<uint32_t>(1 + (attributes & 0xFF) % 200);
      const auto radar = static_cast<uint32_t>(1 + ((attributes >> 8) & 0xF) % 5);
      const bool pointless = (kind < no_points) | (fates[f] == FrameFate::kNoPoints);
      const bool radar_only_box = !pointless & (kind < radar_only);
      box.num_lidar_pts = (pointless | radar_only_box) ? 0 : lidar;
      box.num_radar_pts = pointless ? 0 : (radar_only_box ? radar : radar - 1);
    }
    if (fates[f] == FrameFate::kNoBoxes) boxes.clear();
    on_frame(f, std::span<const SyntheticBox>(boxes));
  }
}

}  // namespace petrsim
