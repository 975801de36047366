// The training dataset as the sampler and the resample loop see it: frames with their GT count
// after mmdet3d's three filters, scenes, sequence chunks, sub-dataset boundaries (mmdet's
// ConcatDataset) and the sampler's group table. Built once from a scenario; immutable after.
//
// Invariants: frames of a scene, chunks of a scene and scenes of a sub-dataset are contiguous
// ranges of dataset indices, in order. A chunk's sampler group is its sub-dataset-local flag
// (flags are concatenated WITHOUT offset, so chunk g of every sub-dataset shares group g).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "proto/scenario.pb.h"

namespace petrsim {

struct FrameInfo {
  uint32_t subdataset = 0;
  uint32_t scene = 0;           // dataset-wide scene index
  uint32_t frame_in_scene = 0;  // position in the scene as given (before any dropping)
  uint32_t chunk = 0;           // dataset-wide chunk index
  uint32_t boxes = 0;           // annotated boxes before the filters (0 when only a count given)
  uint32_t gt_count = 0;        // boxes left after the filters
  bool accepted = false;        // prepare_train_data returns a sample (not None)
  bool prev_exists = false;     // streaming memory carried over from the previous index
};

struct SceneInfo {
  std::string name;
  uint32_t subdataset = 0;
  uint32_t index_in_subdataset = 0;  // as given in the scenario
  uint32_t frames_given = 0;         // frames in the scenario, before any dropping
  int64_t begin = 0;                 // dataset index range [begin, end)
  int64_t end = 0;
};

// A sequence chunk of one sub-dataset: mmdet3d's resample pool for in_group.
struct ChunkInfo {
  uint32_t subdataset = 0;
  uint32_t scene = 0;
  int64_t group = 0;  // sampler group id = local flag
  int64_t begin = 0;  // dataset index range [begin, end)
  int64_t end = 0;
  uint32_t accepted_frames = 0;
};

struct SubDatasetInfo {
  std::string name;
  int64_t begin = 0;  // dataset index range [begin, end)
  int64_t end = 0;
  uint32_t scene_begin = 0, scene_end = 0;
  uint32_t chunk_begin = 0, chunk_end = 0;
  uint32_t chunks_dropped = 0;  // drop_empty_groups
  uint64_t frames_dropped = 0;
};

class Dataset {
 public:
  int64_t size() const { return static_cast<int64_t>(frames_.size()); }
  const FrameInfo& frame(int64_t index) const { return frames_[index]; }
  const std::vector<FrameInfo>& frames() const { return frames_; }
  const std::vector<SceneInfo>& scenes() const { return scenes_; }
  const std::vector<ChunkInfo>& chunks() const { return chunks_; }
  const std::vector<SubDatasetInfo>& subdatasets() const { return subdatasets_; }
  bool rejects_empty_frames() const { return rejects_empty_frames_; }
  int64_t accepted_frames() const { return accepted_frames_; }
  // Accepted frames among dataset indices [begin, end), O(1).
  int64_t accepted_in(int64_t begin, int64_t end) const { return accepted_prefix_[end] - accepted_prefix_[begin]; }

  // The sampler's groups: groups_num = max flag + 1 over the sub-datasets; group g holds, in
  // ascending order, every dataset index whose flag is g (from all sub-datasets).
  int64_t groups_num() const { return static_cast<int64_t>(group_offsets_.size()) - 1; }
  std::span<const int64_t> group_indices(int64_t group) const {
    return {group_members_.data() + group_offsets_[group], group_members_.data() + group_offsets_[group + 1]};
  }
  int64_t group_of(int64_t index) const { return group_of_frame_[index]; }

 private:
  friend class DatasetBuilder;
  std::vector<FrameInfo> frames_;
  std::vector<SceneInfo> scenes_;
  std::vector<ChunkInfo> chunks_;
  std::vector<SubDatasetInfo> subdatasets_;
  std::vector<int64_t> group_offsets_;  // CSR: groups_num + 1 entries
  std::vector<int64_t> group_members_;
  std::vector<int64_t> accepted_prefix_;  // size() + 1 entries
  std::vector<int32_t> group_of_frame_;   // the sampler's hot lookup, one load per index
  bool rejects_empty_frames_ = true;
  int64_t accepted_frames_ = 0;
};

// Builds the dataset: explicit or synthetic frames, filters, chunks, drop_empty_groups, groups.
// The scenario must have passed ValidateScenario. Throws ScenarioError for what only the built
// data shows (a scene that mmdet3d's chunk assertion would reject, an empty dataset).
// `display_name` prefixes error messages.
Dataset BuildDataset(const Scenario& scenario, const std::string& display_name);

}  // namespace petrsim
