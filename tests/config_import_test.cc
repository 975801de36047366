// `petrsim import mmdet3d-config` (importers/mmdet3d_config_job.h): the job a config describes, on configs written in
// the shape of StreamPETR's published ones (tests/data/configs/streampetr) over the importers' mini info files.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <google/protobuf/text_format.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "base/error.h"
#include "check/preflight.h"
#include "data/dataset.h"
#include "formats/mmcv/config.h"
#include "importers/imported_dataset.h"
#include "importers/mmdet3d_config_job.h"
#include "importers/mmdet3d_infos.h"
#include "scenario/scenario_validation.h"

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
    o.interval_test = job.interval_test;
    data.push_back(ReadMmdet3dInfos(job.info_files[i], o));
  }
  ScenarioOverlay overlay;
  overlay.fields = job.scenario;
  Scenario scenario = ToScenario(data, job.filters, "config", &overlay);
  ValidateScenario(scenario, config_path);
  return scenario;
}

const std::string kAv2Infos = kInfos + "/mini_av2_infos_train.pkl";

// The mini info files standing in for every ann_file a config names (train, val, train, ...): Far3D's
// Argoverse 2 infos for its Argoverse2DatasetT, the nuScenes ones for every other class.
std::vector<std::string> MiniInfosFor(const std::string& config_path) {
  ConfigJobOptions options;
  options.gpus = 2;
  const ConfigJob job = ReadConfigJob(ReadMmcvConfig(config_path), options);
  const bool av2 = config_path.find("/far3d/") != std::string::npos;
  std::vector<std::string> infos;
  for (size_t i = 0; i < job.info_files.size(); ++i) infos.push_back(av2 ? kAv2Infos : kTrainVal[i % kTrainVal.size()]);
  return infos;
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
      job { world_size: 2 samples_per_gpu: 2 workers_per_gpu: 6 iterations: 51216 seed: 0 }
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
  // Where the user would change things (for fixes in the user's terms) is the import's alone.
  differ.IgnoreField(Scenario::descriptor()->FindFieldByName("user_source"));
  std::string report;
  differ.ReportDifferencesToString(&report);
  EXPECT_TRUE(differ.Compare(by_hand, imported)) << report;
  EXPECT_EQ(imported.user_source().dataset_type(), "CustomNuScenesDataset");
  EXPECT_NE(imported.user_source().dataset_dict_where().find("stream_petr_r50_704_trainval_24e.py:27"),
            std::string::npos);
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
  EXPECT_NE(
      line("filters.filter_empty_gt").find("default (CustomNuScenesDataset: filter_empty_gt=True) [mmdet3d@47285b3f"),
      std::string::npos)
      << line("filters.filter_empty_gt");
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
              "data.train.dataset.type: the dataset has no type");
  ExpectError("num_gpus = 8\ndata = dict(train=dict(type='KittiDataset', ann_file='a.pkl'))\n",
              "data.train.type: 'KittiDataset' is not a dataset type petrsim knows (NuScenesDataset, "
              "CustomNuScenesDataset, CustomNuScenesDatasetV2");
  ExpectError("num_gpus = 0\n" + train + "))\n", "/virtual/cfg.py:1: num_gpus: expected an int in [1, 65536], found 0");
  ExpectError("num_gpus = 8\n" + train + ", seq_split_num='half'))\n", "expected an int or 'all', found 'half'");
  ExpectError(
      "num_gpus = 8\ndata = dict(train=dict(type='ConcatDataset', datasets=[dict(type='NuScenesDataset', "
      "ann_file='a.pkl'), dict(type='NuScenesDataset', ann_file='b.pkl', use_valid_flag=True)]))\n",
      "the concatenated datasets disagree");
  ExpectError("num_gpus = 8\n" + train +
                  ", collect_keys=['img']), shuffler_sampler=dict(type='MySampler'))\n"
                  "runner = dict(type='IterBasedRunner', max_iters=10)\n",
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

const std::string kCodebases = PETRSIM_SOURCE_DIR "/tests/data/configs/codebases";

Scenario ImportCodebase(const std::string& relative) {
  const std::string path = kCodebases + "/" + relative;
  return Import(path, MiniInfosFor(path), 2);
}

// Each codebase's dataset semantics decide the verdict over the same small infos (train's scene-0553
// has a seq_split_num=2 chunk without GT): a chunk pool livelocks, a whole-dataset pool terminates.
TEST(ConfigImport, EachCodebaseIsReadWithItsOwnDatasetSemanticsOnSyntheticConfigs) {
  const Scenario sparse4d = ImportCodebase("sparse4d/sparse4dv2_seq_filter_default.py");
  EXPECT_TRUE(sparse4d.grouping().seq_mode()) << "with_seq_flag";
  EXPECT_EQ(sparse4d.grouping().seq_split_num(), 2u) << "sequences_split_num";
  EXPECT_TRUE(sparse4d.filters().filter_empty_gt()) << "NuScenes3DDetTrackDataset's default";
  ASSERT_EQ(sparse4d.filters().circle_range_size(), 10);
  EXPECT_EQ(sparse4d.filters().circle_range(2).name(), "construction_vehicle") << "label 2 of data.train.classes";
  EXPECT_EQ(sparse4d.filters().circle_range(2).max_m(), 50.0);
  EXPECT_EQ(sparse4d.sampler().kind(), Sampler::infinite_group_each_sample_in_batch) << "IterBasedRunner";
  EXPECT_EQ(CheckExit(sparse4d), 1) << "Sparse4Dv2 with filter_empty_gt at its default livelocks in a chunk";

  const Scenario far3d = ImportCodebase("far3d/far3d_global_pool.py");
  EXPECT_TRUE(far3d.grouping().seq_mode());
  EXPECT_EQ(far3d.resample().policy(), Resample::in_subdataset) << "Far3D's _rand_another: the whole dataset";
  EXPECT_EQ(far3d.filters().classes_size(), 26) << "Argoverse 2's competition categories";
  EXPECT_EQ(CheckExit(far3d), 0) << "Far3D terminates";

  const Scenario petr = ImportCodebase("petr/petrv2_trainval_cbgs.py");
  EXPECT_FALSE(petr.grouping().seq_mode()) << "PETR's CustomNuScenesDataset: one group";
  EXPECT_FALSE(petr.grouping().has_seq_split_num()) << "check refuses a split without seq_mode";
  EXPECT_EQ(petr.sampler().kind(), Sampler::distributed_group);
  EXPECT_EQ(CheckExit(petr), 0) << "PETR terminates";

  const Scenario bevformer = ImportCodebase("bevformer/bevformer_tiny_like.py");
  EXPECT_FALSE(bevformer.grouping().seq_mode());
  EXPECT_EQ(CheckExit(bevformer), 0) << "BEVFormer terminates";

  const Scenario bevdet = ImportCodebase("bevdet/bevdet_r50_cbgs_like.py");
  EXPECT_EQ(bevdet.job().epochs(), 24u) << "total_epochs without runner: an EpochBasedRunner";
  EXPECT_EQ(CheckExit(bevdet), 0) << "BEVDet terminates";

  const Scenario speed_test = ImportCodebase("streampetr/seq_filter_default_speed_test.py");
  EXPECT_TRUE(speed_test.filters().filter_empty_gt());
  EXPECT_EQ(CheckExit(speed_test), 1) << "StreamPETR seq_mode with filter_empty_gt at its default";

  const Scenario sliding = ImportCodebase("streampetr/sliding_window_8key.py");
  EXPECT_FALSE(sliding.grouping().seq_mode());
  EXPECT_EQ(sliding.filters().gt_required_frames(), 2u) << "num_frame_losses";
  EXPECT_EQ(CheckExit(sliding), 0);
}

ConfigJob Job(const std::string& text, ConfigJobOptions options = {}) {
  return ReadConfigJob(ReadMmcvConfigText(text, "/virtual/cfg.py"), options);
}

std::string Provenance(const ConfigJob& job, const std::string& field) {
  for (const std::string& l : job.provenance) {
    if (l.rfind(field + " = ", 0) == 0) return l;
  }
  return "";
}

// mmcv's and mmdet3d's meaning of the values a config sets (issue 27, point 3).
TEST(ConfigImport, ValuesMeanWhatMmdet3dMakesOfThem) {
  // Labels come from the dataset's classes; ObjectNameFilter only keeps the first len(its classes) labels.
  const ConfigJob narrowed = Job(
      "num_gpus = 2\nclass_names = ['car', 'truck', 'bus']\n"
      "data = dict(samples_per_gpu=1, train=dict(type='NuScenesDataset', ann_file='a.pkl', "
      "classes=['pedestrian', 'car', 'truck'], pipeline=[dict(type='ObjectNameFilter', classes=['car', 'bus'])]))\n");
  EXPECT_EQ(narrowed.filters.classes, (std::vector<std::string>{"pedestrian", "car"}));
  // Without classes: the dataset's CLASSES, in their order.
  const ConfigJob defaults =
      Job("num_gpus = 2\ndata = dict(samples_per_gpu=1, train=dict(type='NuScenesDataset', "
          "ann_file='a.pkl'))\n");
  EXPECT_EQ(defaults.filters.classes.at(2), "trailer") << "NuScenesDataset.CLASSES order";
  // total_epochs without runner: mmdet3d's train script builds an EpochBasedRunner; evaluation.interval is epochs.
  const ConfigJob epochs =
      Job("num_gpus = 2\nnum_iters_per_epoch = 100\ntotal_epochs = 3\nevaluation = dict(interval=2)\n"
          "data = dict(samples_per_gpu=1, train=dict(type='NuScenesDataset', ann_file='a.pkl'))\n");
  EXPECT_EQ(epochs.scenario.job().epochs(), 3u);
  EXPECT_EQ(epochs.scenario.plan().streampetr().evaluation_interval(), 200u) << "2 epochs x 100 iterations";
  // data_root without its trailing slash, joined with '/x.pkl', under --data-root.
  ConfigJobOptions root;
  root.data_root = "/mnt/nus";
  const ConfigJob joined =
      Job("num_gpus = 2\ndata_root = './data/nuscenes'\n"
          "data = dict(samples_per_gpu=1, train=dict(type='NuScenesDataset', data_root=data_root, "
          "ann_file=data_root + '/x_train.pkl'))\n",
          root);
  EXPECT_EQ(joined.info_files, (std::vector<std::string>{"/mnt/nus/x_train.pkl"}));
  // test_mode=True on train: __getitem__ never resamples.
  const ConfigJob test_mode =
      Job("num_gpus = 2\ndata = dict(samples_per_gpu=1, train=dict(type='NuScenesDataset', ann_file='a.pkl', "
          "test_mode=True))\n");
  EXPECT_FALSE(test_mode.scenario.filters().filter_empty_gt()) << "no frame is rejected in test mode";
  // --gpus against the config's num_gpus: a note that num_iters_per_epoch was computed for the config's count.
  ConfigJobOptions gpus;
  gpus.gpus = 16;
  const ConfigJob more =
      Job("num_gpus = 8\nnum_iters_per_epoch = 28130 // (num_gpus * 2)\n"
          "data = dict(samples_per_gpu=2, train=dict(type='NuScenesDataset', ann_file='a.pkl'))\n",
          gpus);
  bool noted = false;
  for (const std::string& note : more.notes)
    noted |= note.find("was computed in the config for 8 GPUs") != std::string::npos;
  EXPECT_TRUE(noted) << fmt::format("{}", fmt::join(more.notes, "\n"));
  EXPECT_NE(Provenance(more, "job.world_size").find("--gpus"), std::string::npos);
}

TEST(ConfigImport, ValuesThatCannotWorkAreRefused) {
  ExpectError("num_gpus = 2\ndata = dict(samples_per_gpu=None, train=dict(type='NuScenesDataset', ann_file='a.pkl'))\n",
              "/virtual/cfg.py:2: data.samples_per_gpu: expected an int, found None");
  // StreamPETR's train script reads cfg.runner and data.shuffler_sampler first.
  const std::string stream =
      "num_gpus = 2\ndata = dict(samples_per_gpu=1, train=dict(type='CustomNuScenesDataset', "
      "ann_file='a.pkl', collect_keys=['img'], seq_mode=True, seq_split_num=2)";
  ExpectError(stream + ", shuffler_sampler=dict(type='DistributedGroupSampler'))\ntotal_epochs = 24\n",
              "runner: StreamPETR (exiawsh/StreamPETR@95f64702)'s train script reads cfg.runner");
  ExpectError(stream + ")\nrunner = dict(type='IterBasedRunner', max_iters=10)\n",
              "data.shuffler_sampler: StreamPETR (exiawsh/StreamPETR@95f64702)'s train script reads");
  // A value the scenario needs that petrsim cannot evaluate: the field, the file:line and the construct.
  ExpectError(
      "import os\nnum_gpus = os.cpu_count()\ndata = dict(samples_per_gpu=1, train=dict(type='NuScenesDataset', "
      "ann_file='a.pkl'))\n",
      "num_gpus: the scenario needs this value, and it depends on /virtual/cfg.py:2:");
}

// Far3D over its own kind of infos (Argoverse 2, tests/data/importers/mini_av2_infos_train.pkl, written by
// scripts/make_av2_fixtures.py): the third log's second half has no GT after the filters. Far3D's whole-dataset
// pool still terminates; the same job with a chunk pool would hang, which proves the chunks without GT are there.
TEST(ConfigImport, Far3dOverSyntheticArgoverse2InfosTerminatesOnlyWithItsWholeDatasetPool) {
  const std::string path = kCodebases + "/far3d/far3d_global_pool.py";
  Scenario far3d = Import(path, {kAv2Infos}, 2);
  ASSERT_EQ(far3d.dataset().subdatasets_size(), 1);
  const ExplicitData& data = far3d.dataset().subdatasets(0).explicit_();
  int frames = 0;
  for (const Scene& scene : data.scenes()) frames += scene.frames_size();
  EXPECT_EQ(frames, 18);
  EXPECT_EQ(data.scenes_size(), 15)
      << "interval_test: each log comes back in runs, a sequence each (argoverse2_dataset_t.py:27-55)";
  EXPECT_EQ(far3d.resample().policy(), Resample::in_subdataset);
  EXPECT_EQ(CheckExit(far3d), 0) << "Far3D's _rand_another draws from the whole dataset";
  far3d.mutable_resample()->set_policy(Resample::in_group);
  EXPECT_EQ(CheckExit(far3d), 1) << "a pool of one chunk without GT never yields a sample";
}

// With plugin=True and a plugin_dir the checkout holds, the dataset class is read from its own source
// (importers/dataset_source.h): the stand-ins under tests/data/configs/codebases/*/projects give the
// same semantics as the table, and a user's own subclass is modelled from its code.
TEST(ConfigImport, DatasetClassesAreReadFromSyntheticStandInSources) {
  const auto provenance = [](const std::string& relative) {
    const std::string path = kCodebases + "/" + relative;
    ConfigJobOptions options;
    options.gpus = 2;
    options.infos = MiniInfosFor(path);
    return ReadConfigJob(ReadMmcvConfig(path), options);
  };
  const ConfigJob far3d = provenance("far3d/far3d_global_pool.py");
  EXPECT_NE(Provenance(far3d, "dataset semantics").find("argoverse2_dataset_t.py:"), std::string::npos)
      << Provenance(far3d, "dataset semantics");
  EXPECT_NE(Provenance(far3d, "resample.policy").find("argoverse2_dataset_t.py:"), std::string::npos)
      << Provenance(far3d, "resample.policy");
  EXPECT_EQ(far3d.scenario.resample().policy(), Resample::in_subdataset);
  EXPECT_EQ(far3d.scenario.sampler().kind(), Sampler::infinite_group_each_sample_in_batch)
      << "the plugin's builder reads shuffler_sampler and builds the infinite sampler";
  EXPECT_TRUE(far3d.interval_test);
  EXPECT_NE(Provenance(far3d, "infos.interval_test").find("far3d_global_pool.py:"), std::string::npos)
      << Provenance(far3d, "infos.interval_test");

  const ConfigJob sparse4d = provenance("sparse4d/sparse4dv2_seq_filter_default.py");
  EXPECT_NE(Provenance(sparse4d, "grouping.seq_mode").find("with_seq_flag"), std::string::npos);
  EXPECT_TRUE(sparse4d.scenario.grouping().seq_mode());
  EXPECT_EQ(sparse4d.scenario.resample().policy(), Resample::in_group) << "the retry loop in _getitem";
  bool loop_found = false;
  for (const std::string& note : sparse4d.notes) {
    loop_found |= note.find("nuscenes_3d_det_track_dataset.py:") != std::string::npos &&
                  note.find("retries without a bound") != std::string::npos;
  }
  EXPECT_TRUE(loop_found) << fmt::format("{}", fmt::join(sparse4d.notes, "\n"));

  EXPECT_EQ(CheckExit(ImportCodebase("sparse4d/sparse4dv2_seq_filter_default.py")), 1);
  EXPECT_EQ(CheckExit(ImportCodebase("far3d/far3d_global_pool.py")), 0);
  EXPECT_EQ(CheckExit(ImportCodebase("bevformer/bevformer_tiny_like.py")), 0);
  EXPECT_EQ(CheckExit(ImportCodebase("petr/petrv2_trainval_cbgs.py")), 0);
  EXPECT_EQ(CheckExit(ImportCodebase("streampetr/seq_filter_default_speed_test.py")), 1);

  // The user's fix, written in the dataset class: a redraw from the whole dataset cannot be trapped.
  const Scenario global = ImportCodebase("user/global_resample.py");
  EXPECT_EQ(global.resample().policy(), Resample::in_subdataset);
  EXPECT_EQ(CheckExit(global), 0);
  // mmengine's bounded loop: at most max_refetch + 1 loads (its keyword-only default), then an error.
  const Scenario bounded = ImportCodebase("user/bounded_retry.py");
  EXPECT_EQ(bounded.resample().policy(), Resample::bounded);
  EXPECT_EQ(bounded.resample().attempts_max(), 1001u);
  EXPECT_EQ(ImportCodebase("user/bounded_retry_10.py").resample().attempts_max(), 11u) << "the dict's max_refetch";
  // No retry loop: one load, then the collate fails (bounded with one attempt: an error, not a hang).
  const Scenario no_retry = ImportCodebase("user/no_retry.py");
  EXPECT_EQ(no_retry.resample().policy(), Resample::bounded);
  EXPECT_EQ(no_retry.resample().attempts_max(), 1u);
}

// The table and the source reading agree on every codebase whose stand-in source the tests hold: each config
// imported once with its plugin (the class read from source) and once with plugin=False (the table's entry).
TEST(ConfigImport, TheTableAndTheSourceReadingAgreeOnSyntheticStandIns) {
  for (const char* relative : {"sparse4d/sparse4dv2_seq_filter_default.py", "far3d/far3d_global_pool.py",
                               "bevformer/bevformer_tiny_like.py", "petr/petrv2_trainval_cbgs.py",
                               "streampetr/seq_filter_default_speed_test.py", "streampetr/sliding_window_8key.py"}) {
    SCOPED_TRACE(relative);
    const std::string path = kCodebases + "/" + relative;
    ConfigJobOptions options;
    options.gpus = 2;
    options.infos = MiniInfosFor(path);
    const Config with_plugin = ReadMmcvConfig(path);
    Config without_plugin = ReadMmcvConfig(path);
    ConfigValue off;
    off.value = false;
    std::get<ConfigDict>(without_plugin.root.value).Set("plugin", off);
    const ConfigJob source = ReadConfigJob(with_plugin, options);
    const ConfigJob table = ReadConfigJob(without_plugin, options);
    ASSERT_NE(Provenance(source, "dataset semantics"), "") << "read from its source";
    ASSERT_EQ(Provenance(table, "dataset semantics"), "") << "the table's entry";
    google::protobuf::util::MessageDifferencer differ;
    // Where _rand_another is written differs by design: the user's file when read, the table's citation otherwise.
    differ.IgnoreField(UserSource::descriptor()->FindFieldByName("rand_another_where"));
    std::string report;
    differ.ReportDifferencesToString(&report);
    EXPECT_TRUE(differ.Compare(table.scenario, source.scenario)) << report;
    EXPECT_FALSE(source.scenario.user_source().rand_another_where().empty());
  }
}

TEST(ConfigImport, CircleThresholdsMeanWhatNumpyComparesThemTo) {
  const std::string base =
      "num_gpus = 2\nclass_names = ['car', 'truck', 'bus']\n"
      "data = dict(samples_per_gpu=1, train=dict(type='NuScenesDataset', ann_file='a.pkl', classes=class_names, "
      "pipeline=[dict(type='CircleObjectRangeFilter', class_dist_thred=";
  // dist <= -1 and dist <= nan are never true: those classes are dropped; inf keeps every box of its class.
  const ConfigJob job = Job(base + "[-1, float('inf'), float('nan')])]))\n");
  ASSERT_EQ(job.filters.circle_range.size(), 1u);
  EXPECT_EQ(job.filters.circle_range[0].first, "truck");
  ExpectError(base + "[-1, -2, -3])]))\n", "drops every class");
}

// Every job config in the tests imports into a scenario that `check` accepts (issue 27, point 1): the
// importer never writes what the validation then refuses.
TEST(ConfigImport, EveryTestConfigImportsIntoAValidScenario) {
  namespace fs = std::filesystem;
  int imported = 0;
  for (const char* dir : {"/tests/data/configs/streampetr", "/tests/data/configs/codebases"}) {
    const fs::path root = fs::path(PETRSIM_SOURCE_DIR) / fs::path(dir).relative_path();
    if (!fs::exists(root)) continue;
    for (const auto& entry : fs::recursive_directory_iterator(root)) {
      if (entry.path().extension() != ".py" || entry.path().parent_path().filename() == "_base_") continue;
      if (entry.path().string().find("/projects/") != std::string::npos) continue;  // a plugin's source
      if (entry.path().filename().string().rfind("dataset_", 0) == 0) continue;     // a dataset class's source
      SCOPED_TRACE(entry.path().string());
      EXPECT_NO_THROW(Import(entry.path().string(), MiniInfosFor(entry.path().string()), 2)) << entry.path();
      ++imported;
    }
  }
  EXPECT_GE(imported, 3);
}

// The mini infos, read once for the property below.
const std::vector<ImportedSubDataset>& MiniTrain() {
  static const std::vector<ImportedSubDataset> data = [] {
    Mmdet3dInfosOptions o;
    o.name = "train";
    return std::vector<ImportedSubDataset>{ReadMmdet3dInfos(kTrainVal[0], o)};
  }();
  return data;
}

// A dataset dict of a known type with a random choice of the keys the importer reads, each with a
// value of the right type or of a wrong one.
std::string RandomTrainDataset() {
  const std::string type =
      *rc::gen::element<std::string>("NuScenesDataset", "CustomNuScenesDataset", "NuScenes3DDetTrackDataset",
                                     "Argoverse2DatasetT", "CustomNuScenesDatasetV2");
  std::string d = "dict(type='" + type + "', ann_file='a.pkl'";
  const auto maybe = [&](const std::string& key, const std::vector<std::string>& values) {
    if (*rc::gen::arbitrary<bool>()) d += ", " + key + "=" + *rc::gen::elementOf(values);
  };
  maybe("collect_keys", {"['img']"});
  maybe("seq_mode", {"True", "False", "1", "0", "None"});
  maybe("with_seq_flag", {"True", "False"});
  maybe("sequences_split_num", {"1", "2", "'all'"});
  maybe("num_frame_losses", {"1", "2", "9"});
  maybe("random_length", {"0", "1"});
  maybe("seq_split_num", {"1", "2", "4", "'all'", "0", "'half'", "100001"});
  maybe("filter_empty_gt", {"True", "False"});
  maybe("use_valid_flag", {"True", "False"});
  maybe("test_mode", {"True", "False"});
  maybe("classes", {"['car']", "['car', 'pedestrian']", "[]", "class_names"});
  maybe("queue_length", {"1", "8"});
  maybe("pipeline", {"[dict(type='ObjectNameFilter', classes=['car'])]",
                     "[dict(type='ObjectRangeFilter', point_cloud_range=[-10, -10, -5, 10, 10, 3])]",
                     "[dict(type='ResizeCropFlipRotImage', training=True, data_aug_conf=dict(rand_flip=True, "
                     "final_dim=(256, 704)))]",
                     "[dict(type='CircleObjectRangeFilter', class_dist_thred=[55, -1, float('nan')])]",
                     "[dict(type='CircleObjectRangeFilter')]", "[]"});
  return d + ")";
}

RC_GTEST_PROP(ConfigImportProps, ImportedScenariosAlwaysValidate, ()) {
  std::string text = "class_names = ['car', 'truck', 'pedestrian']\n";
  text += *rc::gen::element<std::string>("num_gpus = 2\n", "gpu_ids = range(0, 4)\n", "num_gpus = 1\n");
  const bool concat = *rc::gen::arbitrary<bool>();
  const std::string one = RandomTrainDataset();
  const std::string train = concat ? "dict(type='ConcatDataset', datasets=[" + one + ", " + one + "])" : one;
  const std::string sampler =
      *rc::gen::arbitrary<bool>() ? ", shuffler_sampler=dict(type='InfiniteGroupEachSampleInBatchSampler')" : "";
  text += "data = dict(samples_per_gpu=1, train=" + train + sampler + ")\n";
  if (*rc::gen::arbitrary<bool>()) text += "runner = dict(type='IterBasedRunner', max_iters=100)\n";
  if (*rc::gen::arbitrary<bool>())
    text += "total_epochs = 2\nnum_iters_per_epoch = 50\nevaluation = dict(interval=1)\n";
  RC_TAG(text);
  ConfigJob job;
  try {
    job = ReadConfigJob(ReadMmcvConfigText(text, "/virtual/cfg.py"), ConfigJobOptions{});
  } catch (const ScenarioError&) {
    return;  // refused with a message: fine
  }
  ScenarioOverlay overlay;
  overlay.fields = job.scenario;
  Scenario scenario = ToScenario(MiniTrain(), job.filters, "property", &overlay);
  try {
    ValidateScenario(scenario, "/virtual/cfg.py");
  } catch (const ScenarioError& error) {
    RC_FAIL(std::string("the import wrote a scenario check refuses: ") + error.what() + "\nconfig:\n" + text);
  }
}

}  // namespace
}  // namespace petrsim
