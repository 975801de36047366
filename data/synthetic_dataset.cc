// Synthetic scene planning; see synthetic_dataset.h.
#include "data/synthetic_dataset.h"

#include "base/assert.h"
#include "data/sequence_groups.h"
#include "scenario/scenario_defaults.h"

namespace petrsim {
namespace {

void PlantPart(SyntheticScene& scene, EmptyPlant::Part part, FrameFate fate) {
  const uint32_t n = scene.frames();
  const uint32_t first_half = (n + 1) / 2;  // like seq_split_num = 2: ceil(n / 2) frames first
  uint32_t begin = 0, end = n;
  if (part == EmptyPlant::first_half) end = first_half;
  if (part == EmptyPlant::second_half) begin = first_half;
  for (uint32_t f = begin; f < end; ++f) scene.fates[f] = fate;
}

}  // namespace

SyntheticSubDataset::SyntheticSubDataset(const Scenario& scenario, int subdataset_index)
    : data_(scenario.dataset().subdatasets(subdataset_index).synthetic()),
      scenario_seed_(scenario.seed()),
      subdataset_index_(subdataset_index),
      box_count_(data_.boxes_per_frame_mean()) {
  PETRSIM_ASSERT(scenario.dataset().subdatasets(subdataset_index).has_synthetic());
  if (data_.class_mix().empty()) {
    class_names_ = NuScenesClasses();
    for (size_t i = 0; i < class_names_.size(); ++i) {
      class_cumulative_weights_.push_back(static_cast<double>(i + 1));
    }
  } else {
    double total = 0;
    for (const auto& entry : data_.class_mix()) {
      class_names_.push_back(entry.name());
      total += entry.weight();
      class_cumulative_weights_.push_back(total);
    }
  }

  // Scene shapes first: a fixed number of draws per scene keeps scene s independent of the
  // fractions chosen.
  Rng shape(DeriveStreamSeed(scenario_seed_, "synthetic.scenes", subdataset_index));
  const uint32_t span = data_.frames_per_scene_max() - data_.frames_per_scene_min() + 1;
  struct Shape {
    uint32_t frames;
    bool empty_scene, empty_half, second_half;
  };
  std::vector<Shape> shapes(data_.scenes());
  uint64_t total = 0;
  for (auto& s : shapes) {
    s.frames = data_.frames_per_scene_min() + static_cast<uint32_t>(shape.Below(span));
    s.empty_scene = shape.Bernoulli(data_.empty_scene_fraction());
    s.empty_half = shape.Bernoulli(data_.empty_half_scene_fraction());
    s.second_half = shape.Below(2) == 1;
    total += s.frames;
  }
  if (data_.has_frames_total()) {
    // Validation guarantees the target is reachable within [min, max] per scene.
    Rng adjust(DeriveStreamSeed(scenario_seed_, "synthetic.frames_total", subdataset_index));
    while (total != data_.frames_total()) {
      Shape& s = shapes[adjust.Below(shapes.size())];
      if (total < data_.frames_total() && s.frames < data_.frames_per_scene_max()) {
        ++s.frames;
        ++total;
      } else if (total > data_.frames_total() && s.frames > data_.frames_per_scene_min()) {
        --s.frames;
        --total;
      }
    }
  }
  scenes_.resize(data_.scenes());
  for (uint32_t i = 0; i < data_.scenes(); ++i) {
    const Shape& s = shapes[i];
    SyntheticScene& scene = scenes_[i];
    scene.fates.assign(s.frames, FrameFate::kNormal);
    Rng frame_fates(DeriveStreamSeed(scenario_seed_, "synthetic.empty_frames", subdataset_index, i));
    for (auto& fate : scene.fates) {
      if (frame_fates.Bernoulli(data_.empty_frame_fraction())) fate = FrameFate::kNoBoxes;
    }
    if (s.empty_half) {
      PlantPart(scene, s.second_half ? EmptyPlant::second_half : EmptyPlant::first_half, FrameFate::kNoBoxes);
    }
    if (s.empty_scene) PlantPart(scene, EmptyPlant::whole_scene, FrameFate::kNoBoxes);
  }
  for (const auto& plant : data_.plants()) {
    PlantPart(scenes_[plant.scene()], plant.part(),
              plant.how() == EmptyPlant::no_points ? FrameFate::kNoPoints : FrameFate::kNoBoxes);
  }
}

}  // namespace petrsim
