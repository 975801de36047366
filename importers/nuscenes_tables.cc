// nuScenes JSON tables to imported sub-datasets; see nuscenes_tables.h. This file resolves the
// splits, reads the tables (streamed, nuscenes_table_stream.h) and builds each split's frames and
// boxes from them.
#include "importers/nuscenes_tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "base/error.h"
#include "base/input_files.h"
#include "base/json_text.h"
#include "importers/nuscenes_splits.h"
#include "importers/nuscenes_table_stream.h"

namespace petrsim {

std::string NuScenesDetectionName(const std::string& category) {
  static const std::unordered_map<std::string, std::string> mapping = {
      {"movable_object.barrier", "barrier"},
      {"vehicle.bicycle", "bicycle"},
      {"vehicle.bus.bendy", "bus"},
      {"vehicle.bus.rigid", "bus"},
      {"vehicle.car", "car"},
      {"vehicle.construction", "construction_vehicle"},
      {"vehicle.motorcycle", "motorcycle"},
      {"human.pedestrian.adult", "pedestrian"},
      {"human.pedestrian.child", "pedestrian"},
      {"human.pedestrian.construction_worker", "pedestrian"},
      {"human.pedestrian.police_officer", "pedestrian"},
      {"movable_object.trafficcone", "traffic_cone"},
      {"vehicle.trailer", "trailer"},
      {"vehicle.truck", "truck"}};
  const auto it = mapping.find(category);
  return it == mapping.end() ? category : it->second;
}

namespace {

using nuscenes_internal::Table;

// --- Geometry ------------------------------------------------------------------------------------

using Vec3 = std::array<double, 3>;
using Mat3 = std::array<std::array<double, 3>, 3>;

// The rotation of a (w, x, y, z) quaternion, normalised first (as pyquaternion does). A
// (near-)zero quaternion is no rotation: refused (as pyquaternion refuses to normalise it) with the
// table, record token and key, rather than NaN in every box.
Mat3 Rotation(const Table& table, uint64_t index, size_t key) {
  const std::vector<double>& q = table.Numbers(index, key, 4);
  const double norm = std::sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3]);
  if (!(norm >= 1e-12)) {
    table.Fail(index, key,
               fmt::format("a quaternion (w, x, y, z) of norm {} (expected a rotation: norm "
                           "near 1)",
                           norm));
  }
  const double w = q[0] / norm, x = q[1] / norm, y = q[2] / norm, z = q[3] / norm;
  return {{{1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)},
           {2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)},
           {2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)}}};
}

// R^T (p - t): the inverse of p -> R p + t.
Vec3 Into(const Mat3& r, const Vec3& t, const Vec3& p) {
  const Vec3 d = {p[0] - t[0], p[1] - t[1], p[2] - t[2]};
  Vec3 out{};
  for (int i = 0; i < 3; ++i) out[i] = r[0][i] * d[0] + r[1][i] * d[1] + r[2][i] * d[2];
  return out;
}

struct Pose {
  Mat3 rotation;
  Vec3 translation;
};

// The pose of a record's translation and rotation keys.
Pose ToPose(const Table& table, uint64_t index, size_t translation_key, size_t rotation_key) {
  const std::vector<double>& translation = table.Numbers(index, translation_key, 3);
  const Vec3 t = {translation[0], translation[1], translation[2]};
  return {Rotation(table, index, rotation_key), t};
}

// --- The tables ----------------------------------------------------------------------------------

struct SceneRecord {
  std::string token, name, first_sample_token;
  int64_t nbr_samples = 0;
};
struct SampleRecord {
  int64_t timestamp = 0;
  std::string scene_token, next;
  uint64_t file_index = 0;
};
struct LidarKeyframe {
  std::string token, ego_pose_token, calibrated_sensor_token;
  bool has_prev = false;
};
struct Annotation {
  std::string category;  // the detection name (NameMapping applied)
  Vec3 centre;           // global
  uint32_t num_lidar_pts = 0, num_radar_pts = 0;
};

class TablesReader {
 public:
  explicit TablesReader(const NuScenesOptions& options) : options_(options) {
    directory_ = options.dataroot;
    if (!directory_.empty() && directory_.back() != '/') directory_ += '/';
    directory_ += options.version + "/";
  }

  std::vector<ImportedSubDataset> Read() {
    const std::vector<std::pair<std::string, std::vector<std::string>>> splits = ResolveSplits();
    if (options_.progress) {
      for (const char* table : {"category", "instance", "sensor", "calibrated_sensor", "scene", "sample", "sample_data",
                                "ego_pose", "sample_annotation"}) {
        std::error_code error;
        const auto size = std::filesystem::file_size(Path(table), error);
        if (!error) bytes_total_ += size;
      }
      on_bytes_ = [this](uint64_t bytes) {
        bytes_done_ += bytes;
        options_.progress(bytes_done_, std::max(bytes_done_, bytes_total_));
      };
    }
    ReadCategories();
    ReadInstances();
    ReadSensors();
    ReadCalibratedSensors();
    ReadScenes();
    ReadSamples();
    // The splits' scenes and their samples, walked through first_sample_token / next.
    std::vector<std::vector<std::string>> split_samples;
    std::unordered_set<std::string> wanted_samples;
    std::vector<std::string> split_warnings(splits.size());
    for (size_t s = 0; s < splits.size(); ++s) {
      std::vector<std::string> samples;
      size_t missing = 0;
      std::string missing_example;
      for (const auto& scene_name : splits[s].second) {
        const auto it = scene_by_name_.find(scene_name);
        if (it == scene_by_name_.end()) {
          if (missing++ == 0) missing_example = scene_name;
          continue;
        }
        WalkScene(scenes_[it->second], samples);
      }
      if (missing > 0) {
        split_warnings[s] = fmt::format(
            "{} of the split's {} scenes are not in {}scene.json (e.g. {}); the "
            "converter skips them too",
            missing, splits[s].second.size(), directory_, missing_example);
      }
      if (samples.empty()) {
        throw ScenarioError(fmt::format("{}scene.json: split '{}': none of its {} scenes is in this table set",
                                        directory_, splits[s].first, splits[s].second.size()));
      }
      wanted_samples.insert(samples.begin(), samples.end());
      split_samples.push_back(std::move(samples));
    }
    ReadSampleData(wanted_samples);
    ReadEgoPoses();
    ReadAnnotations(wanted_samples);

    std::vector<std::pair<std::string, std::string>> scene_names;
    for (const auto& scene : scenes_) scene_names.emplace_back(scene.token, scene.name);
    std::vector<ImportedSubDataset> out;
    for (size_t s = 0; s < splits.size(); ++s) {
      out.push_back(BuildSplit(splits[s].first, split_samples[s], scene_names));
      if (!split_warnings[s].empty()) out.back().warnings.push_back(split_warnings[s]);
    }
    return out;
  }

 private:
  std::string Path(const char* table) const { return directory_ + table + ".json"; }

  using Splits = std::vector<std::pair<std::string, std::vector<std::string>>>;  // name -> scene names

  // The splits to import: from --split-file, else the official lists of --version.
  Splits ResolveSplits() const {
    if (!options_.split_file.empty()) return SplitsFromFile();
    return OfficialSplits();
  }

  // --split-file's splits ({"split": ["scene-0001", ...]}), those of --split in its order.
  Splits SplitsFromFile() const {
    Splits splits;
    std::FILE* file = std::fopen(options_.split_file.c_str(), "rb");
    if (file == nullptr) {
      throw ScenarioError(fmt::format("{}: cannot open split file: {}", options_.split_file, std::strerror(errno)));
    }
    NoteInputFile(options_.split_file, ::fileno(file));
    nlohmann::ordered_json json;
    try {
      json = nlohmann::ordered_json::parse(file);
    } catch (const nlohmann::json::exception& error) {
      std::fclose(file);
      throw ScenarioError(fmt::format("{}: invalid JSON: {}", options_.split_file, error.what()));
    }
    std::fclose(file);
    if (!json.is_object()) {
      throw ScenarioError(
          fmt::format("{}: expected a JSON object {{\"split\": [\"scene-0001\", ...]}}", options_.split_file));
    }
    for (const auto& [name, scenes] : json.items()) {
      if (!options_.splits.empty() &&
          std::find(options_.splits.begin(), options_.splits.end(), name) == options_.splits.end()) {
        continue;
      }
      std::vector<std::string> names;
      if (!scenes.is_array()) {
        throw ScenarioError(fmt::format("{}: split '{}': expected an array of scene names", options_.split_file, name));
      }
      for (const auto& scene : scenes) {
        if (!scene.is_string()) {
          throw ScenarioError(fmt::format("{}: split '{}': expected scene names (strings), found {}",
                                          options_.split_file, name, JsonText(scene)));
        }
        names.push_back(scene.get<std::string>());
      }
      splits.emplace_back(name, std::move(names));
    }
    for (const auto& wanted : options_.splits) {
      if (std::none_of(splits.begin(), splits.end(), [&](const auto& split) { return split.first == wanted; })) {
        throw ScenarioError(fmt::format("{}: no split '{}'", options_.split_file, wanted));
      }
    }
    if (splits.empty()) throw ScenarioError(fmt::format("{}: no split", options_.split_file));
    // Keep the order of --split.
    if (!options_.splits.empty()) {
      Splits ordered;
      for (const auto& wanted : options_.splits) {
        ordered.push_back(
            *std::find_if(splits.begin(), splits.end(), [&](const auto& split) { return split.first == wanted; }));
      }
      splits = std::move(ordered);
    }
    return splits;
  }

  // The official split lists of --version that --split names.
  Splits OfficialSplits() const {
    Splits splits;
    if (options_.splits.empty()) throw ScenarioError("import nuscenes: --split is required (e.g. --split train,val)");
    std::vector<std::string> allowed;
    if (options_.version == "v1.0-trainval") {
      allowed = {"train", "val"};
    } else if (options_.version == "v1.0-test") {
      allowed = {"test"};
    } else if (options_.version == "v1.0-mini") {
      allowed = {"mini_train", "mini_val", "train", "val"};
    } else {
      throw ScenarioError(
          fmt::format("--version {}: no official split lists for it (v1.0-trainval, v1.0-test, "
                      "v1.0-mini have them); give --split-file",
                      options_.version));
    }
    for (const auto& name : options_.splits) {
      if (std::find(allowed.begin(), allowed.end(), name) == allowed.end()) {
        std::string list;
        for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
        throw ScenarioError(
            fmt::format("--split {}: not an official split of {} (expected one of {})", name, options_.version, list));
      }
      std::string official = name;
      if (options_.version == "v1.0-mini" && (name == "train" || name == "val")) official = "mini_" + name;
      splits.emplace_back(name, *OfficialNuScenesSplit(official));
    }
    return splits;
  }

  void ReadCategories() {
    Table table(Path("category"), {"token", "name"});
    table.Read(on_bytes_, [&](const Table& t, uint64_t i) { categories_[t.String(i, 0)] = t.String(i, 1); });
  }
  void ReadInstances() {
    Table table(Path("instance"), {"token", "category_token"});
    table.Read(on_bytes_, [&](const Table& t, uint64_t i) {
      const auto it = categories_.find(t.String(i, 1));
      if (it == categories_.end()) t.Fail(i, 1, fmt::format("category {} is not in category.json", t.String(i, 1)));
      instance_class_[t.String(i, 0)] = NuScenesDetectionName(it->second);
    });
  }
  void ReadSensors() {
    Table table(Path("sensor"), {"token", "channel"});
    table.Read(on_bytes_, [&](const Table& t, uint64_t i) {
      if (t.String(i, 1) == "LIDAR_TOP") lidar_sensors_.insert(t.String(i, 0));
    });
    if (lidar_sensors_.empty()) throw ScenarioError(Path("sensor") + ": no sensor with channel LIDAR_TOP");
  }
  void ReadCalibratedSensors() {
    Table table(Path("calibrated_sensor"), {"token", "sensor_token", "translation", "rotation"});
    table.Read(on_bytes_, [&](const Table& t, uint64_t i) {
      if (lidar_sensors_.count(t.String(i, 1)) == 0) return;
      lidar_calibrations_.emplace(t.String(i, 0), ToPose(t, i, 2, 3));
    });
  }
  void ReadScenes() {
    Table table(Path("scene"), {"token", "name", "first_sample_token", "nbr_samples"});
    table.Read(on_bytes_, [&](const Table& t, uint64_t i) {
      SceneRecord scene{t.String(i, 0), t.String(i, 1), t.String(i, 2), t.Integer(i, 3)};
      if (!scene_by_name_.emplace(scene.name, scenes_.size()).second) {
        t.Fail(i, 1, fmt::format("scene name {} appears twice", scene.name));
      }
      scenes_.push_back(std::move(scene));
    });
  }
  void ReadSamples() {
    Table table(Path("sample"), {"token", "timestamp", "scene_token", "next"});
    table.Read(on_bytes_, [&](const Table& t, uint64_t i) {
      SampleRecord sample{t.Integer(i, 1), t.String(i, 2), t.String(i, 3), i};
      if (!samples_.emplace(t.String(i, 0), std::move(sample)).second) {
        t.Fail(i, 0, fmt::format("sample token {} appears twice", t.String(i, 0)));
      }
    });
  }
  void WalkScene(const SceneRecord& scene, std::vector<std::string>& out) const {
    std::string token = scene.first_sample_token;
    uint64_t count = 0;
    while (!token.empty()) {
      const auto it = samples_.find(token);
      if (it == samples_.end()) {
        throw ScenarioError(
            fmt::format("{}: scene {} leads (first_sample_token / next) to sample {}, which is "
                        "not in sample.json",
                        Path("scene"), scene.name, token));
      }
      if (it->second.scene_token != scene.token) {
        throw ScenarioError(
            fmt::format("{}: sample {} of scene {} (reached through first_sample_token / next) "
                        "has scene_token {}",
                        Path("sample"), token, scene.name, it->second.scene_token));
      }
      if (++count > samples_.size()) {
        throw ScenarioError(fmt::format("{}: the next links of scene {} form a cycle", Path("sample"), scene.name));
      }
      out.push_back(token);
      token = it->second.next;
    }
    if (static_cast<int64_t>(count) != scene.nbr_samples) {
      throw ScenarioError(fmt::format("{}: scene {} has nbr_samples {}, but its samples' next links count {}",
                                      Path("scene"), scene.name, scene.nbr_samples, count));
    }
  }
  void ReadSampleData(const std::unordered_set<std::string>& wanted) {
    Table table(Path("sample_data"),
                {"token", "sample_token", "ego_pose_token", "calibrated_sensor_token", "is_key_frame", "prev"});
    table.Read(on_bytes_, [&](const Table& t, uint64_t i) {
      // Every record is checked (the calls throw on a missing or mistyped field).
      const std::string& sample = t.String(i, 1);
      const bool key_frame = t.Bool(i, 4);
      t.String(i, 0);
      t.String(i, 2);
      t.String(i, 5);
      if (lidar_calibrations_.count(t.String(i, 3)) == 0 || !key_frame) return;  // not a LIDAR_TOP keyframe
      if (wanted.count(sample) == 0) return;
      LidarKeyframe keyframe{t.String(i, 0), t.String(i, 2), t.String(i, 3), !t.String(i, 5).empty()};
      wanted_poses_.insert(keyframe.ego_pose_token);
      if (!lidar_keyframes_.emplace(sample, std::move(keyframe)).second) {
        t.Fail(i, 1, fmt::format("sample {} has two LIDAR_TOP keyframes", sample));
      }
    });
  }
  void ReadEgoPoses() {
    Table table(Path("ego_pose"), {"token", "translation", "rotation"});
    table.Read(on_bytes_, [&](const Table& t, uint64_t i) {
      if (wanted_poses_.count(t.String(i, 0)) == 0) return;
      poses_.emplace(t.String(i, 0), ToPose(t, i, 1, 2));
    });
  }
  void ReadAnnotations(const std::unordered_set<std::string>& wanted) {
    Table table(Path("sample_annotation"),
                {"token", "sample_token", "instance_token", "translation", "num_lidar_pts", "num_radar_pts"});
    table.Read(on_bytes_, [&](const Table& t, uint64_t i) {
      // Every record is checked, also those of samples not imported: the table is the input.
      const std::string& sample = t.String(i, 1);
      const auto instance = instance_class_.find(t.String(i, 2));
      if (instance == instance_class_.end()) {
        t.Fail(i, 2, fmt::format("instance {} is not in instance.json", t.String(i, 2)));
      }
      const std::vector<double>& centre = t.Numbers(i, 3, 3);
      auto count = [&](size_t key) {
        const int64_t value = t.Integer(i, key);
        if (value < 0 || value > int64_t{UINT32_MAX}) t.Fail(i, key, fmt::format("expected a count, found {}", value));
        return static_cast<uint32_t>(value);
      };
      const uint32_t lidar = count(4);
      const uint32_t radar = count(5);
      if (wanted.count(sample) == 0) return;
      annotations_[sample].push_back(Annotation{instance->second, {centre[0], centre[1], centre[2]}, lidar, radar});
    });
  }

  ImportedSubDataset BuildSplit(const std::string& name, const std::vector<std::string>& samples,
                                const std::vector<std::pair<std::string, std::string>>& scene_names) const {
    ImportedSubDataset sub;
    sub.name = name;
    sub.source = directory_;
    sub.version = options_.version;
    // The converter's order: sample.json's.
    std::vector<const std::string*> order;
    for (const auto& token : samples) order.push_back(&token);
    std::sort(order.begin(), order.end(), [&](const std::string* a, const std::string* b) {
      return samples_.at(*a).file_index < samples_.at(*b).file_index;
    });
    std::unordered_map<std::string, uint32_t> classes;
    for (const std::string* token : order) {
      const SampleRecord& sample = samples_.at(*token);
      const auto keyframe = lidar_keyframes_.find(*token);
      if (keyframe == lidar_keyframes_.end()) {
        throw ScenarioError(fmt::format("{}: sample {} has no LIDAR_TOP keyframe", Path("sample_data"), *token));
      }
      const auto pose = poses_.find(keyframe->second.ego_pose_token);
      if (pose == poses_.end()) {
        throw ScenarioError(fmt::format("{}: ego pose {} of sample_data {} is not there", Path("ego_pose"),
                                        keyframe->second.ego_pose_token, keyframe->second.token));
      }
      const Pose& calibration = lidar_calibrations_.at(keyframe->second.calibrated_sensor_token);
      ImportedFrame frame;
      frame.token = *token;
      frame.timestamp = sample.timestamp;
      frame.scene_token = sample.scene_token;
      frame.sweeps = keyframe->second.has_prev ? 1 : 0;
      frame.box_begin = static_cast<uint32_t>(sub.boxes.size());
      if (const auto anns = annotations_.find(*token); anns != annotations_.end()) {
        for (const Annotation& ann : anns->second) {
          const Vec3 ego = Into(pose->second.rotation, pose->second.translation, ann.centre);
          const Vec3 lidar = Into(calibration.rotation, calibration.translation, ego);
          ImportedBox box;
          const auto [it, inserted] = classes.emplace(ann.category, static_cast<uint32_t>(sub.class_names.size()));
          if (inserted) sub.class_names.push_back(ann.category);
          box.class_index = it->second;
          box.x = static_cast<float>(lidar[0]);
          box.y = static_cast<float>(lidar[1]);
          box.num_lidar_pts = ann.num_lidar_pts;
          box.num_radar_pts = ann.num_radar_pts;
          sub.boxes.push_back(box);
        }
      }
      frame.box_end = static_cast<uint32_t>(sub.boxes.size());
      sub.frames.push_back(std::move(frame));
    }
    OrderFramesAndCutScenes(sub, scene_names);
    return sub;
  }

  const NuScenesOptions& options_;
  std::string directory_;
  // Progress (options_.progress): bytes of the tables read so far, of all of them.
  std::function<void(uint64_t)> on_bytes_;
  uint64_t bytes_done_ = 0, bytes_total_ = 0;
  std::unordered_map<std::string, std::string> categories_;
  std::unordered_map<std::string, std::string> instance_class_;
  std::unordered_set<std::string> lidar_sensors_;
  std::unordered_map<std::string, Pose> lidar_calibrations_;
  std::vector<SceneRecord> scenes_;
  std::unordered_map<std::string, size_t> scene_by_name_;
  std::unordered_map<std::string, SampleRecord> samples_;
  std::unordered_map<std::string, LidarKeyframe> lidar_keyframes_;
  std::unordered_set<std::string> wanted_poses_;
  std::unordered_map<std::string, Pose> poses_;
  std::unordered_map<std::string, std::vector<Annotation>> annotations_;
};

}  // namespace

std::vector<ImportedSubDataset> ReadNuScenesTables(const NuScenesOptions& options) {
  return TablesReader(options).Read();
}

}  // namespace petrsim
