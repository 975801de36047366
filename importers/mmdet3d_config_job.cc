// The job an mmdet3d config describes; see mmdet3d_config_job.h.
#include "importers/mmdet3d_config_job.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "model/error.h"
#include "model/streampetr_ddp_model.h"

namespace petrsim {
namespace {

// Reads typed values from a config, every error naming where the value was written and its key path.
class Reader {
 public:
  explicit Reader(const Config& config) : config_(config) {}

  [[noreturn]] void Fail(const ConfigValue* value, const std::string& path, const std::string& what) const {
    const std::string where = value != nullptr && !value->where.empty() ? value->where : config_.path;
    throw ScenarioError(fmt::format("{}: {}: {}", where, path, what));
  }

  const ConfigDict* Dict(const ConfigValue* value, const std::string& path) const {
    if (value == nullptr) return nullptr;
    const ConfigDict* dict = value->AsDict();
    if (dict == nullptr) Fail(value, path, fmt::format("expected a dict, found {}", value->Repr()));
    return dict;
  }

  std::optional<int64_t> Int(const ConfigValue* value, const std::string& path, int64_t min, int64_t max) const {
    if (value == nullptr || value->is_none()) return std::nullopt;
    const int64_t* v = value->AsInt();
    if (v == nullptr || *v < min || *v > max) {
      Fail(value, path, fmt::format("expected an int in [{}, {}], found {}", min, max, value->Repr()));
    }
    return *v;
  }

  std::optional<bool> Bool(const ConfigValue* value, const std::string& path) const {
    if (value == nullptr) return std::nullopt;
    if (const bool* b = value->AsBool()) return *b;
    if (const int64_t* i = value->AsInt(); i != nullptr && (*i == 0 || *i == 1)) return *i == 1;
    Fail(value, path, fmt::format("expected True or False, found {}", value->Repr()));
  }

  std::optional<std::string> String(const ConfigValue* value, const std::string& path) const {
    if (value == nullptr || value->is_none()) return std::nullopt;
    const std::string* s = value->AsString();
    if (s == nullptr) Fail(value, path, fmt::format("expected a string, found {}", value->Repr()));
    return *s;
  }

  std::vector<std::string> Strings(const ConfigValue* value, const std::string& path) const {
    std::vector<std::string> out;
    if (value == nullptr) return out;
    if (const std::string* s = value->AsString()) return {*s};
    const auto* items = value->AsSequence();
    if (items == nullptr)
      Fail(value, path, fmt::format("expected a string or a list of strings, found {}", value->Repr()));
    for (size_t i = 0; i < items->size(); ++i) {
      const std::string* s = (*items)[i].AsString();
      if (s == nullptr) {
        Fail(&(*items)[i], fmt::format("{}[{}]", path, i),
             fmt::format("expected a string, found {}", (*items)[i].Repr()));
      }
      out.push_back(*s);
    }
    return out;
  }

  std::vector<double> Numbers(const ConfigValue* value, const std::string& path) const {
    std::vector<double> out;
    const auto* items = value == nullptr ? nullptr : value->AsSequence();
    if (items == nullptr)
      Fail(value, path, fmt::format("expected a list of numbers, found {}", value ? value->Repr() : "nothing"));
    for (size_t i = 0; i < items->size(); ++i) {
      const auto n = (*items)[i].AsNumber();
      if (!n)
        Fail(&(*items)[i], fmt::format("{}[{}]", path, i),
             fmt::format("expected a number, found {}", (*items)[i].Repr()));
      out.push_back(*n);
    }
    return out;
  }

  const Config& config() const { return config_; }

 private:
  const Config& config_;
};

const ConfigValue* Get(const ConfigDict* dict, std::string_view key) {
  return dict == nullptr ? nullptr : dict->Get(key);
}

// "cfg.py:21" of a value, or "default (<why>)".
// "FILE:LINE" without the file's directories: the summary table's "from" column.
std::string ShortWhere(const std::string& where) {
  const size_t slash = where.find_last_of('/');
  return slash == std::string::npos ? where : where.substr(slash + 1);
}

std::string From(const ConfigValue* value, const std::string& key) {
  return value != nullptr ? fmt::format("{} ({})", value->where, key) : "";
}

constexpr const char* kNuScenesTypes[] = {"CustomNuScenesDataset", "NuScenesDataset", "NuScenesSweepDataset",
                                          "StreamPETRNuScenesDataset"};
// Train-pipeline ops that draw nothing from numpy (StreamPETR's and mmdet3d's loading, filtering, formatting).
constexpr const char* kNoDrawOps[] = {"LoadMultiViewImageFromFiles", "LoadAnnotations3D",
                                      "ObjectRangeFilter",           "ObjectNameFilter",
                                      "NormalizeMultiviewImage",     "PadMultiViewImage",
                                      "PETRFormatBundle3D",          "Collect3D",
                                      "DefaultFormatBundle3D",       "LoadPointsFromFile",
                                      "LoadPointsFromMultiSweeps",   "PhotoMetricDistortionMultiViewImage"};

}  // namespace

ConfigJob ReadConfigJob(const Config& config, const ConfigJobOptions& options) {
  const Reader r(config);
  ConfigJob out;
  Scenario& s = out.scenario;
  const auto record = [&](const std::string& field, const std::string& value, const std::string& from) {
    out.provenance.push_back(fmt::format("{} = {}  # {}", field, value, from));
  };
  const ConfigDict* data = r.Dict(config.Find("data"), "data");
  if (data == nullptr)
    throw ScenarioError(fmt::format("{}: the config has no `data` dict (data = dict(...))", config.path));

  // Batch and loader.
  if (const auto v = r.Int(Get(data, "samples_per_gpu"), "data.samples_per_gpu", 1, 1 << 16)) {
    s.mutable_job()->set_samples_per_gpu(static_cast<uint32_t>(*v));
    record("job.samples_per_gpu", std::to_string(*v), From(Get(data, "samples_per_gpu"), "data.samples_per_gpu"));
  }
  if (const auto v = r.Int(Get(data, "workers_per_gpu"), "data.workers_per_gpu", 0, 1024)) {
    s.mutable_job()->set_workers_per_gpu(static_cast<uint32_t>(*v));
    record("job.workers_per_gpu", std::to_string(*v), From(Get(data, "workers_per_gpu"), "data.workers_per_gpu"));
  }

  // GPUs.
  if (options.gpus) {
    s.mutable_job()->set_world_size(*options.gpus);
    record("job.world_size", std::to_string(*options.gpus), "--gpus");
  } else if (const ConfigValue* n = config.Find("num_gpus")) {
    const auto v = r.Int(n, "num_gpus", 1, 65536);
    s.mutable_job()->set_world_size(static_cast<uint32_t>(*v));
    record("job.world_size", std::to_string(*v), From(n, "num_gpus"));
  } else if (const ConfigValue* ids = config.Find("gpu_ids")) {
    const auto* items = ids->AsSequence();
    if (items == nullptr || items->empty())
      r.Fail(ids, "gpu_ids", fmt::format("expected a list of GPU ids, found {}", ids->Repr()));
    s.mutable_job()->set_world_size(static_cast<uint32_t>(items->size()));
    record("job.world_size", std::to_string(items->size()), From(ids, "gpu_ids"));
  } else {
    throw ScenarioError(
        fmt::format("{}: the config names no GPU count (no num_gpus, no gpu_ids): pass --gpus N, the job's world size",
                    config.path));
  }

  // The train dataset(s), in ConcatDataset order.
  const ConfigValue* train_value = Get(data, "train");
  const ConfigDict* train = r.Dict(train_value, "data.train");
  if (train == nullptr)
    throw ScenarioError(fmt::format("{}: data.train: the config has no train dataset", config.path));
  struct Part {
    const ConfigDict* dict;
    std::string path;
  };
  std::vector<Part> parts;
  {
    const auto type = r.String(Get(train, "type"), "data.train.type");
    if (type && (*type == "CBGSDataset" || *type == "RepeatDataset" || *type == "ClassBalancedDataset")) {
      r.Fail(Get(train, "type"), "data.train.type",
             fmt::format("{} resamples the dataset it wraps; petrsim models the plain dataset and its sampler", *type));
    }
    if (type && *type == "ConcatDataset") {
      const auto* items = Get(train, "datasets") ? Get(train, "datasets")->AsSequence() : nullptr;
      if (items == nullptr || items->empty()) {
        r.Fail(train_value, "data.train.datasets", "a ConcatDataset needs a list of datasets");
      }
      for (size_t i = 0; i < items->size(); ++i) {
        const std::string path = fmt::format("data.train.datasets[{}]", i);
        parts.push_back(Part{r.Dict(&(*items)[i], path), path});
      }
    } else {
      parts.push_back(Part{train, "data.train"});
    }
  }
  std::optional<bool> seq_mode, filter_empty_gt, use_valid_flag;
  std::optional<std::string> seq_split;
  std::string first_type;
  const std::string config_data_root = [&] {
    if (const ConfigValue* v = Get(train, "data_root"); v != nullptr && v->AsString()) return *v->AsString();
    if (const ConfigValue* v = config.Find("data_root"); v != nullptr && v->AsString()) return *v->AsString();
    return std::string();
  }();
  std::vector<std::string> ann_files;
  for (const Part& part : parts) {
    const auto type = r.String(Get(part.dict, "type"), part.path + ".type");
    if (!type) r.Fail(Get(part.dict, "type"), part.path + ".type", "the dataset has no type");
    if (std::find(std::begin(kNuScenesTypes), std::end(kNuScenesTypes), *type) == std::end(kNuScenesTypes)) {
      r.Fail(Get(part.dict, "type"), part.path + ".type",
             fmt::format("expected a nuScenes dataset (CustomNuScenesDataset, NuScenesDataset), found '{}'", *type));
    }
    if (first_type.empty()) first_type = *type;
    const std::vector<std::string> files = r.Strings(Get(part.dict, "ann_file"), part.path + ".ann_file");
    if (files.empty()) r.Fail(Get(part.dict, "ann_file"), part.path + ".ann_file", "the dataset has no ann_file");
    ann_files.insert(ann_files.end(), files.begin(), files.end());
    // One value for the whole job: the scenario has one filter set and one grouping.
    const auto same = [&](std::optional<bool>& have, const char* key, bool fallback) {
      const ConfigValue* v = Get(part.dict, key);
      const bool value = r.Bool(v, part.path + "." + key).value_or(fallback);
      if (have && *have != value) {
        r.Fail(v, part.path + "." + key,
               fmt::format("the concatenated datasets disagree ({} here, {} before): petrsim keeps one value a job",
                           value ? "True" : "False", *have ? "True" : "False"));
      }
      have = value;
    };
    same(seq_mode, "seq_mode", false);
    same(filter_empty_gt, "filter_empty_gt", true);
    same(use_valid_flag, "use_valid_flag", false);
    if (const ConfigValue* v = Get(part.dict, "seq_split_num")) {
      const std::string text = v->AsString() ? *v->AsString() : v->AsInt() ? std::to_string(*v->AsInt()) : "";
      if (text.empty() || (v->AsString() && text != "all")) {
        r.Fail(v, part.path + ".seq_split_num", fmt::format("expected an int or 'all', found {}", v->Repr()));
      }
      if (seq_split && *seq_split != text) {
        r.Fail(v, part.path + ".seq_split_num", "the concatenated datasets disagree: petrsim keeps one value a job");
      }
      seq_split = text;
    }
    for (const char* key : {"queue_length", "num_frame_losses"}) {
      if (const ConfigValue* v = Get(part.dict, key)) {
        out.notes.push_back(fmt::format("{}.{} = {} ({}): {}", part.path, key, v->Repr(), v->where,
                                        seq_mode.value_or(false) ? "seq_mode sets it to 1 (CustomNuScenesDataset)"
                                                                 : "not modelled: petrsim models seq_mode streams"));
      }
    }
  }
  const auto where_of = [&](const char* key) -> std::string {
    for (const Part& part : parts) {
      if (const ConfigValue* v = Get(part.dict, key)) return From(v, part.path + "." + key);
    }
    return "";
  };
  // Paths: --infos, else ann_file under --data-root.
  if (!options.infos.empty()) {
    if (options.infos.size() != ann_files.size()) {
      throw ScenarioError(fmt::format("--infos: {} file(s) given, the config's ann_file names {} ({})",
                                      options.infos.size(), ann_files.size(), fmt::join(ann_files, ", ")));
    }
    out.info_files = options.infos;
  } else {
    const std::filesystem::path config_dir = std::filesystem::path(config.path).parent_path();
    for (const std::string& file : ann_files) {
      std::string rel = file;
      if (!options.data_root.empty()) {
        if (!config_data_root.empty() && rel.rfind(config_data_root, 0) == 0) rel = rel.substr(config_data_root.size());
        out.info_files.push_back((std::filesystem::path(options.data_root) / rel).lexically_normal().string());
      } else {
        // As the training script resolves it: relative to where it runs, usually the repository root.
        out.info_files.push_back(rel);
      }
    }
  }
  for (const std::string& file : out.info_files) {
    std::string name = std::filesystem::path(file).filename().string();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, ".pkl") == 0) name.resize(name.size() - 4);
    out.subdataset_names.push_back(name);
  }
  // Grouping and filters.
  s.mutable_grouping()->set_seq_mode(*seq_mode);
  record("grouping.seq_mode", *seq_mode ? "true" : "false",
         where_of("seq_mode").empty() ? "default (CustomNuScenesDataset: seq_mode=False)" : where_of("seq_mode"));
  if (seq_split == "all") {
    s.mutable_grouping()->set_seq_split_all(true);
    record("grouping.seq_split_all", "true", where_of("seq_split_num"));
  } else {
    const uint32_t n = seq_split ? static_cast<uint32_t>(std::stoul(*seq_split)) : 1;
    if (n < 1 || n > 1000)
      throw ScenarioError(fmt::format("{}: seq_split_num: must be in [1, 1000], got {}", where_of("seq_split_num"), n));
    s.mutable_grouping()->set_seq_split_num(n);
    record("grouping.seq_split_num", std::to_string(n),
           seq_split ? where_of("seq_split_num") : "default (CustomNuScenesDataset: seq_split_num=1)");
  }
  out.filters.filter_empty_gt = *filter_empty_gt;
  out.filters.use_valid_flag = *use_valid_flag;
  out.filters.seq_mode = *seq_mode;
  out.filters.from_config = true;
  out.filters.seq_split_num = s.grouping().seq_split_num();
  // The summary's table says where each came from: the config's line, or the class default.
  const auto origin = [&](const char* key, const char* fallback) {
    for (const Part& part : parts) {
      if (const ConfigValue* v = Get(part.dict, key)) return ShortWhere(v->where);
    }
    return std::string(fallback);
  };
  out.filters.origins["filter_empty_gt"] = origin("filter_empty_gt", "Custom3DDataset default");
  out.filters.origins["use_valid_flag"] = origin("use_valid_flag", "NuScenesDataset default");
  out.filters.origins["seq_mode"] = origin("seq_mode", "CustomNuScenesDataset default");
  out.filters.origins["seq_split_num"] = origin("seq_split_num", "CustomNuScenesDataset default");
  record("filters.filter_empty_gt", *filter_empty_gt ? "true" : "false",
         where_of("filter_empty_gt").empty() ? "default (mmdet3d Custom3DDataset: filter_empty_gt=True)"
                                             : where_of("filter_empty_gt"));
  record("filters.use_valid_flag", *use_valid_flag ? "true" : "false",
         where_of("use_valid_flag").empty() ? "default (mmdet3d NuScenesDataset: use_valid_flag=False)"
                                            : where_of("use_valid_flag"));

  // The train pipeline: the filters' classes and range, the random ops.
  const ConfigValue* pipeline_value = Get(parts.front().dict, "pipeline");
  if (pipeline_value == nullptr) pipeline_value = config.Find("train_pipeline");
  std::vector<std::string> classes;
  std::string classes_from;
  Pipeline pipeline;
  bool pipeline_seen = false;
  if (pipeline_value != nullptr) {
    const auto* ops = pipeline_value->AsSequence();
    if (ops == nullptr)
      r.Fail(pipeline_value, "data.train.pipeline",
             fmt::format("expected a list of ops, found {}", pipeline_value->Repr()));
    pipeline_seen = true;
    for (size_t i = 0; i < ops->size(); ++i) {
      const std::string path = fmt::format("data.train.pipeline[{}]", i);
      const ConfigDict* op = r.Dict(&(*ops)[i], path);
      const auto type = r.String(Get(op, "type"), path + ".type");
      if (!type) r.Fail(&(*ops)[i], path, "an op without a type");
      if (*type == "ObjectNameFilter") {
        classes = r.Strings(Get(op, "classes"), path + ".classes");
        classes_from = From(Get(op, "classes"), path + ".classes");
      } else if (*type == "ObjectRangeFilter") {
        const std::vector<double> range = r.Numbers(Get(op, "point_cloud_range"), path + ".point_cloud_range");
        if (range.size() != 6 || range[0] != range[1] || range[3] != range[4]) {
          r.Fail(Get(op, "point_cloud_range"), path + ".point_cloud_range",
                 "expected [x_min, y_min, z_min, x_max, y_max, z_max] with x and y sharing their bounds (petrsim keeps "
                 "one BEV range)");
        }
        out.filters.bev_range_min_m = range[0];
        out.filters.bev_range_max_m = range[3];
        out.filters.origins["range"] = ShortWhere(Get(op, "point_cloud_range")->where);
        s.mutable_filters()->set_bev_range_min_m(range[0]);
        s.mutable_filters()->set_bev_range_max_m(range[3]);
        record("filters.bev_range", fmt::format("[{}, {}]", range[0], range[3]),
               From(Get(op, "point_cloud_range"), path + ".point_cloud_range"));
      } else if (*type == "ResizeCropFlipRotImage") {
        auto* resize = pipeline.add_ops()->mutable_resize_crop_flip_rot_image();
        resize->set_training(r.Bool(Get(op, "training"), path + ".training").value_or(false));
        if (const ConfigDict* aug = r.Dict(Get(op, "data_aug_conf"), path + ".data_aug_conf")) {
          resize->set_rand_flip(r.Bool(Get(aug, "rand_flip"), path + ".data_aug_conf.rand_flip").value_or(false));
          if (const ConfigValue* dim = Get(aug, "final_dim")) {
            const std::vector<double> d = r.Numbers(dim, path + ".data_aug_conf.final_dim");
            if (d.empty() || d[0] < 3) r.Fail(dim, path + ".data_aug_conf.final_dim", "expected (height, width)");
            pipeline.mutable_grid_mask()->set_image_height(static_cast<uint32_t>(d[0]));
          }
        }
        record(
            fmt::format("pipeline.ops[{}]", pipeline.ops_size() - 1),
            fmt::format("ResizeCropFlipRotImage(training={}, rand_flip={})", resize->training(), resize->rand_flip()),
            From(&(*ops)[i], path));
      } else if (*type == "GlobalRotScaleTransImage") {
        pipeline.add_ops()->mutable_global_rot_scale_trans_image();
        record(fmt::format("pipeline.ops[{}]", pipeline.ops_size() - 1), "GlobalRotScaleTransImage",
               From(&(*ops)[i], path));
      } else if (std::find(std::begin(kNoDrawOps), std::end(kNoDrawOps), *type) == std::end(kNoDrawOps)) {
        out.notes.push_back(fmt::format(
            "{} ({}): '{}' is not an op petrsim knows; taken as drawing nothing from numpy (if it does, add its draws "
            "as pipeline.ops {{ calls {{ ... }} }})",
            path, (*ops)[i].where, *type));
      }
    }
  }
  if (classes.empty()) {
    if (const ConfigValue* names = config.Find("class_names")) {
      classes = r.Strings(names, "class_names");
      classes_from = From(names, "class_names");
    }
  }
  if (!classes.empty()) {
    out.filters.classes = classes;
    out.filters.origins["classes"] = ShortWhere(classes_from.substr(0, classes_from.find(' ')));
    for (const std::string& c : classes) s.mutable_filters()->add_classes(c);
    record("filters.classes", fmt::format("[{}]", fmt::join(classes, ", ")), classes_from);
  }
  s.mutable_filters()->set_filter_empty_gt(out.filters.filter_empty_gt);
  s.mutable_filters()->set_use_valid_flag(out.filters.use_valid_flag);

  // The model: GridMask, the head's decoder layers and denoising.
  const ConfigDict* model = r.Dict(config.Find("model"), "model");
  if (pipeline_seen) {
    const ConfigValue* grid = Get(model, "use_grid_mask");
    pipeline.mutable_grid_mask()->set_use(r.Bool(grid, "model.use_grid_mask").value_or(false));
    record("pipeline.grid_mask.use", pipeline.grid_mask().use() ? "true" : "false",
           grid ? From(grid, "model.use_grid_mask") : "default (Petr3D: use_grid_mask=False)");
    *s.mutable_pipeline() = pipeline;
  }
  if (const ConfigValue* layers = config.Find("model.pts_bbox_head.transformer.decoder.num_layers")) {
    const auto v = r.Int(layers, "model.pts_bbox_head.transformer.decoder.num_layers", 1, 1000);
    s.mutable_plan()->mutable_streampetr()->set_decoder_layers(static_cast<uint32_t>(*v));
    record("plan.streampetr.decoder_layers", std::to_string(*v), From(layers, "decoder.num_layers"));
  }
  if (const ConfigValue* dn = config.Find("model.pts_bbox_head.with_dn")) {
    const bool v = *r.Bool(dn, "model.pts_bbox_head.with_dn");
    s.mutable_plan()->mutable_streampetr()->set_denoising(v);
    record("plan.streampetr.denoising", v ? "true" : "false", From(dn, "model.pts_bbox_head.with_dn"));
  }
  if (const ConfigValue* unused = config.Find("find_unused_parameters")) {
    const bool v = *r.Bool(unused, "find_unused_parameters");
    if (v) {
      // plan.ddp replaces the reference model as a whole: write it out with the flag.
      *s.mutable_plan()->mutable_ddp() = StreamPetrReferenceDdpModel(s.plan().streampetr().decoder_layers());
      s.mutable_plan()->mutable_ddp()->set_find_unused_parameters(true);
    }
    record("plan.ddp.find_unused_parameters", v ? "true" : "false", From(unused, "find_unused_parameters"));
  }
  if (const ConfigValue* interval = config.Find("log_config.interval")) {
    const auto v = r.Int(interval, "log_config.interval", 0, 1 << 30);
    s.mutable_plan()->mutable_streampetr()->set_log_interval(static_cast<uint32_t>(*v));
    record("plan.streampetr.log_interval", std::to_string(*v), From(interval, "log_config.interval"));
  }
  if (const ConfigValue* interval = config.Find("checkpoint_config.interval")) {
    const auto v = r.Int(interval, "checkpoint_config.interval", 0, 1 << 30);
    s.mutable_plan()->mutable_streampetr()->set_checkpoint_interval(static_cast<uint32_t>(*v));
    record("plan.streampetr.checkpoint_interval", std::to_string(*v), From(interval, "checkpoint_config.interval"));
  }

  // The sampler.
  {
    const ConfigValue* sampler = config.Find("data.shuffler_sampler.type");
    const std::string kind = r.String(sampler, "data.shuffler_sampler.type").value_or("DistributedGroupSampler");
    if (kind == "InfiniteGroupEachSampleInBatchSampler") {
      s.mutable_sampler()->set_kind(Sampler::infinite_group_each_sample_in_batch);
    } else if (kind == "DistributedGroupSampler") {
      s.mutable_sampler()->set_kind(Sampler::distributed_group);
    } else if (kind == "DistributedSampler") {
      s.mutable_sampler()->set_kind(Sampler::distributed);
    } else {
      r.Fail(sampler, "data.shuffler_sampler.type",
             fmt::format("expected InfiniteGroupEachSampleInBatchSampler, DistributedGroupSampler or "
                         "DistributedSampler, found '{}'",
                         kind));
    }
    record("sampler.kind", Sampler::Kind_Name(s.sampler().kind()),
           sampler ? From(sampler, "data.shuffler_sampler.type")
                   : "default (mmdet build_dataloader: DistributedGroupSampler when shuffling)");
  }

  // The job's length.
  const ConfigValue* per_epoch = config.Find("num_iters_per_epoch");
  const auto iters_per_epoch = r.Int(per_epoch, "num_iters_per_epoch", 1, int64_t{1} << 40);
  if (const ConfigDict* runner = r.Dict(config.Find("runner"), "runner")) {
    const auto type = r.String(Get(runner, "type"), "runner.type").value_or("");
    if (type == "IterBasedRunner") {
      const auto v = r.Int(Get(runner, "max_iters"), "runner.max_iters", 1, int64_t{1} << 40);
      if (!v) r.Fail(config.Find("runner"), "runner.max_iters", "an IterBasedRunner needs max_iters");
      s.mutable_job()->set_iterations(static_cast<uint64_t>(*v));
      record("job.iterations", std::to_string(*v), From(Get(runner, "max_iters"), "runner.max_iters"));
    } else if (type == "EpochBasedRunner") {
      const auto v = r.Int(Get(runner, "max_epochs"), "runner.max_epochs", 1, 1 << 20);
      if (!v) r.Fail(config.Find("runner"), "runner.max_epochs", "an EpochBasedRunner needs max_epochs");
      s.mutable_job()->set_epochs(static_cast<uint32_t>(*v));
      record("job.epochs", std::to_string(*v), From(Get(runner, "max_epochs"), "runner.max_epochs"));
      if (iters_per_epoch) {
        s.mutable_job()->set_iterations_per_epoch(static_cast<uint64_t>(*iters_per_epoch));
        record("job.iterations_per_epoch", std::to_string(*iters_per_epoch), From(per_epoch, "num_iters_per_epoch"));
      }
    } else {
      r.Fail(Get(runner, "type"), "runner.type",
             fmt::format("expected IterBasedRunner or EpochBasedRunner, found '{}'", type));
    }
  }
  // The evaluation hook (registered by mmdet's train script unless --no-validate): its collectives
  // in the plan every evaluation.interval iterations (epochs for an EpochBasedRunner).
  if (const ConfigValue* eval = config.Find("evaluation.interval")) {
    const auto v = r.Int(eval, "evaluation.interval", 1, int64_t{1} << 40);
    const bool by_epoch = config.Find("runner.type") != nullptr && config.Find("runner.type")->AsString() != nullptr &&
                          *config.Find("runner.type")->AsString() == "EpochBasedRunner";
    std::optional<int64_t> iterations = *v;
    if (by_epoch) iterations = iters_per_epoch ? std::optional<int64_t>(*v * *iters_per_epoch) : std::nullopt;
    if (!iterations || *iterations > int64_t{UINT32_MAX}) {
      out.notes.push_back(fmt::format(
          "evaluation.interval = {} epoch(s) ({}): without num_iters_per_epoch petrsim cannot place the evaluation "
          "hook's collectives in the plan (set plan.streampetr.evaluation_interval to its iteration count)",
          *v, eval->where));
    } else {
      StreamPetrPlan* plan = s.mutable_plan()->mutable_streampetr();
      plan->set_evaluation_interval(static_cast<uint32_t>(*iterations));
      record("plan.streampetr.evaluation_interval", std::to_string(*iterations),
             From(eval, by_epoch ? "evaluation.interval, epochs x num_iters_per_epoch" : "evaluation.interval"));
      if (const ConfigValue* bn = config.Find("evaluation.broadcast_bn_buffer")) {
        const auto b = r.Bool(bn, "evaluation.broadcast_bn_buffer");
        plan->set_evaluation_broadcast_bn_buffer(b.value_or(true));
        record("plan.streampetr.evaluation_broadcast_bn_buffer", *b ? "true" : "false",
               From(bn, "evaluation.broadcast_bn_buffer"));
      }
      if (const ConfigValue* gpu = config.Find("evaluation.gpu_collect")) {
        const auto b = r.Bool(gpu, "evaluation.gpu_collect");
        plan->set_evaluation_gpu_collect(b.value_or(false));
        record("plan.streampetr.evaluation_gpu_collect", *b ? "true" : "false", From(gpu, "evaluation.gpu_collect"));
      }
    }
  }

  // Communication and seed.
  if (const ConfigValue* backend = config.Find("dist_params.backend")) {
    const std::string v = *r.String(backend, "dist_params.backend");
    if (v == "nccl") {
      s.mutable_comm()->set_backend(Comm::nccl);
    } else if (v == "gloo") {
      s.mutable_comm()->set_backend(Comm::gloo);
    } else {
      r.Fail(backend, "dist_params.backend", fmt::format("expected 'nccl' or 'gloo', found '{}'", v));
    }
    record("comm.backend", v, From(backend, "dist_params.backend"));
  }
  // mmcv's init_dist passes dist_params on to torch.distributed.init_process_group: a timeout there
  // is a datetime.timedelta, a call this reader never evaluates, so a config that sets one is refused
  // before this point; any other value is the wrong type for PyTorch.
  if (const ConfigValue* timeout = config.Find("dist_params.timeout")) {
    r.Fail(timeout, "dist_params.timeout",
           fmt::format("expected a datetime.timedelta (init_process_group's timeout), found {}", timeout->Repr()));
  }
  if (const ConfigValue* params = config.Find("dist_params")) {
    record("comm.timeout_ms", "1800000",
           fmt::format("{} (dist_params sets no timeout: PyTorch's default, 30 minutes)", params->where));
  }
  if (const ConfigValue* seed = config.Find("seed")) {
    const auto v = r.Int(seed, "seed", 0, (int64_t{1} << 31) - 1);
    s.mutable_job()->set_seed(static_cast<uint32_t>(*v));
    record("job.seed", std::to_string(*v), From(seed, "seed"));
  } else {
    out.notes.push_back(
        "the config sets no seed: without --seed mmdet's train script draws a random one and logs `Set random seed "
        "to S`; job.seed is left at 0 (set it with --set job.seed=S)");
  }
  return out;
}

}  // namespace petrsim
