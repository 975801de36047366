// The job an mmdet3d config describes; see mmdet3d_config_job.h. One method per section of the
// config (loader, world, train datasets, grouping, filters, pipeline, model, sampler, length,
// evaluation, communication), each writing its scenario fields with where each value came from.
#include "importers/mmdet3d_config_job.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "importers/config_field_reader.h"
#include "importers/dataset_semantics.h"
#include "importers/dataset_source.h"
#include "model/error.h"
#include "model/streampetr_ddp_model.h"

namespace petrsim {
namespace {

// Train-pipeline ops that draw nothing from numpy (StreamPETR's and mmdet3d's loading, filtering, formatting).
constexpr const char* kNoDrawOps[] = {"LoadMultiViewImageFromFiles", "LoadAnnotations3D",
                                      "ObjectRangeFilter",           "ObjectNameFilter",
                                      "NormalizeMultiviewImage",     "PadMultiViewImage",
                                      "PETRFormatBundle3D",          "Collect3D",
                                      "DefaultFormatBundle3D",       "LoadPointsFromFile",
                                      "LoadPointsFromMultiSweeps",   "PhotoMetricDistortionMultiViewImage",
                                      "CircleObjectRangeFilter"};

// One dataset of the train set (ConcatDataset order), with the semantics of its type.
struct TrainPart {
  const ConfigDict* dict = nullptr;
  std::string path;  // "data.train", "data.train.datasets[1]", "data.train.dataset"
  const DatasetSemantics* semantics = nullptr;
};

class ConfigJobBuilder {
 public:
  ConfigJobBuilder(const Config& config, const ConfigJobOptions& options)
      : config_(config), options_(options), r_(config) {}

  ConfigJob Build() {
    data_ = r_.Dict(config_.Find("data"), "data");
    if (data_ == nullptr) {
      throw ScenarioError(fmt::format("{}: the config has no `data` dict (data = dict(...))", config_.path));
    }
    ReadLoader();
    ReadWorld();
    ReadTrainParts();
    ReadInfoPaths();
    ReadGrouping();
    ReadDatasetFilters();
    ReadPipeline();
    ReadClasses();
    ReadModel();
    ReadLength();
    ReadSampler();
    ReadEvaluation();
    ReadCommAndSeed();
    return std::move(out_);
  }

 private:
  Scenario& s() { return out_.scenario; }
  void Record(const std::string& field, const std::string& value, const std::string& from) {
    out_.provenance.push_back(fmt::format("{} = {}  # {}", field, value, from));
  }
  // Where the first train part that sets `key` set it ("" when none does).
  const ConfigValue* PartValue(std::string_view key) const {
    for (const TrainPart& part : parts_) {
      if (const ConfigValue* v = Get(part.dict, key)) return v;
    }
    return nullptr;
  }
  std::string WhereOf(std::string_view key) const {
    for (const TrainPart& part : parts_) {
      if (const ConfigValue* v = Get(part.dict, key)) return From(v, part.path + "." + std::string(key));
    }
    return "";
  }
  const DatasetSemantics& Semantics() const { return *parts_.front().semantics; }

  void ReadLoader();
  void ReadWorld();
  void ReadTrainParts();
  void UnwrapTrain(const ConfigValue* value, const std::string& path, int depth);
  void ReadInfoPaths();
  void ReadGrouping();
  void ReadDatasetFilters();
  void ReadFrameQueue();
  void ReadResamplePolicy();
  int64_t BoundedAttempts();
  void ReadPipeline();
  void ReadPipelineOp(const ConfigValue& op_value, const std::string& path);
  void ReadClasses();
  void ReadModel();
  void ReadSampler();
  void ReadShufflerSampler(const ConfigValue* shuffler, const ConfigValue* type_value, bool iter_runner);
  void ReadLength();
  void ReadEvaluation();
  void ReadCommAndSeed();
  // One boolean for the whole job (the scenario keeps one value a job): the parts must agree.
  bool SameInEveryPart(const char* key, bool fallback);
  const DatasetSemantics* FromSource(const std::string& type, const std::vector<std::string>& keys,
                                     const ConfigValue* type_value);

  const Config& config_;
  const ConfigJobOptions& options_;
  const ConfigFieldReader r_;
  ConfigJob out_;
  const ConfigDict* data_ = nullptr;
  std::vector<TrainPart> parts_;
  std::deque<DatasetSemantics> from_source_;  // classes read from the user's source (stable addresses)
  std::vector<std::string> ann_files_;
  std::vector<std::string> ann_file_origins_;
  bool seq_mode_ = false;
  bool test_mode_ = false;
  Pipeline pipeline_;
  bool pipeline_seen_ = false;
  bool range_filter_seen_ = false;
  std::vector<double> circle_thresholds_;         // CircleObjectRangeFilter.class_dist_thred, by label
  std::string circle_from_;                       // where it was set ("" when the pipeline has no such op)
  std::vector<std::string> name_filter_classes_;  // ObjectNameFilter.classes, when the pipeline has one
  std::string name_filter_from_;
  std::optional<int64_t> iterations_per_epoch_;
  bool by_epoch_ = false;
  std::string runner_type_ = "EpochBasedRunner";  // the runner the train script builds
};

void ConfigJobBuilder::ReadLoader() {
  for (const char* key : {"samples_per_gpu", "workers_per_gpu"}) {
    const ConfigValue* v = Get(data_, key);
    const std::string path = fmt::format("data.{}", key);
    if (v != nullptr && v->is_none()) {
      // mmdet's build_dataloader passes it on as the batch size of a GroupSampler / DataLoader: None fails there.
      r_.Fail(v, path, "expected an int, found None (mmdet's build_dataloader needs the per-GPU count)");
    }
    const bool samples = std::string_view(key) == "samples_per_gpu";
    const auto n = r_.Int(v, path, samples ? 1 : 0, samples ? 1 << 16 : 1024);
    if (!n) continue;
    if (samples) {
      s().mutable_job()->set_samples_per_gpu(static_cast<uint32_t>(*n));
    } else {
      s().mutable_job()->set_workers_per_gpu(static_cast<uint32_t>(*n));
    }
    Record(fmt::format("job.{}", key), std::to_string(*n), From(v, path));
  }
}

void ConfigJobBuilder::ReadWorld() {
  const ConfigValue* num_gpus = config_.Find("num_gpus");
  if (options_.gpus) {
    s().mutable_job()->set_world_size(*options_.gpus);
    Record("job.world_size", std::to_string(*options_.gpus), "--gpus");
    const auto config_gpus =
        num_gpus != nullptr && num_gpus->AsInt() ? std::optional(*num_gpus->AsInt()) : std::nullopt;
    const ConfigValue* per_epoch = config_.Find("num_iters_per_epoch");
    if (config_gpus && *config_gpus != *options_.gpus && per_epoch != nullptr) {
      out_.notes.push_back(fmt::format(
          "--gpus {} but the config's num_gpus = {} ({}): num_iters_per_epoch = {} ({}) was computed in the config "
          "for {} GPUs, and the real job on {} GPUs uses it as written, so petrsim does too (to model the job you "
          "would run after setting num_gpus = {}, edit the config and import it again)",
          *options_.gpus, *config_gpus, num_gpus->where, per_epoch->Repr(), per_epoch->where, *config_gpus,
          *options_.gpus, *options_.gpus));
    }
  } else if (num_gpus != nullptr) {
    const auto v = r_.Int(num_gpus, "num_gpus", 1, 65536);
    if (!v) r_.Fail(num_gpus, "num_gpus", "expected an int in [1, 65536], found None");
    s().mutable_job()->set_world_size(static_cast<uint32_t>(*v));
    Record("job.world_size", std::to_string(*v), From(num_gpus, "num_gpus"));
  } else if (const ConfigValue* ids = config_.Find("gpu_ids")) {
    r_.RequireKnown(ids, "gpu_ids");
    const auto* items = ids->AsSequence();
    if (items == nullptr || items->empty()) {
      r_.Fail(ids, "gpu_ids", fmt::format("expected a list of GPU ids, found {}", ids->Repr()));
    }
    s().mutable_job()->set_world_size(static_cast<uint32_t>(items->size()));
    Record("job.world_size", std::to_string(items->size()), From(ids, "gpu_ids"));
  } else {
    throw ScenarioError(
        fmt::format("{}: the config names no GPU count (no num_gpus, no gpu_ids): pass --gpus N, the job's world size",
                    config_.path));
  }
}

void ConfigJobBuilder::ReadTrainParts() {
  const ConfigValue* train = Get(data_, "train");
  if (train == nullptr) {
    throw ScenarioError(fmt::format("{}: data.train: the config has no train dataset", config_.path));
  }
  UnwrapTrain(train, "data.train", 0);
}

// Walks the wrappers (ConcatDataset, CBGSDataset, RepeatDataset, ...) down to the datasets that read
// info files, in ConcatDataset order.
void ConfigJobBuilder::UnwrapTrain(const ConfigValue* value, const std::string& path, int depth) {
  if (depth > 8) r_.Fail(value, path, "datasets wrapped more than 8 deep");
  const ConfigDict* dict = r_.Dict(value, path);
  if (dict == nullptr) r_.Fail(value, path, "expected a dataset dict, found nothing");
  const auto type = r_.String(Get(dict, "type"), path + ".type");
  if (!type) r_.Fail(value, path + ".type", "the dataset has no type");
  if (*type == "ConcatDataset") {
    const ConfigValue* datasets = Get(dict, "datasets");
    r_.RequireKnown(datasets, path + ".datasets");
    const auto* items = datasets != nullptr ? datasets->AsSequence() : nullptr;
    if (items == nullptr || items->empty())
      r_.Fail(value, path + ".datasets", "a ConcatDataset needs a list of datasets");
    for (size_t i = 0; i < items->size(); ++i)
      UnwrapTrain(&(*items)[i], fmt::format("{}.datasets[{}]", path, i), depth + 1);
    return;
  }
  if (const WrapperSemantics* wrapper = FindWrapperSemantics(*type)) {
    out_.notes.push_back(fmt::format("{} = {} ({}): {} [{}]", path + ".type", *type, Get(dict, "type")->where,
                                     wrapper->effect, wrapper->source));
    const ConfigValue* inner = Get(dict, wrapper->inner_key);
    if (inner == nullptr) {
      r_.Fail(value, fmt::format("{}.{}", path, wrapper->inner_key),
              fmt::format("a {} needs the dataset it wraps in `{}`", *type, wrapper->inner_key));
    }
    UnwrapTrain(inner, fmt::format("{}.{}", path, wrapper->inner_key), depth + 1);
    return;
  }
  std::vector<std::string> keys;
  for (const ConfigEntry& entry : dict->entries) keys.push_back(entry.key);
  const DatasetSemantics* semantics = FromSource(*type, keys, Get(dict, "type"));
  if (semantics == nullptr) semantics = FindDatasetSemantics(*type, keys);
  if (semantics == nullptr) {
    r_.Fail(Get(dict, "type"), path + ".type",
            fmt::format("'{}' is not a dataset type petrsim knows ({}); its resample loop and None conditions "
                        "decide whether the job can hang",
                        *type, fmt::join(KnownDatasetTypes(), ", ")));
  }
  if (!parts_.empty() && parts_.front().semantics->codebase != semantics->codebase) {
    r_.Fail(Get(dict, "type"), path + ".type",
            fmt::format("the concatenated datasets are of different kinds ({} of {} and {} of {}): petrsim keeps one "
                        "dataset semantics a job",
                        parts_.front().semantics->type, parts_.front().semantics->codebase, semantics->type,
                        semantics->codebase));
  }
  parts_.push_back(TrainPart{dict, path, semantics});
  const std::vector<std::string> files = r_.Strings(Get(dict, "ann_file"), path + ".ann_file");
  if (files.empty()) r_.Fail(Get(dict, "ann_file"), path + ".ann_file", "the dataset has no ann_file");
  for (const std::string& file : files) {
    ann_files_.push_back(file);
    ann_file_origins_.push_back(From(Get(dict, "ann_file"), path + ".ann_file"));
  }
}

// The config's data_root as a path prefix of `file`, compared by path components ('./data/nuscenes'
// is a prefix of './data/nuscenes/x.pkl' and of 'data/nuscenes//x.pkl', not of './data/nuscenes2/x.pkl').
std::optional<std::filesystem::path> RelativeToDataRoot(const std::string& file, const std::string& data_root) {
  namespace fs = std::filesystem;
  if (data_root.empty()) return std::nullopt;
  const fs::path root = fs::path(data_root).lexically_normal();
  const fs::path path = fs::path(file).lexically_normal();
  auto r = root.begin();
  auto p = path.begin();
  for (; r != root.end() && !r->empty(); ++r, ++p) {
    if (p == path.end() || *p != *r) return std::nullopt;
  }
  fs::path rest;
  for (; p != path.end(); ++p) rest /= *p;
  return rest;
}

void ConfigJobBuilder::ReadInfoPaths() {
  if (!options_.infos.empty()) {
    if (options_.infos.size() != ann_files_.size()) {
      throw ScenarioError(fmt::format("--infos: {} file(s) given, the config's ann_file names {} ({})",
                                      options_.infos.size(), ann_files_.size(), fmt::join(ann_files_, ", ")));
    }
    out_.info_files = options_.infos;
    for (const std::string& file : options_.infos) out_.info_file_origins.push_back("--infos " + file);
  } else {
    const std::string config_root = [&] {
      if (const ConfigValue* v = PartValue("data_root"); v != nullptr && v->AsString()) return *v->AsString();
      if (const ConfigValue* v = config_.Find("data_root"); v != nullptr && v->AsString()) return *v->AsString();
      return std::string();
    }();
    for (size_t i = 0; i < ann_files_.size(); ++i) {
      const std::string& file = ann_files_[i];
      std::string resolved = std::filesystem::path(file).lexically_normal().string();
      if (!options_.data_root.empty()) {
        // --data-root stands for the config's data_root; a file outside it is taken relative to --data-root.
        const auto rest = RelativeToDataRoot(file, config_root);
        const std::filesystem::path rel = rest ? *rest : std::filesystem::path(file).relative_path();
        resolved = (std::filesystem::path(options_.data_root) / rel).lexically_normal().string();
      }
      // Without --data-root: as the training script resolves it, relative to where it runs (the repository root).
      out_.info_files.push_back(resolved);
      out_.info_file_origins.push_back(
          fmt::format("ann_file '{}' ({}){}", file, ann_file_origins_[i],
                      options_.data_root.empty() ? "" : fmt::format(" under --data-root {}", options_.data_root)));
    }
  }
  for (const std::string& file : out_.info_files) {
    std::string name = std::filesystem::path(file).filename().string();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".pkl") == 0) name.resize(name.size() - 4);
    out_.subdataset_names.push_back(name);
  }
}

// The dataset class read from the user's own source, when the config names a plugin directory that the
// checkout holding the config has (dataset_source.h); nullptr otherwise.
const DatasetSemantics* ConfigJobBuilder::FromSource(const std::string& type, const std::vector<std::string>& keys,
                                                     const ConfigValue* type_value) {
  const ConfigValue* plugin = config_.Find("plugin");
  const ConfigValue* plugin_dir = config_.Find("plugin_dir");
  if (plugin == nullptr || plugin->AsUnknown() != nullptr || !plugin->Truthy() || plugin_dir == nullptr ||
      plugin_dir->AsString() == nullptr) {
    return nullptr;
  }
  for (const DatasetSemantics& known : from_source_) {
    if (known.type == type) return &known;
  }
  DatasetSourceQuery query;
  query.config_path = config_.path;
  query.plugin_dir = *plugin_dir->AsString();
  query.type = type;
  query.keys = keys;
  std::optional<DatasetSourceReading> reading = ReadDatasetSource(query);
  if (!reading) {
    const std::string& dir = *plugin_dir->AsString();
    out_.notes.push_back(
        PluginDirectoryFound(query)
            ? fmt::format("plugin_dir '{}' ({}): the directory holds no class {}; its semantics are petrsim's entry "
                          "for the type",
                          dir, plugin_dir->where, type)
            : fmt::format("plugin_dir '{}' ({}): not found from the config's folder upwards, so {}'s source was not "
                          "read; its semantics are petrsim's entry for the type",
                          dir, plugin_dir->where, type));
    return nullptr;
  }
  Record("dataset semantics", type,
         fmt::format("{} ({}), read from its source at {}, over {}", From(type_value, "type"), type,
                     reading->class_where, reading->base_entry));
  for (const std::string& finding : reading->findings) out_.notes.push_back("dataset source: " + finding);
  from_source_.push_back(std::move(reading->semantics));
  return &from_source_.back();
}

bool ConfigJobBuilder::SameInEveryPart(const char* key, bool fallback) {
  std::optional<bool> have;
  for (const TrainPart& part : parts_) {
    const ConfigValue* v = Get(part.dict, key);
    const bool value = r_.Bool(v, part.path + "." + key).value_or(fallback);
    if (have && *have != value) {
      r_.Fail(v, part.path + "." + key,
              fmt::format("the concatenated datasets disagree ({} here, {} before): petrsim keeps one value a job",
                          value ? "True" : "False", *have ? "True" : "False"));
    }
    have = value;
  }
  return *have;
}

void ConfigJobBuilder::ReadGrouping() {
  const DatasetSemantics& sem = Semantics();
  const char* mode_key = sem.flags == GroupFlags::kSeqFlagSplit ? "with_seq_flag" : "seq_mode";
  const char* split_key = sem.flags == GroupFlags::kSeqFlagSplit ? "sequences_split_num" : "seq_split_num";
  seq_mode_ = sem.flags != GroupFlags::kZeros && SameInEveryPart(mode_key, false);
  s().mutable_grouping()->set_seq_mode(seq_mode_);
  const std::string mode_from = WhereOf(mode_key);
  Record("grouping.seq_mode", seq_mode_ ? "true" : "false",
         sem.flags == GroupFlags::kZeros
             ? fmt::format("{} builds one group flag for the whole dataset [{}]", sem.type, sem.flags_source)
         : mode_from.empty() ? fmt::format("default ({}: {}=False) [{}]", sem.type, mode_key, sem.flags_source)
                             : mode_from);
  out_.filters.seq_mode = seq_mode_;
  out_.filters.origins["seq_mode"] =
      mode_from.empty() ? fmt::format("{} default", sem.type) : ShortWhere(PartValue(mode_key)->where);
  std::optional<std::string> split;
  for (const TrainPart& part : parts_) {
    const ConfigValue* v = Get(part.dict, split_key);
    if (v == nullptr || (v->is_none() && !seq_mode_)) continue;  // read only in sequence mode
    r_.RequireKnown(v, part.path + "." + split_key);
    const std::string text = v->AsString() ? *v->AsString() : v->AsInt() ? std::to_string(*v->AsInt()) : "";
    if (text.empty() || (v->AsString() && text != "all")) {
      r_.Fail(v, part.path + "." + split_key, fmt::format("expected an int or 'all', found {}", v->Repr()));
    }
    if (v->AsInt() && (*v->AsInt() < 1 || *v->AsInt() > 100000)) {
      r_.Fail(v, part.path + "." + split_key, fmt::format("expected an int in [1, 100000] or 'all', found {}", text));
    }
    if (split && *split != text) {
      r_.Fail(v, part.path + "." + split_key, "the concatenated datasets disagree: petrsim keeps one value a job");
    }
    split = text;
  }
  if (!seq_mode_) {
    // The dataset reads the split only in sequence mode: the scenario leaves it out (validation refuses it there).
    out_.filters.origins["seq_split_num"] = "(no sequence mode)";
    if (sem.flags == GroupFlags::kZeros) {
      for (const char* key : {"seq_mode", "with_seq_flag"}) {
        if (const ConfigValue* v = PartValue(key)) {
          out_.notes.push_back(fmt::format("{} = {} ({}) is not read by {}, whose group flag is zeros: one group [{}]",
                                           key, v->Repr(), v->where, sem.type, sem.flags_source));
        }
      }
    }
    if (split) {
      out_.notes.push_back(fmt::format("{} = {} ({}) has no effect: {} builds no sequence chunks here", split_key,
                                       *split, WhereOf(split_key), sem.type));
    }
    out_.filters.seq_split_num = 1;
    return;
  }
  if (split == "all") {
    s().mutable_grouping()->set_seq_split_all(true);
    Record("grouping.seq_split_all", "true", WhereOf(split_key));
    out_.filters.seq_split_num = 1;
  } else {
    const uint32_t n = split ? static_cast<uint32_t>(std::stoul(*split)) : 1;
    s().mutable_grouping()->set_seq_split_num(n);
    Record("grouping.seq_split_num", std::to_string(n),
           split ? WhereOf(split_key) : fmt::format("default ({}: {}=1)", sem.type, split_key));
    out_.filters.seq_split_num = n;
  }
  out_.filters.origins["seq_split_num"] =
      split ? ShortWhere(PartValue(split_key)->where) : fmt::format("{} default", sem.type);
}

void ConfigJobBuilder::ReadDatasetFilters() {
  const DatasetSemantics& sem = Semantics();
  test_mode_ = SameInEveryPart("test_mode", false);
  if (test_mode_) {
    out_.notes.push_back(fmt::format(
        "test_mode=True on the train dataset ({}): __getitem__ returns prepare_test_data, which never rejects a frame "
        "and carries no GT for training; without seq_mode Custom3DDataset also sets no group flag, which "
        "DistributedGroupSampler asserts [mmdet3d@47285b3f mmdet3d/datasets/custom_3d.py:101-103, 426-439]: the "
        "real job may fail before or at its first step",
        WhereOf("test_mode")));
  }
  if (const ConfigValue* interval = PartValue("load_interval")) {
    const auto n = r_.Int(interval, parts_.front().path + ".load_interval", 1, 1 << 20);
    if (n && *n != 1) {
      r_.Fail(interval, parts_.front().path + ".load_interval",
              fmt::format("is {}: the dataset keeps every {}th info after sorting, which petrsim's info reader does "
                          "not do; import with load_interval=1 (or the infos cut to every {}th frame)",
                          *n, *n, *n));
    }
  }
  const bool configured_filter = SameInEveryPart("filter_empty_gt", sem.filter_empty_gt_default);
  // In test mode __getitem__ returns prepare_test_data: no frame is rejected, nothing is resampled.
  const bool filter_empty_gt = configured_filter && !test_mode_;
  const bool use_valid_flag = SameInEveryPart("use_valid_flag", sem.use_valid_flag_default);
  out_.filters.filter_empty_gt = filter_empty_gt;
  out_.filters.use_valid_flag = use_valid_flag;
  out_.filters.from_config = true;
  const auto origin = [&](const char* key, std::string_view fallback) {
    const std::string where = WhereOf(key);
    const ConfigValue* v = PartValue(key);
    return v == nullptr ? fmt::format("{} default", fallback) : ShortWhere(v->where);
  };
  out_.filters.origins["filter_empty_gt"] = origin("filter_empty_gt", sem.type);
  out_.filters.origins["use_valid_flag"] = origin("use_valid_flag", sem.type);
  const auto from = [&](const char* key, bool fallback, std::string_view source) {
    const std::string where = WhereOf(key);
    return where.empty() ? fmt::format("default ({}: {}={}) [{}]", sem.type, key, fallback ? "True" : "False", source)
                         : where;
  };
  Record("filters.filter_empty_gt", filter_empty_gt ? "true" : "false",
         test_mode_ ? fmt::format("{} (test_mode=True: __getitem__ returns prepare_test_data, which never rejects a "
                                  "frame or resamples)",
                                  WhereOf("test_mode"))
                    : from("filter_empty_gt", sem.filter_empty_gt_default, sem.filter_empty_gt_source));
  Record("filters.use_valid_flag", use_valid_flag ? "true" : "false",
         from("use_valid_flag", sem.use_valid_flag_default, sem.use_valid_flag_source));
  s().mutable_filters()->set_filter_empty_gt(filter_empty_gt);
  s().mutable_filters()->set_use_valid_flag(use_valid_flag);

  // Far3D's interval_test: an argument of Argoverse2DatasetT only (argoverse2_dataset_t.py:19), the order its infos
  // are read in, which the info reader applies.
  if (sem.type == "Argoverse2DatasetT") {
    out_.interval_test = SameInEveryPart("interval_test", false);
    Record("infos.interval_test", out_.interval_test ? "true" : "false",
           from("interval_test", false,
                "Far3D@5efb9d73 projects/mmdet3d_plugin/datasets/argoverse2_dataset_t.py:19,27-31"));
    // Its flags assert only the total length, not seq_split_num chunks per scene (:76-77): interval_test's runs
    // of one frame are legal there.
    if (seq_mode_) {
      s().mutable_grouping()->set_seq_split_count_asserted(false);
      out_.filters.seq_split_count_asserted = false;
      Record("grouping.seq_split_count_asserted", "false",
             "Argoverse2DatasetT [Far3D@5efb9d73 projects/mmdet3d_plugin/datasets/argoverse2_dataset_t.py:76-77]");
    }
  }

  if (!test_mode_) ReadResamplePolicy();  // in test mode the pool is never drawn from
  if (!sem.not_modelled.empty()) out_.notes.push_back(fmt::format("{}: {}", sem.type, sem.not_modelled));
  ReadFrameQueue();
}

// A bounded retry loop's loads: the class's bound, or `max_refetch + k` with the dataset dict's max_refetch
// (mmengine's form); 0 for an unbounded loop.
int64_t ConfigJobBuilder::BoundedAttempts() {
  const DatasetSemantics& sem = Semantics();
  if (!sem.bounded_by_max_refetch) return sem.bounded_attempts;
  const std::string path = parts_.front().path + ".max_refetch";
  if (const auto refetch = r_.Int(PartValue("max_refetch"), path, 0, int64_t{1} << 26)) {
    return *refetch + sem.max_refetch_offset;
  }
  return sem.bounded_attempts;  // the class's default (0 when petrsim could not read it: unbounded)
}

// The resample loop: which pool a None draws from, how often, or no loop at all.
void ConfigJobBuilder::ReadResamplePolicy() {
  const DatasetSemantics& sem = Semantics();
  Resample::Policy policy = Resample::in_group;
  std::string why;
  if (sem.pool == ResamplePool::kNoResample) {
    // A None reaches the collate function: the job fails on the first frame without GT, it does not hang. One
    // load, then an error, is petrsim's `bounded` with attempts_max 1.
    policy = Resample::bounded;
    s().mutable_resample()->set_attempts_max(1);
    why = fmt::format(
        "{} has no resample loop: a frame without GT makes __getitem__ return None and the "
        "DataLoader's collate fails [{}]",
        sem.type, sem.pool_source);
  } else if (const int64_t attempts = BoundedAttempts(); attempts > 0) {
    policy = Resample::bounded;
    s().mutable_resample()->set_attempts_max(static_cast<uint64_t>(std::min<int64_t>(attempts, 1 << 26)));
    why = fmt::format("{} loads a frame at most {} times, then raises [{}]", sem.type, attempts, sem.pool_source);
    if (sem.pool == ResamplePool::kWholeDataset && seq_mode_) {
      out_.notes.push_back(fmt::format(
          "{}: a bounded retry over the whole dataset in sequence mode is modelled as bounded within the chunk",
          sem.type));
    }
  } else if (sem.pool == ResamplePool::kWholeDataset) {
    policy = Resample::in_subdataset;
    why = fmt::format("{}._rand_another draws from the whole dataset [{}]", sem.type, sem.pool_source);
  } else {
    why = fmt::format("{}._rand_another draws from the frame's own group flag [{}]", sem.type, sem.pool_source);
  }
  if (policy != Resample::in_group) s().mutable_resample()->set_policy(policy);
  Record("resample.policy", Resample::Policy_Name(policy), why);
}

// StreamPETR's sliding window (seq_mode False): each load checks the last num_frame_losses frames of a
// queue of the queue_length frames ending at the index (random_length of them drawn by Python's
// random.shuffle, which petrsim does not model: with random_length 0 the queue is exactly the frames
// before the index). In sequence mode the dataset sets both to 1.
void ConfigJobBuilder::ReadFrameQueue() {
  const DatasetSemantics& sem = Semantics();
  if (!sem.queue_checks_frame_losses || seq_mode_ || test_mode_) {
    for (const char* key : {"queue_length", "num_frame_losses", "random_length"}) {
      if (const ConfigValue* v = PartValue(key)) {
        out_.notes.push_back(fmt::format("{} = {} ({}): no effect here ({})", key, v->Repr(), v->where,
                                         seq_mode_ ? "seq_mode sets it aside" : "the dataset does not read it"));
      }
    }
    return;
  }
  const std::string path = parts_.front().path;
  const auto losses = r_.Int(PartValue("num_frame_losses"), path + ".num_frame_losses", 1, 64).value_or(1);
  const auto queue = r_.Int(PartValue("queue_length"), path + ".queue_length", 1, 1 << 16).value_or(8);
  const auto random_length = r_.Int(PartValue("random_length"), path + ".random_length", 0, 1 << 16).value_or(0);
  if (losses > queue) {
    r_.Fail(PartValue("num_frame_losses"), path + ".num_frame_losses",
            fmt::format("is {} but the queue holds queue_length = {} frames: prepare_train_data would index past it",
                        losses, queue));
  }
  if (random_length > 0 && losses > 1) {
    out_.notes.push_back(fmt::format(
        "random_length = {} ({}): the queue's earlier frames are drawn with Python's random.shuffle, which petrsim "
        "does not model; the check takes the frame(s) just before the index ({} of them)",
        random_length, WhereOf("random_length"), losses - 1));
  }
  if (losses == 1) return;
  s().mutable_filters()->set_gt_required_frames(static_cast<uint32_t>(losses));
  const std::string where = WhereOf("num_frame_losses");
  Record("filters.gt_required_frames", std::to_string(losses),
         fmt::format("{} [{}]", where.empty() ? "default num_frame_losses" : where, sem.queue_source));
}

void ConfigJobBuilder::ReadPipeline() {
  const ConfigValue* pipeline_value = Get(parts_.front().dict, "pipeline");
  if (pipeline_value == nullptr) pipeline_value = config_.Find("train_pipeline");
  if (pipeline_value == nullptr) return;
  r_.RequireKnown(pipeline_value, "data.train.pipeline");
  const auto* ops = pipeline_value->AsSequence();
  if (ops == nullptr) {
    r_.Fail(pipeline_value, "data.train.pipeline",
            fmt::format("expected a list of ops, found {}", pipeline_value->Repr()));
  }
  pipeline_seen_ = true;
  for (size_t i = 0; i < ops->size(); ++i) ReadPipelineOp((*ops)[i], fmt::format("data.train.pipeline[{}]", i));
  if (!range_filter_seen_) {
    // No ObjectRangeFilter: no box is dropped for where it is. The scenario keeps one BEV range, so
    // it gets one no box reaches.
    constexpr double kNoRange = 1e9;
    out_.filters.bev_range_min_m = -kNoRange;
    out_.filters.bev_range_max_m = kNoRange;
    out_.filters.origins["range"] = "no ObjectRangeFilter";
    s().mutable_filters()->set_bev_range_min_m(-kNoRange);
    s().mutable_filters()->set_bev_range_max_m(kNoRange);
    Record("filters.bev_range", "[-1e9, 1e9]",
           fmt::format("{}: the train pipeline has no ObjectRangeFilter, so no box is dropped for its position",
                       pipeline_value->where));
  }
}

void ConfigJobBuilder::ReadPipelineOp(const ConfigValue& op_value, const std::string& path) {
  const ConfigDict* op = r_.Dict(&op_value, path);
  const auto type = r_.String(Get(op, "type"), path + ".type");
  if (!type) r_.Fail(&op_value, path, "an op without a type");
  if (*type == "ObjectNameFilter" || *type == "InstanceNameFilter") {
    // Sparse4D's InstanceNameFilter keeps labels in range(len(classes)) like mmdet3d's ObjectNameFilter
    // (Sparse4D@db711ad5 projects/mmdet3d_plugin/datasets/pipelines/transform_3d.py:121-146).
    name_filter_classes_ = r_.Strings(Get(op, "classes"), path + ".classes");
    name_filter_from_ = From(Get(op, "classes"), path + ".classes");
  } else if (*type == "ObjectRangeFilter") {
    const std::vector<double> range = r_.Numbers(Get(op, "point_cloud_range"), path + ".point_cloud_range");
    if (range.size() != 6 || range[0] != range[1] || range[3] != range[4]) {
      r_.Fail(Get(op, "point_cloud_range"), path + ".point_cloud_range",
              "expected [x_min, y_min, z_min, x_max, y_max, z_max] with x and y sharing their bounds (petrsim keeps "
              "one BEV range)");
    }
    range_filter_seen_ = true;
    out_.filters.bev_range_min_m = range[0];
    out_.filters.bev_range_max_m = range[3];
    out_.filters.origins["range"] = ShortWhere(Get(op, "point_cloud_range")->where);
    s().mutable_filters()->set_bev_range_min_m(range[0]);
    s().mutable_filters()->set_bev_range_max_m(range[3]);
    Record("filters.bev_range", fmt::format("[{}, {}]", range[0], range[3]),
           From(Get(op, "point_cloud_range"), path + ".point_cloud_range"));
  } else if (*type == "CircleObjectRangeFilter") {
    const ConfigValue* thresholds = Get(op, "class_dist_thred");
    if (thresholds != nullptr) {
      circle_thresholds_ = r_.Numbers(thresholds, path + ".class_dist_thred");
      for (double& t : circle_thresholds_) {
        // numpy: dist <= t is never true for a negative t or NaN (the class is dropped), always for +inf.
        if (std::isnan(t) || t < 0) t = -1;
        if (std::isinf(t) && t > 0) t = 1e9;
      }
      circle_from_ = From(thresholds, path + ".class_dist_thred");
    } else {
      // Its default: 52.5 m for the first five labels, 31.5, 42 for the next three, 31.5.
      circle_thresholds_ = {52.5, 52.5, 52.5, 52.5, 52.5, 31.5, 42, 42, 42, 31.5};
      circle_from_ = fmt::format(
          "{} (class_dist_thred: the default) [Sparse4D@db711ad "
          "projects/mmdet3d_plugin/datasets/pipelines/transform_3d.py:307-320]",
          op_value.where);
    }
  } else if (*type == "ResizeCropFlipRotImage") {
    auto* resize = pipeline_.add_ops()->mutable_resize_crop_flip_rot_image();
    resize->set_training(r_.Bool(Get(op, "training"), path + ".training").value_or(false));
    if (const ConfigDict* aug = r_.Dict(Get(op, "data_aug_conf"), path + ".data_aug_conf")) {
      resize->set_rand_flip(r_.Bool(Get(aug, "rand_flip"), path + ".data_aug_conf.rand_flip").value_or(false));
      if (const ConfigValue* dim = Get(aug, "final_dim")) {
        const std::vector<double> d = r_.Numbers(dim, path + ".data_aug_conf.final_dim");
        if (d.empty() || d[0] < 3) r_.Fail(dim, path + ".data_aug_conf.final_dim", "expected (height, width)");
        pipeline_.mutable_grid_mask()->set_image_height(static_cast<uint32_t>(d[0]));
      }
    }
    Record(fmt::format("pipeline.ops[{}]", pipeline_.ops_size() - 1),
           fmt::format("ResizeCropFlipRotImage(training={}, rand_flip={})", resize->training(), resize->rand_flip()),
           From(&op_value, path));
  } else if (*type == "GlobalRotScaleTransImage") {
    pipeline_.add_ops()->mutable_global_rot_scale_trans_image();
    Record(fmt::format("pipeline.ops[{}]", pipeline_.ops_size() - 1), "GlobalRotScaleTransImage",
           From(&op_value, path));
  } else if (std::find(std::begin(kNoDrawOps), std::end(kNoDrawOps), *type) == std::end(kNoDrawOps)) {
    out_.notes.push_back(fmt::format(
        "{} ({}): '{}' is not an op petrsim knows; taken as drawing nothing from numpy (if it does, add its draws "
        "as pipeline.ops {{ calls {{ ... }} }})",
        path, op_value.where, *type));
  }
}

// The classes whose boxes count: the dataset labels a box by its index in its CLASSES
// (`data.train.classes`, else the class's own list), a name outside it gets -1; ObjectNameFilter
// keeps labels in range(len(its classes)), i.e. the first len(classes) names of the dataset's
// CLASSES; the empty-GT check ignores -1 labels, so without the filter the dataset's CLASSES count.
void ConfigJobBuilder::ReadClasses() {
  const DatasetSemantics& sem = Semantics();
  std::vector<std::string> dataset_classes;
  std::string from;
  if (const ConfigValue* v = PartValue("classes"); v != nullptr && !v->is_none()) {
    dataset_classes = r_.Strings(v, parts_.front().path + ".classes");
    from = WhereOf("classes");
  } else {
    if (sem.default_classes.empty()) {
      r_.Fail(Get(parts_.front().dict, "type"), parts_.front().path + ".classes",
              fmt::format("the config sets no classes and {}'s CLASSES are not in its source ({}): set "
                          "classes=[...] in the dataset dict",
                          sem.type, sem.default_classes_source));
    }
    for (std::string_view c : sem.default_classes) dataset_classes.emplace_back(c);
    from = fmt::format("default ({}.CLASSES) [{}]", sem.type, sem.default_classes_source);
  }
  std::vector<std::string> classes = dataset_classes;
  if (!name_filter_from_.empty() && name_filter_classes_.size() < classes.size()) {
    classes.resize(name_filter_classes_.size());
    from += fmt::format(", the first {} kept by ObjectNameFilter ({}: it keeps labels below len(classes))",
                        classes.size(), name_filter_from_);
  }
  if (classes.empty()) {
    const ConfigValue* at = PartValue("classes") != nullptr ? PartValue("classes") : Get(parts_.front().dict, "type");
    r_.Fail(at, parts_.front().path + ".classes",
            fmt::format("no class is left ({}): every box would be filtered", from));
  }
  out_.filters.classes = classes;
  const ConfigValue* classes_value = PartValue("classes");
  out_.filters.origins["classes"] = classes_value != nullptr && !classes_value->is_none()
                                        ? ShortWhere(classes_value->where)
                                        : fmt::format("{} default", sem.type);
  for (const std::string& c : classes) s().mutable_filters()->add_classes(c);
  Record("filters.classes", fmt::format("[{}]", fmt::join(classes, ", ")), from);
  if (circle_from_.empty()) return;
  // CircleObjectRangeFilter keeps a box of label i (its index in the dataset's CLASSES) within
  // class_dist_thred[i] metres; a label past the list is dropped.
  std::vector<std::string> limits;
  for (size_t i = 0; i < circle_thresholds_.size() && i < dataset_classes.size(); ++i) {
    if (circle_thresholds_[i] < 0) {
      limits.push_back(fmt::format("{} dropped (threshold < 0 or NaN)", dataset_classes[i]));
      continue;  // not listed: CircleObjectRangeFilter then drops the class
    }
    out_.filters.circle_range.emplace_back(dataset_classes[i], circle_thresholds_[i]);
    ClassDistance* c = s().mutable_filters()->add_circle_range();
    c->set_name(dataset_classes[i]);
    c->set_max_m(circle_thresholds_[i]);
    limits.push_back(fmt::format("{} <= {} m", dataset_classes[i], circle_thresholds_[i]));
  }
  if (out_.filters.circle_range.empty()) {
    r_.Fail(nullptr, "CircleObjectRangeFilter.class_dist_thred",
            fmt::format("drops every class ({}): no box would be left", circle_from_));
  }
  Record("filters.circle_range", fmt::format("[{}]", fmt::join(limits, ", ")), circle_from_);
}

void ConfigJobBuilder::ReadModel() {
  const ConfigDict* model = r_.Dict(config_.Find("model"), "model");
  if (pipeline_seen_) {
    const ConfigValue* grid = Get(model, "use_grid_mask");
    pipeline_.mutable_grid_mask()->set_use(r_.Bool(grid, "model.use_grid_mask").value_or(false));
    Record("pipeline.grid_mask.use", pipeline_.grid_mask().use() ? "true" : "false",
           grid ? From(grid, "model.use_grid_mask") : "default (Petr3D: use_grid_mask=False)");
    *s().mutable_pipeline() = pipeline_;
  }
  StreamPetrPlan* plan = s().mutable_plan()->mutable_streampetr();
  if (const ConfigValue* layers = config_.Find("model.pts_bbox_head.transformer.decoder.num_layers")) {
    const auto v = r_.Int(layers, "model.pts_bbox_head.transformer.decoder.num_layers", 1, 1000);
    if (v) {
      plan->set_decoder_layers(static_cast<uint32_t>(*v));
      Record("plan.streampetr.decoder_layers", std::to_string(*v), From(layers, "decoder.num_layers"));
    }
  }
  if (const ConfigValue* dn = config_.Find("model.pts_bbox_head.with_dn")) {
    const bool v = *r_.Bool(dn, "model.pts_bbox_head.with_dn");
    plan->set_denoising(v);
    Record("plan.streampetr.denoising", v ? "true" : "false", From(dn, "model.pts_bbox_head.with_dn"));
  }
  if (const ConfigValue* unused = config_.Find("find_unused_parameters")) {
    const bool v = *r_.Bool(unused, "find_unused_parameters");
    if (v) {
      // plan.ddp replaces the reference model as a whole: write it out with the flag.
      *s().mutable_plan()->mutable_ddp() = StreamPetrReferenceDdpModel(plan->decoder_layers());
      s().mutable_plan()->mutable_ddp()->set_find_unused_parameters(true);
    }
    Record("plan.ddp.find_unused_parameters", v ? "true" : "false", From(unused, "find_unused_parameters"));
  }
  for (const auto& [key, field] : {std::pair{"log_config.interval", "log_interval"},
                                   std::pair{"checkpoint_config.interval", "checkpoint_interval"}}) {
    const ConfigValue* interval = config_.Find(key);
    const auto v = r_.Int(interval, key, 0, 1 << 30);
    if (!v) continue;
    if (std::string_view(field) == "log_interval") {
      plan->set_log_interval(static_cast<uint32_t>(*v));
    } else {
      plan->set_checkpoint_interval(static_cast<uint32_t>(*v));
    }
    Record(fmt::format("plan.streampetr.{}", field), std::to_string(*v), From(interval, key));
  }
  if (!s().plan().streampetr().ByteSizeLong()) s().mutable_plan()->clear_streampetr();
  if (!s().plan().ByteSizeLong()) s().clear_plan();
}

// The sampler the codebase's train script builds for `data.train` (it decides the index stream).
void ConfigJobBuilder::ReadSampler() {
  const DatasetSemantics& sem = Semantics();
  const ConfigValue* shuffler = config_.Find("data.shuffler_sampler");
  const ConfigValue* type_value = config_.Find("data.shuffler_sampler.type");
  const bool iter_runner = runner_type_ == "IterBasedRunner";
  const auto set = [&](Sampler::Kind kind, const std::string& from) {
    s().mutable_sampler()->set_kind(kind);
    Record("sampler.kind", Sampler::Kind_Name(kind), from);
  };
  switch (sem.script) {
    case TrainScript::kMmdet3dTrainModel:
    case TrainScript::kSparse4dCustomTrain: {
      if (shuffler != nullptr) {
        out_.notes.push_back(fmt::format("data.shuffler_sampler ({}) is not read by {}'s train script [{}]",
                                         shuffler->where, sem.codebase, sem.script_source));
      }
      if (!iter_runner) {
        set(Sampler::distributed_group,
            fmt::format("{} runner: DistributedGroupSampler [{}]", runner_type_, sem.script_source));
      } else if (sem.script == TrainScript::kSparse4dCustomTrain) {
        set(Sampler::infinite_group_each_sample_in_batch,
            fmt::format("IterBasedRunner: InfiniteGroupEachSampleInBatchSampler [{}]", sem.script_source));
        out_.notes.push_back(fmt::format(
            "Sparse4D's InfiniteGroupEachSampleInBatchSampler also skips the head of a group's buffer (p=0.5) and "
            "reverses a new group (p=0.1) with numpy draws in the main process [Sparse4D@db711ad5 "
            "projects/mmdet3d_plugin/datasets/samplers/infinite_group_each_sample_in_batch_sampler.py:122-160]; "
            "petrsim streams the same groups without them: the pools, and so the verdict, are the same, the "
            "exact iteration of a hang may differ"));
      } else {
        set(Sampler::distributed_group,
            fmt::format("IterBasedRunner: mmdet's InfiniteGroupBatchSampler, which petrsim models as its "
                        "DistributedGroupSampler (the same pools; another index order) [{}]",
                        sem.script_source));
      }
      return;
    }
    case TrainScript::kStreamPetrCustomTrain:
    case TrainScript::kBevformerCustomTrain:
      if (shuffler == nullptr) {
        throw ScenarioError(
            fmt::format("{}: data.shuffler_sampler: {}'s train script reads cfg.data.shuffler_sampler (and "
                        "nonshuffler_sampler), so the real job stops with AttributeError before training [{}]: add "
                        "shuffler_sampler=dict(type='DistributedGroupSampler') to `data`",
                        config_.path, sem.codebase, sem.script_source));
      }
      if (sem.script == TrainScript::kStreamPetrCustomTrain && iter_runner && shuffler->is_none()) {
        r_.Fail(shuffler, "data.shuffler_sampler",
                fmt::format("is None with an IterBasedRunner: {}'s builder reads shuffler_sampler['type'] then, a "
                            "TypeError before training [{}]",
                            sem.codebase, sem.script_source));
      }
      if (Get(data_, "samples_per_gpu") == nullptr && Get(data_, "imgs_per_gpu") == nullptr) {
        throw ScenarioError(fmt::format(
            "{}: data.samples_per_gpu: {}'s train script reads cfg.data.samples_per_gpu, so the real job stops with "
            "AttributeError without it [{}]",
            config_.path, sem.codebase, sem.script_source));
      }
      break;
  }
  ReadShufflerSampler(shuffler, type_value, iter_runner);
}

// The sampler of a train script that reads data.shuffler_sampler (StreamPETR's, Far3D's, BEVFormer's).
void ConfigJobBuilder::ReadShufflerSampler(const ConfigValue* shuffler, const ConfigValue* type_value,
                                           bool iter_runner) {
  const DatasetSemantics& sem = Semantics();
  const auto set = [&](Sampler::Kind kind, const std::string& from) {
    s().mutable_sampler()->set_kind(kind);
    Record("sampler.kind", Sampler::Kind_Name(kind), from);
  };
  const std::string kind =
      shuffler != nullptr && shuffler->is_none()
          ? "DistributedGroupSampler"
          : r_.String(type_value, "data.shuffler_sampler.type").value_or("DistributedGroupSampler");
  const std::string from = type_value ? From(type_value, "data.shuffler_sampler.type")
                                      : fmt::format("default (DistributedGroupSampler) [{}]", sem.script_source);
  if (kind == "InfiniteGroupEachSampleInBatchSampler" && sem.script == TrainScript::kStreamPetrCustomTrain) {
    if (!iter_runner) {
      r_.Fail(type_value, "data.shuffler_sampler.type",
              fmt::format("InfiniteGroupEachSampleInBatchSampler becomes the batch sampler only with an "
                          "IterBasedRunner [{}]; with runner '{}' the builder uses it as a plain sampler, which "
                          "petrsim does not model",
                          sem.script_source, runner_type_));
    }
    set(Sampler::infinite_group_each_sample_in_batch, from);
  } else if (kind == "DistributedGroupSampler") {
    set(Sampler::distributed_group, from);
  } else if (kind == "DistributedSampler") {
    set(Sampler::distributed, from);
  } else {
    r_.Fail(
        type_value, "data.shuffler_sampler.type",
        fmt::format("expected {}DistributedGroupSampler or DistributedSampler, found '{}'",
                    sem.script == TrainScript::kStreamPetrCustomTrain ? "InfiniteGroupEachSampleInBatchSampler, " : "",
                    kind));
  }
}

// The runner: its type decides the sampler, and max_iters or max_epochs the job's length.
void ConfigJobBuilder::ReadLength() {
  const DatasetSemantics& sem = Semantics();
  const ConfigValue* per_epoch = config_.Find("num_iters_per_epoch");
  iterations_per_epoch_ = r_.Int(per_epoch, "num_iters_per_epoch", 1, int64_t{1} << 40);
  const ConfigDict* runner = r_.Dict(config_.Find("runner"), "runner");
  const ConfigValue* total_epochs = config_.Find("total_epochs");
  const ConfigValue* epochs_value = nullptr;
  std::string epochs_from;
  if (runner != nullptr) {
    const auto type = r_.String(Get(runner, "type"), "runner.type");
    if (!type)
      r_.Fail(config_.Find("runner"), "runner.type", "a runner needs a type (IterBasedRunner, EpochBasedRunner)");
    runner_type_ = *type;
    epochs_value = Get(runner, "max_epochs");
    epochs_from = "runner.max_epochs";
  } else if (sem.script == TrainScript::kStreamPetrCustomTrain) {
    throw ScenarioError(fmt::format(
        "{}: runner: {}'s train script reads cfg.runner while it builds the data loaders, before its total_epochs "
        "fallback, so the real job stops with AttributeError [{}]: add runner = dict(type='EpochBasedRunner', "
        "max_epochs=N) or dict(type='IterBasedRunner', max_iters=N)",
        config_.path, sem.codebase, sem.script_source));
  } else {
    // mmdet3d's train_model (and BEVFormer's, Sparse4D's): a config without `runner` gets
    // EpochBasedRunner(max_epochs=total_epochs), with a warning.
    runner_type_ = "EpochBasedRunner";
    if (total_epochs == nullptr) return;
    epochs_value = total_epochs;
    epochs_from =
        fmt::format("total_epochs, no runner: the train script builds an EpochBasedRunner [{}]", sem.script_source);
  }
  if (runner_type_ == "IterBasedRunner") {
    const auto v = r_.Int(Get(runner, "max_iters"), "runner.max_iters", 1, int64_t{1} << 40);
    if (!v) r_.Fail(config_.Find("runner"), "runner.max_iters", "an IterBasedRunner needs max_iters");
    s().mutable_job()->set_iterations(static_cast<uint64_t>(*v));
    Record("job.iterations", std::to_string(*v), From(Get(runner, "max_iters"), "runner.max_iters"));
  } else if (runner_type_ == "EpochBasedRunner" || runner_type_ == "EpochBasedRunner_video") {
    by_epoch_ = true;
    const std::string key = runner != nullptr ? "runner.max_epochs" : "total_epochs";
    const auto v = r_.Int(epochs_value, key, 1, 1 << 20);
    if (!v) {
      r_.Fail(runner != nullptr ? config_.Find("runner") : epochs_value, key,
              "an EpochBasedRunner needs max_epochs (an int), found nothing");
    }
    s().mutable_job()->set_epochs(static_cast<uint32_t>(*v));
    Record("job.epochs", std::to_string(*v), From(epochs_value, epochs_from));
    if (iterations_per_epoch_) {
      s().mutable_job()->set_iterations_per_epoch(static_cast<uint64_t>(*iterations_per_epoch_));
      Record("job.iterations_per_epoch", std::to_string(*iterations_per_epoch_),
             From(per_epoch, "num_iters_per_epoch"));
    }
  } else {
    r_.Fail(
        Get(runner, "type"), "runner.type",
        fmt::format("expected IterBasedRunner, EpochBasedRunner or EpochBasedRunner_video, found '{}'", runner_type_));
  }
}

// The evaluation hook (registered by mmdet's train script unless --no-validate): its collectives in
// the plan every evaluation.interval iterations (epochs for an epoch-based runner).
void ConfigJobBuilder::ReadEvaluation() {
  const ConfigValue* eval = config_.Find("evaluation.interval");
  if (eval == nullptr) return;
  const auto v = r_.Int(eval, "evaluation.interval", 1, int64_t{1} << 40);
  if (!v) return;
  std::optional<int64_t> iterations = *v;
  if (by_epoch_) {
    iterations = iterations_per_epoch_ ? std::optional<int64_t>(*v * *iterations_per_epoch_) : std::nullopt;
  }
  if (!iterations || *iterations > int64_t{UINT32_MAX}) {
    out_.notes.push_back(fmt::format(
        "evaluation.interval = {} epoch(s) ({}): without num_iters_per_epoch petrsim cannot place the evaluation "
        "hook's collectives in the plan (set plan.streampetr.evaluation_interval to its iteration count)",
        *v, eval->where));
    return;
  }
  StreamPetrPlan* plan = s().mutable_plan()->mutable_streampetr();
  plan->set_evaluation_interval(static_cast<uint32_t>(*iterations));
  Record("plan.streampetr.evaluation_interval", std::to_string(*iterations),
         From(eval, by_epoch_ ? "evaluation.interval, epochs x num_iters_per_epoch" : "evaluation.interval"));
  if (const ConfigValue* bn = config_.Find("evaluation.broadcast_bn_buffer")) {
    const auto b = r_.Bool(bn, "evaluation.broadcast_bn_buffer");
    plan->set_evaluation_broadcast_bn_buffer(b.value_or(true));
    Record("plan.streampetr.evaluation_broadcast_bn_buffer", *b ? "true" : "false",
           From(bn, "evaluation.broadcast_bn_buffer"));
  }
  if (const ConfigValue* gpu = config_.Find("evaluation.gpu_collect")) {
    const auto b = r_.Bool(gpu, "evaluation.gpu_collect");
    plan->set_evaluation_gpu_collect(b.value_or(false));
    Record("plan.streampetr.evaluation_gpu_collect", *b ? "true" : "false", From(gpu, "evaluation.gpu_collect"));
  }
}

void ConfigJobBuilder::ReadCommAndSeed() {
  if (const ConfigValue* backend = config_.Find("dist_params.backend")) {
    const std::string v = r_.String(backend, "dist_params.backend").value_or("None");
    if (v == "nccl") {
      s().mutable_comm()->set_backend(Comm::nccl);
    } else if (v == "gloo") {
      s().mutable_comm()->set_backend(Comm::gloo);
    } else {
      r_.Fail(backend, "dist_params.backend", fmt::format("expected 'nccl' or 'gloo', found '{}'", v));
    }
    Record("comm.backend", v, From(backend, "dist_params.backend"));
  }
  // mmcv's init_dist passes dist_params on to torch.distributed.init_process_group: a timeout there
  // is a datetime.timedelta, a call this reader never evaluates; any other value is the wrong type.
  if (const ConfigValue* timeout = config_.Find("dist_params.timeout")) {
    r_.RequireKnown(timeout, "dist_params.timeout");
    r_.Fail(timeout, "dist_params.timeout",
            fmt::format("expected a datetime.timedelta (init_process_group's timeout), found {}", timeout->Repr()));
  }
  if (const ConfigValue* params = config_.Find("dist_params")) {
    Record("comm.timeout_ms", "1800000",
           fmt::format("{} (dist_params sets no timeout: PyTorch's default, 30 minutes)", params->where));
  }
  // Every codebase's tools/train.py takes --seed (default 0) and overwrites cfg.seed with it before the
  // dataset and the loaders are built: a `seed` in the config has no effect on the job.
  constexpr const char* kSeedSource =
      "tools/train.py --seed, default 0, then cfg.seed = args.seed: StreamPETR@95f64702 tools/train.py:52,203-208; "
      "mmdet3d@47285b3f tools/train.py:65,210-215; the same in PETR, BEVFormer, BEVDet, Sparse4D, Far3D";
  s().mutable_job()->set_seed(0);
  Record("job.seed", "0", fmt::format("the train script's default [{}]", kSeedSource));
  if (const ConfigValue* seed = config_.Find("seed"); seed != nullptr && !seed->is_none()) {
    out_.notes.push_back(fmt::format(
        "seed = {} ({}) has no effect: the train script overwrites cfg.seed with its --seed (default 0); if the job "
        "ran with --seed S, set --set job.seed=S (a training log's `Set random seed to S` line names it)",
        seed->Repr(), seed->where));
  } else {
    out_.notes.push_back(
        "the config sets no seed: the job's seed is the train script's --seed, 0 unless it was given (a training "
        "log's `Set random seed to S` line names it; set it with --set job.seed=S)");
  }
}

}  // namespace

ConfigJob ReadConfigJob(const Config& config, const ConfigJobOptions& options) {
  return ConfigJobBuilder(config, options).Build();
}

}  // namespace petrsim
