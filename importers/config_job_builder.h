// The builder behind ReadConfigJob (mmdet3d_config_job.h), internal to importers/: one method per section of
// the config (loader, world, train datasets, info paths, grouping, filters, pipeline, classes, model,
// sampler, length, evaluation, communication), each writing its scenario fields with where each value
// came from. Its definitions are cut along the config's parts: mmdet3d_config_job.cc (the job, the train
// datasets and their files), config_job_dataset.cc (what the dataset does with a frame: groups, filters,
// resampling, the pipeline, the classes), config_job_training.cc (model, sampler, length, evaluation,
// communication and seed). Sections run in Build's order; none reads state a later one sets.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "importers/config_field_reader.h"
#include "importers/dataset_semantics.h"
#include "importers/mmdet3d_config_job.h"

namespace petrsim::config_job {

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
  void ReadTestModeAndInterval();
  std::string KeyOrigin(const char* key, bool fallback, std::string_view source) const;
  void ReadIntervalTest();
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

}  // namespace petrsim::config_job
