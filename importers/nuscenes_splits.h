// The official nuScenes scene splits (nuscenes-devkit's splits.py), by name: train (700 scenes),
// val (150) and test (150) of v1.0-trainval / v1.0-test, mini_train (8) and mini_val (2) of
// v1.0-mini.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace petrsim {

// The scene names of an official split ("scene-0001", ...), or nullopt for another name.
std::optional<std::vector<std::string>> OfficialNuScenesSplit(const std::string& split);

}  // namespace petrsim
