// `petrsim import mmdet3d-config` (importers/mmdet3d_config_job.h): the job a config describes, on configs written in
// the shape of StreamPETR's published ones (tests/data/configs/streampetr) over the importers' mini info files.
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "importers/imported_dataset.h"
#include "importers/mmdet3d_config_job.h"
#include "importers/mmdet3d_infos.h"
#include "formats/mmcv/config.h"
#include "model/dataset.h"
#include "model/error.h"
#include "model/preflight.h"
#include "model/scenario_validation.h"

namespace petrsim {
namespace {

const std::string kConfigs = PETRSIM_SOURCE_DIR "/tests/data/configs/streampetr";
const std::string kInfos = PETRSIM_SOURCE_DIR "/tests/data/importers";
const std::vector<std::string> kTrainVal = {kInfos + "/mini_infos_train.pkl", kInfos + "/mini_infos_val.pkl"};

// The scenario `import mmdet3d-config` writes, built in memory.
Scenario Import(const std::string& config_path, const std::vector<std::string>& infos, uint32_t gpus) {
  const Config config = ReadMmcvConfig(config_path);
  ConfigJobOptions options;
  options.infos = infos;
  options.gpus = gpus;
  const ConfigJob job = ReadConfigJob(config, options);
  std::vector<ImportedSubDataset> data;
  for (size_t i = 0; i < job.info_files.size(); ++i) {
    Mmdet3dInfosOptions o;
    o.name = job.subdataset_names[i];
    o.use_valid_flag = job.filters.use_valid_flag;
    data.push_back(ReadMmdet3dInfos(job.info_files[i], o));
  }
  ScenarioOverlay overlay;
  overlay.fields = job.scenario;
  Scenario scenario = ToScenario(data, job.filters, "config", &overlay);
  ValidateScenario(scenario, config_path);
  return scenario;
}

int CheckExit(const Scenario& scenario) {
  const Dataset dataset = BuildDataset(scenario, "test");
  return RunPreflight(scenario, dataset).job_fails ? 1 : 0;
}

TEST(ConfigImport, TheCurrentConfigCannotLivelock) {
  // StreamPETR's current 24e config: filter_empty_gt=False, use_valid_flag=True. The mini infos hold chunks without
  // GT, and still `check` proves the job terminates.
  const Scenario s = Import(kConfigs + "/stream_petr_r50_704_bs2_seq_24e.py", {kTrainVal[0]}, 2);
  EXPECT_FALSE(s.filters().filter_empty_gt());
  EXPECT_TRUE(s.filters().use_valid_flag());
  EXPECT_EQ(CheckExit(s), 0);
}

TEST(ConfigImport, TheOlderTrainValFormLivelocksAndEqualsTheHandWrittenScenario) {
  const Scenario imported = Import(kConfigs + "/stream_petr_r50_704_trainval_24e.py", kTrainVal, 2);
  EXPECT_EQ(CheckExit(imported), 1) << "filter_empty_gt left at the dataset's default (True) over empty chunks";
  // The same job written by hand: the infos imported with their defaults, the job's fields typed in.
  std::vector<ImportedSubDataset> data;
  for (const std::string& file : kTrainVal) data.push_back(ReadMmdet3dInfos(file, Mmdet3dInfosOptions{}));
  Scenario by_hand = ToScenario(data, ImportFilters{}, "by hand");
  Scenario fields;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"(
      job { world_size: 2 samples_per_gpu: 2 workers_per_gpu: 6 iterations: 51216 }
      grouping { seq_mode: true seq_split_num: 2 }
      filters {
        filter_empty_gt: true use_valid_flag: true bev_range_min_m: -51.2 bev_range_max_m: 51.2
        classes: ["car", "truck", "construction_vehicle", "bus", "trailer", "barrier", "motorcycle", "bicycle",
                  "pedestrian", "traffic_cone"]
      }
      sampler { kind: infinite_group_each_sample_in_batch }
      plan { streampetr { decoder_layers: 3 log_interval: 10 checkpoint_interval: 2134 evaluation_interval: 51216 } }
      comm { backend: nccl }
      pipeline {
        ops { resize_crop_flip_rot_image { training: true rand_flip: true } }
        ops { global_rot_scale_trans_image {} }
        grid_mask { use: true image_height: 256 }
      })",
                                                            &fields));
  for (const auto* f : {"job", "grouping", "filters", "sampler", "plan", "comm", "pipeline"}) {
    const auto* field = Scenario::descriptor()->FindFieldByName(f);
    by_hand.GetReflection()
        ->MutableMessage(&by_hand, field)
        ->CopyFrom(fields.GetReflection()->GetMessage(fields, field));
  }
  google::protobuf::util::MessageDifferencer differ;
  differ.IgnoreField(Scenario::descriptor()->FindFieldByName("description"));
  std::string report;
  differ.ReportDifferencesToString(&report);
  EXPECT_TRUE(differ.Compare(by_hand, imported)) << report;
}

TEST(ConfigImport, RecordsWhereEachValueCameFrom) {
  const Config config = ReadMmcvConfig(kConfigs + "/stream_petr_r50_704_trainval_24e.py");
  ConfigJobOptions options;
  options.infos = kTrainVal;
  const ConfigJob job = ReadConfigJob(config, options);
  EXPECT_EQ(job.scenario.job().world_size(), 8u) << "num_gpus of the config";
  const auto line = [&](const std::string& field) -> std::string {
    for (const std::string& l : job.provenance) {
      if (l.rfind(field + " = ", 0) == 0) return l;
    }
    return "";
  };
  EXPECT_NE(line("job.world_size").find("stream_petr_r50_704_trainval_24e.py:10 (num_gpus)"), std::string::npos)
      << line("job.world_size");
  EXPECT_NE(line("filters.filter_empty_gt").find("default (mmdet3d Custom3DDataset"), std::string::npos);
  EXPECT_NE(line("sampler.kind").find("stream_petr_r50_704_bs2_seq_24e.py:"), std::string::npos) << "from the base";
  EXPECT_NE(line("comm.timeout_ms").find("(dist_params sets no timeout: PyTorch's default, 30 minutes)"),
            std::string::npos)
      << line("comm.timeout_ms");
}

void ExpectError(const std::string& text, const std::string& fragment, ConfigJobOptions options = {}) {
  try {
    ReadConfigJob(ReadMmcvConfigText(text, "/virtual/cfg.py"), options);
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const ScenarioError& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
  }
}

TEST(ConfigImport, BadJobsGetTheirFileLineAndKey) {
  const std::string train = "data = dict(samples_per_gpu=2, train=dict(type='CustomNuScenesDataset', ann_file='a.pkl'";
  ExpectError("num_gpus = 8\n" + train + ", filter_empty_gt='no'))\n",
              "/virtual/cfg.py:2: data.train.filter_empty_gt: expected True or False, found 'no'");
  ExpectError(train + "))\n", "the config names no GPU count (no num_gpus, no gpu_ids): pass --gpus N");
  ExpectError("num_gpus = 8\ndata = dict(train=dict(type='CBGSDataset', dataset=dict()))\n",
              "data.train.type: CBGSDataset resamples the dataset it wraps");
  ExpectError("num_gpus = 8\ndata = dict(train=dict(type='KittiDataset', ann_file='a.pkl'))\n",
              "expected a nuScenes dataset (CustomNuScenesDataset, NuScenesDataset), found 'KittiDataset'");
  ExpectError("num_gpus = 0\n" + train + "))\n", "/virtual/cfg.py:1: num_gpus: expected an int in [1, 65536], found 0");
  ExpectError("num_gpus = 8\n" + train + ", seq_split_num='half'))\n", "expected an int or 'all', found 'half'");
  ExpectError(
      "num_gpus = 8\ndata = dict(train=dict(type='ConcatDataset', datasets=[dict(type='NuScenesDataset', "
      "ann_file='a.pkl'), dict(type='NuScenesDataset', ann_file='b.pkl', use_valid_flag=True)]))\n",
      "the concatenated datasets disagree");
  ExpectError("num_gpus = 8\n" + train + "), shuffler_sampler=dict(type='MySampler'))\n",
              "data.shuffler_sampler.type: expected InfiniteGroupEachSampleInBatchSampler");
  ExpectError("num_gpus = 8\n" + train + "))\nrunner = dict(type='IterBasedRunner')\n",
              "runner.max_iters: an IterBasedRunner needs max_iters");
  ConfigJobOptions two;
  two.infos = {"a.pkl", "b.pkl"};
  ExpectError("num_gpus = 8\n" + train + "))\n", "--infos: 2 file(s) given, the config's ann_file names 1 (a.pkl)",
              two);
  ExpectError("num_gpus = 8\n" + train + "))\ndist_params = dict(backend='nccl', timeout=1800)\n",
              "/virtual/cfg.py:3: dist_params.timeout: expected a datetime.timedelta (init_process_group's timeout), "
              "found 1800");
  ExpectError("x = 1\n", "the config has no `data` dict");
}

TEST(ConfigImport, ConcatDatasetAndAnnFileListsKeepTheirOrder) {
  ConfigJobOptions options;
  options.data_root = "/data/nus";
  const ConfigJob list = ReadConfigJob(
      ReadMmcvConfigText("num_gpus = 4\ndata_root = 'data/nuscenes/'\ndata = dict(train=dict(type='NuScenesDataset', "
                         "data_root=data_root, ann_file=[data_root + 'b_train.pkl', data_root + 'a_val.pkl']))\n",
                         "/virtual/cfg.py"),
      options);
  EXPECT_EQ(list.info_files, (std::vector<std::string>{"/data/nus/b_train.pkl", "/data/nus/a_val.pkl"}));
  EXPECT_EQ(list.subdataset_names, (std::vector<std::string>{"b_train", "a_val"}));
  EXPECT_EQ(list.scenario.sampler().kind(), Sampler::distributed_group) << "mmdet's default sampler";
  EXPECT_FALSE(list.filters.use_valid_flag) << "NuScenesDataset's default";
  EXPECT_TRUE(list.filters.filter_empty_gt) << "Custom3DDataset's default";
}

}  // namespace
}  // namespace petrsim
