// A dataset read from a user's real metadata (mmdet3d info pickles or the nuScenes tables), in
// the form both importers produce: per sub-dataset the frames in its dataset class's order
// (StreamPETR's: sorted by timestamp; Far3D's Argoverse 2: the file's), its scenes (StreamPETR's:
// a scene starts at every frame without lidar sweeps; Far3D's: wherever scene_id changes) and the
// annotated boxes with what mmdet3d's filters look at. From it come the scenario (ToScenario, or
// WriteScenarioFile for a large one) and the import summary.
//
// Invariants: frames are in the dataset's order (OrderFramesAndCutScenes or
// KeepOrderAndCutScenesBySceneId); scenes cover the frames contiguously, in order, the first
// starting at frame 0; boxes of a frame are the range [box_begin, box_end).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "proto/scenario.pb.h"

namespace petrsim {

struct ImportedBox {
  uint32_t class_index = 0;  // into ImportedSubDataset::class_names
  // BEV centre in the lidar frame, rounded to float32: mmdet3d compares float32 boxes with a
  // float32 range, so this is exactly what its ObjectRangeFilter sees.
  float x = 0;
  float y = 0;
  uint32_t num_lidar_pts = 0;
  uint32_t num_radar_pts = 0;
  // The info file's valid_flag when it differs from lidar + radar points > 0 (what the converter
  // writes); -1 when it agrees or is unknown.
  int8_t valid_flag = -1;
};

struct ImportedFrame {
  std::string token;
  int64_t timestamp = 0;
  std::string scene_token;  // empty when the source has none; Argoverse 2: the scene_id (log id)
  std::string scene_name;   // the nuScenes scene name, when the source has it (else empty)
  uint32_t sweeps = 0;      // lidar sweeps before the keyframe (only 0 vs > 0 matters)
  uint32_t box_begin = 0;
  uint32_t box_end = 0;
};

struct ImportedScene {
  std::string name;
  uint32_t frame_begin = 0;
  uint32_t frame_end = 0;
};

struct ImportedSubDataset {
  std::string name;     // the scenario's sub-dataset name
  std::string source;   // the file or directory it came from
  std::string version;  // the metadata's version, e.g. "v1.0-trainval" (may be empty)
  std::vector<std::string> class_names;
  std::vector<ImportedBox> boxes;
  std::vector<ImportedFrame> frames;
  std::vector<ImportedScene> scenes;
  // Frames where the zero-sweeps rule and scene_token disagree (a new scene by one, not by the
  // other), and a few of them described for the summary.
  uint64_t scene_token_disagreements = 0;
  std::vector<std::string> warnings;
};

// The filters of the user's config, recorded in the scenario's `filters`. Defaults: StreamPETR's
// (docs/reference/streampetr.md, section 9).
struct ImportFilters {
  std::vector<std::string> classes;  // empty: the ten nuScenes detection classes
  double bev_range_min_m = -51.2;
  double bev_range_max_m = 51.2;
  // CircleObjectRangeFilter: per class, the largest BEV distance kept (empty: no such filter).
  std::vector<std::pair<std::string, double>> circle_range;
  bool use_valid_flag = true;
  bool filter_empty_gt = true;
  uint32_t seq_split_num = 2;
  bool seq_split_count_asserted = true;  // false: a short scene yields fewer chunks (Far3D)
  bool seq_mode = true;                  // StreamPETR's streaming configs; a config may say otherwise
  bool from_config = false;              // read from a config (`import mmdet3d-config`): no import option changes them
  // Where each value came from, by setting ("filter_empty_gt", "use_valid_flag", "classes",
  // "range", "seq_mode", "seq_split_num"): the option that set it (e.g. "--no-valid-flag") or a config's
  // "file:line". A setting not listed is petrsim's default, an assumption the summary says how
  // to change.
  std::map<std::string, std::string> origins;
};

// Frames in the source's order (the converter's) with boxes: sorts them by timestamp (stably,
// as Python's sorted), cuts scenes with the zero-sweeps rule, names each scene by
// `scene_names[its first frame's scene_token]` when given, else by that frame's scene_name,
// else by its scene_token, and counts the frames where a scene_token change and the rule
// disagree.
void OrderFramesAndCutScenes(ImportedSubDataset& subdataset,
                             const std::vector<std::pair<std::string, std::string>>& scene_names = {});

// Far3D's Argoverse 2 order (argoverse2_dataset.py:94-97 and argoverse2_dataset_t.py:27-55): the
// frames stay in the file's order (no sort), reordered as infos[0::5] + ... + infos[4::5] when
// `interval_test`, then a scene starts wherever scene_token (the info's scene_id) differs from the
// previous frame's; scenes are named by it (" (part N)" when a log comes back).
void KeepOrderAndCutScenesBySceneId(ImportedSubDataset& subdataset, bool interval_test);

// "--range": 6 numbers (a point_cloud_range: x_min, y_min, z_min, x_max, y_max, z_max) or 2
// (min, max); x and y must share their bounds, as the scenario keeps one BEV range.
void ParseRangeOption(const std::string& text, ImportFilters& filters);

// The items of a comma-separated option value, each trimmed of spaces; empty items are kept.
std::vector<std::string> SplitCommaList(const std::string& text);

// The counts the summary prints, per sub-dataset and in total.
struct ImportCounts {
  std::string name;
  uint64_t frames = 0;
  uint64_t scenes = 0;
  uint64_t groups = 0;  // sequence chunks (seq_split_num per scene)
  uint64_t zero_gt_frames = 0;
  uint64_t zero_gt_groups = 0;
  uint64_t boxes = 0;
  uint64_t boxes_kept = 0;  // after the filters
};
struct ImportSummary {
  std::vector<ImportCounts> subdatasets;
  ImportCounts total;
  uint64_t sampler_groups = 0;  // flags are concatenated without offset: the largest sub-dataset's
  std::vector<std::string> warnings;
};
ImportSummary Summarize(const std::vector<ImportedSubDataset>& data, const ImportFilters& filters);
// `written` follows the path on the first line, e.g. " (binary protobuf, 15.5 MB)".
std::string FormatSummary(const ImportSummary& summary, const ImportFilters& filters, const std::string& output_path,
                          const std::string& written = "");
// The summary's table of the filter settings: each value, where it came from ("assumed" for
// petrsim's default), and the option and the --set that change it.
std::string FormatFilterSettings(const ImportFilters& filters);

// The scenario: the data as explicit sub-datasets (each frame's boxes as BoxColumns, the class
// names in explicit.class_names), the filters, and petrsim's defaults (StreamPETR's reference
// configuration) for everything else.
// What a config sets beyond the dataset (`import mmdet3d-config`): the messages `fields` has (job, grouping,
// filters, sampler, plan, comm, pipeline) replace the import's defaults; `comments` (where each value came from)
// head a text file, one `# ` line each.
struct ScenarioOverlay {
  Scenario fields;
  std::vector<std::string> comments;
};
Scenario ToScenario(const std::vector<ImportedSubDataset>& data, const ImportFilters& filters,
                    const std::string& description, const ScenarioOverlay* overlay = nullptr);

// The encoding a scenario file gets from its name: binary protobuf for ".pb", the protobuf JSON
// mapping for ".json", the text format for any other name (".pbtxt").
enum class ScenarioFileFormat { kText, kBinary, kJson };
ScenarioFileFormat ScenarioFileFormatOf(const std::string& path);

// Writes the scenario to `path` atomically (a temporary file renamed at the end; nothing is left
// on error) in the encoding its name gives (ScenarioFileFormatOf). Text is written directly,
// each frame's box columns as lists (`x: [12.5, -3.25]`). Returns the bytes written.
uint64_t WriteScenarioFile(const std::vector<ImportedSubDataset>& data, const ImportFilters& filters,
                           const std::string& description, const std::string& path,
                           const ScenarioOverlay* overlay = nullptr);

}  // namespace petrsim
