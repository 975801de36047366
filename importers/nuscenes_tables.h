// The nuScenes tables (DIR/VERSION/*.json) to imported sub-datasets, one per split, as
// StreamPETR's converter and dataset would see them: the samples of the split's scenes in
// sample.json order, then sorted by timestamp, a scene starting at every keyframe whose LIDAR_TOP
// sample_data has no previous sweep (the converter's sweeps list is empty exactly then); per
// frame the sample's annotations in sample_annotation.json order with the class mmdet3d's
// NuScenesDataset.NameMapping gives their category (other categories keep their name and are
// filtered out), the centre moved global -> ego (the keyframe's ego pose) -> lidar (its
// calibrated sensor), and the lidar and radar point counts. The large tables (sample_data,
// ego_pose, sample_annotation) are streamed, keeping only what the import needs.
//
// Tables read: category, instance, sensor (to find LIDAR_TOP), calibrated_sensor, scene, sample,
// sample_data, ego_pose, sample_annotation.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "importers/imported_dataset.h"

namespace petrsim {

struct NuScenesOptions {
  std::string dataroot;  // the directory holding VERSION/
  std::string version = "v1.0-trainval";
  // Split names. Official ones: train, val (v1.0-trainval), test (v1.0-test), mini_train,
  // mini_val (v1.0-mini; train and val mean these there). With split_file: its keys (all of
  // them, in the file's order, when empty).
  std::vector<std::string> splits;
  // A JSON object {"split name": ["scene-0001", ...], ...} instead of the official lists.
  std::string split_file;
  // Called with (bytes of the tables read, their total size) as they are read (a progress bar).
  // May be empty.
  std::function<void(uint64_t done, uint64_t total)> progress;
};

// One sub-dataset per split, named after it. Throws ScenarioError naming the table file, the
// record (index and token) and key, what was expected and what was found.
std::vector<ImportedSubDataset> ReadNuScenesTables(const NuScenesOptions& options);

// mmdet3d's NuScenesDataset.NameMapping: the detection class of a nuScenes category, or the
// category itself when it has none (e.g. "animal").
std::string NuScenesDetectionName(const std::string& category);

}  // namespace petrsim
