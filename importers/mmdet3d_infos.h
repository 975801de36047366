// mmdet3d 1.0 nuScenes info files (nuscenes_infos_*.pkl, StreamPETR's *_temporal_infos_*.pkl):
// {'infos': [info, ...], 'metadata': {'version': ...}} with numpy arrays, as the converter
// writes them through mmcv (pickle protocol 2; 3-5 are read too); the dicts may be
// collections.OrderedDict, and the older format's bare list of infos is read too. One file
// becomes one sub-dataset: its frames sorted by timestamp, scenes cut at frames without lidar
// sweeps (cross-checked with scene_token; named by scene_name when the infos have it, else by
// scene_token), and per frame the boxes (gt_names, gt_boxes[:, 0:2], num_lidar_pts,
// num_radar_pts, valid_flag). As in mmdet3d's NuScenesDataset.get_ann_info, valid_flag is needed
// only with use_valid_flag and num_lidar_pts only without it; num_radar_pts is never needed
// (absent: 0). mmdet3d 1.x files ({'data_list': ...}) are refused with a clear message.
//
// Far3D's Argoverse 2 infos (tools/create_infos_av2/create_av2_infos.py: {'infos': [...],
// 'split': ...}, each info with scene_id, lidar_timestamp_ns and gt3d_infos) are read as its
// Argoverse2DatasetT reads them: frames in the file's order (no sort; interval_test reorders
// them), a scene wherever scene_id changes, per frame the boxes of gt3d_infos (gt_names, a list
// of str; gt_boxes[:, 0:2], a torch tensor; num_interior_pts as the lidar point count; valid_flag
// when present). The first info decides which shape the file has.
//
// The pickle is read with formats/pickle's numpy mode (torch tensors too; av2, pathlib and pandas
// objects beside the annotations as inert values): no code runs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "importers/imported_dataset.h"

namespace petrsim {

// At most this many infos in one info file (25 times Waymo's train split), and what one imported
// frame costs at the import's peak (measured: 10,000,000 repeats of one info peaked at 4.7 GB).
inline constexpr uint64_t kInfosPerFileMax = 4'000'000;
inline constexpr uint64_t kImportBytesPerFrame = 470;

struct Mmdet3dInfosOptions {
  std::string name;  // the sub-dataset's name; default: the file name without .pkl
  // mmdet3d reads info['valid_flag'] with use_valid_flag and info['num_lidar_pts'] without it: a
  // file without the one it reads is an error.
  bool use_valid_flag = true;
  // Far3D's Argoverse2DatasetT(interval_test=True) (argoverse2_dataset_t.py:27-31): the frames
  // reordered as infos[0::5] + infos[1::5] + ... + infos[4::5] before scenes are cut. Argoverse 2
  // infos only; nuScenes infos are sorted by timestamp whatever it says.
  bool interval_test = false;
  // Called with (bytes of the pickle read, its size) as it is read (a progress bar). May be empty.
  std::function<void(uint64_t done, uint64_t total)> progress;
  // PickleOptions::release: the bytes below the offset are not read again (ReadMmdet3dInfos drops
  // their pages). May be empty.
  std::function<void(uint64_t done)> release;
  // PickleOptions::release_range: the same for a range, from the reader's second thread.
  std::function<void(uint64_t from, uint64_t to)> release_range;
};

// Reads `path`. Throws ScenarioError naming the file, the info index and key path, what was
// expected and what was found.
ImportedSubDataset ReadMmdet3dInfos(const std::string& path, const Mmdet3dInfosOptions& options);

// The same for bytes already in memory; `display_name` starts every error message.
ImportedSubDataset ParseMmdet3dInfos(std::string_view bytes, const std::string& display_name,
                                     const Mmdet3dInfosOptions& options);

}  // namespace petrsim
