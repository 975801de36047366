// Scenario loading: the three encodings (text, binary, JSON mapping) detected by content, the
// shipped scenarios, and the error messages for bad input (file name, field path or
// line:column, rule and value found).
#include "scenario/scenario_loader.h"

#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "scenario/scenario_validation.h"

namespace petrsim {
namespace {

using google::protobuf::util::MessageDifferencer;

// A small valid scenario touching most parts of the schema (messages, oneofs, enums, packed
// and repeated fields, doubles, uint64, strings).
const char* const kValidText = R"pb(
  name: "small"
  description: "encoding round trip"
  seed: 7
  dataset {
    subdatasets {
      name: "mini"
      explicit {
        scenes {
          name: "a"
          gt_counts: [ 3, 4, 0, 5 ]
        }
        scenes {
          name: "b"
          frames {
            token: "t0"
            boxes { name: "car" x: 1.5 y: -2.25 num_lidar_pts: 3 }
          }
          frames { gt_count: 2 }
          frames {}
          frames { boxes { name: "pedestrian" num_lidar_pts: 0 num_radar_pts: 2 } }
        }
      }
    }
  }
  filters { classes: "car" classes: "pedestrian" bev_range_min_m: -40 bev_range_max_m: 40 }
  grouping { seq_split_num: 2 }
  sampler { kind: infinite_group_each_sample_in_batch }
  resample { policy: bounded attempts_max: 50 pipeline_draws_per_attempt: 2 }
  job { world_size: 2 samples_per_gpu: 1 workers_per_gpu: 2 iterations: 12 seed: 3 }
  plan {
    custom {
      per_iteration { name: "loss" op: allreduce reduce_op: avg numel: 4 dtype: float32 }
      periodic {
        collective { op: reduce reduce_op: max }
        every_iterations: 50
      }
    }
  }
  cost { sample_load_ns: 1000000 jitter_fraction: 0.25 }
  comm { backend: gloo timeout_ms: 600000 }
  faults { slow_rank { rank: 1 factor: 3 } }
  faults { straggler { rank: 0 iteration: 5 delay_ns: 1000 } }
)pb";

std::string WriteTempFile(const std::string& name, const std::string& content) {
  const auto dir = std::filesystem::temp_directory_path() / "petrsim_scenario_loader_test";
  std::filesystem::create_directories(dir);
  const auto path = dir / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  return path.string();
}

std::vector<std::string> SplitLines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// ---------------------------------------------------------------------------------------------
// Encodings

TEST(ScenarioLoaderTest, TextBinaryAndJsonGiveEqualMessages) {
  const Scenario from_text = LoadScenario(kValidText, "small.pbtxt");
  EXPECT_EQ(from_text.name(), "small");
  ASSERT_EQ(from_text.dataset().subdatasets_size(), 1);
  EXPECT_EQ(from_text.dataset().subdatasets(0).explicit_().scenes(1).frames(0).boxes(0).x(), 1.5);

  const std::string binary = from_text.SerializeAsString();
  std::string json;
  ASSERT_TRUE(google::protobuf::util::MessageToJsonString(from_text, &json).ok());

  EXPECT_EQ(DetectScenarioEncoding(kValidText), ScenarioEncoding::kText);
  EXPECT_EQ(DetectScenarioEncoding(binary), ScenarioEncoding::kBinary);
  EXPECT_EQ(DetectScenarioEncoding(json), ScenarioEncoding::kJson);

  const Scenario from_binary = LoadScenario(binary, "small.binpb");
  const Scenario from_json = LoadScenario(json, "small.json");
  EXPECT_TRUE(MessageDifferencer::Equals(from_text, from_binary)) << from_text.DebugString() << "\n---\n"
                                                                  << from_binary.DebugString();
  EXPECT_TRUE(MessageDifferencer::Equals(from_text, from_json)) << json << "\n---\n" << from_json.DebugString();
}

TEST(ScenarioLoaderTest, DetectionIgnoresLeadingWhitespace) {
  EXPECT_EQ(DetectScenarioEncoding("  \n\t{\"name\": \"x\"}"), ScenarioEncoding::kJson);
  EXPECT_EQ(DetectScenarioEncoding("# comment\nname: \"x\"\n"), ScenarioEncoding::kText);
  EXPECT_EQ(DetectScenarioEncoding(""), ScenarioEncoding::kText);
  EXPECT_EQ(DetectScenarioEncoding("name: \"caf\xc3\xa9\"\n"), ScenarioEncoding::kText);
}

TEST(ScenarioLoaderTest, BinaryFileNamedPbtxtIsReadAsBinary) {
  const Scenario expected = LoadScenario(kValidText, "small.pbtxt");
  const std::string path = WriteTempFile("binary_in_disguise.pbtxt", expected.SerializeAsString());
  const Scenario loaded = LoadScenarioFile(path);
  EXPECT_TRUE(MessageDifferencer::Equals(expected, loaded));
  std::filesystem::remove(path);
}

// A binary scenario whose first bytes happen to look like blank space and '{' (field 1 'name'
// has tag 0x0A = '\n'; a 123-byte name has the length byte 0x7B = '{') is still binary.
TEST(ScenarioLoaderTest, BinaryStartingWithNewlineAndBraceIsReadAsBinary) {
  Scenario expected = LoadScenario(kValidText, "small.pbtxt");
  expected.set_name(std::string(123, 'n'));
  const std::string binary = expected.SerializeAsString();
  ASSERT_EQ(binary.substr(0, 2), "\n{");
  EXPECT_EQ(DetectScenarioEncoding(binary), ScenarioEncoding::kBinary);
  const Scenario loaded = LoadScenario(binary, "named.pbtxt");
  EXPECT_TRUE(MessageDifferencer::Equals(expected, loaded));
}

TEST(ScenarioLoaderTest, ShippedScenariosLoadAndBuild) {
  const std::filesystem::path dir = std::filesystem::path(PETRSIM_SOURCE_DIR) / "scenarios";
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.is_regular_file() && entry.path().extension() == ".pbtxt") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty()) << "no scenarios in " << dir;
  for (const auto& file : files) {
    SCOPED_TRACE(file.string());
    EXPECT_NO_THROW({
      const Scenario scenario = LoadScenarioFile(file.string());
      const Dataset dataset = BuildDataset(scenario, file.string());
      EXPECT_GT(dataset.size(), 0);
    });
  }
}

// ---------------------------------------------------------------------------------------------
// Bad input

// Two scenes of 4 frames: 4 sequence groups with the default seq_split_num 2.
const char* const kDataset = R"pb(
  dataset {
    subdatasets {
      name: "mini"
      explicit {
        scenes {
          name: "a"
          gt_counts: [ 1, 2, 3, 4 ]
        }
        scenes {
          name: "b"
          gt_counts: [ 1, 1, 1, 1 ]
        }
      }
    }
  }
)pb";
const char* const kJob = "job { world_size: 2 samples_per_gpu: 1 }\n";

// A scenario that is valid except for what `extra` adds.
std::string ValidWith(const std::string& extra) { return std::string(kDataset) + kJob + extra; }
// The dataset above with the given job block and extra text.
std::string WithJob(const std::string& job, const std::string& extra = "") {
  return std::string(kDataset) + job + "\n" + extra;
}
// One sub-dataset block with the given body, and the standard job.
std::string WithSubDataset(const std::string& body, const std::string& extra = "") {
  return "dataset {\n  subdatasets {\n    name: \"sub\"\n    " + body + "\n  }\n}\n" + kJob + extra;
}

struct BadCase {
  const char* name;
  std::string content;
  std::vector<std::string> expected_substrings;
};

std::vector<BadCase> BadCases() {
  return {
      // Text format syntax and types (line:column from protobuf's text parser).
      {"text syntax error",
       "name: \"x\"\njob {\n  world_size: 2\n  samples_per_gpu 1 1\n}\n",
       {"bad.pbtxt:4:19:", "Expected \":\", found \"1\""}},
      // protobuf reports the position after the unknown name.
      {"unknown field name",
       "name: \"x\"\njob {\n  world_sise: 2\n}\n",
       {"bad.pbtxt:3:", "petrsim.Job", "has no field named \"world_sise\""}},
      {"wrong value type", "job {\n  world_size: \"two\"\n}\n", {"bad.pbtxt:2:15:", "Expected integer"}},
      {"unknown enum value",
       ValidWith("resample {\n  policy: sometimes\n}\n"),
       {"bad.pbtxt:", "Unknown enumeration value of \"sometimes\"", "policy"}},
      {"two members of the job length oneof",
       WithJob("job {\n  world_size: 2\n  samples_per_gpu: 1\n  iterations: 10\n  epochs: 2\n}"),
       {"bad.pbtxt:", "\"epochs\"", "\"iterations\"", "oneof"}},
      {"non-repeated field given twice",
       WithJob("job { world_size: 2 world_size: 4 samples_per_gpu: 1 }"),
       {"bad.pbtxt:", "world_size", "specified multiple times"}},

      // Other encodings.
      {"binary garbage",
       std::string("\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x02", 13),
       {"bad.pbtxt: ", "read as a binary petrsim.Scenario", "does not parse either", "13 bytes"}},
      {"binary with fields the schema does not define",
       std::string("\x98\x06\x01", 3),
       {"bad.pbtxt: ", "binary scenario has fields petrsim.Scenario does not define"}},
      {"invalid JSON", "{\"job\": {\"worldSize\": }", {"bad.pbtxt: ", "invalid scenario in the protobuf JSON mapping"}},
      {"JSON unknown field",
       "{\"job\": {\"worldSise\": 2}}",
       {"bad.pbtxt: ", "invalid scenario in the protobuf JSON mapping", "worldSise"}},

      // Dataset.
      {"no sub-datasets",
       std::string(kJob),
       {"bad.pbtxt: ", "dataset.subdatasets: must list at least one sub-dataset"}},
      {"sub-dataset with no source", WithSubDataset(""), {"bad.pbtxt: ", "dataset.subdatasets[0]:", "needs a source"}},
      {"synthetic frames_per_scene_max < min",
       WithSubDataset("synthetic { scenes: 2 frames_per_scene_min: 10 frames_per_scene_max: 5 }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0].synthetic.frames_per_scene_max", "must be >= frames_per_scene_min (10)",
        "got 5"}},
      {"synthetic fraction > 1",
       WithSubDataset("synthetic { scenes: 2 empty_frame_fraction: 1.5 }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0].synthetic.empty_frame_fraction", "must be a fraction in [0, 1]",
        "got 1.5"}},
      {"synthetic frames_total unreachable",
       WithSubDataset("synthetic { scenes: 2 frames_per_scene_min: 3 frames_per_scene_max: 4 "
                      "frames_total: 9 }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0].synthetic.frames_total",
        "must be in [scenes * frames_per_scene_min, scenes * frames_per_scene_max] = [6, 8]", "got 9"}},
      {"synthetic plant of a scene out of range",
       WithSubDataset("synthetic { scenes: 2 plants { scene: 2 } }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0].synthetic.plants[0].scene", "must be < scenes (2)", "got 2"}},
      {"scene with both frames and gt_counts",
       WithSubDataset("explicit { scenes { frames { gt_count: 1 } gt_counts: [1] } }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0].explicit.scenes[0]:", "give either frames or gt_counts, not both"}},
      {"scene with no frames",
       WithSubDataset("explicit { scenes { name: \"empty\" } }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0].explicit.scenes[0]:", "a scene needs at least one frame"}},
      {"explicit sub-dataset with no scenes",
       WithSubDataset("explicit { }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0].explicit.scenes", "must list at least one scene"}},
      {"frame with both boxes and gt_count",
       WithSubDataset("explicit { scenes { frames { gt_count: 1 boxes { name: \"car\" } } "
                      "frames { gt_count: 1 } } }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0].explicit.scenes[0].frames[0]:",
        "give at most one of boxes, gt_count and box_columns"}},
      {"frame with boxes and box_columns",
       WithSubDataset("explicit { class_names: \"car\" scenes { frames { boxes { name: \"car\" } "
                      "box_columns { class_index: [0] x: [1] y: [1] num_lidar_pts: [1] } } "
                      "frames { gt_count: 1 } } }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0].explicit.scenes[0].frames[0]:",
        "give at most one of boxes, gt_count and box_columns"}},
      {"box column shorter than class_index",
       WithSubDataset("explicit { class_names: \"car\" scenes { frames { "
                      "box_columns { class_index: [0, 0] x: [1, 2] y: [1] num_lidar_pts: [1, 1] } } "
                      "frames { gt_count: 1 } } }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0].explicit.scenes[0].frames[0].box_columns.y:",
        "must hold one value per box, as class_index does (2 boxes)", "1 value(s)"}},
      {"box column class_index past class_names",
       WithSubDataset("explicit { class_names: \"car\" scenes { frames { "
                      "box_columns { class_index: [0, 1, 3] x: [1, 2, 3] y: [1, 2, 3] num_lidar_pts: [1, 1, 1] } } "
                      "frames { gt_count: 1 } } }"),
       {"bad.pbtxt: ", "frames[0].box_columns.class_index[1]:",
        "must be < the number of the sub-dataset's explicit.class_names (1)", "(and 1 more in this column)"}},
      {"box column x not finite",
       WithSubDataset("explicit { class_names: \"car\" scenes { frames { "
                      "box_columns { class_index: [0] x: [inf] y: [1] num_lidar_pts: [1] } } "
                      "frames { gt_count: 1 } } }"),
       {"bad.pbtxt: ", "frames[0].box_columns.x[0]:", "must be finite"}},
      {"valid_flag_differs not ascending",
       WithSubDataset("explicit { class_names: \"car\" scenes { frames { "
                      "box_columns { class_index: [0, 0] x: [1, 2] y: [1, 2] num_lidar_pts: [1, 1] "
                      "valid_flag_differs: [1, 1] } } frames { gt_count: 1 } } }"),
       {"bad.pbtxt: ", "frames[0].box_columns.valid_flag_differs[1]:", "must be above the previous index (1)"}},
      {"class_names repeated",
       WithSubDataset("explicit { class_names: [\"car\", \"car\"] scenes { frames { gt_count: 1 } "
                      "frames { gt_count: 1 } } }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0].explicit.class_names[1]:", "must not repeat a name", "\"car\""}},
      {"box without a class name",
       WithSubDataset("explicit { scenes { frames { boxes { x: 1 } } frames { gt_count: 1 } } }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0].explicit.scenes[0].frames[0].boxes[0].name", "must be set"}},
      {"scene too short for seq_split_num (BuildDataset)",
       WithSubDataset("explicit { scenes { name: \"long\" gt_counts: [1, 1] } "
                      "scenes { name: \"short\" gt_counts: [1] } }"),
       {"bad.pbtxt: ", "dataset.subdatasets[0] ('sub')", "scene 1 'short'", "has 1 frame(s)",
        "mmdet3d asserts every scene yields exactly 2"}},

      // Filters.
      {"duplicate filter class",
       ValidWith("filters { classes: \"car\" classes: \"bus\" classes: \"car\" }"),
       {"bad.pbtxt: ", "filters.classes[2]", "must not repeat a class", "got \"car\""}},
      {"bev range min >= max",
       ValidWith("filters { bev_range_min_m: 10 bev_range_max_m: 10 }"),
       {"bad.pbtxt: ", "filters.bev_range_max_m", "must be finite and > bev_range_min_m", "got 10"}},

      // Grouping.
      {"seq_split_num 0",
       ValidWith("grouping { seq_split_num: 0 }"),
       {"bad.pbtxt: ", "grouping.seq_split_num", "must be in [1, 100000]", "got 0"}},
      {"seq_split_num near 2^32 (would overflow ceil(n / s))",
       ValidWith("grouping { seq_split_num: 4294967295 }"),
       {"bad.pbtxt: ", "grouping.seq_split_num", "must be in [1, 100000]", "got 4294967295"}},
      {"seq_split_num with seq_split_all",
       ValidWith("grouping { seq_split_num: 2 seq_split_all: true }"),
       {"bad.pbtxt: ", "grouping.seq_split_num", "must not be set together with seq_split_all: true"}},
      {"seq_split_num without seq_mode",
       ValidWith("grouping { seq_mode: false seq_split_num: 2 }"),
       {"bad.pbtxt: ", "grouping.seq_mode", "have no effect"}},

      // Sampler.
      {"sampler.shuffle with the infinite sampler",
       ValidWith("sampler { shuffle: false }"),
       {"bad.pbtxt: ", "sampler.shuffle", "applies to kind: distributed only",
        "kind is infinite_group_each_sample_in_batch"}},
      {"groups_num < world_size * samples_per_gpu (CheckSamplerConstructible)",
       WithJob("job { world_size: 4 samples_per_gpu: 2 }"),
       {"bad.pbtxt: ", "job.world_size * job.samples_per_gpu", "groups_num >= world_size * samples_per_gpu",
        "got 4 < 4 * 2"}},

      // Resample.
      {"keep_empty with filter_empty_gt explicitly true",
       ValidWith("filters { filter_empty_gt: true }\nresample { policy: keep_empty }"),
       {"bad.pbtxt: ", "filters.filter_empty_gt", "is true, but resample.policy keep_empty"}},
      {"bounded with attempts_max 0",
       ValidWith("resample { policy: bounded attempts_max: 0 }"),
       {"bad.pbtxt: ", "resample.attempts_max", "must be in [1, ", "got 0"}},
      {"attempts_max with policy in_group",
       ValidWith("resample { policy: in_group attempts_max: 5 }"),
       {"bad.pbtxt: ", "resample.attempts_max", "applies to policy: bounded only", "policy is in_group"}},

      // Job.
      {"world_size 0",
       WithJob("job { world_size: 0 samples_per_gpu: 1 }"),
       {"bad.pbtxt: ", "job.world_size", "must be in [1, 65536]", "got 0"}},
      {"samples_per_gpu 0",
       WithJob("job { world_size: 2 samples_per_gpu: 0 }"),
       {"bad.pbtxt: ", "job.samples_per_gpu", "must be in [1, 256]", "got 0"}},
      {"prefetch_factor with workers_per_gpu 0",
       WithJob("job { world_size: 2 samples_per_gpu: 1 workers_per_gpu: 0 prefetch_factor: 2 }"),
       {"bad.pbtxt: ", "job.prefetch_factor", "needs workers_per_gpu >= 1"}},
      {"iterations 0",
       WithJob("job { world_size: 2 samples_per_gpu: 1 iterations: 0 }"),
       {"bad.pbtxt: ", "job.iterations", "must be in [1, 1000000000]", "got 0"}},
      {"iterations_per_epoch with iterations",
       WithJob("job { world_size: 2 samples_per_gpu: 1 iterations: 10 iterations_per_epoch: 5 }"),
       {"bad.pbtxt: ", "job.iterations_per_epoch", "applies with epochs only"}},
      // Issue 33, point 2: a job length refused, never wrapped (2 x (2^64-1) was 2^64-2 iterations).
      {"iterations_per_epoch 2^64-1",
       WithJob("job { world_size: 2 samples_per_gpu: 1 epochs: 2 iterations_per_epoch: 18446744073709551615 }"),
       {"bad.pbtxt: ", "job.iterations_per_epoch", "must be in [1, 1000000000]", "got 18446744073709551615"}},
      {"epochs x iterations_per_epoch beyond 10^9",
       WithJob("job { world_size: 2 samples_per_gpu: 1 epochs: 100000 iterations_per_epoch: 100000 }"),
       {"bad.pbtxt: ", "job.iterations_per_epoch", "times job.epochs (100000) must be at most 1000000000",
        "got 100000 (10000000000 iterations)"}},
      {"job.seed >= 2^31",
       WithJob("job { world_size: 2 samples_per_gpu: 1 seed: 2147483648 }"),
       {"bad.pbtxt: ", "job.seed", "must be < 2^31", "got 2147483648"}},

      {"straggler without a delay",
       ValidWith("faults { straggler { rank: 0 iteration: 3 } }"),
       {"bad.pbtxt: ", "faults[0].straggler.delay_ns", "must be set and > 0", "has no effect"}},
      // Plan, cost, comm.
      {"unknown PyTorch release",
       ValidWith("comm { torch_version: \"1.8.2\" }"),
       {"bad.pbtxt: ", "comm.torch_version", "must be a supported PyTorch release", "1.9, 1.10", "2.5)",
        "got \"1.8.2\""}},
      {"PyTorch release that is not a version",
       ValidWith("comm { torch_version: \"latest\" }"),
       {"bad.pbtxt: ", "comm.torch_version", "got \"latest\""}},
      {"DDP model without tensors",
       ValidWith("plan { ddp { bucket_cap_mb: 25 } }"),
       {"bad.pbtxt: ", "plan.ddp.tensors", "must list the model's tensors"}},
      {"DDP tensor with a zero size",
       ValidWith("plan { ddp { tensors { shape: [4, 0] } } }"),
       {"bad.pbtxt: ", "plan.ddp.tensors[0].shape[1]", "must be in [1, 2^40]", "got 0"}},
      {"DDP model with only buffers",
       ValidWith("plan { ddp { tensors { kind: buffer shape: 4 } } }"),
       {"bad.pbtxt: ", "plan.ddp.tensors", "must list at least one parameter that requires grad"}},
      {"DDP bucket cap of 0",
       ValidWith("plan { ddp { tensors { shape: 4 } bucket_cap_mb: 0 } }"),
       {"bad.pbtxt: ", "plan.ddp.bucket_cap_mb", "must be in (0, 10^6] MiB", "got 0"}},
      {"a field replaced by plan.ddp",
       ValidWith("plan { streampetr { parameters: 5 } }"),
       {"bad.pbtxt: ", "plan.streampetr.parameters", "was replaced by plan.ddp"}},
      {"custom plan with no per_iteration collective",
       ValidWith("plan { custom { startup { op: broadcast } } }"),
       {"bad.pbtxt: ", "plan.custom.per_iteration", "must list at least one collective"}},
      {"custom collective with numel 0",
       ValidWith("plan { custom { per_iteration { numel: 0 } } }"),
       {"bad.pbtxt: ", "plan.custom.per_iteration[0].numel", "must be in [1, 2^40]", "got 0"}},
      {"custom collective with numel beyond 2^40",
       ValidWith("plan { custom { per_iteration { numel: 4611686018427387904 } } }"),
       {"bad.pbtxt: ", "plan.custom.per_iteration[0].numel", "must be in [1, 2^40]"}},
      {"custom collective with an endless compute_before_ns",
       ValidWith("plan { custom { per_iteration { compute_before_ns: 18446744073709551615 } } }"),
       {"bad.pbtxt: ", "plan.custom.per_iteration[0].compute_before_ns", "must be <= 10^15"}},
      {"focal_head_loss_terms beyond the plan's memory (issue 33, point 2)",
       ValidWith("plan { streampetr { focal_head_loss_terms: 4000000000 } }"),
       {"bad.pbtxt: ", "plan.streampetr.focal_head_loss_terms", "must be <= 1000", "about 596.0 GiB",
        "got 4000000000"}},
      {"DDP repeats beyond the keys petrsim unrolls (issue 33, point 2)",
       ValidWith("plan { ddp { tensors { shape: 4 repeat: 1000000 state_dict_aliases: 1 } } }"),
       {"bad.pbtxt: ", "plan.ddp.tensors", "must stand for at most 1000000 state_dict keys", "got 2000000"}},
      {"bev_range_min_m nan blames the minimum (issue 33, point 6)",
       ValidWith("filters { bev_range_min_m: nan }"),
       {"bad.pbtxt: ", "filters.bev_range_min_m: must be finite", "got nan"}},
      {"old_code_skips_dn_without_gt without denoising",
       ValidWith("plan { streampetr { denoising: false old_code_skips_dn_without_gt: true } }"),
       {"bad.pbtxt: ", "plan.streampetr.old_code_skips_dn_without_gt", "needs denoising: true"}},
      {"jitter_fraction 1",
       ValidWith("cost { jitter_fraction: 1 }"),
       {"bad.pbtxt: ", "cost.jitter_fraction", "must be in [0, 1)", "got 1"}},
      {"comm timeout_ms 0",
       ValidWith("comm { timeout_ms: 0 }"),
       {"bad.pbtxt: ", "comm.timeout_ms", "must be in [1, 10^9]", "got 0"}},
      {"comm timeout_ms beyond 10^9",
       ValidWith("comm { timeout_ms: 1000000001 }"),
       {"bad.pbtxt: ", "comm.timeout_ms", "must be in [1, 10^9]", "got 1000000001"}},
      {"watchdog poll beyond an hour",
       ValidWith("comm { watchdog_poll_ms: 3600001 }"),
       {"bad.pbtxt: ", "comm.watchdog_poll_ms", "must be <= 3600000", "got 3600001"}},
      {"sample load time that would overflow virtual time",
       ValidWith("cost { sample_load_ns: 1000000000000000001 }"),
       {"bad.pbtxt: ", "cost.sample_load_ns", "must be <= 10^15"}},
      {"dead rank time beyond 2^62",
       ValidWith("faults { dead_rank { rank: 0 at_ns: 9000000000000000000 } }"),
       {"bad.pbtxt: ", "faults[0].dead_rank.at_ns", "must be <= 2^62"}},

      // Faults.
      {"fault rank >= world_size",
       ValidWith("faults { dead_rank { rank: 2 } }"),
       {"bad.pbtxt: ", "faults[0].dead_rank.rank", "must be < job.world_size (2)", "got 2"}},
      {"fault worker >= workers_per_gpu",
       ValidWith("faults { slow_worker { rank: 0 worker: 4 } }"),
       {"bad.pbtxt: ", "faults[0].slow_worker.worker", "must be < job.workers_per_gpu (4", "got 4"}},
      {"slow rank factor < 1",
       ValidWith("faults { slow_rank { rank: 1 factor: 0.5 } }"),
       {"bad.pbtxt: ", "faults[0].slow_rank.factor", "must be in [1, 10^6]", "got 0.5"}},
      {"fault with no kind", ValidWith("faults { }"), {"bad.pbtxt: ", "faults[0]:", "a fault needs one of"}},
  };
}

TEST(ScenarioLoaderTest, BadInputIsRejectedWithPathRuleAndValue) {
  const std::vector<BadCase> cases = BadCases();
  EXPECT_GE(cases.size(), 20u);
  for (const BadCase& bad : cases) {
    SCOPED_TRACE(bad.name);
    try {
      const Scenario scenario = LoadScenario(bad.content, "bad.pbtxt");
      const Dataset dataset = BuildDataset(scenario, "bad.pbtxt");
      CheckSamplerConstructible(scenario, dataset, "bad.pbtxt");
      ADD_FAILURE() << "no ScenarioError for:\n" << bad.content;
    } catch (const ScenarioError& error) {
      const std::string message = error.what();
      for (const std::string& expected : bad.expected_substrings) {
        EXPECT_NE(message.find(expected), std::string::npos) << "expected \"" << expected << "\" in:\n" << message;
      }
    } catch (const std::exception& error) {
      ADD_FAILURE() << "not a ScenarioError: " << error.what();
    }
  }
}

// The valid base of the bad cases really is valid (so each case fails for its own reason).
TEST(ScenarioLoaderTest, BadCaseBaseIsValid) {
  const Scenario scenario = LoadScenario(ValidWith(""), "base.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "base.pbtxt");
  EXPECT_EQ(dataset.groups_num(), 4);
  EXPECT_NO_THROW(MakeRankSampler(scenario, dataset, 0));
}

TEST(ScenarioLoaderTest, ABadByteInATextScenarioIsNamedByLineAndColumn) {
  // A text scenario saved as Latin-1 (caf\xe9 in a comment), and one with a stray NUL: neither is
  // text nor a binary protobuf; the error says where the byte is and what it is.
  const auto message = [](std::string_view bytes) {
    try {
      LoadScenario(bytes, "s.pbtxt");
    } catch (const ScenarioError& error) {
      return std::string(error.what());
    }
    return std::string("(no error)");
  };
  const std::string latin1 = message(std::string_view("job {\n  world_size: 2\n  # caf\xe9\n}\n"));
  EXPECT_NE(latin1.find("s.pbtxt: not a scenario: as text, line 3, column 8 (byte 29) has 0xe9, which does not start "
                        "a valid UTF-8 character"),
            std::string::npos)
      << latin1;
  const std::string nul = message(std::string_view("job {\n  world_\0size: 2\n}\n", 24));
  EXPECT_NE(nul.find("line 2, column 9 (byte 14) has 0x0, a NUL byte"), std::string::npos) << nul;
}

TEST(ScenarioLoaderTest, MissingFileNamesThePath) {
  const std::string path = (std::filesystem::temp_directory_path() / "petrsim_no_such_dir" / "missing.pbtxt").string();
  try {
    LoadScenarioFile(path);
    FAIL() << "no error for a missing file";
  } catch (const ScenarioError& error) {
    EXPECT_NE(std::string(error.what()).find(path), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("cannot open"), std::string::npos) << error.what();
  }
}

TEST(ScenarioLoaderTest, EveryViolationIsReportedOnItsOwnLine) {
  const std::string content = WithJob("job { world_size: 0 samples_per_gpu: 0 seed: 2147483648 }",
                                      "grouping { seq_split_num: 0 }\ncomm { timeout_ms: 0 }\n");
  try {
    LoadScenario(content, "multi.pbtxt");
    FAIL() << "no error";
  } catch (const ScenarioError& error) {
    const std::vector<std::string> lines = SplitLines(error.what());
    const std::vector<std::string> expected = {
        "multi.pbtxt: grouping.seq_split_num: must be in [1, 100000]",
        "multi.pbtxt: job.world_size: must be in [1, 65536], got 0",
        "multi.pbtxt: job.samples_per_gpu: must be in [1, 256], got 0",
        "multi.pbtxt: job.seed: must be < 2^31",
        "multi.pbtxt: comm.timeout_ms: must be in [1, 10^9], got 0",
    };
    ASSERT_EQ(lines.size(), expected.size()) << error.what();
    for (size_t i = 0; i < expected.size(); ++i) {
      EXPECT_EQ(lines[i].rfind(expected[i], 0), 0u) << "line " << i << ": " << lines[i];
    }
  }
  // The same list without the file prefix, in schema order.
  const Scenario scenario = ParseScenario(content, "multi.pbtxt");
  EXPECT_EQ(FindScenarioViolations(scenario).size(), 5u);
}

// Issue 33: string fields must be UTF-8 (a .pb or a text escape holds any bytes; every JSON writer
// after loading needs text), with the field path and the offset; names that repeat are refused;
// a PyTorch release with a tail PEP 440 does not allow is not one.
TEST(ScenarioValidationTest, RefusesBytesRepeatedNamesAndBadReleaseTails) {
  const Scenario valid = ParseScenario(kValidText, "valid.pbtxt");
  Scenario scenario = valid;
  ASSERT_TRUE(FindScenarioViolations(scenario).empty());
  scenario.set_name("ok \xc3\xa9");
  EXPECT_TRUE(FindScenarioViolations(scenario).empty());
  scenario.set_name("bad\xff\xfename");
  scenario.mutable_user_source()->add_info_files(std::string("x\xed\xa0\x80.pkl"));
  std::vector<std::string> lines = FindScenarioViolations(scenario);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "name: must be text (UTF-8): invalid UTF-8 at byte 3 of 9 ('bad\\xff\\xfename')");
  EXPECT_EQ(lines[1].rfind("user_source.info_files[0]: must be text (UTF-8): invalid UTF-8 at byte 1 of 8", 0), 0u)
      << lines[1];

  // A string deep in the dataset: the path names each message and item on the way (spelled only
  // for a violation).
  scenario = valid;
  ExplicitData* data = scenario.mutable_dataset()->add_subdatasets()->mutable_explicit_();
  Scene* scene = data->add_scenes();
  scene = data->add_scenes();
  scene->add_frames()->set_token("t0");
  scene->add_frames()->set_token("t\xc0");
  lines = FindScenarioViolations(scenario);
  const std::string nested = "dataset.subdatasets[" + std::to_string(scenario.dataset().subdatasets_size() - 1) +
                             "].explicit.scenes[1].frames[1].token: must be text (UTF-8): invalid UTF-8 at byte 1";
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [&](const std::string& line) {
    return line.rfind(nested, 0) == 0;
  })) << ::testing::PrintToString(lines);

  scenario = valid;
  for (const char* release : {"1.10", "1.10.2", "1.10.0a0", "1.10.0rc1+cu113", "2.1.0.dev20230801", "1.13.1+cu117"}) {
    scenario.mutable_comm()->set_torch_version(release);
    EXPECT_TRUE(FindScenarioViolations(scenario).empty()) << release;
  }
  for (const char* release : {"1.10abc", "1.10+", "1.10.0rc", "1.10 ", "1.10.0+cu 1"}) {
    scenario.mutable_comm()->set_torch_version(release);
    EXPECT_EQ(FindScenarioViolations(scenario).size(), 1u) << release;
  }
}

}  // namespace
}  // namespace petrsim
