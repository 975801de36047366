// The importers (importers/): mmdet3d info pickles and the nuScenes tables, checked against the
// counts scripts/make_import_fixtures.py computed independently (tests/data/importers/).
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "base/error.h"
#include "base/file_io.h"
#include "base/input_files.h"
#include "data/dataset.h"
#include "importers/import_output.h"
#include "importers/imported_dataset.h"
#include "importers/mmdet3d_infos.h"
#include "importers/nuscenes_splits.h"
#include "importers/nuscenes_tables.h"
#include "scenario/scenario_loader.h"

namespace petrsim {
namespace {

const std::string kData = std::string(PETRSIM_SOURCE_DIR) + "/tests/data/importers/";

nlohmann::json Expected() {
  std::ifstream file(kData + "expected.json");
  return nlohmann::json::parse(file);
}

std::vector<ImportedSubDataset> PickleRoute(const ImportFilters& filters = {}) {
  Mmdet3dInfosOptions options;
  options.use_valid_flag = filters.use_valid_flag;
  return {ReadMmdet3dInfos(kData + "mini_infos_train.pkl", options),
          ReadMmdet3dInfos(kData + "mini_infos_val.pkl", options)};
}

std::vector<ImportedSubDataset> JsonRoute() {
  NuScenesOptions options;
  options.dataroot = kData + "nuscenes";
  options.version = "v1.0-mini";
  options.splits = {"mini_train", "mini_val"};
  return ReadNuScenesTables(options);
}

std::string ErrorOf(const std::function<void()>& run) {
  try {
    run();
  } catch (const ScenarioError& error) {
    return error.what();
  }
  return "";
}

// Every count of expected.json[variant] against the summary, and the per-frame GT counts against
// the dataset petrsim's model builds from the written scenario.
// (build_dataset: false for data mmdet3d's chunk assertion rejects, which BuildDataset refuses.)
void CheckCounts(const std::vector<ImportedSubDataset>& data, const ImportFilters& filters,
                 const nlohmann::json& expected, bool check_names = true, bool build_dataset = true) {
  const ImportSummary summary = Summarize(data, filters);
  ASSERT_EQ(summary.subdatasets.size(), expected["subdatasets"].size());
  for (size_t s = 0; s < data.size(); ++s) {
    SCOPED_TRACE(data[s].name);
    const auto& want = expected["subdatasets"][s];
    const ImportCounts& got = summary.subdatasets[s];
    if (check_names) {
      EXPECT_EQ(got.name, want["name"].get<std::string>());
    }
    EXPECT_EQ(got.frames, want["frames"].get<uint64_t>());
    EXPECT_EQ(got.scenes, want["scenes"].get<uint64_t>());
    EXPECT_EQ(got.groups, want["groups"].get<uint64_t>());
    EXPECT_EQ(got.zero_gt_frames, want["zero_gt_frames"].get<uint64_t>());
    EXPECT_EQ(got.zero_gt_groups, want["zero_gt_groups"].get<uint64_t>());
    EXPECT_EQ(got.boxes, want["boxes"].get<uint64_t>());
    std::vector<uint64_t> scene_frames;
    for (const auto& scene : data[s].scenes) scene_frames.push_back(scene.frame_end - scene.frame_begin);
    EXPECT_EQ(scene_frames, want["scene_frames"].get<std::vector<uint64_t>>());
    std::vector<std::string> tokens;
    for (const auto& frame : data[s].frames) tokens.push_back(frame.token);
    EXPECT_EQ(tokens, want["tokens"].get<std::vector<std::string>>());
  }
  const auto& total = expected["total"];
  EXPECT_EQ(summary.total.frames, total["frames"].get<uint64_t>());
  EXPECT_EQ(summary.total.zero_gt_frames, total["zero_gt_frames"].get<uint64_t>());
  EXPECT_EQ(summary.total.zero_gt_groups, total["zero_gt_groups"].get<uint64_t>());

  if (!build_dataset) return;
  // The scenario, through data/dataset.cc: GT per frame and per scene.
  const Scenario scenario = ToScenario(data, filters, "test");
  const Dataset dataset = BuildDataset(scenario, "imported");
  std::vector<uint32_t> frame_gt;
  for (const auto& frame : dataset.frames()) frame_gt.push_back(frame.gt_count);
  std::vector<uint32_t> want_gt;
  std::vector<uint64_t> want_scene_gt, scene_gt;
  for (const auto& sub : expected["subdatasets"]) {
    for (const auto& scene : sub["frame_gt"]) {
      for (const auto& gt : scene) want_gt.push_back(gt.get<uint32_t>());
    }
    for (const auto& gt : sub["scene_gt"]) want_scene_gt.push_back(gt.get<uint64_t>());
  }
  EXPECT_EQ(frame_gt, want_gt);
  for (const auto& scene : dataset.scenes()) {
    uint64_t gt = 0;
    for (int64_t i = scene.begin; i < scene.end; ++i) gt += dataset.frame(i).gt_count;
    scene_gt.push_back(gt);
  }
  EXPECT_EQ(scene_gt, want_scene_gt);
  EXPECT_EQ(static_cast<uint64_t>(dataset.chunks().size()), total["groups"].get<uint64_t>());
}

TEST(Mmdet3dInfos, CountsMatchTheFixtureWithStreamPetrsFilters) {
  CheckCounts(PickleRoute(), ImportFilters{}, Expected()["default"]);
}

TEST(Mmdet3dInfos, CountsMatchForTheConfigsOtherFilters) {
  const nlohmann::json expected = Expected();
  ImportFilters no_valid_flag;
  no_valid_flag.use_valid_flag = false;
  CheckCounts(PickleRoute(no_valid_flag), no_valid_flag, expected["no_valid_flag"]);
  ImportFilters classes;
  classes.classes = {"car", "pedestrian"};
  CheckCounts(PickleRoute(classes), classes, expected["classes_car_pedestrian"]);
  ImportFilters range;
  ParseRangeOption("-30,-30,-5,30,30,3", range);
  CheckCounts(PickleRoute(range), range, expected["range_30"]);
}

TEST(Mmdet3dInfos, EveryPickleProtocolGivesTheSameDataset) {
  const ImportedSubDataset p2 = ReadMmdet3dInfos(kData + "mini_infos_val.pkl", {});
  for (const int protocol : {3, 4, 5}) {
    Mmdet3dInfosOptions options;
    options.name = p2.name;
    const ImportedSubDataset other =
        ReadMmdet3dInfos(kData + "mini_infos_val_p" + std::to_string(protocol) + ".pkl", options);
    const Scenario a = ToScenario({p2}, {}, "");
    const Scenario b = ToScenario({other}, {}, "");
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a, b)) << "protocol " << protocol;
  }
}

// expected.json's counts of the val file alone (its second sub-dataset) in `variant`.
nlohmann::json ExpectedVal(const std::string& variant) {
  const nlohmann::json sub = Expected()[variant]["subdatasets"][1];
  nlohmann::json total = sub;
  return {{"subdatasets", {sub}}, {"total", total}};
}

ImportedSubDataset ReadShape(const std::string& file, bool use_valid_flag = true) {
  Mmdet3dInfosOptions options;
  options.name = "mini_infos_val";
  options.use_valid_flag = use_valid_flag;
  return ReadMmdet3dInfos(kData + "shapes/" + file, options);
}

// The shapes mmdet3d reads besides {'infos': [...], 'metadata': ...} of plain dicts, as Python's
// pickle writes them (scripts/make_import_fixtures.py): each gives the val file's dataset.
TEST(Mmdet3dInfos, TheOtherShapesMmdet3dReadsGiveTheSameDataset) {
  const ImportedSubDataset plain = ReadMmdet3dInfos(kData + "mini_infos_val.pkl", {});
  const Scenario want = ToScenario({plain}, {}, "");
  for (const char* file : {"ordered_dict.pkl", "bare_list.pkl"}) {
    const ImportedSubDataset sub = ReadShape(file);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(ToScenario({sub}, {}, ""), want)) << file;
  }
  // The older format is read, with a warning that says what mmdet3d's NuScenesDataset expects.
  const ImportedSubDataset list = ReadShape("bare_list.pkl");
  ASSERT_EQ(list.warnings.size(), 1u);
  EXPECT_NE(list.warnings[0].find("the infos are a bare list"), std::string::npos) << list.warnings[0];

  // scene_name names the scenes; nothing else changes.
  ImportedSubDataset named = ReadShape("scene_name.pkl");
  ASSERT_EQ(named.scenes.size(), 2u);
  EXPECT_EQ(named.scenes[0].name, "scene-0103");
  EXPECT_EQ(named.scenes[1].name, "scene-0916");
  EXPECT_NE(plain.scenes[0].name, "scene-0103");  // without scene_name: the scene_token
  for (size_t i = 0; i < named.scenes.size(); ++i) named.scenes[i].name = plain.scenes[i].name;
  for (auto& frame : named.frames) frame.scene_name.clear();
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(ToScenario({named}, {}, ""), want));

  // No num_radar_pts: mmdet3d never reads it (the stored valid_flag counts radar points).
  ImportFilters no_valid_flag;
  no_valid_flag.use_valid_flag = false;
  CheckCounts({ReadShape("no_radar.pkl")}, {}, ExpectedVal("default"));
  CheckCounts({ReadShape("no_radar.pkl", false)}, no_valid_flag, ExpectedVal("no_valid_flag"));

  // Only the stored flag: enough with use_valid_flag (a warning says what it cannot do); without
  // it mmdet3d reads num_lidar_pts, so the import refuses.
  const ImportedSubDataset flag_only = ReadShape("flag_only.pkl");
  CheckCounts({flag_only}, {}, ExpectedVal("default"));
  ASSERT_EQ(flag_only.warnings.size(), 1u);
  EXPECT_NE(flag_only.warnings[0].find("info(s) without 'num_lidar_pts' (the first: infos[0])"), std::string::npos)
      << flag_only.warnings[0];
  const std::string error = ErrorOf([&] { ReadShape("flag_only.pkl", false); });
  EXPECT_NE(error.find("flag_only.pkl: infos[0]: missing key 'num_lidar_pts' (mmdet3d reads it with "
                       "use_valid_flag=False"),
            std::string::npos)
      << error;
}

TEST(Mmdet3dInfos, ScenesFollowTheZeroSweepsRuleAndDisagreementsAreReported) {
  const nlohmann::json expected = Expected();
  const ImportedSubDataset sub = ReadMmdet3dInfos(kData + "disagree_infos.pkl", {});
  CheckCounts({sub}, {}, expected["disagree"], true, /*build_dataset=*/false);
  // Its one-frame scene is the job's (and petrsim check's) error.
  const std::string error = ErrorOf([&] { BuildDataset(ToScenario({sub}, {}, ""), "disagree"); });
  EXPECT_NE(error.find("has 1 frame(s): seq_split_num 2 cuts it into 1 chunk(s)"), std::string::npos) << error;
  EXPECT_EQ(sub.scene_token_disagreements, expected["disagree_warnings"].get<uint64_t>());
  const ImportSummary summary = Summarize({sub}, {});
  const auto has = [&](const std::string& text) {
    return std::any_of(summary.warnings.begin(), summary.warnings.end(),
                       [&](const std::string& w) { return w.find(text) != std::string::npos; });
  };
  EXPECT_TRUE(has("3 frame(s) where a new scene by the zero-sweeps rule")) << FormatSummary(summary, {}, "x");
  EXPECT_TRUE(has("no lidar sweeps, so StreamPETR starts a new scene there"));
  EXPECT_TRUE(has("its scene_token changes, but it has lidar sweeps"));
  EXPECT_TRUE(has("has 1 frame(s): seq_split_num 2 cuts it into 1 chunk(s)"));
}

TEST(Mmdet3dInfos, BadFilesGetPreciseErrors) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty.pkl", "empty.pkl: empty file (not a pickle)"},
      {"not_a_pickle.pkl", "not_a_pickle.pkl: byte 0: unknown pickle opcode 0x7b (not a pickle"},
      {"timestamp_str.pkl", "timestamp_str.pkl: infos[1].timestamp: expected an int (microseconds), found str"},
      {"no_sweeps.pkl", "no_sweeps.pkl: infos[2]: missing key 'sweeps'"},
      {"boxes_3_columns.pkl",
       "infos[0].gt_boxes: expected a float array of shape (N, 7) (x, y, z, dx, dy, dz, "
       "yaw), found float64 array of shape (6, 3)"},
      {"names_short.pkl",
       "infos[0].gt_names: expected a str array of shape (6,) (one per gt_boxes row), found str "
       "(<U26) array of shape (5,)"},
      {"lidar_pts_float.pkl", "infos[0].num_lidar_pts: expected an int array of shape (6,)"},
      {"no_gt.pkl", "infos[0]: missing key 'gt_boxes' (a test-split info file has no annotations"},
      {"infos_not_list.pkl", "infos_not_list.pkl: infos: expected a list, found a dict"},
      {"data_list.pkl", "data_list.pkl: top level: this is an mmdet3d 1.x info file"},
      {"calls_system.pkl", "calls_system.pkl: byte 21: refused global posix.system"},
      {"calls_eval.pkl", "calls_eval.pkl: byte 29: refused global builtins.eval"},
      {"array_shape_mismatch.pkl", "but the data holds 8 bytes"},
  };
  for (const auto& [file, message] : cases) {
    const std::string error = ErrorOf([&] { ReadMmdet3dInfos(kData + "bad/" + file, {}); });
    EXPECT_NE(error.find(message), std::string::npos) << file << ": " << error;
  }
  // The cut file: "byte N: truncated", N inside the file.
  const std::string truncated = kData + "bad/truncated.pkl";
  const std::string error = ErrorOf([&] { ReadMmdet3dInfos(truncated, {}); });
  const std::string prefix = truncated + ": byte ";
  ASSERT_EQ(error.compare(0, prefix.size(), prefix), 0) << error;
  size_t digits = 0;
  const uint64_t offset = std::stoull(error.substr(prefix.size()), &digits);
  EXPECT_GT(digits, 0u);
  EXPECT_LT(offset, std::filesystem::file_size(truncated)) << error;
  EXPECT_EQ(error.compare(prefix.size() + digits, 12, ": truncated:"), 0) << error;
  EXPECT_NE(ErrorOf([&] { ReadMmdet3dInfos(kData + "bad/missing.pkl", {}); }).find("cannot open info file"),
            std::string::npos);
}

// --- Hand-made info pickles: protocol 4 opcodes, numpy arrays as numpy 1.x pickles them ---------

std::string Op(int c) { return std::string(1, static_cast<char>(c)); }
std::string U32(uint32_t v) {
  std::string out;
  for (int i = 0; i < 4; ++i) out += Op(static_cast<int>((v >> (8 * i)) & 0xff));
  return out;
}
// An opcode and its 4-byte argument (appended, not "X" + ...: GCC 12's -Wrestrict misfires there).
std::string Op4(char op, uint32_t argument, const std::string& tail = "") {
  std::string out(1, op);
  out += U32(argument);
  out += tail;
  return out;
}
std::string X(const std::string& text) { return Op4('X', static_cast<uint32_t>(text.size()), text); }
std::string J(int32_t value) { return Op4('J', static_cast<uint32_t>(value)); }
std::string B(const std::string& data) { return Op4('B', static_cast<uint32_t>(data.size()), data); }
std::string Put(uint32_t index) { return Op4('r', index); }
std::string Get(uint32_t index) { return Op4('j', index); }
// The globals, memoized at 10-14 (and popped).
std::string Globals() {
  return "cnumpy.core.multiarray\n_reconstruct\n" + Put(10) + "0" + "cnumpy\nndarray\n" + Put(11) + "K" + Op(0) +
         Op(0x85) + "C" + Op(1) + "b" + Op(0x87) + Put(12) + "0" + "cnumpy\ndtype\n" + Put(13) + "0" +
         "cnumpy.core.multiarray\nscalar\n" + Put(14) + "0";
}
std::string Dtype(const std::string& spec, const std::string& order, int32_t elsize = -1) {
  return Get(13) + "(" + X(spec) + Op(0x89) + Op(0x88) + "tR(K" + Op(3) + X(order) + "NNN" + J(elsize) + J(-1) + "K" +
         Op(0) + "tb";
}
// ndarray.__setstate__'s tuple.
std::string ArrayState(const std::vector<int32_t>& shape, const std::string& dtype, const std::string& data) {
  std::string dims;
  for (const int32_t d : shape) dims += J(d);
  return "(K" + Op(1) + "(" + dims + "t" + dtype + Op(0x89) + B(data) + "t";
}
std::string Array(const std::vector<int32_t>& shape, const std::string& dtype, const std::string& data) {
  return Get(10) + Get(12) + "R" + ArrayState(shape, dtype, data) + "b";
}
std::string Scalar(const std::string& dtype, const std::string& bytes) {
  return Get(14) + "(" + dtype + B(bytes) + "tR";
}
std::string Repeat(const std::string& unit, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += unit;
  return out;
}
// One info: token t<i>, no sweeps, then `fields` (key, value, key, value, ...).
std::string Info(int i, const std::string& fields, const std::string& timestamp = "") {
  return "}(" + X("token") + X("t" + std::to_string(i)) + X("timestamp") + (timestamp.empty() ? J(i) : timestamp) +
         X("sweeps") + "]" + fields + "u";
}
std::string InfoFile(const std::string& infos) {
  return Op(0x80) + Op(4) + Globals() + "}" + Put(0) + "(" + X("infos") + "]" + Put(1) + "(" + infos + "e" +
         X("metadata") + "}u.";
}
// The five arrays of n cars, with `names` for gt_names and `lidar` for num_lidar_pts.
std::string Boxes(int n, const std::string& names, const std::string& lidar) {
  return X("gt_boxes") + Array({n, 7}, Dtype("f8", "<"), std::string(56 * n, '\0')) + X("gt_names") + names +
         X("num_lidar_pts") + lidar + X("num_radar_pts") +
         Array({n}, Dtype("i8", "<"), Repeat(std::string("\1\0\0\0\0\0\0\0", 8), n)) + X("valid_flag") +
         Array({n}, Dtype("b1", "|"), std::string(n, '\1'));
}
std::string Cars(int n) {
  std::string car;
  for (const char c : std::string("car")) car += Op(c) + std::string(3, '\0');  // UCS-4
  return Array({n}, Dtype("U3", "<", 12), Repeat(car, n));
}
std::string Ones(int n) { return Array({n}, Dtype("i8", "<"), Repeat(std::string("\1\0\0\0\0\0\0\0", 8), n)); }
std::string ParseError(const std::string& bytes) {
  return ErrorOf([&] { ParseMmdet3dInfos(bytes, "hand.pkl", {}); });
}

TEST(Mmdet3dInfos, HandMadePicklesImport) {
  const ImportedSubDataset sub = ParseMmdet3dInfos(
      InfoFile(Info(0, Boxes(3, Cars(3), Ones(3))) + Info(1, Boxes(2, Cars(2), Ones(2)))), "hand.pkl", {});
  ASSERT_EQ(sub.frames.size(), 2u);
  EXPECT_EQ(sub.boxes.size(), 5u);
  ASSERT_EQ(sub.class_names.size(), 1u);
  EXPECT_EQ(sub.class_names[0], "car");
}

// The infos are read as the pickle reader adds them to the list (PickleOptions::on_record). A hand-made file whose
// infos the reader cannot take so (a 'data_list' before 'infos', both record lists; an 'infos' list built before its
// key, so not known as one) is read again as a whole tree: the frames are the 'infos' list's, as tree mode gives them.
TEST(Mmdet3dInfos, InfosTheReaderCannotStreamAreReadAsAWholeTree) {
  const std::string infos = Info(0, Boxes(3, Cars(3), Ones(3))) + Info(1, Boxes(2, Cars(2), Ones(2)));
  const auto tokens = [](const ImportedSubDataset& sub) {
    std::vector<std::string> out;
    for (const ImportedFrame& frame : sub.frames) out.push_back(frame.token);
    return out;
  };
  const std::vector<std::string> want = {"t0", "t1"};
  EXPECT_EQ(tokens(ParseMmdet3dInfos(InfoFile(infos), "hand.pkl", {})), want);
  const std::string both = Op(0x80) + Op(4) + Globals() + "}" + Put(0) + "(" + X("data_list") + "]" + Put(1) + "(" +
                           Info(9, Boxes(1, Cars(1), Ones(1))) + "e" + X("infos") + "]" + Put(2) + "(" + infos + "e" +
                           X("metadata") + "}u.";
  const ImportedSubDataset from_both = ParseMmdet3dInfos(both, "both.pkl", {});
  EXPECT_EQ(tokens(from_both), want);
  EXPECT_EQ(from_both.boxes.size(), 5u);
  const std::string list_first = Op(0x80) + Op(4) + Globals() + "}" + Put(0) + "]" + Put(1) + "(" + infos + "e0(" +
                                 X("infos") + Get(1) + X("metadata") + "}u.";
  const ImportedSubDataset from_list_first = ParseMmdet3dInfos(list_first, "list_first.pkl", {});
  EXPECT_EQ(tokens(from_list_first), want);
  EXPECT_EQ(from_list_first.boxes.size(), 5u);
  // Info 0 changed after the APPENDS that handed it over (a GET of it, then SETITEM): refused by the stream, read as
  // the tree ends up.
  const std::string info0 = "}" + Put(5) + "(" + X("token") + X("t0") + X("timestamp") + J(0) + X("sweeps") + "]" +
                            Boxes(3, Cars(3), Ones(3)) + "u";
  const std::string changed = Op(0x80) + Op(4) + Globals() + "}" + Put(0) + "(" + X("infos") + "]" + Put(1) + "(" +
                              info0 + Info(1, Boxes(2, Cars(2), Ones(2))) + "e" + Get(5) + X("scene_name") +
                              X("changed") + "s0" + X("metadata") + "}u.";
  const ImportedSubDataset from_changed = ParseMmdet3dInfos(changed, "changed.pkl", {});
  EXPECT_EQ(tokens(from_changed), want);
  ASSERT_EQ(from_changed.frames.size(), 2u);
  EXPECT_EQ(from_changed.frames[0].scene_name, "changed");
}

TEST(Mmdet3dInfos, ArrayDataCopiedFromOneSharedStateIsRefused) {
  // Every info's gt_boxes is a new array BUILT from one memoized state: a few bytes of file per
  // copy of the whole buffer.
  const int rows = 4681;  // 256 KiB of float64
  std::string infos;
  for (int i = 0; i < 30; ++i) {
    const std::string boxes = i == 0 ? Get(10) + Get(12) + "R" +
                                           ArrayState({rows, 7}, Dtype("f8", "<"), std::string(56 * rows, '\0')) +
                                           Put(30) + "b"
                                     : Get(10) + Get(12) + "R" + Get(30) + "b";
    infos += Info(i, X("gt_boxes") + boxes);
  }
  const std::string error = ParseError(InfoFile(infos));
  EXPECT_NE(error.find("hand.pkl: byte "), std::string::npos) << error;
  EXPECT_NE(error.find("numpy data copies exceed"), std::string::npos) << error;
  EXPECT_NE(error.find("shared buffers?"), std::string::npos) << error;
}

TEST(Mmdet3dInfos, ArraysSharedBetweenInfosAreCappedByTheFileSize) {
  // The first info's arrays are memoized and fetched again by the nine others: 10,000 boxes
  // from a file of about 85 kB.
  const int n = 1000;
  std::string infos;
  for (int i = 0; i < 10; ++i) {
    std::string fields;
    const char* keys[] = {"gt_boxes", "gt_names", "num_lidar_pts", "num_radar_pts", "valid_flag"};
    if (i == 0) {
      const std::string arrays[] = {Array({n, 7}, Dtype("f8", "<"), std::string(56 * n, '\0')), Cars(n), Ones(n),
                                    Ones(n), Array({n}, Dtype("b1", "|"), std::string(n, '\1'))};
      for (uint32_t k = 0; k < 5; ++k) fields += X(keys[k]) + arrays[k] + Put(20 + k);
    } else {
      for (uint32_t k = 0; k < 5; ++k) fields += X(keys[k]) + Get(20 + k);
    }
    infos += Info(i, fields);
  }
  const std::string bytes = InfoFile(infos);
  const std::string error = ParseError(bytes);
  const uint64_t cap = bytes.size() / 16;
  const uint64_t crossing = cap / n;  // the first info whose boxes cross the cap
  EXPECT_NE(error.find(fmt::format("hand.pkl: infos[{}].gt_boxes: the infos so far hold {} boxes", crossing,
                                   (crossing + 1) * n)),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("are arrays shared between infos?"), std::string::npos) << error;
}

TEST(Mmdet3dInfos, BytesNamesAndHugeUnsignedValuesAreRefused) {
  // gt_names as bytes (|S3): mmdet3d's str class names never match b'car'.
  const std::string bytes_names = Array({2}, Dtype("S3", "|", 3), "carcar");
  std::string error = ParseError(InfoFile(Info(0, Boxes(2, bytes_names, Ones(2)))));
  EXPECT_NE(error.find("hand.pkl: infos[0].gt_names: expected a str array ('<U..') or an object "
                       "array of str, found a bytes dtype (bytes (|S3) array of shape (2,))"),
            std::string::npos)
      << error;
  // A uint64 timestamp above INT64_MAX.
  const std::string huge(8, '\xff');
  error = ParseError(InfoFile(Info(0, Boxes(1, Cars(1), Ones(1)), Scalar(Dtype("u8", "<"), huge))));
  EXPECT_NE(error.find("hand.pkl: infos[0].timestamp: a numpy uint64 timestamp "
                       "18446744073709551615 above the int64 range"),
            std::string::npos)
      << error;
  // One in range reads as it is.
  const ImportedSubDataset sub = ParseMmdet3dInfos(
      InfoFile(Info(0, Boxes(1, Cars(1), Ones(1)), Scalar(Dtype("u8", "<"), std::string("\x40\x42\x0f\0\0\0\0\0", 8)))),
      "hand.pkl", {});
  ASSERT_EQ(sub.frames.size(), 1u);
  EXPECT_EQ(sub.frames[0].timestamp, 1000000);
  // A uint64 point count above INT64_MAX.
  error = ParseError(InfoFile(Info(0, Boxes(1, Cars(1), Array({1}, Dtype("u8", "<"), huge)))));
  EXPECT_NE(error.find("hand.pkl: infos[0].num_lidar_pts[0]: expected a count in [0, 2^32), "
                       "found 18446744073709551615"),
            std::string::npos)
      << error;
}

// --- Hand-made nuScenes tables ------------------------------------------------------------------

// One scene of one sample with one car at global `centre`; the LIDAR_TOP keyframe's ego pose and
// calibration as given ((w, x, y, z) rotations). Returns the options to read it.
NuScenesOptions OneSampleTables(const std::string& name, const std::string& centre, const std::string& ego_rotation,
                                const std::string& ego_translation = "[0, 0, 0]",
                                const std::string& calibration_rotation = "[1, 0, 0, 0]") {
  const std::string root = testing::TempDir() + "/" + name;
  std::filesystem::create_directories(root + "/v1.0-mini");
  const auto write = [&](const std::string& table, const std::string& json) {
    std::ofstream(root + "/v1.0-mini/" + table + ".json") << json;
  };
  write("category", R"([{"token": "c1", "name": "vehicle.car"}])");
  write("instance", R"([{"token": "i1", "category_token": "c1"}])");
  write("sensor", R"([{"token": "s1", "channel": "LIDAR_TOP"}])");
  write("calibrated_sensor", R"([{"token": "cs1", "sensor_token": "s1", "translation": [0, 0, 0],
                                   "rotation": )" +
                                 calibration_rotation + "}]");
  write("scene", R"([{"token": "sc1", "name": "scene-x", "first_sample_token": "sa1",
                      "nbr_samples": 1}])");
  write("sample", R"([{"token": "sa1", "timestamp": 1000, "scene_token": "sc1", "next": ""}])");
  write("sample_data", R"([{"token": "sd1", "sample_token": "sa1", "ego_pose_token": "ep1",
                            "calibrated_sensor_token": "cs1", "is_key_frame": true,
                            "prev": ""}])");
  write("ego_pose",
        R"([{"token": "ep1", "translation": )" + ego_translation + R"(, "rotation": )" + ego_rotation + "}]");
  write("sample_annotation", R"([{"token": "a1", "sample_token": "sa1", "instance_token": "i1",
                                  "translation": )" +
                                 centre + R"(, "num_lidar_pts": 5, "num_radar_pts": 0}])");
  const std::string split_file = root + "/splits.json";
  std::ofstream(split_file) << R"({"only": ["scene-x"]})";
  NuScenesOptions options;
  options.dataroot = root;
  options.version = "v1.0-mini";
  options.split_file = split_file;
  return options;
}

TEST(NuScenesTables, TheTransformIntoTheLidarFrameByHand) {
  // Ego at the origin, turned 90 degrees about z (w = cos 45, z = sin 45); the lidar is the ego
  // frame. The global point (1, 0) lies to the ego's right: (0, -1).
  const double h = std::sqrt(0.5);
  const std::string yaw90 = fmt::format("[{:.17g}, 0, 0, {:.17g}]", h, h);
  std::vector<ImportedSubDataset> data = ReadNuScenesTables(OneSampleTables("yaw90", "[1, 0, 0]", yaw90));
  ASSERT_EQ(data.size(), 1u);
  ASSERT_EQ(data[0].boxes.size(), 1u);
  EXPECT_NEAR(data[0].boxes[0].x, 0.0, 1e-6);
  EXPECT_NEAR(data[0].boxes[0].y, -1.0, 1e-6);
  EXPECT_EQ(data[0].class_names[data[0].boxes[0].class_index], "car");
  // Translated too: ego at (10, 5), the same yaw, so its x axis points along global y; the
  // global point (10, 7), 2 m along global y from it, is straight ahead: (2, 0).
  data = ReadNuScenesTables(OneSampleTables("yaw90_moved", "[10, 7, 0]", yaw90, "[10, 5, 0]"));
  ASSERT_EQ(data[0].boxes.size(), 1u);
  EXPECT_NEAR(data[0].boxes[0].x, 2.0, 1e-6);
  EXPECT_NEAR(data[0].boxes[0].y, 0.0, 1e-6);
}

TEST(NuScenesTables, AZeroQuaternionIsRefused) {
  std::string error = ErrorOf([&] { ReadNuScenesTables(OneSampleTables("zero_ego", "[1, 0, 0]", "[0, 0, 0, 0]")); });
  EXPECT_NE(error.find("v1.0-mini/ego_pose.json: record 0 (token ep1): 'rotation': a quaternion "
                       "(w, x, y, z) of norm 0"),
            std::string::npos)
      << error;
  error = ErrorOf([&] {
    ReadNuScenesTables(OneSampleTables("zero_calibration", "[1, 0, 0]", "[1, 0, 0, 0]", "[0, 0, 0]", "[0, 0, 0, 0]"));
  });
  EXPECT_NE(error.find("v1.0-mini/calibrated_sensor.json: record 0 (token cs1): 'rotation': a "
                       "quaternion (w, x, y, z) of norm 0"),
            std::string::npos)
      << error;
}

TEST(NuScenesTables, GiveTheSameDatasetAsTheInfoPickles) {
  const std::vector<ImportedSubDataset> json = JsonRoute();
  const std::vector<ImportedSubDataset> pickle = PickleRoute();
  CheckCounts(json, {}, Expected()["default"], /*check_names=*/false);
  ASSERT_EQ(json.size(), pickle.size());
  for (size_t s = 0; s < json.size(); ++s) {
    const ImportedSubDataset& a = json[s];
    const ImportedSubDataset& b = pickle[s];
    ASSERT_EQ(a.frames.size(), b.frames.size());
    ASSERT_EQ(a.boxes.size(), b.boxes.size());
    ASSERT_EQ(a.scenes.size(), b.scenes.size());
    for (size_t i = 0; i < a.scenes.size(); ++i) {
      EXPECT_EQ(a.scenes[i].frame_begin, b.scenes[i].frame_begin);
      EXPECT_EQ(a.scenes[i].frame_end, b.scenes[i].frame_end);
    }
    for (size_t f = 0; f < a.frames.size(); ++f) {
      EXPECT_EQ(a.frames[f].token, b.frames[f].token);
      EXPECT_EQ(a.frames[f].scene_token, b.frames[f].scene_token);
      EXPECT_EQ(a.frames[f].box_end - a.frames[f].box_begin, b.frames[f].box_end - b.frames[f].box_begin);
    }
    for (size_t i = 0; i < a.boxes.size(); ++i) {
      const ImportedBox& x = a.boxes[i];
      const ImportedBox& y = b.boxes[i];
      EXPECT_EQ(a.class_names[x.class_index], b.class_names[y.class_index]) << i;
      // Both are the converter's transform in double, rounded to float32: the same float but for
      // the last bits of the double arithmetic.
      EXPECT_NEAR(x.x, y.x, 1e-4) << i;
      EXPECT_NEAR(x.y, y.y, 1e-4) << i;
      EXPECT_EQ(x.num_lidar_pts, y.num_lidar_pts);
      EXPECT_EQ(x.num_radar_pts, y.num_radar_pts);
      EXPECT_EQ(y.valid_flag, -1);  // the converter's flag is lidar + radar > 0
    }
  }
  // The two routes' datasets, as the model builds them, are the same.
  const Dataset from_json = BuildDataset(ToScenario(json, {}, ""), "json");
  const Dataset from_pickle = BuildDataset(ToScenario(pickle, {}, ""), "pickle");
  ASSERT_EQ(from_json.size(), from_pickle.size());
  for (int64_t i = 0; i < from_json.size(); ++i) {
    EXPECT_EQ(from_json.frame(i).gt_count, from_pickle.frame(i).gt_count) << i;
    EXPECT_EQ(from_json.frame(i).chunk, from_pickle.frame(i).chunk) << i;
  }
  EXPECT_EQ(from_json.groups_num(), from_pickle.groups_num());
  // Scenes are named by nuScenes' names on this route.
  EXPECT_EQ(json[0].scenes[0].name, "scene-0061");
  EXPECT_EQ(json[1].scenes[1].name, "scene-0916");
}

TEST(NuScenesTables, SplitNamesAndFiles) {
  NuScenesOptions options;
  options.dataroot = kData + "nuscenes";
  options.version = "v1.0-mini";
  options.splits = {"train"};  // v1.0-mini's train is mini_train, as in the converter
  const std::vector<ImportedSubDataset> train = ReadNuScenesTables(options);
  ASSERT_EQ(train.size(), 1u);
  EXPECT_EQ(train[0].name, "train");
  EXPECT_EQ(train[0].frames.size(), 21u);
  options.splits = {"val"};
  options.version = "v1.0-trainval";
  EXPECT_NE(ErrorOf([&] { ReadNuScenesTables(options); }).find("cannot open nuScenes table"), std::string::npos);
  options.version = "v1.0-mini";
  options.splits = {"test"};
  EXPECT_NE(ErrorOf([&] { ReadNuScenesTables(options); }).find("--split test: not an official split of v1.0-mini"),
            std::string::npos);
  // A split file instead of the official lists.
  const std::string split_file = testing::TempDir() + "/splits.json";
  {
    std::ofstream out(split_file);
    out << R"({"mine": ["scene-0103", "scene-0061"], "other": ["scene-0655"]})";
  }
  options.splits = {};
  options.split_file = split_file;
  const std::vector<ImportedSubDataset> mine = ReadNuScenesTables(options);
  ASSERT_EQ(mine.size(), 2u);
  EXPECT_EQ(mine[0].name, "mine");
  EXPECT_EQ(mine[0].frames.size(), 8u + 9u);
  EXPECT_EQ(mine[1].frames.size(), 6u);
  options.splits = {"nope"};
  EXPECT_NE(ErrorOf([&] { ReadNuScenesTables(options); }).find("no split 'nope'"), std::string::npos);
}

TEST(NuScenesTables, BadTablesGetPreciseErrors) {
  NuScenesOptions options;
  options.version = "v1.0-mini";
  options.splits = {"mini_train"};
  options.dataroot = kData + "bad_nuscenes_missing_table";
  EXPECT_NE(ErrorOf([&] { ReadNuScenesTables(options); }).find("v1.0-mini/sample.json: cannot open nuScenes table"),
            std::string::npos);
  options.dataroot = kData + "bad_nuscenes_broken_json";
  const std::string broken = ErrorOf([&] { ReadNuScenesTables(options); });
  EXPECT_NE(broken.find("v1.0-mini/sample.json: invalid JSON at byte"), std::string::npos) << broken;
  options.dataroot = kData + "bad_nuscenes_translation";
  const std::string translation = ErrorOf([&] { ReadNuScenesTables(options); });
  EXPECT_NE(translation.find("sample_annotation.json: record 3 (token "), std::string::npos) << translation;
  EXPECT_NE(translation.find("'translation': expected 3 numbers, found 2 number(s)"), std::string::npos) << translation;
}

TEST(NuScenesSplits, AreTheOfficialLists) {
  const auto train = OfficialNuScenesSplit("train");
  const auto val = OfficialNuScenesSplit("val");
  const auto test = OfficialNuScenesSplit("test");
  const auto mini_train = OfficialNuScenesSplit("mini_train");
  const auto mini_val = OfficialNuScenesSplit("mini_val");
  ASSERT_TRUE(train && val && test && mini_train && mini_val);
  EXPECT_EQ(train->size(), 700u);
  EXPECT_EQ(val->size(), 150u);
  EXPECT_EQ(test->size(), 150u);
  EXPECT_EQ(*mini_train, (std::vector<std::string>{"scene-0061", "scene-0553", "scene-0655", "scene-0757", "scene-0796",
                                                   "scene-1077", "scene-1094", "scene-1100"}));
  EXPECT_EQ(*mini_val, (std::vector<std::string>{"scene-0103", "scene-0916"}));
  EXPECT_EQ(train->front(), "scene-0001");
  EXPECT_EQ(train->back(), "scene-1110");
  EXPECT_EQ(val->front(), "scene-0003");
  EXPECT_EQ(test->back(), "scene-1043");
  std::set<std::string> all(train->begin(), train->end());
  all.insert(val->begin(), val->end());
  all.insert(test->begin(), test->end());
  EXPECT_EQ(all.size(), 1000u);  // disjoint: every nuScenes scene once
  EXPECT_FALSE(OfficialNuScenesSplit("trainval").has_value());
}

TEST(NuScenesTables, NameMappingIsMmdet3ds) {
  EXPECT_EQ(NuScenesDetectionName("vehicle.bus.bendy"), "bus");
  EXPECT_EQ(NuScenesDetectionName("human.pedestrian.police_officer"), "pedestrian");
  EXPECT_EQ(NuScenesDetectionName("movable_object.trafficcone"), "traffic_cone");
  EXPECT_EQ(NuScenesDetectionName("vehicle.construction"), "construction_vehicle");
  EXPECT_EQ(NuScenesDetectionName("human.pedestrian.stroller"), "human.pedestrian.stroller");
  EXPECT_EQ(NuScenesDetectionName("animal"), "animal");
}

TEST(ImportedDataset, TheWrittenScenarioReadsBackAsTheSameMessage) {
  ImportFilters filters;
  filters.classes = {"car", "bus"};
  filters.use_valid_flag = false;
  filters.seq_split_num = 3;
  std::vector<ImportedSubDataset> data = PickleRoute(filters);
  data[0].boxes[0].valid_flag = 0;  // a stored flag that disagrees with the counts is written too
  data[0].class_names.push_back("we\"ird\\name\n");
  data[0].boxes[1].class_index = static_cast<uint32_t>(data[0].class_names.size() - 1);
  const Scenario want = ToScenario(data, filters, "round trip");
  for (const std::string suffix : {".pbtxt", ".pb", ".json"}) {
    const std::string path = testing::TempDir() + "/imported" + suffix;
    WriteScenarioFile(data, filters, "round trip", path);
    // No temporary file is left ("<path>.tmp.<pid>.<n>").
    for (const auto& entry : std::filesystem::directory_iterator(testing::TempDir())) {
      EXPECT_EQ(entry.path().string().find(path + ".tmp"), std::string::npos) << entry.path();
    }
    const Scenario got = LoadScenarioFile(path);
    std::string difference;
    google::protobuf::util::MessageDifferencer differ;
    differ.ReportDifferencesToString(&difference);
    EXPECT_TRUE(differ.Compare(want, got)) << suffix << ": " << difference;
  }
  // Nothing half-written where the file cannot be created.
  const std::string error = ErrorOf([&] { WriteScenarioFile(data, filters, "", "/nonexistent-dir/x.pbtxt"); });
  EXPECT_NE(error.find("/nonexistent-dir/x.pbtxt.tmp: cannot open for writing"), std::string::npos) << error;
}

TEST(ImportedDataset, AStoredValidFlagDecidesUnderUseValidFlag) {
  std::vector<ImportedSubDataset> data = PickleRoute();
  // A box with points whose stored flag says invalid, and one without points flagged valid.
  ImportedBox& kept = data[0].boxes[data[0].frames[0].box_begin];
  const uint64_t before = Summarize(data, {}).total.boxes_kept;
  const bool was_kept = kept.num_lidar_pts + kept.num_radar_pts > 0;
  kept.valid_flag = was_kept ? 0 : 1;
  const ImportSummary summary = Summarize(data, {});
  const Dataset dataset = BuildDataset(ToScenario(data, {}, ""), "flag");
  uint64_t kept_in_dataset = 0;
  for (const auto& frame : dataset.frames()) kept_in_dataset += frame.gt_count;
  EXPECT_EQ(summary.total.boxes_kept, kept_in_dataset);
  ImportFilters no_flag;
  no_flag.use_valid_flag = false;
  // Without use_valid_flag the stored flag is ignored (num_lidar_pts > 0 decides).
  const Dataset without = BuildDataset(ToScenario(data, no_flag, ""), "flag");
  uint64_t kept_without = 0;
  for (const auto& frame : without.frames()) kept_without += frame.gt_count;
  EXPECT_EQ(Summarize(data, no_flag).total.boxes_kept, kept_without);
  (void)before;
}

TEST(ImportedDataset, RangeOption) {
  ImportFilters filters;
  ParseRangeOption("-51.2,-51.2,-5.0,51.2,51.2,3.0", filters);
  EXPECT_EQ(filters.bev_range_min_m, -51.2);
  EXPECT_EQ(filters.bev_range_max_m, 51.2);
  ParseRangeOption("-40, 40", filters);
  EXPECT_EQ(filters.bev_range_min_m, -40);
  EXPECT_NE(ErrorOf([&] { ParseRangeOption("-50,-40,-5,50,40,3", filters); }).find("differ"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { ParseRangeOption("1,2,3", filters); }).find("expected 6 numbers"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { ParseRangeOption("a,b", filters); }).find("'a' is not a number"), std::string::npos);
  EXPECT_NE(ErrorOf([&] { ParseRangeOption("5,-5", filters); }).find("minimum must be below"), std::string::npos);
}

// Issue 33, point 5: an import never writes over one of its inputs, nor over a file that is not a
// scenario an import wrote; its own outputs (text, binary, JSON) and empty files it overwrites.
TEST(ImportOutput, RefusesInputsAndFilesThatAreNotAnImportsOutput) {
  EXPECT_TRUE(IsImportOutput(""));
  EXPECT_TRUE(IsImportOutput("# A petrsim scenario written by `petrsim import` (proto/scenario.proto ...\n"));
  EXPECT_FALSE(IsImportOutput("# A petrsim scenario\nname: \"mine\"\n"));
  EXPECT_FALSE(IsImportOutput("name: \"imported: x\"\ndescription: \"petrsim import\"\n"));  // hand-written
  Scenario scenario;
  scenario.set_name("imported: train");
  scenario.set_description("petrsim import mmdet3d-infos: train.pkl");
  EXPECT_TRUE(IsImportOutput(scenario.SerializeAsString()));
  scenario.set_description("mine");
  EXPECT_FALSE(IsImportOutput(scenario.SerializeAsString()));
  EXPECT_FALSE(IsImportOutput(std::string("\x80\x04\x95", 3)));  // a pickle
  EXPECT_TRUE(
      IsImportOutput("{\n \"name\": \"imported: a\",\n \"description\": \"petrsim import mmdet3d-infos: a\"\n}"));
  EXPECT_FALSE(IsImportOutput("{\n \"name\": \"mine\",\n \"description\": \"petrsim import\"\n}"));

  const std::filesystem::path dir = std::filesystem::path(::testing::TempDir()) / "import_output";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string input = (dir / "a.pkl").string(), link = (dir / "link.pkl").string();
  std::ofstream(input) << "pickle bytes";
  std::filesystem::create_symlink(input, link);
  const auto error_of = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const ScenarioError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(error_of([&] { CheckImportOutput(input, {input}); }).find("is the input"), std::string::npos);
  EXPECT_NE(error_of([&] { CheckImportOutput(link, {input}); }).find("is the input " + input), std::string::npos);
  EXPECT_NE(error_of([&] { CheckImportOutput(input, {}); }).find("exists and is not a scenario petrsim import wrote"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { CheckImportOutput((dir / "new.pb").string(), {input}); }), "");
  std::ofstream(dir / "empty.pbtxt");
  EXPECT_EQ(error_of([&] { CheckImportOutput((dir / "empty.pbtxt").string(), {input}); }), "");
  // Against the files read so far: an input found while reading (a config's _base_ file).
  ClearInputFilesRead();
  std::ofstream(dir / "base.py");
  ReadRegularFile((dir / "base.py").string(), "config", 1 << 20);
  EXPECT_NE(error_of([&] { CheckImportOutputAgainstInputsRead((dir / "base.py").string()); }).find("is the input"),
            std::string::npos);
  EXPECT_EQ(error_of([&] { CheckImportOutputAgainstInputsRead((dir / "empty.pbtxt").string()); }), "");
  ClearInputFilesRead();
}

}  // namespace
}  // namespace petrsim
