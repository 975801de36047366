// Dataset construction from a scenario; see dataset.h.
#include "data/dataset.h"

#include <algorithm>
#include <cstdio>

#include "base/assert.h"
#include "base/error.h"
#include "data/box_filter.h"
#include "data/sequence_groups.h"
#include "data/synthetic_dataset.h"
#include "scenario/scenario_defaults.h"

namespace petrsim {

BoxFilter::BoxFilter(const Filters& filters)
    : classes_(EffectiveClasses(filters)),
      use_valid_flag_(filters.use_valid_flag()),
      range_min_(static_cast<float>(filters.bev_range_min_m())),
      range_max_(static_cast<float>(filters.bev_range_max_m())) {
  for (const ClassDistance& c : filters.circle_range()) circle_.emplace_back(c.name(), static_cast<float>(c.max_m()));
  has_circle_ = !circle_.empty();
}

float BoxFilter::ClassLimit(const std::string& name) const {
  if (std::find(classes_.begin(), classes_.end(), name) == classes_.end()) return kDropped;
  if (!has_circle_) return std::numeric_limits<float>::infinity();
  for (const auto& [circle_name, limit] : circle_) {
    if (circle_name == name) return limit;
  }
  return kDropped;  // CircleObjectRangeFilter keeps only the labels it lists
}

// Builds a Dataset in three passes: frames per scene (with GT counts), chunks (with dropping),
// then the sampler's group table.
class DatasetBuilder {
 public:
  DatasetBuilder(const Scenario& scenario, const std::string& display_name)
      : scenario_(scenario), display_name_(display_name), filter_(scenario.filters()) {
    dataset_.rejects_empty_frames_ = RejectsEmptyFrames(scenario);
  }

  Dataset Build() {
    for (int s = 0; s < scenario_.dataset().subdatasets_size(); ++s) BuildSubDataset(s);
    if (dataset_.frames_.empty()) {
      throw ScenarioError(display_name_ +
                          ": dataset: no frame left (every group was dropped by "
                          "drop_empty_groups, so the job would have nothing to train on)");
    }
    BuildGroups();
    dataset_.group_of_frame_.resize(dataset_.frames_.size());
    for (size_t i = 0; i < dataset_.frames_.size(); ++i) {
      dataset_.group_of_frame_[i] = static_cast<int32_t>(dataset_.chunks_[dataset_.frames_[i].chunk].group);
    }
    dataset_.accepted_prefix_.assign(dataset_.frames_.size() + 1, 0);
    for (size_t i = 0; i < dataset_.frames_.size(); ++i) {
      dataset_.accepted_prefix_[i + 1] = dataset_.accepted_prefix_[i] + dataset_.frames_[i].accepted;
    }
    return std::move(dataset_);
  }

 private:
  // One scene's frames before chunking: GT count and box count per frame.
  struct PendingScene {
    std::string name;
    uint32_t index_in_subdataset = 0;
    std::vector<uint32_t> gt_counts;
    std::vector<uint32_t> box_counts;
  };

  std::string SceneName(const std::string& prefix, uint32_t index) const {
    char digits[16];
    std::snprintf(digits, sizeof(digits), "%04u", index);
    return prefix + digits;
  }

  std::vector<PendingScene> ReadExplicit(int s, const ExplicitData& data) const {
    const std::string prefix = SubDatasetName(scenario_, s) + "-";
    std::vector<PendingScene> scenes(data.scenes_size());
    const bool use_valid_flag = scenario_.filters().use_valid_flag();
    // Box columns: whether each entry of the class table is a target class, looked up once.
    std::vector<float> target(data.class_names_size());
    for (int c = 0; c < data.class_names_size(); ++c) target[c] = filter_.ClassLimit(data.class_names(c));
    for (int i = 0; i < data.scenes_size(); ++i) {
      const Scene& scene = data.scenes(i);
      PendingScene& pending = scenes[i];
      pending.index_in_subdataset = static_cast<uint32_t>(i);
      pending.name = scene.name().empty() ? SceneName(prefix, i) : scene.name();
      for (const uint32_t gt : scene.gt_counts()) {
        pending.gt_counts.push_back(gt);
        pending.box_counts.push_back(0);
      }
      for (const Frame& frame : scene.frames()) {
        uint32_t gt = 0;
        uint32_t boxes = static_cast<uint32_t>(frame.boxes_size());
        if (frame.has_gt_count()) {
          gt = frame.gt_count();
        } else if (frame.has_box_columns()) {
          gt = CountKept(frame.box_columns(), target, use_valid_flag);
          boxes = static_cast<uint32_t>(frame.box_columns().class_index_size());
        } else {
          for (const Box& box : frame.boxes()) {
            // A stored valid_flag decides validity under use_valid_flag (mmdet3d reads the flag).
            const bool stored_flag = use_valid_flag && box.has_valid_flag();
            const uint32_t lidar = stored_flag ? box.valid_flag() : box.num_lidar_pts();
            const uint32_t radar = stored_flag ? 0 : box.num_radar_pts();
            gt += filter_.Keeps(filter_.ClassLimit(box.name()), box.x(), box.y(), lidar, radar);
          }
        }
        pending.gt_counts.push_back(gt);
        pending.box_counts.push_back(boxes);
      }
    }
    return scenes;
  }

  // The boxes of one frame's columns that survive the filters: each exactly as the Box with the
  // same values (the stored valid flag of a box in valid_flag_differs is the opposite of its
  // point counts', and decides under use_valid_flag).
  uint32_t CountKept(const BoxColumns& columns, const std::vector<float>& target, bool use_valid_flag) const {
    const int n = columns.class_index_size();
    const bool radar = columns.num_radar_pts_size() == n;
    int next_differs = 0;
    uint32_t gt = 0;
    for (int b = 0; b < n; ++b) {
      uint32_t lidar = columns.num_lidar_pts(b);
      uint32_t radar_pts = radar ? columns.num_radar_pts(b) : 0;
      if (next_differs < columns.valid_flag_differs_size() &&
          columns.valid_flag_differs(next_differs) == static_cast<uint32_t>(b)) {
        ++next_differs;
        if (use_valid_flag) {
          lidar = (uint64_t{lidar} + radar_pts) > 0 ? 0 : 1;  // the stored flag, opposite to the counts'
          radar_pts = 0;
        }
      }
      gt += filter_.Keeps(target[columns.class_index(b)], columns.x(b), columns.y(b), lidar, radar_pts);
    }
    return gt;
  }

  std::vector<PendingScene> ReadSynthetic(int s) const {
    const SyntheticSubDataset synthetic(scenario_, s);
    const auto& data = scenario_.dataset().subdatasets(s).synthetic();
    const std::string prefix =
        data.has_scene_name_prefix() ? data.scene_name_prefix() : SubDatasetName(scenario_, s) + "-";
    std::vector<float> target;
    for (const auto& name : synthetic.class_names()) target.push_back(filter_.ClassLimit(name));
    std::vector<PendingScene> scenes(synthetic.scenes().size());
    for (uint32_t i = 0; i < scenes.size(); ++i) {
      PendingScene& pending = scenes[i];
      pending.index_in_subdataset = i;
      pending.name = SceneName(prefix, i);
      synthetic.ForEachFrame(i, [&](uint32_t, std::span<const SyntheticBox> boxes) {
        uint32_t gt = 0;
        for (const auto& box : boxes) {
          gt += filter_.Keeps(target[box.class_index], box.x, box.y, box.num_lidar_pts, box.num_radar_pts);
        }
        pending.gt_counts.push_back(gt);
        pending.box_counts.push_back(static_cast<uint32_t>(boxes.size()));
      });
    }
    return scenes;
  }

  // Chunk lengths of one scene under the grouping settings; throws like mmdet3d's assertion.
  std::vector<uint32_t> ChunkLengths(int s, const PendingScene& scene) const {
    const auto& grouping = scenario_.grouping();
    const uint32_t n = static_cast<uint32_t>(scene.gt_counts.size());
    if (grouping.seq_split_all()) return std::vector<uint32_t>(n, 1);
    const uint32_t split = grouping.seq_split_num();
    std::vector<uint32_t> lengths = SceneChunkLengths(n, split);
    if (lengths.size() != split && grouping.seq_split_count_asserted()) {
      throw ScenarioError(display_name_ + ": dataset.subdatasets[" + std::to_string(s) + "] ('" +
                          SubDatasetName(scenario_, s) + "') scene " + std::to_string(scene.index_in_subdataset) +
                          " '" + scene.name + "' has " + std::to_string(n) + " frame(s): seq_split_num " +
                          std::to_string(split) + " cuts it into " + std::to_string(lengths.size()) +
                          " chunk(s) of ceil(" + std::to_string(n) + "/" + std::to_string(split) +
                          "), but mmdet3d asserts every scene yields exactly " + std::to_string(split) +
                          " (the real job fails when it builds the dataset)");
    }
    return lengths;
  }

  // The state of one sub-dataset while its frames are added: its info (ranges, drops), its
  // settings, and the running values the frames share.
  struct SubDatasetBuild {
    int s = 0;
    SubDatasetInfo info;
    bool seq_mode = false;
    bool drop_empty = false;
    // gt_required_frames: the sub-dataset index of the last frame without GT, to accept a frame
    // only when none of the frames its queue checks lacks GT.
    int64_t required = 1;
    int64_t last_empty = -1;
    int64_t next_flag = 0;
  };

  void BuildSubDataset(int s) {
    const SubDataset& source = scenario_.dataset().subdatasets(s);
    std::vector<PendingScene> scenes = source.has_explicit_() ? ReadExplicit(s, source.explicit_()) : ReadSynthetic(s);
    SubDatasetBuild b;
    b.s = s;
    b.info.name = SubDatasetName(scenario_, s);
    b.info.begin = dataset_.size();
    b.info.scene_begin = static_cast<uint32_t>(dataset_.scenes_.size());
    b.info.chunk_begin = static_cast<uint32_t>(dataset_.chunks_.size());
    b.seq_mode = scenario_.grouping().seq_mode();
    b.drop_empty = scenario_.resample().policy() == Resample::drop_empty_groups && dataset_.rejects_empty_frames_;
    b.required = scenario_.filters().gt_required_frames();
    if (DropsWhole(scenes, b)) return;
    std::vector<std::vector<uint32_t>> lengths(scenes.size());
    if (b.seq_mode) {
      for (size_t i = 0; i < scenes.size(); ++i) lengths[i] = ChunkLengths(s, scenes[i]);
    }
    if (!b.seq_mode) {
      ChunkInfo chunk;
      chunk.subdataset = static_cast<uint32_t>(s);
      chunk.scene = b.info.scene_begin;
      chunk.begin = b.info.begin;
      chunk.group = 0;
      dataset_.chunks_.push_back(chunk);
    }
    for (size_t i = 0; i < scenes.size(); ++i) AddScene(scenes[i], lengths[i], b);
    if (!b.seq_mode) dataset_.chunks_[b.info.chunk_begin].end = dataset_.size();
    b.info.end = dataset_.size();
    b.info.scene_end = static_cast<uint32_t>(dataset_.scenes_.size());
    b.info.chunk_end = static_cast<uint32_t>(dataset_.chunks_.size());
    dataset_.subdatasets_.push_back(b.info);
  }

  // Without seq_mode the whole sub-dataset is one group (mmdet3d's flag of zeros), so
  // drop_empty_groups drops it whole when none of its frames has GT: then it is recorded empty.
  bool DropsWhole(const std::vector<PendingScene>& scenes, SubDatasetBuild& b) {
    if (b.seq_mode || !b.drop_empty) return false;
    const bool any_gt = std::any_of(scenes.begin(), scenes.end(), [](const PendingScene& scene) {
      return std::any_of(scene.gt_counts.begin(), scene.gt_counts.end(), [](uint32_t gt) { return gt > 0; });
    });
    if (any_gt) return false;
    b.info.chunks_dropped = 1;
    for (const auto& scene : scenes) b.info.frames_dropped += scene.gt_counts.size();
    b.info.end = b.info.begin;
    b.info.scene_end = b.info.scene_begin;
    b.info.chunk_end = b.info.chunk_begin;
    dataset_.subdatasets_.push_back(b.info);
    return true;
  }

  // One scene's frames: in the sub-dataset's one chunk, or (seq_mode) in chunks of `lengths`,
  // each dropped when drop_empty_groups finds no GT in it.
  void AddScene(const PendingScene& scene, const std::vector<uint32_t>& lengths, SubDatasetBuild& b) {
    SceneInfo scene_info;
    scene_info.name = scene.name;
    scene_info.subdataset = static_cast<uint32_t>(b.s);
    scene_info.index_in_subdataset = scene.index_in_subdataset;
    scene_info.frames_given = static_cast<uint32_t>(scene.gt_counts.size());
    scene_info.begin = dataset_.size();
    const uint32_t scene_index = static_cast<uint32_t>(dataset_.scenes_.size());
    if (!b.seq_mode) {
      const uint32_t chunk_index = b.info.chunk_begin;
      for (uint32_t f = 0; f < scene.gt_counts.size(); ++f) {
        AddFrame(scene, scene_index, f, chunk_index, dataset_.size() != b.info.begin, b);
      }
    } else {
      uint32_t f = 0;
      for (const uint32_t length : lengths) {
        const bool has_gt = std::any_of(scene.gt_counts.begin() + f, scene.gt_counts.begin() + f + length,
                                        [](uint32_t gt) { return gt > 0; });
        if (b.drop_empty && !has_gt) {
          ++b.info.chunks_dropped;
          b.info.frames_dropped += length;
          f += length;
          continue;
        }
        ChunkInfo chunk;
        chunk.subdataset = static_cast<uint32_t>(b.s);
        chunk.scene = scene_index;
        chunk.group = b.next_flag++;
        chunk.begin = dataset_.size();
        chunk.end = chunk.begin + length;
        const auto chunk_index = static_cast<uint32_t>(dataset_.chunks_.size());
        dataset_.chunks_.push_back(chunk);
        for (uint32_t k = 0; k < length; ++k, ++f) AddFrame(scene, scene_index, f, chunk_index, k != 0, b);
      }
    }
    scene_info.end = dataset_.size();
    // A scene all of whose chunks were dropped leaves no trace in the dataset.
    if (scene_info.end > scene_info.begin) dataset_.scenes_.push_back(scene_info);
  }

  // Frame `f` of a scene, in chunk `chunk_index`; accepted when it has GT and (gt_required_frames)
  // so do the frames its queue checks.
  void AddFrame(const PendingScene& scene, uint32_t scene_index, uint32_t f, uint32_t chunk_index, bool prev_exists,
                SubDatasetBuild& b) {
    FrameInfo frame;
    frame.subdataset = static_cast<uint32_t>(b.s);
    frame.scene = scene_index;
    frame.frame_in_scene = f;
    frame.chunk = chunk_index;
    frame.boxes = scene.box_counts[f];
    frame.gt_count = scene.gt_counts[f];
    const int64_t local = static_cast<int64_t>(dataset_.size() - b.info.begin);
    if (frame.gt_count == 0) b.last_empty = local;
    frame.accepted = !dataset_.rejects_empty_frames_ ||
                     (frame.gt_count > 0 && b.last_empty < std::max<int64_t>(0, local - b.required + 1));
    frame.prev_exists = prev_exists;
    dataset_.accepted_frames_ += frame.accepted;
    dataset_.chunks_[chunk_index].accepted_frames += frame.accepted;
    dataset_.frames_.push_back(frame);
  }

  // The sampler's groups: flags concatenated without offset, so group g gathers chunk g of
  // every sub-dataset, in dataset order.
  void BuildGroups() {
    int64_t groups_num = 0;
    for (const auto& chunk : dataset_.chunks_) groups_num = std::max(groups_num, chunk.group + 1);
    std::vector<int64_t> sizes(groups_num, 0);
    for (const auto& chunk : dataset_.chunks_) sizes[chunk.group] += chunk.end - chunk.begin;
    dataset_.group_offsets_.assign(groups_num + 1, 0);
    for (int64_t g = 0; g < groups_num; ++g) {
      dataset_.group_offsets_[g + 1] = dataset_.group_offsets_[g] + sizes[g];
    }
    dataset_.group_members_.resize(dataset_.frames_.size());
    std::vector<int64_t> cursor(dataset_.group_offsets_.begin(), dataset_.group_offsets_.end() - 1);
    // Chunks are in dataset order, so each group's members come out ascending.
    for (const auto& chunk : dataset_.chunks_) {
      for (int64_t i = chunk.begin; i < chunk.end; ++i) {
        dataset_.group_members_[cursor[chunk.group]++] = i;
      }
    }
  }

  const Scenario& scenario_;
  const std::string& display_name_;
  BoxFilter filter_;
  Dataset dataset_;
};

Dataset BuildDataset(const Scenario& scenario, const std::string& display_name) {
  return DatasetBuilder(scenario, display_name).Build();
}

}  // namespace petrsim
