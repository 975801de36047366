// The job an mmdet3d config describes; see mmdet3d_config_job.h and config_job_builder.h. This file: the
// loader, the world, the train datasets through their wrappers (or the class read from its source), and
// the info files they name.
#include "importers/mmdet3d_config_job.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "importers/config_field_reader.h"
#include "importers/config_job_builder.h"
#include "importers/dataset_semantics.h"
#include "importers/dataset_source.h"

namespace petrsim {
namespace config_job {
namespace {

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

}  // namespace

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

}  // namespace config_job

ConfigJob ReadConfigJob(const Config& config, const ConfigJobOptions& options) {
  return config_job::ConfigJobBuilder(config, options).Build();
}

}  // namespace petrsim
