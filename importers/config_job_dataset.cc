// What the dataset of a config does with a frame (config_job_builder.h): its groups, the filters that
// decide a frame has no GT, the resample loop, the train pipeline and the classes.
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

namespace petrsim::config_job {
namespace {

// Train-pipeline ops that draw nothing from numpy (StreamPETR's and mmdet3d's loading, filtering, formatting).
constexpr const char* kNoDrawOps[] = {"LoadMultiViewImageFromFiles", "LoadAnnotations3D",
                                      "ObjectRangeFilter",           "ObjectNameFilter",
                                      "NormalizeMultiviewImage",     "PadMultiViewImage",
                                      "PETRFormatBundle3D",          "Collect3D",
                                      "DefaultFormatBundle3D",       "LoadPointsFromFile",
                                      "LoadPointsFromMultiSweeps",   "PhotoMetricDistortionMultiViewImage",
                                      "CircleObjectRangeFilter"};

}  // namespace

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

// test_mode (noted: the real job may fail) and load_interval (refused unless 1) of the dataset dict.
void ConfigJobBuilder::ReadTestModeAndInterval() {
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
}

// Where a dataset key was set, or its class's default and the source that says so.
std::string ConfigJobBuilder::KeyOrigin(const char* key, bool fallback, std::string_view source) const {
  const std::string where = WhereOf(key);
  return where.empty()
             ? fmt::format("default ({}: {}={}) [{}]", Semantics().type, key, fallback ? "True" : "False", source)
             : where;
}

// Far3D's interval_test: an argument of Argoverse2DatasetT only (argoverse2_dataset_t.py:19), the order its infos
// are read in, which the info reader applies.
void ConfigJobBuilder::ReadIntervalTest() {
  out_.interval_test = SameInEveryPart("interval_test", false);
  Record("infos.interval_test", out_.interval_test ? "true" : "false",
         KeyOrigin("interval_test", false,
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

void ConfigJobBuilder::ReadDatasetFilters() {
  const DatasetSemantics& sem = Semantics();
  ReadTestModeAndInterval();
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
  Record("filters.filter_empty_gt", filter_empty_gt ? "true" : "false",
         test_mode_ ? fmt::format("{} (test_mode=True: __getitem__ returns prepare_test_data, which never rejects a "
                                  "frame or resamples)",
                                  WhereOf("test_mode"))
                    : KeyOrigin("filter_empty_gt", sem.filter_empty_gt_default, sem.filter_empty_gt_source));
  Record("filters.use_valid_flag", use_valid_flag ? "true" : "false",
         KeyOrigin("use_valid_flag", sem.use_valid_flag_default, sem.use_valid_flag_source));
  s().mutable_filters()->set_filter_empty_gt(filter_empty_gt);
  s().mutable_filters()->set_use_valid_flag(use_valid_flag);
  // Where the user would change it (check/user_change.h).
  UserSource& user = *s().mutable_user_source();
  user.set_config(config_.path);
  user.set_dataset_dict(parts_.front().path);
  user.set_dataset_type(sem.type);
  if (const ConfigValue* type = Get(parts_.front().dict, "type")) user.set_dataset_dict_where(type->where);
  if (const ConfigValue* v = PartValue("filter_empty_gt")) user.set_filter_empty_gt_where(v->where);

  if (sem.type == "Argoverse2DatasetT") ReadIntervalTest();

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
  s().mutable_user_source()->set_rand_another_where(sem.pool_source);
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

}  // namespace petrsim::config_job
