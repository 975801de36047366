// The mmcv config reader (formats/mmcv/config.h) on configs written in the shape of
// StreamPETR's published ones (tests/data/configs/), checked against what mmcv 1.x's own Config
// code makes of the same files (dumps/*.json and logs/*_mmcv.log, written by
// tests/data/configs/make_dumps.py), and on about 60 bad configs, each with its file:line:col.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/mmcv/config.h"

namespace petrsim {
namespace {

const std::string kData = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/configs/";
const std::string kR50 = kData + "streampetr/stream_petr_r50_704_bs2_seq_24e.py";
const std::string kVov = kData + "streampetr/stream_petr_vov_800_bs2_seq_24e.py";
const std::string kTrainval = kData + "streampetr/stream_petr_r50_704_trainval_24e.py";

std::string ErrorOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const ScenarioError& error) {
    return error.what();
  }
  return "(no error)";
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// The value as mmcv.dump writes it to JSON (tuples become arrays), keys in order.
nlohmann::ordered_json ToJson(const ConfigValue& v) {
  switch (v.kind()) {
    case ConfigValue::Kind::kNone:
      return nullptr;
    case ConfigValue::Kind::kBool:
      return *v.AsBool();
    case ConfigValue::Kind::kInt:
      return *v.AsInt();
    case ConfigValue::Kind::kFloat:
      return *v.AsFloat();
    case ConfigValue::Kind::kString:
      return *v.AsString();
    case ConfigValue::Kind::kList:
    case ConfigValue::Kind::kTuple: {
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      for (const ConfigValue& item : *v.AsSequence()) out.push_back(ToJson(item));
      return out;
    }
    case ConfigValue::Kind::kDict: {
      nlohmann::ordered_json out = nlohmann::ordered_json::object();
      for (const auto& [key, value] : v.AsDict()->entries) out[key] = ToJson(value);
      return out;
    }
  }
  return nullptr;
}

const ConfigValue& Get(const Config& config, const std::string& path) {
  const ConfigValue* v = config.Find(path);
  if (v == nullptr) throw std::runtime_error("no " + path + " in " + config.path);
  return *v;
}
int64_t Int(const Config& config, const std::string& path) {
  const int64_t* i = Get(config, path).AsInt();
  if (i == nullptr) throw std::runtime_error(path + " is not an int: " + Get(config, path).Repr());
  return *i;
}
std::string Str(const Config& config, const std::string& path) {
  const std::string* s = Get(config, path).AsString();
  if (s == nullptr) throw std::runtime_error(path + " is not a string: " + Get(config, path).Repr());
  return *s;
}

Config Text(const std::string& text) { return ReadMmcvConfigText(text, "/nonexistent/inline.py"); }

std::vector<std::string> Keys(const ConfigValue& v) {
  std::vector<std::string> keys;
  for (const auto& entry : v.AsDict()->entries) keys.push_back(entry.key);
  return keys;
}

// ---------------------------------------------------------------------------------------------
// StreamPETR-shaped configs.

TEST(MmcvConfig, CurrentStreamPetrConfigMergesItsBases) {
  const Config config = ReadMmcvConfig(kR50);
  EXPECT_EQ(config.files,
            (std::vector<std::string>{kR50, kData + "_base_/datasets/nus-3d.py", kData + "_base_/default_runtime.py"}));
  // Arithmetic over earlier names: 28130 // (8 * 2).
  EXPECT_EQ(Int(config, "num_iters_per_epoch"), 1758);
  EXPECT_EQ(Int(config, "runner.max_iters"), 42192);
  EXPECT_EQ(Str(config, "runner.type"), "IterBasedRunner");
  EXPECT_EQ(Int(config, "evaluation.interval"), 42192);
  EXPECT_EQ(Int(config, "checkpoint_config.interval"), 1758);
  EXPECT_EQ(Int(config, "checkpoint_config.max_keep_ckpts"), 3);
  EXPECT_EQ(Int(config, "data.samples_per_gpu"), 2);
  EXPECT_EQ(Int(config, "data.workers_per_gpu"), 4);
  EXPECT_EQ(Str(config, "data.train.type"), "CustomNuScenesDataset");
  EXPECT_EQ(Str(config, "data.train.ann_file"), "./data/nuscenes/nuscenes2d_temporal_infos_train.pkl");
  EXPECT_EQ(*Get(config, "data.train.filter_empty_gt").AsBool(), false);
  EXPECT_EQ(*Get(config, "data.train.use_valid_flag").AsBool(), true);
  EXPECT_EQ(*Get(config, "data.train.seq_mode").AsBool(), true);
  EXPECT_EQ(Int(config, "data.train.seq_split_num"), 2);
  EXPECT_EQ(Str(config, "data.shuffler_sampler.type"), "InfiniteGroupEachSampleInBatchSampler");
  EXPECT_EQ(Int(config, "model.pts_bbox_head.transformer.decoder.num_layers"), 6);
  EXPECT_EQ(Int(config, "model.pts_bbox_head.scalar"), 10);
  EXPECT_EQ(*Get(config, "find_unused_parameters").AsBool(), false);
  EXPECT_EQ(*Get(config, "lr_config.warmup_ratio").AsFloat(), 1.0 / 3);
  EXPECT_EQ(Get(config, "model.img_backbone.out_indices").Repr(), "(2, 3)");
  // From the bases: untouched keys, and keys of a dict the child merges into.
  EXPECT_EQ(Int(config, "log_config.interval"), 50);
  EXPECT_EQ(Str(config, "dist_params.backend"), "nccl");
  EXPECT_EQ(Str(config, "data.val.data_root"), "data/nuscenes/");  // the child's val has none
  EXPECT_EQ(*Get(config, "data.val.test_mode").AsBool(), true);
  EXPECT_EQ(Get(config, "workflow").Repr(), "[('train', 1)]");
  // The child's own values replace the base's (lists are not merged).
  EXPECT_EQ(Get(config, "class_names").AsSequence()->size(), 10u);
  EXPECT_EQ(Str(config, "class_names.2"), "construction_vehicle");
  EXPECT_EQ(Get(config, "point_cloud_range").Repr(), "[-51.2, -51.2, -5.0, 51.2, 51.2, 3.0]");
  // dict(type=..., **img_norm_cfg); string concatenation; list + list.
  EXPECT_EQ(Get(config, "train_pipeline.6").Repr(),
            "{'type': 'NormalizeMultiviewImage', 'mean': [123.675, 116.28, 103.53], 'std': [58.395, 57.12, 57.375], "
            "'to_rgb': True}");
  EXPECT_EQ(Get(config, "data.val.collect_keys").AsSequence()->size(), 9u);
  EXPECT_EQ(Int(config, "ida_aug_conf.final_dim.1"), 704);
}

TEST(MmcvConfig, WhereEachValueWasWritten) {
  const Config config = ReadMmcvConfig(kR50);
  // samples_per_gpu=batch_size: the value is batch_size's, written at line 28.
  EXPECT_EQ(Get(config, "data.samples_per_gpu").where, kR50 + ":28");
  EXPECT_EQ(Get(config, "num_iters_per_epoch").where, kR50 + ":29");
  EXPECT_EQ(Get(config, "data.train.ann_file").where, kR50 + ":201");
  EXPECT_EQ(Get(config, "log_config.interval").where, kData + "_base_/default_runtime.py:6");
  EXPECT_EQ(Get(config, "data.val.data_root").where, kData + "_base_/datasets/nus-3d.py:10");
  EXPECT_EQ(Get(config, "data").where, kR50 + ":195");  // the merged dict: the child's
  EXPECT_EQ(config.root.where, kR50);
}

TEST(MmcvConfig, KeysInMmcvsOrder) {
  const Config config = ReadMmcvConfig(kR50);
  const std::vector<std::string> keys = Keys(config.root);
  ASSERT_GE(keys.size(), 25u);
  // The first base's keys, then the second's, then the child's new ones, in assignment order.
  EXPECT_EQ(std::vector<std::string>(keys.begin(), keys.begin() + 4),
            (std::vector<std::string>{"point_cloud_range", "class_names", "dataset_type", "data_root"}));
  EXPECT_EQ(keys[11], "checkpoint_config");
  EXPECT_EQ(keys[21], "backbone_norm_cfg");
  EXPECT_EQ(keys.back(), "runner");
}

TEST(MmcvConfig, VovConfigLeavesFilterEmptyGtToTheDataset) {
  const Config config = ReadMmcvConfig(kVov);
  EXPECT_EQ(*Get(config, "data.train.use_valid_flag").AsBool(), false);
  EXPECT_EQ(config.Find("data.train.filter_empty_gt"), nullptr);
  EXPECT_EQ(Str(config, "model.img_backbone.type"), "VoVNetCP");
  EXPECT_EQ(Get(config, "model.img_backbone.out_features").Repr(), "('stage4', 'stage5')");
  EXPECT_EQ(Str(config, "load_from"), "ckpts/fcos3d_vovnet_imgbackbone-remapped.pth");
  EXPECT_EQ(Get(config, "train_pipeline.6.to_rgb").Repr(), "False");
}

TEST(MmcvConfig, TwoLevelsOfBaseWithDeleteAndBaseVariables) {
  const Config config = ReadMmcvConfig(kTrainval);
  const std::string base = kData + "streampetr/stream_petr_r50_704_bs2_seq_24e.py";
  EXPECT_EQ(config.files, (std::vector<std::string>{kTrainval, base, kData + "_base_/datasets/nus-3d.py",
                                                    kData + "_base_/default_runtime.py"}));
  EXPECT_EQ(Int(config, "num_iters_per_epoch"), 2134);
  EXPECT_EQ(Int(config, "runner.max_iters"), 51216);
  EXPECT_EQ(Str(config, "runner.type"), "IterBasedRunner");  // merged from the base
  // data.train replaced (_delete_=True): a list ann_file, no filter_empty_gt, no _delete_ left.
  const ConfigValue& train = Get(config, "data.train");
  EXPECT_EQ(Get(config, "data.train.ann_file").Repr(),
            "['./data/nuscenes/nuscenes2d_temporal_infos_train.pkl', "
            "'./data/nuscenes/nuscenes2d_temporal_infos_val.pkl']");
  EXPECT_EQ(train.AsDict()->Get("filter_empty_gt"), nullptr);
  EXPECT_EQ(train.AsDict()->Get("_delete_"), nullptr);
  EXPECT_EQ(Int(config, "data.workers_per_gpu"), 6);
  EXPECT_EQ(Int(config, "data.samples_per_gpu"), 2);  // from the base
  EXPECT_EQ(Str(config, "data.val.ann_file"), "./data/nuscenes/nuscenes2d_temporal_infos_val.pkl");
  // {{_base_.x}}: the base's whole value, with the base's place.
  EXPECT_EQ(Get(config, "data.train.pipeline").AsSequence()->size(), 10u);
  EXPECT_EQ(Str(config, "data.train.classes.0"), "car");
  EXPECT_EQ(Get(config, "data.train.classes").where, base + ":22");
  EXPECT_EQ(Get(config, "data.train.collect_keys").AsSequence()->size(), 10u);
  // Nested merge and a replaced sub-dict.
  EXPECT_EQ(Int(config, "model.pts_bbox_head.transformer.decoder.num_layers"), 3);
  EXPECT_EQ(*Get(config, "model.pts_bbox_head.transformer.decoder.return_intermediate").AsBool(), true);
  EXPECT_EQ(Int(config, "model.pts_bbox_head.num_query"), 644);
  EXPECT_EQ(config.Find("model.img_backbone.pretrained"), nullptr);
  EXPECT_EQ(config.Find("model.img_backbone.with_cp"), nullptr);
  EXPECT_EQ(Get(config, "optimizer").Repr(), "{'type': 'AdamW', 'lr': 0.0002, 'weight_decay': 0.01}");
  // _delete_ on a key no base has: mmcv keeps it.
  EXPECT_EQ(Get(config, "momentum_config").Repr(), "{'_delete_': True, 'policy': 'cyclic'}");
  EXPECT_EQ(Int(config, "evaluation.interval"), 51216);
  EXPECT_EQ(Get(config, "evaluation.pipeline").AsSequence()->size(), 5u);  // kept from the base
  EXPECT_EQ(Int(config, "log_config.interval"), 10);
  EXPECT_EQ(Get(config, "log_config.hooks").AsSequence()->size(), 2u);
  EXPECT_EQ(Str(config, "work_dir"), "./work_dirs/stream_petr_r50_704_trainval_24e/");
}

// mmcv 1.x's own _file2dict/_merge_a_into_b/_substitute_base_vars on the same files wrote these
// dumps: the same values, the same types (tuples are JSON arrays), the same key order.
TEST(MmcvConfig, EqualsWhatMmcvMakesOfTheSameFiles) {
  for (const std::string name :
       {"stream_petr_r50_704_bs2_seq_24e", "stream_petr_vov_800_bs2_seq_24e", "stream_petr_r50_704_trainval_24e"}) {
    SCOPED_TRACE(name);
    const Config config = ReadMmcvConfig(kData + "streampetr/" + name + ".py");
    const nlohmann::ordered_json expected =
        nlohmann::ordered_json::parse(ReadText(kData + "dumps/" + std::string(name) + ".json"));
    EXPECT_EQ(ToJson(config.root).dump(), expected.dump());
  }
}

TEST(MmcvConfig, ReadsTheJsonDump) {
  const std::string dump = kData + "dumps/stream_petr_r50_704_trainval_24e.json";
  const Config from_json = ReadMmcvConfig(dump);
  const Config from_py = ReadMmcvConfig(kTrainval);
  EXPECT_EQ(ToJson(from_json.root).dump(), ToJson(from_py.root).dump());
  EXPECT_EQ(*Get(from_json, "lr_config.warmup_ratio").AsFloat(), 1.0 / 3);
  EXPECT_EQ(Get(from_json, "runner.max_iters").kind(), ConfigValue::Kind::kInt);
  EXPECT_EQ(Get(from_json, "runner.max_iters").where, dump + ":1");  // json.dump writes one line
  EXPECT_EQ(from_json.files, std::vector<std::string>{dump});
}

TEST(MmcvConfig, JsonConfigWithBaseAndBaseVariable) {
  const std::string path = kData + "bases/json_child.json";
  const Config config = ReadMmcvConfig(path);
  EXPECT_EQ(Int(config, "log_config.interval"), 5);
  EXPECT_EQ(Get(config, "log_config.hooks").AsSequence()->size(), 2u);
  EXPECT_EQ(Get(config, "saved_checkpoint_config").Repr(), "{'interval': 1}");
  EXPECT_EQ(Get(config, "dist_params").Repr(), "{'backend': 'gloo', 'timeout': 1800}");
  EXPECT_EQ(Get(config, "dist_params.timeout").where, path + ":5");
  EXPECT_EQ(Get(config, "log_config.interval").where, path + ":3");
}

// The Config block mmdet's train.py logs, as mmcv's pretty_text prints it (with gpu_ids set by
// train.py): the same config as the file, plus gpu_ids.
TEST(MmcvConfig, ConfigBlockOfALogEqualsTheConfig) {
  for (const std::string name :
       {"stream_petr_r50_704_bs2_seq_24e", "stream_petr_vov_800_bs2_seq_24e", "stream_petr_r50_704_trainval_24e"}) {
    SCOPED_TRACE(name);
    Config from_py = ReadMmcvConfig(kData + "streampetr/" + name + ".py");
    const std::string log = kData + "logs/" + std::string(name) + "_mmcv.log";
    const Config from_log = ReadConfigBlockOfLog(log);
    EXPECT_EQ(Get(from_log, "gpu_ids").Repr(), "[0, 1, 2, 3, 4, 5, 6, 7]");
    const Config gpu_ids = Text("gpu_ids = [0, 1, 2, 3, 4, 5, 6, 7]\n");
    std::get<ConfigDict>(from_py.root.value).Set("gpu_ids", Get(gpu_ids, "gpu_ids"));
    EXPECT_EQ(from_log.root.Repr(), from_py.root.Repr());
    EXPECT_EQ(Get(from_log, "point_cloud_range").where, log + ":3");
    EXPECT_EQ(from_log.files, std::vector<std::string>{log});
  }
}

TEST(MmcvConfig, YapfFormattedConfigBlock) {
  const std::string log = kData + "logs/train_yapf_style.log";
  const Config config = ReadConfigBlockOfLog(log);
  EXPECT_EQ(Get(config, "data.train.ann_file").AsSequence()->size(), 2u);
  EXPECT_EQ(Int(config, "data.workers_per_gpu"), 6);
  EXPECT_EQ(Int(config, "runner.max_iters"), 51216);
  EXPECT_EQ(Get(config, "gpu_ids").Repr(), "[0, 1, 2, 3, 4, 5, 6, 7]");
  EXPECT_EQ(Get(config, "gpu_ids").where, log + ":60");
  EXPECT_EQ(Get(config, "label2cat").Repr(), "{'0': 'car', '1': 'truck'}");  // int keys as text
  EXPECT_EQ(*Get(config, "dist_params.timeout").AsFloat(), 1e-05);
  EXPECT_EQ(*Get(config, "lr_config.warmup_ratio").AsFloat(), 1.0 / 3);
  EXPECT_EQ(Get(config, "ida_aug_conf.final_dim").Repr(), "(256, 704)");
  EXPECT_EQ(Keys(config.root).back(), "gpu_ids");  // the block ends at the next record
  EXPECT_EQ(Get(config, "point_cloud_range").where, log + ":10");
}

// SYNTHETIC: a log written by hand for an 8-rank job, not the seed job's (its real excerpt has no config block).
TEST(MmcvConfig, ConfigBlockOfASyntheticEightRankLog) {
  const std::string log = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/logs/synthetic_8ranks_torch1.9.log";
  const Config config = ReadConfigBlockOfLog(log);
  EXPECT_EQ(Get(config, "gpu_ids").AsSequence()->size(), 8u);
  EXPECT_EQ(Get(config, "gpu_ids").where, log + ":34");  // after its first line, the "# SYNTHETIC" comment
  EXPECT_EQ(Int(config, "runner.max_iters"), 42192);
  EXPECT_EQ(Int(config, "num_iters_per_epoch"), 1758);
}

// The seed job's only real log is the 15 lines of the watchdog timeouts the user posted: no config block to read.
TEST(MmcvConfig, TheSeedJobsRealExcerptHasNoConfigBlock) {
  const std::string log = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/logs/seed_job_excerpt.log";
  const std::string error = ErrorOf([&] { ReadConfigBlockOfLog(log); });
  EXPECT_EQ(error.rfind(log + ": no Config block", 0), 0u) << error;
}

TEST(MmcvConfig, PredefinedVariables) {
  const std::string path = kData + "predefined/uses_predefined.py";
  const Config config = ReadMmcvConfig(path);
  const std::string dir = std::filesystem::absolute(kData + "predefined").lexically_normal().string();
  EXPECT_EQ(Str(config, "work_dir"), dir + "/work_dirs/uses_predefined");
  EXPECT_EQ(Get(config, "names").Repr(), "['uses_predefined.py', '.py']");
  EXPECT_EQ(Str(config, "not_a_variable"), "{{ fileSize }}");
}

// ---------------------------------------------------------------------------------------------
// Errors of whole files: each with its file:line(:col), the construct and the cause.

struct BadCase {
  std::string file;      // under tests/data/configs/
  std::string expected;  // what follows the file's path in the message (a prefix of the rest)
};

std::string ReadAny(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  if (ext == ".log") return ErrorOf([&] { ReadConfigBlockOfLog(path); });
  return ErrorOf([&] { ReadMmcvConfig(path); });
}

const char kTail[] = " is not supported in a config petrsim reads without running it";

TEST(MmcvConfig, BadConfigsNameFileLineAndConstruct) {
  const std::string t = kTail;
  const std::vector<BadCase> cases = {
      // dict(x for x in sizes): pairs that are ints (Python raises TypeError too).
      {"bad/generator.py", ":2:13: 'int' object is not iterable (Python raises TypeError)"},
      {"bad/attribute.py", ":2:11: attribute access ('_base_.class_names')" + t +
                               "; mmcv 1.x reads a base file's variable as {{_base_.class_names}}"},
      {"bad/undefined_name.py",
       ":5:18: name 'point_cloud_range' is not defined (a config reads only names assigned above it in the same "
       "file; mmcv runs each file on its own, so a base file's variable is written {{_base_.point_cloud_range}})"},
      {"bad/unterminated_string.py", ":2:7: unterminated triple-quoted string literal (it starts here)"},
      {"bad/unterminated_line_string.py",
       ":2:13: unterminated string literal (expected its closing quote on the same line)"},
      {"bad/unbalanced_bracket.py", ":3:44: unbalanced bracket: ']' closes the '(' opened at line 3:15 (expected ')')"},
      {"bad/unclosed_bracket.py",
       ":1:13: unbalanced bracket: '(' is never closed (expected ')' before the end of the file)"},
      {"bad/bad_base_path.py", ":3: _base_ '../_base_/datasets/nus-3d-missing.py': " + kData +
                                   "_base_/datasets/nus-3d-missing.py does not exist"},
      {"bad/base_not_string.py", ":2:1: _base_ must be a string or a list of strings, found a tuple"},
      {"bad/base_list_of_int.py", ":1:1: _base_ must be a string or a list of strings, found a list holding an int (" +
                                      kData + "bad/base_list_of_int.py:3)"},
      {"bad/deep_nesting.py", ":2:205: brackets nested deeper than 200 (petrsim's limit)"},
      {"bad/binary.py", ":1:1: not UTF-8 text (byte 0x89); a Python config is UTF-8 (a binary file?)"},
      {"bad/nul_byte.py", ":2:15: a NUL byte: this is not a Python config (a binary file?)"},
      // np is never imported there: Python's NameError.
      {"bad/call_dotted.py", ":1:8: name 'np' is not defined"},
      {"bad/indentation.py", ":2:5: unexpected indentation (a Python IndentationError)"},
      {"bad/leading_zero.py", ":1:8: leading zeros in a decimal integer literal are not permitted"},
      {"bad/placeholder_arithmetic.py",
       ":3:22: {{_base_.data_root}} is an operand of '+': mmcv substitutes a base's variable only as a whole value "
       "(here it would still be its placeholder string)"},
      {"bad/placeholder_in_string.py",
       ":2:12: {{_base_.data_root}} inside a string literal: mmcv substitutes a base's variable only as a whole "
       "value (write name = {{_base_.data_root}} without quotes)"},
      {"bad/placeholder_without_base.py",
       ":2: {{_base_.data_root}} in a config without _base_ (mmcv leaves its placeholder string there)"},
      {"bad/placeholder_missing.py",
       ":2: {{_base_.log_config.hooks_missing}}: the bases define no 'hooks_missing' in 'log_config' (mmcv raises "
       "KeyError)"},
      {"bad/reserved_key.py", ":2: 'filename' is reserved for config file (mmcv raises KeyError; rename it)"},
      {"bad/division_by_zero.py", ":3:29: integer division or modulo by zero (Python raises ZeroDivisionError)"},
      {"bad/overflow.py", ":1:9: integer overflow in '**' (petrsim reads 64-bit integers; Python's grow)"},
      {"bad/type_error.py", ":2:22: unsupported operand types for '+': 'str' and 'int' (Python raises TypeError)"},
      {"bad/broken.json", ":2:7: not valid JSON: syntax error while parsing value"},
      {"bad/list_root.json", ": a JSON config must be an object (mmcv: cfg_dict must be a dict), found a list"},
      {"bad/config.yaml", ": a YAML config: this petrsim build reads .py and .json configs"},
      {"bad/config.txt", ": not an mmcv config: mmcv reads .py, .json, .yaml and .yml"},
      {"bad/no_config.log", ": no Config block: petrsim looks for the record mmdet's train.py logs before the config"},
      {"bad/log_with_import.log", ":4:8: a name from an import ('os')" + t + " (a Config block holds only values)"},
      {"bases/delete_type_error.py",
       ":4: 'workflow' is a dict in the child config but a list in its base (" + kData +
           "_base_/default_runtime.py:17): mmcv cannot inherit it (TypeError); set _delete_=True in the child's dict "
           "to replace the base's value"},
      {"bases/duplicate_base_key.py",
       ":3:1: Duplicate key is not allowed among bases (mmcv raises KeyError): 'point_cloud_range' (" + kData +
           "bases/dup_a.py:2 and " + kData + "bases/dup_b.py:4)"},
      {"bases/cycle_a.py", "(see below)"},
  };
  ASSERT_GE(cases.size(), 15u);
  for (const BadCase& c : cases) {
    if (c.file == "bases/cycle_a.py") continue;
    SCOPED_TRACE(c.file);
    const std::string message = ReadAny(kData + c.file);
    const std::string prefix = kData + c.file + c.expected;
    EXPECT_EQ(message.substr(0, prefix.size()), prefix) << message;
  }
}

TEST(MmcvConfig, BaseCycleIsAnError) {
  const std::string a = kData + "bases/cycle_a.py";
  const std::string b = kData + "bases/cycle_b.py";
  EXPECT_EQ(ErrorOf([&] { ReadMmcvConfig(a); }), b + ":3: _base_ './cycle_a.py': _base_ cycle: " + a + " -> " + b +
                                                     " -> " + a + " (mmcv recurses until Python's recursion limit)");
}

TEST(MmcvConfig, MissingFileAndDirectory) {
  EXPECT_EQ(ErrorOf([&] { ReadMmcvConfig(kData + "nothing.py"); }),
            kData + "nothing.py: cannot open mmcv config file (no such file or not readable)");
  EXPECT_EQ(ErrorOf([&] { ReadMmcvConfig(kData + "streampetr"); }),
            kData +
                "streampetr: not an mmcv config: mmcv reads .py, .json, .yaml and .yml (petrsim .py and .json), "
                "found ''");
  EXPECT_EQ(ErrorOf([&] { ReadConfigBlockOfLog(kData + "no.log"); }),
            kData + "no.log: cannot open training log (no such file or not readable)");
}

// ---------------------------------------------------------------------------------------------
// The language, statement by statement (texts in memory).

std::string TextError(const std::string& text) {
  return ErrorOf([&] { Text(text); });
}
std::string ValueOf(const std::string& expression) { return Get(Text("x = " + expression + "\n"), "x").Repr(); }

// Configs that were refused before issue 27 and are read now: their constructs evaluate, or become
// values petrsim cannot evaluate (an error only where a caller needs them).
TEST(MmcvConfig, FormerlyRefusedConstructsAreRead) {
  for (const char* name : {"import",
                           "from_import",
                           "call_range",
                           "list_comprehension",
                           "dict_comprehension",
                           "lambda",
                           "fstring",
                           "subscript",
                           "if_statement",
                           "def",
                           "class_def",
                           "for_loop",
                           "with_statement",
                           "augmented",
                           "tuple_unpack",
                           "conditional",
                           "comparison",
                           "bitwise",
                           "walrus",
                           "star",
                           "set_literal",
                           "call_method",
                           "call_print",
                           "builtin_reference",
                           "expression_statement",
                           "annotated",
                           "positional_dict",
                           "percent_format"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(ReadAny(kData + "bad/" + name + ".py"), "(no error)");
  }
  EXPECT_EQ(ReadAny(kData + "bad/log_with_call.log"), "(no error)");
}

TEST(MmcvConfig, PythonArithmetic) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"7 // 2", "3"},
      {"-7 // 2", "-4"},
      {"7 // -2", "-4"},
      {"-7 % 3", "2"},
      {"7 % -3", "-2"},
      {"7 / 2", "3.5"},
      {"6 / 3", "2.0"},
      {"1.0 / 3", "0.3333333333333333"},
      {"2 ** 10", "1024"},
      {"2 ** -1", "0.5"},
      {"-2 ** 2", "-4"},
      {"(-2) ** 2", "4"},
      {"2 ** 3 ** 2", "512"},
      {"7.5 // 2", "3.0"},
      {"-7.5 // 2", "-4.0"},
      {"-7.5 % 2", "0.5"},
      {"7.5 % -2", "-0.5"},
      {"1_000 + 0x10 + 0o10 + 0b11", "1027"},
      {".5 + 1e-4", "0.5001"},
      {"2.", "2.0"},
      {"1e16", "1e+16"},
      {"1e15", "1000000000000000.0"},
      {"0.0001", "0.0001"},
      {"0.00001", "1e-05"},
      {"1.5e-7", "1.5e-07"},
      {"-0.0", "-0.0"},
      {"1e400", "inf"},
      {"True + True", "2"},
      {"-True", "-1"},
      {"+3", "3"},
      {"2 * 3 + 4 * 5 - 6 / 3", "24.0"},
      {"28130 // (8 * 2)", "1758"},
      {"'a' 'b' + \"c\"", "'abc'"},
      {"'ab' * 3", "'ababab'"},
      {"3 * 'ab'", "'ababab'"},
      {"'ab' * -1", "''"},
      {"[1] * 3 + [2]", "[1, 1, 1, 2]"},
      {"(1,) * 2", "(1, 1)"},
      {"(1, 2) + (3,)", "(1, 2, 3)"},
      {"()", "()"},
      {"(1)", "1"},
      {"[]", "[]"},
      {"{}", "{}"},
      {"1, 2", "(1, 2)"},
      {"{'a': 1, 'b': 2, 'a': 3}", "{'a': 3, 'b': 2}"},
      {"{1: 'x', 2: 'y'}", "{'1': 'x', '2': 'y'}"},
      {"{**dict(a=1, b=2), 'b': 3}", "{'a': 1, 'b': 3}"},
      {"dict(a=1, **dict(b=2), c=3)", "{'a': 1, 'b': 2, 'c': 3}"},
      {"dict()", "{}"},
      {"dict(a=[1, (2, 3)], b=None, c=False)", "{'a': [1, (2, 3)], 'b': None, 'c': False}"},
      {"r'\\n\\d'", "'\\\\n\\\\d'"},
      {"'\\x41\\u00e9\\n\\t\\\\'", "'A\xc3\xa9\\n\\t\\\\'"},
      {"'\\101\\0'", "'A\\x00'"},
      {"'\\q'", "'\\\\q'"},
      {"\"it's\"", "\"it's\""},
      {"u'x'", "'x'"},
      {"'''a\nb'''", "'a\\nb'"},
      {"'a\\\nb'", "'ab'"},
      {"(1 +\n 2)", "3"},
      {"1 + \\\n 2", "3"},
      {"[1,\n # a comment\n 2,]", "[1, 2]"},
      {"9223372036854775807", "9223372036854775807"},
      {"-9223372036854775807 - 1", "-9223372036854775808"},
  };
  for (const auto& [expression, repr] : cases) {
    SCOPED_TRACE(expression);
    EXPECT_EQ(ValueOf(expression), repr);
  }
}

TEST(MmcvConfig, ArithmeticErrors) {
  const std::string at = "/nonexistent/inline.py:1:";
  EXPECT_EQ(TextError("x = 1 / 0"), at + "7: division by zero (Python raises ZeroDivisionError)");
  EXPECT_EQ(TextError("x = 1 % 0"), at + "7: integer division or modulo by zero (Python raises ZeroDivisionError)");
  EXPECT_EQ(TextError("x = 1.0 // 0"), at + "9: float floor division by zero (Python raises ZeroDivisionError)");
  EXPECT_EQ(TextError("x = 0 ** -1"),
            at + "7: 0.0 cannot be raised to a negative power (Python raises ZeroDivisionError)");
  EXPECT_EQ(TextError("x = (-8.0) ** 0.5"),
            at + "12: a negative number to a fractional power: Python's result is a complex number");
  EXPECT_EQ(TextError("x = 10.0 ** 400"), at + "10: float overflow in '**' (Python raises OverflowError)");
  EXPECT_EQ(TextError("x = 9223372036854775807 + 1"),
            at + "25: integer overflow in '+' (petrsim reads 64-bit integers; Python's grow)");
  EXPECT_EQ(TextError("x = 9223372036854775808"), at + "5: integer literal too large (petrsim reads 64-bit integers)");
  EXPECT_EQ(TextError("x = [1] + (2,)"),
            at + "9: unsupported operand types for '+': 'list' and 'tuple' (Python raises TypeError)");
  EXPECT_EQ(TextError("x = 'a' - 'b'"),
            at + "9: unsupported operand types for '-': 'str' and 'str' (Python raises TypeError)");
  EXPECT_EQ(TextError("x = -'a'"), at + "5: bad operand type for unary -: 'str' (Python raises TypeError)");
  EXPECT_EQ(TextError("x = [1] * 2.0"),
            at + "9: unsupported operand types for '*': 'list' and 'float' (Python raises TypeError)");
  // Read now (issue 27), as values petrsim cannot evaluate.
  EXPECT_EQ(Get(Text("x = 1j"), "x").AsUnknown()->reason, "/nonexistent/inline.py:1: a complex number");
  EXPECT_EQ(Get(Text("x = b'abc'"), "x").AsUnknown()->reason, "/nonexistent/inline.py:1: a bytes literal");
  EXPECT_EQ(TextError("x = 1_"), at + "5: invalid number literal '1_'");
  EXPECT_EQ(TextError("x = '\\xZZ'"), at + "6: truncated \\x escape (expected 2 hex digits)");
}

TEST(MmcvConfig, StatementsAndNames) {
  const Config config = Text(
      "\"\"\"A module docstring.\"\"\"\n"
      "a = b = 3\n"
      "c = a + b; d = 'x'\n"
      "__helper = [1, 2]\n"
      "e = __helper + [3]\n"
      "a = 4  # a redefinition keeps a's place\n"
      "_deprecation_ = dict(expected='y.py')\n"
      "'''a string statement'''\n"
      "f = \\\n"
      "    5\n");
  EXPECT_EQ(config.root.Repr(), "{'a': 4, 'b': 3, 'c': 6, 'd': 'x', 'e': [1, 2, 3], 'f': 5}");
  EXPECT_EQ(Get(config, "f").where, "/nonexistent/inline.py:10");
  EXPECT_EQ(Get(config, "c").where, "/nonexistent/inline.py:3");
  EXPECT_EQ(Get(config, "b").where, "/nonexistent/inline.py:2");

  const std::string at = "/nonexistent/inline.py:";
  EXPECT_EQ(TextError("x = 1\ny = x +\n"), at + "2:8: expected an expression, found the end of the line");
  EXPECT_EQ(TextError("x = 1 2\n"), at + "1:7: expected an operator or the end of the statement, found the number 2");
  EXPECT_EQ(TextError("x =\n"), at + "1:4: expected an expression after '=', found the end of the line");
  EXPECT_EQ(TextError("x = dict(a=1, a=2)\n"), at + "1:15: keyword argument repeated: 'a' (a Python SyntaxError)");
  EXPECT_EQ(TextError("d = dict(a=1)\nx = dict(a=2, **d)\n"),
            at + "2:15: dict() got multiple values for keyword argument 'a' (Python raises TypeError)");
  EXPECT_EQ(TextError("x = dict(**[1])\n"), at + "1:10: '**' needs a dict, found a list");
  EXPECT_EQ(TextError("x = {1: 'a', '1': 'b'}\n"),
            at + "1:14: the keys 1 and '1' in one dict (petrsim stores an int key as its text)");
  EXPECT_EQ(TextError("x = {1.5: 'a'}\n"), at + "1:6: a dict key that is a float (petrsim reads str and int keys)");
  // Assignments to attributes and subscripts are read now (issue 27); of an undefined name they are
  // Python's NameError.
  EXPECT_EQ(TextError("x.y = 1\n").substr(0, at.size() + 28), at + "1:1: name 'x' is not defined");
  EXPECT_EQ(TextError("x[0] = 1\n").substr(0, at.size() + 28), at + "1:1: name 'x' is not defined");
  EXPECT_EQ(TextError("True = 1\n"), at + "1:1: cannot assign to the keyword 'True'");
  // Read now (issue 27): values, or values petrsim cannot evaluate; no error.
  for (const char* text : {"x = not 1\n", "x = 1 and 2\n", "x = 1 in [1]\n", "x = ...\n", "x = {v for v in [1]}\n",
                           "x = ~1\n", "x = [1][0]\n", "x = dict(a=1).keys()\n", "@decorator\ndef f(): pass\n",
                           "try:\n    x = 1\nexcept Exception:\n    pass\n", "x = 1\ndel x\n", "assert True\n",
                           "global x\n", "x = range(3)\n"}) {
    EXPECT_EQ(TextError(text), "(no error)") << text;
  }
  EXPECT_EQ(TextError("x = 1 @ 2\n"),
            at + "1:7: unsupported operand types for '@': 'int' and 'int' (Python raises TypeError)");
  EXPECT_EQ(TextError("while True:\n    pass\n"),
            at + "1:1: the config builds more than 1000000 values (petrsim's limit for a config)");
  EXPECT_EQ(TextError("del x\n"), at + "1:5: name 'x' is not defined");
  EXPECT_EQ(TextError("x = yield\n"), at + "1:5: a yield expression" + std::string(kTail));
  EXPECT_EQ(TextError("x = 1 $ 2\n"), at + "1:7: unexpected character '$'");
  EXPECT_EQ(TextError("x = '\\N{BULLET}'\n"),
            at + "1:6: a \\N{...} escape (a named Unicode character)" + std::string(kTail));
  EXPECT_EQ(TextError("x = 1 \\ 2\n"), at + "1:7: unexpected character after a line continuation '\\'");
  EXPECT_EQ(TextError("x = 1\n)\n"), at + "2:1: unbalanced bracket: ')' closes no open bracket");
  EXPECT_EQ(TextError("inf_value = inf\n"),
            at + "1:13: name 'inf' is not defined (a config reads only names assigned above it in the same file; mmcv "
                 "runs each file on its own, so a base file's variable is written {{_base_.inf}})");
  EXPECT_EQ(TextError("filename = 1\n"),
            "/nonexistent/inline.py:1: 'filename' is reserved for config file (mmcv raises KeyError; rename it)");
}

TEST(MmcvConfig, LineEndingsBomAndTrailingCommas) {
  const Config config = Text(
      "\xEF\xBB\xBF"
      "a = 1\r\nb = (1, 2,)\rc = [\r\n  3,\r\n]\n\n\n# end\n");
  EXPECT_EQ(config.root.Repr(), "{'a': 1, 'b': (1, 2), 'c': [3]}");
  EXPECT_EQ(Get(config, "b").where, "/nonexistent/inline.py:2");
  EXPECT_EQ(Get(config, "c").where, "/nonexistent/inline.py:3");
  EXPECT_EQ(Text("").root.Repr(), "{}");
  EXPECT_EQ(Text("# only a comment").root.Repr(), "{}");
  EXPECT_EQ(TextError("a = 1\rb = 'x\r'\n"),
            "/nonexistent/inline.py:2:5: unterminated string literal (expected its closing quote on the same line)");
}

TEST(MmcvConfig, LogBlockReadsRangeAndNothingElse) {
  const std::string head = "2024-03-01 09:00:01,200 - mmdet - INFO - Config:\n";
  auto log = [&](const std::string& block) { return ReadConfigBlockOfLogText(head + block, "/x/train.log"); };
  EXPECT_EQ(Get(log("gpu_ids = range(0, 8)\n"), "gpu_ids").Repr(), "[0, 1, 2, 3, 4, 5, 6, 7]");
  EXPECT_EQ(Get(log("gpu_ids = range(4)\n"), "gpu_ids").Repr(), "[0, 1, 2, 3]");
  EXPECT_EQ(Get(log("gpu_ids = range(0, 8, 3)\n"), "gpu_ids").Repr(), "[0, 3, 6]");
  EXPECT_EQ(Get(log("gpu_ids = range(8, 0, -3)\n"), "gpu_ids").Repr(), "[8, 5, 2]");
  EXPECT_EQ(Get(log("gpu_ids = range(3, 0)\n"), "gpu_ids").Repr(), "[]");
  EXPECT_EQ(Get(log("x = [inf, -inf]\n"), "x").Repr(), "[inf, -inf]");
  EXPECT_EQ(Get(log("x = 1\r\ny = 2\r\n"), "y").where, "/x/train.log:3");
  EXPECT_EQ(ErrorOf([&] { log("gpu_ids = range(0, 8, 0)\n"); }), "/x/train.log:2:11: range() arg 3 must not be zero");
  EXPECT_EQ(ErrorOf([&] { log("gpu_ids = range(0, 1 << 30)\n"); }),
            "/x/train.log:2:11: range() of more than 1048576 ints (petrsim's limit)");
  EXPECT_EQ(ErrorOf([&] { log("gpu_ids = range(0, 2000000000)\n"); }),
            "/x/train.log:2:11: range() of more than 1048576 ints (petrsim's limit)");
  EXPECT_EQ(ErrorOf([&] { log("gpu_ids = range('a')\n"); }), "/x/train.log:2:17: range() needs ints, found a string");
  EXPECT_EQ(ErrorOf([&] { log("_base_ = 'a.py'\n"); }),
            "/x/train.log:2:1: _base_ in a Config block: mmcv prints the merged config, without _base_ (is this a "
            "config file?)");
  EXPECT_EQ(ErrorOf([&] { log("x = {{_base_.a}}\n"); }), "/x/train.log:2:7: attribute access ('_base_.a')" +
                                                             std::string(kTail) +
                                                             "; mmcv 1.x reads a base file's variable as {{_base_.a}}");
  // A block ends at the next record, even one of another logger or level.
  const Config config = ReadConfigBlockOfLogText(
      "noise\n" + head + "a = 1\n2024-03-01 09:00:02,000 - root - WARNING - b = (\n", "/x/train.log");
  EXPECT_EQ(config.root.Repr(), "{'a': 1}");
}

TEST(MmcvConfig, Limits) {
  const std::string at = "/nonexistent/inline.py:";
  EXPECT_EQ(TextError("x = [0] * 1000000000\n"),
            at + "1:9: the config builds more than 1000000 values (petrsim's limit for a config)");
  EXPECT_EQ(TextError("x = 'ab' * 1000000000000\n"),
            at + "1:10: the config builds more than 64 MiB of strings (petrsim's limit for a config)");
  // Names can stack literals deeper than brackets can.
  std::string text = "a0 = 1\n";
  for (int i = 1; i <= 300; ++i) {
    text.append("a").append(std::to_string(i)).append(" = [a").append(std::to_string(i - 1)).append("]\n");
  }
  EXPECT_EQ(TextError(text), at + "258:8: a value nested deeper than 256 levels (petrsim's limit)");
  std::string minus = "x = ";
  minus.append(300, '-');
  minus += "1\n";
  EXPECT_EQ(TextError(minus), at + "1:204: expression nested deeper than 200 levels (petrsim's limit)");
  // Copies of a big value through names are counted.
  EXPECT_EQ(TextError("a = [0] * 400000\nb = [a, a, a]\n"),
            at + "2:9: the config builds more than 1000000 values (petrsim's limit for a config)");
  std::string tokens = "x = [";
  for (int i = 0; i < 1100000; ++i) tokens += "1,";
  EXPECT_EQ(TextError(tokens + "]\n"), at + "1:2000003: more than 2000000 tokens (petrsim's limit for a config)");
}

TEST(MmcvConfig, FindAndHelpers) {
  const Config config = Text("x = dict(a=[1, dict(b='c')], t=(1.5, None), e='')\n");
  EXPECT_EQ(Str(config, "x.a.1.b"), "c");
  EXPECT_EQ(config.Find("x.a.2"), nullptr);
  EXPECT_EQ(config.Find("x.a.-1"), nullptr);
  EXPECT_EQ(config.Find("x.a.b"), nullptr);
  EXPECT_EQ(config.Find("x.nothing"), nullptr);
  EXPECT_EQ(config.Find(""), &config.root);
  EXPECT_EQ(*Get(config, "x.t.0").AsNumber(), 1.5);
  EXPECT_EQ(*Get(config, "x.a.0").AsNumber(), 1.0);
  EXPECT_FALSE(Get(config, "x.t.1").AsNumber().has_value());
  EXPECT_TRUE(Get(config, "x.t.1").is_none());
  EXPECT_FALSE(Get(config, "x.e").Truthy());
  EXPECT_TRUE(Get(config, "x.a").Truthy());
  EXPECT_FALSE(Get(config, "x.t.1").Truthy());
  EXPECT_EQ(ConfigValue::KindName(Get(config, "x.t").kind()), std::string("a tuple"));
}

// ---------------------------------------------------------------------------------------------
// Garbage never crashes the reader: it reads or it says why (ScenarioError), nothing else.

std::string ReadOutcome(const std::function<void()>& run) {
  try {
    run();
    return "read";
  } catch (const ScenarioError&) {
    return "error";
  }
}

RC_GTEST_PROP(MmcvConfigProps, PrintableGarbageIsReadOrRefused, ()) {
  const std::string text = *rc::gen::container<std::string>(rc::gen::oneOf(
      rc::gen::inRange<char>(32, 127),
      rc::gen::element('\n', '\t', '\\', '\'', '"', '#', '(', ')', '[', ']', '{', '}', '=', ',', ':', '*')));
  RC_ASSERT(ReadOutcome([&] { ReadMmcvConfigText(text, "/nonexistent/garbage.py"); }) != "");
  RC_ASSERT(ReadOutcome([&] { ReadMmcvConfigText(text, "/nonexistent/garbage.json"); }) != "");
  RC_ASSERT(ReadOutcome([&] {
              ReadConfigBlockOfLogText("2024-03-01 09:00:01,200 - mmdet - INFO - Config:\n" + text, "/x/train.log");
            }) != "");
}

// A real config with a few bytes changed: mostly syntax errors deep inside, sometimes still a
// config (its _base_ then read from the test data).
RC_GTEST_PROP(MmcvConfigProps, MutatedConfigIsReadOrRefused, ()) {
  static const std::string original = ReadText(kTrainval) + ReadText(kR50);
  std::string text = original;
  const int edits = *rc::gen::inRange(1, 8);
  for (int i = 0; i < edits; ++i) {
    const size_t at = *rc::gen::inRange<size_t>(0, text.size());
    const char c = *rc::gen::element('(', ')', '[', ']', '{', '}', '\'', '"', '\\', '\n', '#', '=', '*', '.', ' ', 'x',
                                     '0', '\0', '\xff', '_', ':', ',');
    switch (*rc::gen::inRange(0, 3)) {
      case 0:
        text.insert(text.begin() + static_cast<std::ptrdiff_t>(at), c);
        break;
      case 1:
        if (at < text.size()) text[at] = c;
        break;
      default:
        if (at < text.size()) text.erase(at, 1);
    }
  }
  RC_ASSERT(ReadOutcome([&] { ReadMmcvConfigText(text, kTrainval); }) != "");
}

TEST(MmcvConfig, RandomBytesNeverCrash) {
  // A plain loop over deterministic pseudo-random bytes (rapidcheck shrinks; this covers more).
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&]() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  const std::string alphabet = "abcxyz_019 .+-*/%()[]{}'\"\\#=,:;\n\t{{}}_base_.fileDirname\r@!<>|&^~$`";
  int read = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string text;
    const size_t length = next() % 120;
    for (size_t i = 0; i < length; ++i) text += alphabet[next() % alphabet.size()];
    read += ReadOutcome([&] { ReadMmcvConfigText(text, "/nonexistent/random.py"); }) == "read";
  }
  EXPECT_GT(read, 0);  // some of them are configs (an empty text is)
}

}  // namespace
}  // namespace petrsim
