// The dataset semantics table; see dataset_semantics.h. Each source names the repository, the commit
// read and file:line; docs/research/camera3d_dataset_semantics.md has the reading behind each entry.
#include "importers/dataset_semantics.h"

#include <algorithm>

namespace petrsim {
namespace {

// mmdet3d v1.0.0rc6 (open-mmlab/mmdetection3d@47285b3f), the base every codebase here builds on; its
// retry loop is unchanged since v0.17.1, which PETR, BEVFormer and BEVDet use.
constexpr std::string_view kMmdet3dZeros = "mmdet3d@47285b3f mmdet3d/datasets/custom_3d.py:101-103,441-448";
constexpr std::string_view kMmdet3dPool = "mmdet3d@47285b3f mmdet3d/datasets/custom_3d.py:417-439";
constexpr std::string_view kMmdet3dFilter = "mmdet3d@47285b3f mmdet3d/datasets/custom_3d.py:70,216-234";
constexpr std::string_view kMmdet3dValid = "mmdet3d@47285b3f mmdet3d/datasets/nuscenes_dataset.py:128,266-299";
constexpr std::string_view kMmdet3dClasses = "mmdet3d@47285b3f mmdet3d/datasets/nuscenes_dataset.py:112";
constexpr std::string_view kMmdet3dScript =
    "mmdet3d@47285b3f mmdet3d/apis/train.py:205-248 -> mmdet 2.x build_dataloader";
constexpr std::string_view kStreamPetrScript =
    "StreamPETR@95f64702 projects/mmdet3d_plugin/core/apis/mmdet_train.py:58-72,101-111, "
    "projects/mmdet3d_plugin/datasets/builder.py:53-100";

const std::vector<std::string> kNuScenesClasses = {
    "car",     "truck",      "trailer",    "bus",          "construction_vehicle",
    "bicycle", "motorcycle", "pedestrian", "traffic_cone", "barrier"};

// mmdet3d's NuScenesDataset under mmdet 2.x's build_dataloader: one group, the whole-dataset pool.
DatasetSemantics Mmdet3dNuScenes() {
  DatasetSemantics base;
  base.type = "NuScenesDataset";
  base.codebase = "mmdet3d v1.0.0rc6";
  base.flags = GroupFlags::kZeros;
  base.flags_source = kMmdet3dZeros;
  base.pool = ResamplePool::kFlagGroup;
  base.pool_source = kMmdet3dPool;
  base.script = TrainScript::kMmdet3dTrainModel;
  base.script_source = kMmdet3dScript;
  base.filter_empty_gt_default = true;
  base.filter_empty_gt_source = kMmdet3dFilter;
  base.use_valid_flag_default = false;
  base.use_valid_flag_source = kMmdet3dValid;
  base.default_classes = kNuScenesClasses;
  base.default_classes_source = kMmdet3dClasses;
  return base;
}

// StreamPETR's CustomNuScenesDataset: it requires collect_keys (PETR's and BEVFormer's classes of the
// same name take none).
DatasetSemantics StreamPetr(const DatasetSemantics& base) {
  DatasetSemantics stream = base;
  stream.type = "CustomNuScenesDataset";
  stream.codebase = "StreamPETR (exiawsh/StreamPETR@95f64702)";
  stream.distinguishing_keys = {"collect_keys", "seq_mode", "seq_split_num"};
  stream.flags = GroupFlags::kSeqModeSplit;
  stream.flags_source = "StreamPETR@95f64702 projects/mmdet3d_plugin/datasets/nuscenes_dataset.py:29-79";
  stream.pool_source =
      "StreamPETR@95f64702 projects/mmdet3d_plugin/datasets/nuscenes_dataset.py:244-257 (the retry loop), "
      "_rand_another inherited: mmdet3d@47285b3f mmdet3d/datasets/custom_3d.py:417-424";
  stream.queue_checks_frame_losses = true;
  stream.queue_source = "StreamPETR@95f64702 projects/mmdet3d_plugin/datasets/nuscenes_dataset.py:29-41,82-116";
  stream.script = TrainScript::kStreamPetrCustomTrain;
  stream.script_source = kStreamPetrScript;
  return stream;
}

// BEVFormer's CustomNuScenesDataset (bev_size, queue_length): zeros, the whole-dataset pool; a load
// fails when any frame of its queue has no GT.
DatasetSemantics Bevformer(const DatasetSemantics& base) {
  DatasetSemantics bevformer = base;
  bevformer.type = "CustomNuScenesDataset";
  bevformer.codebase = "BEVFormer (fundamentalvision/BEVFormer@66b65f3a)";
  bevformer.distinguishing_keys = {"bev_size", "overlap_test"};
  bevformer.pool_source =
      "BEVFormer@66b65f3a projects/mmdet3d_plugin/datasets/nuscenes_dataset.py:169-182, _rand_another inherited "
      "(mmdet3d v0.17.1 custom_3d.py, unchanged in rc6 :417-424)";
  bevformer.script = TrainScript::kBevformerCustomTrain;
  bevformer.script_source = "BEVFormer@66b65f3a projects/mmdet3d_plugin/datasets/builder.py (shuffler_sampler)";
  bevformer.not_modelled =
      "each load also fails when one of the queue_length - 1 earlier frames that Python's random.shuffle picks "
      "(BEVFormer@66b65f3a projects/mmdet3d_plugin/datasets/nuscenes_dataset.py:31-55) has no GT; petrsim checks "
      "the frame itself. The pool is the whole dataset, so the verdict changes only when nearly every frame fails";
  return bevformer;
}

// BEVFormer's CustomNuScenesDatasetV2: the first one's semantics under a class name of its own.
DatasetSemantics BevformerV2(const DatasetSemantics& bevformer) {
  DatasetSemantics bevformer_v2 = bevformer;
  bevformer_v2.type = "CustomNuScenesDatasetV2";
  bevformer_v2.distinguishing_keys = {};
  bevformer_v2.pool_source =
      "BEVFormer@66b65f3a projects/mmdet3d_plugin/datasets/nuscenes_dataset_v2.py:232-245, _rand_another inherited";
  bevformer_v2.not_modelled =
      "with mono_cfg a load also fails when no camera keeps a mono annotation (BEVFormer@66b65f3a "
      "projects/mmdet3d_plugin/datasets/nuscenes_dataset_v2.py:200-230); petrsim checks the frame's 3D GT only";
  return bevformer_v2;
}

// PETR / PETRv2: subclasses of NuScenesDataset that change only get_data_info (no None there).
DatasetSemantics Petr(const DatasetSemantics& base) {
  DatasetSemantics petr = base;
  petr.type = "CustomNuScenesDataset";
  petr.codebase = "PETR (megvii-research/PETR@f7525f93)";
  petr.pool_source =
      "PETR@f7525f93 projects/mmdet3d_plugin/datasets/nuscenes_dataset.py:16-20 (only get_data_info); the retry "
      "loop and pool of mmdet3d v0.17.1 custom_3d.py (unchanged in rc6 :417-439)";
  return petr;
}

// PETR's multi-dataset variant: PETR's semantics.
DatasetSemantics PetrMulti(const DatasetSemantics& petr) {
  DatasetSemantics petr_multi = petr;
  petr_multi.type = "MultiCustomNuScenesDataset";
  petr_multi.pool_source =
      "PETR@f7525f93 projects/mmdet3d_plugin/datasets/multi_nuscenes_dataset.py:22-56 (no retry-loop change)";
  return petr_multi;
}

// Sparse4D v1/v2: StreamPETR's chunking under with_seq_flag / sequences_split_num.
DatasetSemantics Sparse4d(const DatasetSemantics& base) {
  DatasetSemantics sparse4d = base;
  sparse4d.type = "NuScenes3DDetTrackDataset";
  sparse4d.codebase = "Sparse4D (linxuewu/Sparse4D@db711ad5)";
  sparse4d.flags = GroupFlags::kSeqFlagSplit;
  sparse4d.flags_source =
      "Sparse4D@db711ad5 projects/mmdet3d_plugin/datasets/nuscenes_3d_det_track_dataset.py:106-138,188-239";
  sparse4d.pool_source =
      "Sparse4D@db711ad5 projects/mmdet3d_plugin/datasets/nuscenes_3d_det_track_dataset.py:302-323 (the retry "
      "loop), _rand_another inherited: mmdet3d custom_3d.py:417-424";
  sparse4d.filter_empty_gt_source =
      "Sparse4D@db711ad5 projects/mmdet3d_plugin/datasets/nuscenes_3d_det_track_dataset.py:116,333-350";
  sparse4d.use_valid_flag_source =
      "Sparse4D@db711ad5 projects/mmdet3d_plugin/datasets/nuscenes_3d_det_track_dataset.py:106-138,551-590";
  sparse4d.default_classes_source =
      "Sparse4D@db711ad5 projects/mmdet3d_plugin/datasets/nuscenes_3d_det_track_dataset.py:81-92";
  sparse4d.script = TrainScript::kSparse4dCustomTrain;
  sparse4d.script_source =
      "Sparse4D@db711ad5 projects/mmdet3d_plugin/apis/mmdet_train.py:71-90, datasets/builder.py:53-81";
  return sparse4d;
}

// Far3D: _rand_another overridden with the whole dataset; flags by scene_id.
DatasetSemantics Far3d(const DatasetSemantics& base) {
  DatasetSemantics far3d = base;
  far3d.type = "Argoverse2DatasetT";
  far3d.codebase = "Far3D (megvii-research/Far3D@5efb9d73)";
  far3d.flags = GroupFlags::kSeqModeSplit;
  far3d.flags_source =
      "Far3D@5efb9d73 projects/mmdet3d_plugin/datasets/argoverse2_dataset_t.py:19-79 (sequences by scene_id)";
  far3d.pool = ResamplePool::kWholeDataset;
  far3d.pool_source = "Far3D@5efb9d73 projects/mmdet3d_plugin/datasets/argoverse2_dataset_t.py:243-264";
  far3d.filter_empty_gt_source = "Far3D@5efb9d73 projects/mmdet3d_plugin/datasets/argoverse2_dataset.py:32";
  far3d.use_valid_flag_source = "Far3D@5efb9d73 projects/mmdet3d_plugin/datasets/argoverse2_dataset.py:34,182-221";
  far3d.default_classes = {};
  far3d.default_classes_source =
      "Far3D@5efb9d73 projects/mmdet3d_plugin/datasets/argoverse2_dataset_t.py:17 (the av2 package's "
      "CompetitionCategories, not in the repository)";
  far3d.queue_checks_frame_losses = true;
  far3d.queue_source = "Far3D@5efb9d73 projects/mmdet3d_plugin/datasets/argoverse2_dataset_t.py:32-37,116-119";
  far3d.script = TrainScript::kStreamPetrCustomTrain;
  far3d.script_source = "Far3D@5efb9d73 (builder, samplers and apis byte-identical to StreamPETR@95f64702's)";
  far3d.not_modelled =
      "a frame with a missing camera also fails (argoverse2_dataset_t.py:191-193). Its Argoverse 2 infos are read "
      "in file order, reordered by interval_test (:27-31), with a sequence wherever scene_id changes (:44-55); "
      "nuScenes-shaped infos under this class are sorted and cut at sweep-less frames instead";
  return far3d;
}

// One entry a dataset class and codebase; classes of the same name are told apart by their keys.
std::vector<DatasetSemantics> MakeTable() {
  const DatasetSemantics base = Mmdet3dNuScenes();
  const DatasetSemantics bevformer = Bevformer(base);
  const DatasetSemantics petr = Petr(base);
  return {base, StreamPetr(base), bevformer,      BevformerV2(bevformer),
          petr, PetrMulti(petr),  Sparse4d(base), Far3d(base)};
}

const std::vector<DatasetSemantics>& Table() {
  static const std::vector<DatasetSemantics> table = MakeTable();
  return table;
}

const std::vector<WrapperSemantics>& Wrappers() {
  static const std::vector<WrapperSemantics> wrappers = {
      {"CBGSDataset", "dataset",
       "class-balanced sample_indices (np.random.choice per class, with replacement, in the main process after "
       "set_random_seed) replace the index space the sampler walks; a None is still resampled by the inner "
       "dataset's own loop in its own pool, so the verdict is the inner dataset's. petrsim samples the inner "
       "dataset's indices: `sample` is not the wrapper's index stream",
       "mmdet3d@47285b3f mmdet3d/datasets/dataset_wrappers.py:19-68"},
      {"RepeatDataset", "dataset",
       "repeats the inner dataset `times` times (flags tiled); a None is resampled in the inner dataset's pool",
       "mmdet 2.x mmdet/datasets/dataset_wrappers.py (RepeatDataset)"},
  };
  return wrappers;
}

}  // namespace

const DatasetSemantics* FindDatasetSemantics(std::string_view type, std::span<const std::string> keys) {
  const DatasetSemantics* fallback = nullptr;
  for (const DatasetSemantics& entry : Table()) {
    if (entry.type != type) continue;
    if (entry.distinguishing_keys.empty()) {
      if (fallback == nullptr) fallback = &entry;
      continue;
    }
    const bool matches =
        std::any_of(entry.distinguishing_keys.begin(), entry.distinguishing_keys.end(),
                    [&](std::string_view key) { return std::find(keys.begin(), keys.end(), key) != keys.end(); });
    if (matches) return &entry;
  }
  return fallback;
}

std::vector<std::string_view> KnownDatasetTypes() {
  std::vector<std::string_view> types;
  for (const DatasetSemantics& entry : Table()) {
    if (std::find(types.begin(), types.end(), entry.type) == types.end()) types.push_back(entry.type);
  }
  return types;
}

const WrapperSemantics* FindWrapperSemantics(std::string_view type) {
  for (const WrapperSemantics& wrapper : Wrappers()) {
    if (wrapper.type == type) return &wrapper;
  }
  return nullptr;
}

}  // namespace petrsim
