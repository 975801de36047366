// Imported datasets: ordering, scenes, summary and the scenario file; see imported_dataset.h.
#include "importers/imported_dataset.h"

#include <fmt/format.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unordered_map>

#include "base/assert.h"
#include "base/error.h"
#include "base/temp_files.h"
#include "data/box_filter.h"
#include "data/sequence_groups.h"
#include "scenario/scenario_defaults.h"

namespace petrsim {
namespace {

constexpr size_t kWarningsShownMax = 5;

Filters FiltersProto(const ImportFilters& filters) {
  Filters proto;
  proto.set_filter_empty_gt(filters.filter_empty_gt);
  proto.set_use_valid_flag(filters.use_valid_flag);
  const std::vector<std::string>& classes = filters.classes.empty() ? NuScenesClasses() : filters.classes;
  for (const auto& name : classes) proto.add_classes(name);
  proto.set_bev_range_min_m(filters.bev_range_min_m);
  proto.set_bev_range_max_m(filters.bev_range_max_m);
  for (const auto& [name, max_m] : filters.circle_range) {
    ClassDistance* c = proto.add_circle_range();
    c->set_name(name);
    c->set_max_m(max_m);
  }
  return proto;
}

// Whether a box survives mmdet3d's filters; the stored valid_flag wins over the point counts
// when use_valid_flag is on (mmdet3d reads info['valid_flag']), as data/dataset.cc does.
bool Keeps(const BoxFilter& filter, bool use_valid_flag, float target, const ImportedBox& box) {
  if (use_valid_flag && box.valid_flag >= 0) {
    return filter.Keeps(target, box.x, box.y, box.valid_flag ? 1 : 0, 0);
  }
  return filter.Keeps(target, box.x, box.y, box.num_lidar_pts, box.num_radar_pts);
}

std::string ShortToken(const std::string& token) { return token.size() > 12 ? token.substr(0, 12) + "..." : token; }

// A text-format string literal.
std::string Quote(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += fmt::format("\\{:03o}", u);
        } else {
          out.push_back(c);
        }
    }
  }
  return out + "\"";
}

// The shortest decimal that reads back as the same float32 (a double parse then a float32
// rounding gives it back too: float32 midpoints are exact doubles).
void AppendFloat(std::string& out, float value) {
  char buffer[32];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, result.ptr);
}

void AppendInteger(std::string& out, uint32_t value) {
  char buffer[16];
  const auto result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  out.append(buffer, result.ptr);
}

// Whether a frame's boxes need a num_radar_pts column (left out when every count is 0).
bool HasRadarPoints(const ImportedSubDataset& sub, const ImportedFrame& frame) {
  for (uint32_t b = frame.box_begin; b < frame.box_end; ++b) {
    if (sub.boxes[b].num_radar_pts != 0) return true;
  }
  return false;
}

bool EndsWith(const std::string& text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The scenario without its dataset: name, description, filters, grouping.
Scenario Header(const std::vector<ImportedSubDataset>& data, const ImportFilters& filters,
                const std::string& description, const ScenarioOverlay* overlay) {
  Scenario scenario;
  std::string name = "imported";
  for (size_t i = 0; i < data.size(); ++i) name += (i == 0 ? ": " : " + ") + data[i].name;
  scenario.set_name(name);
  scenario.set_description(description);
  *scenario.mutable_filters() = FiltersProto(filters);
  scenario.mutable_grouping()->set_seq_mode(filters.seq_mode);
  scenario.mutable_grouping()->set_seq_split_num(filters.seq_split_num);
  if (overlay != nullptr) {
    const Scenario& f = overlay->fields;
    if (f.has_filters()) *scenario.mutable_filters() = f.filters();
    if (f.has_grouping()) *scenario.mutable_grouping() = f.grouping();
    if (f.has_sampler()) *scenario.mutable_sampler() = f.sampler();
    if (f.has_resample()) *scenario.mutable_resample() = f.resample();
    if (f.has_job()) *scenario.mutable_job() = f.job();
    if (f.has_plan()) *scenario.mutable_plan() = f.plan();
    if (f.has_comm()) *scenario.mutable_comm() = f.comm();
    if (f.has_pipeline()) *scenario.mutable_pipeline() = f.pipeline();
    if (f.has_user_source()) *scenario.mutable_user_source() = f.user_source();
  }
  return scenario;
}

}  // namespace

void OrderFramesAndCutScenes(ImportedSubDataset& subdataset,
                             const std::vector<std::pair<std::string, std::string>>& scene_names) {
  auto& frames = subdataset.frames;
  std::stable_sort(frames.begin(), frames.end(),
                   [](const ImportedFrame& a, const ImportedFrame& b) { return a.timestamp < b.timestamp; });
  std::unordered_map<std::string, std::string> names(scene_names.begin(), scene_names.end());
  std::unordered_map<std::string, int> name_uses;
  subdataset.scenes.clear();
  subdataset.scene_token_disagreements = 0;
  for (uint32_t k = 0; k < frames.size(); ++k) {
    const ImportedFrame& frame = frames[k];
    const bool rule_starts = k == 0 || frame.sweeps == 0;
    if (k > 0 && !frame.scene_token.empty() && !frames[k - 1].scene_token.empty()) {
      const bool token_starts = frame.scene_token != frames[k - 1].scene_token;
      if (token_starts != rule_starts) {
        ++subdataset.scene_token_disagreements;
        if (subdataset.warnings.size() < kWarningsShownMax) {
          subdataset.warnings.push_back(
              rule_starts ? fmt::format("frame {} (token {}): no lidar sweeps, so StreamPETR starts a new "
                                        "scene there, but its scene_token is the previous frame's",
                                        k, ShortToken(frame.token))
                          : fmt::format("frame {} (token {}): its scene_token changes, but it has lidar "
                                        "sweeps, so StreamPETR keeps it in the previous scene",
                                        k, ShortToken(frame.token)));
        }
      }
    }
    if (rule_starts) {
      ImportedScene scene;
      const auto known = names.find(frame.scene_token);
      std::string name = known != names.end()        ? known->second
                         : !frame.scene_name.empty() ? frame.scene_name
                                                     : frame.scene_token;
      if (!name.empty() && ++name_uses[name] > 1) name += fmt::format(" (part {})", name_uses[name]);
      scene.name = name;
      scene.frame_begin = k;
      subdataset.scenes.push_back(scene);
    }
    subdataset.scenes.back().frame_end = k + 1;
  }
}

void KeepOrderAndCutScenesBySceneId(ImportedSubDataset& subdataset, bool interval_test) {
  auto& frames = subdataset.frames;
  if (interval_test) {
    // argoverse2_dataset_t.py:27-31: infos[0::5] + infos[1::5] + ... + infos[4::5].
    std::vector<ImportedFrame> reordered;
    reordered.reserve(frames.size());
    for (size_t start = 0; start < 5; ++start) {
      for (size_t k = start; k < frames.size(); k += 5) reordered.push_back(std::move(frames[k]));
    }
    frames = std::move(reordered);
  }
  std::unordered_map<std::string, int> name_uses;
  subdataset.scenes.clear();
  subdataset.scene_token_disagreements = 0;
  for (uint32_t k = 0; k < frames.size(); ++k) {
    // argoverse2_dataset_t.py:44-53: a new sequence wherever scene_id differs from the previous
    // frame's, so a log that interval_test splits into runs is a scene per run.
    if (k == 0 || frames[k].scene_token != frames[k - 1].scene_token) {
      ImportedScene scene;
      scene.name = frames[k].scene_token;
      if (++name_uses[scene.name] > 1) scene.name += fmt::format(" (part {})", name_uses[scene.name]);
      scene.frame_begin = k;
      subdataset.scenes.push_back(std::move(scene));
    }
    subdataset.scenes.back().frame_end = k + 1;
  }
}

std::vector<std::string> SplitCommaList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string item = text.substr(start, comma - start);
    item.erase(0, item.find_first_not_of(' '));
    item.erase(item.find_last_not_of(' ') + 1);
    out.push_back(std::move(item));
    start = comma + 1;
  }
  return out;
}

void ParseRangeOption(const std::string& text, ImportFilters& filters) {
  std::vector<double> values;
  for (const std::string& item : SplitCommaList(text)) {
    double value = 0;
    const auto result = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || result.ec != std::errc() || result.ptr != item.data() + item.size() || !std::isfinite(value)) {
      throw ScenarioError(fmt::format("--range {}: '{}' is not a number", text, item));
    }
    values.push_back(value);
  }
  double low = 0, high = 0;
  if (values.size() == 6) {
    if (values[0] != values[1] || values[3] != values[4]) {
      throw ScenarioError(
          fmt::format("--range {}: x in [{}, {}] and y in [{}, {}] differ; the scenario keeps one "
                      "BEV range for "
                      "both (filters.bev_range_min_m / bev_range_max_m)",
                      text, values[0], values[3], values[1], values[4]));
    }
    low = values[0];
    high = values[3];
  } else if (values.size() == 2) {
    low = values[0];
    high = values[1];
  } else {
    throw ScenarioError(
        fmt::format("--range {}: expected 6 numbers (a point_cloud_range: x_min, y_min, "
                    "z_min, x_max, y_max, z_max) or 2 (min, max), got {}",
                    text, values.size()));
  }
  if (!(low < high)) throw ScenarioError(fmt::format("--range {}: the minimum must be below the maximum", text));
  filters.bev_range_min_m = low;
  filters.bev_range_max_m = high;
}

namespace {

// The boxes each frame of `sub` keeps under the filters (its GT as the dataset sees it).
std::vector<uint32_t> KeptPerFrame(const ImportedSubDataset& sub, const BoxFilter& filter,
                                   const ImportFilters& filters) {
  std::vector<float> target(sub.class_names.size());
  for (size_t c = 0; c < target.size(); ++c) target[c] = filter.ClassLimit(sub.class_names[c]);
  std::vector<uint32_t> gt(sub.frames.size(), 0);
  for (size_t f = 0; f < sub.frames.size(); ++f) {
    for (uint32_t b = sub.frames[f].box_begin; b < sub.frames[f].box_end; ++b) {
      const ImportedBox& box = sub.boxes[b];
      gt[f] += Keeps(filter, filters.use_valid_flag, target[box.class_index], box);
    }
  }
  return gt;
}

// The sampler's groups of `sub` and those without GT (`gt`: per frame): one for the whole of it, or with
// seq_mode the seq_split_num chunks of each scene; a scene that cannot be cut so is warned about.
void CountGroups(const ImportedSubDataset& sub, const std::vector<uint32_t>& gt, const ImportFilters& filters,
                 ImportCounts& counts, std::vector<std::string>& warnings) {
  if (!filters.seq_mode) {
    // One group for the whole sub-dataset (mmdet3d's flag of zeros): no chunks, nothing to split.
    counts.groups = 1;
    counts.zero_gt_groups = std::all_of(gt.begin(), gt.end(), [](uint32_t g) { return g == 0; }) ? 1 : 0;
    return;
  }
  size_t unsplittable = 0;
  for (const auto& scene : sub.scenes) {
    const uint32_t n = scene.frame_end - scene.frame_begin;
    const std::vector<uint32_t> lengths = SceneChunkLengths(n, filters.seq_split_num);
    if (lengths.size() != filters.seq_split_num && filters.seq_split_count_asserted &&
        ++unsplittable <= kWarningsShownMax) {
      warnings.push_back(
          fmt::format("{}: scene '{}' (frames {}-{}) has {} frame(s): seq_split_num {} cuts it into {} "
                      "chunk(s), "
                      "but mmdet3d asserts every scene yields {} (the real job fails when it builds the "
                      "dataset; petrsim check reports it)",
                      sub.name, scene.name, scene.frame_begin, scene.frame_end - 1, n, filters.seq_split_num,
                      lengths.size(), filters.seq_split_num));
    }
    uint32_t at = scene.frame_begin;
    for (const uint32_t length : lengths) {
      ++counts.groups;
      counts.zero_gt_groups +=
          std::all_of(gt.begin() + at, gt.begin() + at + length, [](uint32_t g) { return g == 0; });
      at += length;
    }
    PETRSIM_ASSERT(at == scene.frame_end);  // the chunks cover the scene, each frame once
  }
  if (unsplittable > kWarningsShownMax) {
    warnings.push_back(fmt::format("{}: {} more scene(s) seq_split_num {} cannot cut", sub.name,
                                   unsplittable - kWarningsShownMax, filters.seq_split_num));
  }
}

}  // namespace

ImportSummary Summarize(const std::vector<ImportedSubDataset>& data, const ImportFilters& filters) {
  ImportSummary summary;
  const BoxFilter filter(FiltersProto(filters));
  summary.total.name = "total";
  for (const auto& sub : data) {
    ImportCounts counts;
    counts.name = sub.name;
    counts.frames = sub.frames.size();
    counts.scenes = sub.scenes.size();
    counts.boxes = sub.boxes.size();
    const std::vector<uint32_t> gt = KeptPerFrame(sub, filter, filters);
    for (const uint32_t kept : gt) {
      counts.boxes_kept += kept;
      counts.zero_gt_frames += kept == 0;
    }
    CountGroups(sub, gt, filters, counts, summary.warnings);
    // Each count is of a subset of what it is counted in.
    PETRSIM_ASSERT(counts.boxes_kept <= counts.boxes);
    PETRSIM_ASSERT(counts.zero_gt_frames <= counts.frames);
    PETRSIM_ASSERT(counts.zero_gt_groups <= counts.groups);
    if (sub.scene_token_disagreements > 0) {
      summary.warnings.push_back(
          fmt::format("{}: {} frame(s) where a new scene by the zero-sweeps rule (which StreamPETR uses) and a "
                      "scene_token change disagree; the scenes follow the rule",
                      sub.name, sub.scene_token_disagreements));
    }
    for (const auto& warning : sub.warnings) summary.warnings.push_back(sub.name + ": " + warning);
    summary.sampler_groups = std::max(summary.sampler_groups, counts.groups);
    for (auto* total : {&summary.total}) {
      total->frames += counts.frames;
      total->scenes += counts.scenes;
      total->groups += counts.groups;
      total->zero_gt_frames += counts.zero_gt_frames;
      total->zero_gt_groups += counts.zero_gt_groups;
      total->boxes += counts.boxes;
      total->boxes_kept += counts.boxes_kept;
    }
    summary.subdatasets.push_back(counts);
  }
  return summary;
}

std::string FormatFilterSettings(const ImportFilters& filters) {
  const std::vector<std::string>& classes = filters.classes.empty() ? NuScenesClasses() : filters.classes;
  std::string class_list;
  for (size_t i = 0; i < classes.size(); ++i) class_list += (i ? ", " : "") + classes[i];
  struct Setting {
    const char* key;  // in ImportFilters::origins
    std::string name, value, option, set;
  };
  const auto flag = [](bool value) { return value ? "true" : "false"; };
  const std::vector<Setting> settings = {
      {"filter_empty_gt", "filter_empty_gt", flag(filters.filter_empty_gt),
       filters.filter_empty_gt ? "--no-filter-empty-gt" : "(leave out --no-filter-empty-gt)",
       fmt::format("--set filters.filter_empty_gt={}", flag(!filters.filter_empty_gt))},
      {"use_valid_flag", "use_valid_flag", flag(filters.use_valid_flag),
       filters.use_valid_flag ? "--no-valid-flag" : "(leave out --no-valid-flag)",
       fmt::format("--set filters.use_valid_flag={}", flag(!filters.use_valid_flag))},
      {"classes", "class_names", fmt::format("{} (below)", classes.size()), "--classes a,b,...",
       "--set filters.classes=a,b,..."},
      {"range", "point_cloud_range", fmt::format("x, y in ({}, {})", filters.bev_range_min_m, filters.bev_range_max_m),
       "--range x0,y0,z0,x1,y1,z1", "--set filters.bev_range_min_m=X0 --set filters.bev_range_max_m=X1"},
      {"seq_mode", "seq_mode", flag(filters.seq_mode), "-",
       fmt::format("--set grouping.seq_mode={}", flag(!filters.seq_mode))},
      {"seq_split_num", "seq_split_num", filters.seq_mode ? std::to_string(filters.seq_split_num) : "-",
       "--seq-split-num N", "--set grouping.seq_split_num=N"},
  };
  bool assumed_any = false;
  size_t from_width = 18;
  for (const auto& [key, origin] : filters.origins) from_width = std::max(from_width, origin.size());
  std::string rows;
  for (const Setting& setting : settings) {
    const auto origin = filters.origins.find(setting.key);
    const bool assumed = origin == filters.origins.end();
    assumed_any |= assumed;
    rows += fmt::format("  {:<17}  {:<22}  {:<{}}  {:<26}  {}\n", setting.name, setting.value,
                        assumed ? "assumed" : origin->second, from_width,
                        filters.from_config ? "(edit the config)" : setting.option, setting.set);
  }
  std::string out = assumed_any ? "filters and grouping written into the scenario (\"assumed\": petrsim's default, "
                                  "StreamPETR's reference config,\nnot read from your config: check each against it):\n"
                                : "filters and grouping written into the scenario:\n";
  out += fmt::format("  {:<17}  {:<22}  {:<{}}  {:<26}  {}\n", "setting", "value", "from", from_width,
                     "change it at import", "or on the scenario (check, sample, sweep, run)");
  out += rows;
  out += "  class_names: " + class_list + "\n";
  if (filters.origins.count("filter_empty_gt") == 0 && filters.filter_empty_gt) {
    out +=
        "  (filter_empty_gt true is mmdet3d's default, which a config without it gets; StreamPETR's current configs, "
        "e.g. stream_petr_r50_flash_704_bs2_seq_24e.py, set filter_empty_gt=False: then no frame is resampled and "
        "the job cannot livelock)\n";
  }
  return out;
}

std::string FormatSummary(const ImportSummary& summary, const ImportFilters& filters, const std::string& output_path,
                          const std::string& written) {
  std::string out = fmt::format("wrote {}{}\n", output_path, written);
  size_t width = 5;
  for (const auto& counts : summary.subdatasets) width = std::max(width, counts.name.size());
  out += fmt::format("  {:<{}}  {:>8}  {:>6}  {:>6}  {:>14}  {:>14}  {:>9}  {:>9}\n", "", width, "frames", "scenes",
                     "groups", "zero-GT frames", "zero-GT groups", "boxes", "boxes kept");
  auto row = [&](const ImportCounts& c) {
    out += fmt::format("  {:<{}}  {:>8}  {:>6}  {:>6}  {:>14}  {:>14}  {:>9}  {:>9}\n", c.name, width, c.frames,
                       c.scenes, c.groups, c.zero_gt_frames, c.zero_gt_groups, c.boxes, c.boxes_kept);
  };
  for (const auto& counts : summary.subdatasets) row(counts);
  if (summary.subdatasets.size() > 1) row(summary.total);
  if (filters.seq_mode) {
    out += fmt::format(
        "groups: seq_split_num {} chunks per scene; the sampler sees {} group(s) (sub-datasets' "
        "flags are concatenated without offset)\n",
        filters.seq_split_num, summary.sampler_groups);
  } else {
    out +=
        "groups: no sequence mode: each sub-dataset is one group (mmdet3d's flag of zeros), which a resample "
        "draws from\n";
  }
  out += FormatFilterSettings(filters);
  for (const auto& warning : summary.warnings) out += "warning: " + warning + "\n";
  out += fmt::format("next: petrsim check {}\n", output_path);
  return out;
}

Scenario ToScenario(const std::vector<ImportedSubDataset>& data, const ImportFilters& filters,
                    const std::string& description, const ScenarioOverlay* overlay) {
  Scenario scenario = Header(data, filters, description, overlay);
  for (const auto& sub : data) {
    SubDataset* out = scenario.mutable_dataset()->add_subdatasets();
    out->set_name(sub.name);
    ExplicitData* explicit_data = out->mutable_explicit_();
    for (const auto& name : sub.class_names) explicit_data->add_class_names(name);
    for (const auto& scene : sub.scenes) {
      Scene* scene_out = explicit_data->add_scenes();
      if (!scene.name.empty()) scene_out->set_name(scene.name);
      for (uint32_t f = scene.frame_begin; f < scene.frame_end; ++f) {
        const ImportedFrame& frame = sub.frames[f];
        Frame* frame_out = scene_out->add_frames();
        frame_out->set_token(frame.token);
        if (frame.box_begin == frame.box_end) continue;
        BoxColumns& columns = *frame_out->mutable_box_columns();
        const uint32_t n = frame.box_end - frame.box_begin;
        columns.mutable_class_index()->Reserve(static_cast<int>(n));
        columns.mutable_x()->Reserve(static_cast<int>(n));
        columns.mutable_y()->Reserve(static_cast<int>(n));
        columns.mutable_num_lidar_pts()->Reserve(static_cast<int>(n));
        const bool radar = HasRadarPoints(sub, frame);
        for (uint32_t b = frame.box_begin; b < frame.box_end; ++b) {
          const ImportedBox& box = sub.boxes[b];
          columns.add_class_index(box.class_index);
          columns.add_x(box.x);
          columns.add_y(box.y);
          columns.add_num_lidar_pts(box.num_lidar_pts);
          if (radar) columns.add_num_radar_pts(box.num_radar_pts);
          if (box.valid_flag >= 0) columns.add_valid_flag_differs(b - frame.box_begin);
        }
      }
    }
  }
  return scenario;
}

namespace {

// The binary and JSON files are small enough to build the whole Scenario message in memory and
// write it at once; only the text file is streamed.
uint64_t WriteEncodedScenarioFile(const std::vector<ImportedSubDataset>& data, const ImportFilters& filters,
                                  const std::string& description, const std::string& path,
                                  const ScenarioOverlay* overlay) {
  const Scenario scenario = ToScenario(data, filters, description, overlay);
  std::string bytes;
  if (ScenarioFileFormatOf(path) == ScenarioFileFormat::kBinary) {
    PETRSIM_ASSERT(scenario.SerializeToString(&bytes));
  } else {
    google::protobuf::util::JsonPrintOptions options;
    options.add_whitespace = true;
    const auto status = google::protobuf::util::MessageToJsonString(scenario, &bytes, options);
    if (!status.ok())
      throw ScenarioError(fmt::format("{}: cannot write JSON: {}", path, std::string(status.message())));
  }
  AtomicFile file(path, AtomicFile::TempName::kUnique);
  file.Write(bytes);
  file.Commit();
  return bytes.size();
}

// The text file's opening: the comment that explains the format and, where the job was
// overlaid, where each value came from; then the header fields and the start of the dataset.
std::string TextScenarioOpening(const std::vector<ImportedSubDataset>& data, const ImportFilters& filters,
                                const std::string& description, const ScenarioOverlay* overlay) {
  std::string out =
      "# A petrsim scenario written by `petrsim import` (proto/scenario.proto documents every "
      "field).\n"
      "# Each frame's boxes are columns (BoxColumns), one value per box: class_index into the\n"
      "# sub-dataset's class_names, x, y (centres in the lidar frame, rounded to float32 as mmdet3d's\n"
      "# range filter compares them), num_lidar_pts, num_radar_pts (none: all 0), and\n"
      "# valid_flag_differs: the boxes whose stored valid_flag is not what their points give.\n"
      "# Fields not written here take petrsim's defaults, StreamPETR's reference configuration\n"
      "# (8 ranks x 2 samples per GPU, 4 workers, the infinite group sampler, in_group resampling,\n"
      "# one epoch); set your job's with --set, e.g.\n"
      "#   petrsim check THIS --set job.world_size=16 --set job.epochs=24\n";
  std::string header;
  if (overlay != nullptr && !overlay->comments.empty()) {
    out += "#\n# Where each value of the job came from:\n";
    for (const std::string& line : overlay->comments) out += "#   " + line + "\n";
  }
  google::protobuf::TextFormat::PrintToString(Header(data, filters, description, overlay), &header);
  out += header;
  out += "dataset {\n";
  return out;
}

// One frame with boxes, as text: its box_columns block, written by hand rather than through
// TextFormat so that a large dataset is not built as messages first.
void AppendFrameBoxColumns(std::string& out, const ImportedSubDataset& sub, const ImportedFrame& frame) {
  out += "\n          box_columns {\n";
  const auto column = [&](const char* name, auto value_of) {
    out += "            ";
    out += name;
    out += ": [";
    for (uint32_t b = frame.box_begin; b < frame.box_end; ++b) {
      if (b != frame.box_begin) out += ", ";
      value_of(sub.boxes[b]);
    }
    out += "]\n";
  };
  column("class_index", [&](const ImportedBox& box) { AppendInteger(out, box.class_index); });
  column("x", [&](const ImportedBox& box) { AppendFloat(out, box.x); });
  column("y", [&](const ImportedBox& box) { AppendFloat(out, box.y); });
  column("num_lidar_pts", [&](const ImportedBox& box) { AppendInteger(out, box.num_lidar_pts); });
  if (HasRadarPoints(sub, frame)) {
    column("num_radar_pts", [&](const ImportedBox& box) { AppendInteger(out, box.num_radar_pts); });
  }
  std::string differs;
  for (uint32_t b = frame.box_begin; b < frame.box_end; ++b) {
    if (sub.boxes[b].valid_flag < 0) continue;
    if (!differs.empty()) differs += ", ";
    AppendInteger(differs, b - frame.box_begin);
  }
  if (!differs.empty()) out += "            valid_flag_differs: [" + differs + "]\n";
  out += "          }\n        }\n";
}

}  // namespace

uint64_t WriteScenarioFile(const std::vector<ImportedSubDataset>& data, const ImportFilters& filters,
                           const std::string& description, const std::string& path, const ScenarioOverlay* overlay) {
  if (ScenarioFileFormatOf(path) != ScenarioFileFormat::kText) {
    return WriteEncodedScenarioFile(data, filters, description, path, overlay);
  }
  // The temporary file is opened before the header is built, as before, so that any error comes in
  // the same order.
  AtomicFile file(path, AtomicFile::TempName::kUnique);
  uint64_t written = 0;
  std::string out = TextScenarioOpening(data, filters, description, overlay);
  // The text is written in pieces of about 1 MiB so that a large dataset's file is never held
  // whole in memory.
  const auto flush = [&] {
    file.Write(out);
    written += out.size();
    out.clear();
  };
  for (const auto& sub : data) {
    out += "  subdatasets {\n    name: " + Quote(sub.name) + "\n    explicit {\n";
    if (!sub.class_names.empty()) {
      out += "      class_names: [";
      for (size_t c = 0; c < sub.class_names.size(); ++c) out += (c ? ", " : "") + Quote(sub.class_names[c]);
      out += "]\n";
    }
    for (const auto& scene : sub.scenes) {
      out += "      scenes {\n";
      if (!scene.name.empty()) out += "        name: " + Quote(scene.name) + "\n";
      for (uint32_t f = scene.frame_begin; f < scene.frame_end; ++f) {
        const ImportedFrame& frame = sub.frames[f];
        out += "        frames { token: " + Quote(frame.token);
        if (frame.box_begin == frame.box_end) {
          out += " }\n";
          continue;
        }
        AppendFrameBoxColumns(out, sub, frame);
        if (out.size() > (1u << 20)) flush();
      }
      out += "      }\n";
    }
    out += "    }\n  }\n";
  }
  out += "}\n";
  flush();
  file.Commit();
  return written;
}

ScenarioFileFormat ScenarioFileFormatOf(const std::string& path) {
  if (EndsWith(path, ".pb")) return ScenarioFileFormat::kBinary;
  if (EndsWith(path, ".json")) return ScenarioFileFormat::kJson;
  return ScenarioFileFormat::kText;
}

}  // namespace petrsim
