// `petrsim diagnose` (replay/diagnose.h) on real Flight Recorder dumps (tests/data/flight_recorder/
// nvrx: four 16-rank Megatron jobs with injected faults and NVIDIA's own analyzer output), on
// damaged copies of them, on a synthetic JSON of them (json.dump of the pickles), and on
// petrsim's own traces of a simulated hang; and the pickle reader (replay/pickle.h) on
// hand-written pickles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/dataset.h"
#include "formats/flight_recorder/flight_recorder.h"
#include "formats/pickle/pickle.h"
#include "plan/iteration_plan.h"
#include "replay/diagnose.h"
#include "scenario/scenario_loader.h"
#include "sim/simulator.h"
#include "trace/directory_writer.h"
#include "trace/reader.h"
#include "trace/trace_event.h"

namespace petrsim {
namespace {

namespace fs = std::filesystem;

const std::string kData = PETRSIM_SOURCE_DIR "/tests/data";
const std::string kNvrx = kData + "/flight_recorder/nvrx";

// A fresh directory under the test's temporary folder.
fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("petrsim_diagnose_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// One row of NVIDIA's reference output: PGID | desc | op | size | dtype | missing ranks.
struct ReferenceRow {
  std::string pg, op, size, dtype;
  std::vector<uint32_t> missing;
};

std::string Trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(' ');
  const size_t end = text.find_last_not_of(' ');
  return begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
}

std::vector<ReferenceRow> ReadReference(const std::string& name) {
  std::ifstream in(kNvrx + "/reference_outputs/" + name + "_reference.txt");
  EXPECT_TRUE(in.good()) << name;
  std::vector<ReferenceRow> rows;
  std::string line;
  std::getline(in, line);  // the header
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::stringstream stream(line);
    std::string cell;
    while (std::getline(stream, cell, '|')) cells.push_back(Trim(cell));
    if (cells.size() != 6) continue;
    ReferenceRow row{cells[0], cells[2], cells[3], cells[4], {}};
    std::stringstream ranks(cells[5]);
    while (std::getline(ranks, cell, ',')) row.missing.push_back(static_cast<uint32_t>(std::stoul(cell)));
    rows.push_back(row);
  }
  return rows;
}

std::string Shape(const std::vector<std::vector<int64_t>>& sizes) {
  std::string out;
  for (const int64_t d : sizes.at(0)) {
    if (!out.empty()) out += 'x';
    out += std::to_string(d);
  }
  return out;
}

std::vector<const StuckCollective*> Roots(const Diagnosis& diagnosis) {
  std::vector<const StuckCollective*> roots;
  for (const auto& stuck : diagnosis.stuck) {
    if (stuck.root) roots.push_back(&stuck);
  }
  return roots;
}

// The acceptance test: the root stuck collectives equal NVIDIA's analyzer's rows exactly.
class NvrxCase : public ::testing::TestWithParam<std::string> {};

TEST_P(NvrxCase, RootsEqualTheReferenceOutput) {
  const Diagnosis diagnosis = Diagnose(LoadRecordings({kNvrx + "/" + GetParam()}));
  const auto reference = ReadReference(GetParam());
  ASSERT_FALSE(reference.empty());
  const auto roots = Roots(diagnosis);
  ASSERT_EQ(roots.size(), reference.size());
  std::set<std::string> expected, found;
  for (const auto& row : reference) {
    expected.insert(row.pg + "|" + row.op + "|" + row.size + "|" + row.dtype + "|" +
                    ::testing::PrintToString(row.missing));
  }
  for (const auto* stuck : roots) {
    found.insert(stuck->group + "|" + stuck->op + "|" + Shape(stuck->sizes) + "|" + stuck->dtype + "|" +
                 ::testing::PrintToString(stuck->missing_ranks));
  }
  EXPECT_EQ(found, expected);
  EXPECT_EQ(diagnosis.world_size, 16u);
  EXPECT_TRUE(diagnosis.ranks_without_file.empty());
  EXPECT_TRUE(diagnosis.partial.empty());
  EXPECT_TRUE(diagnosis.desyncs.empty());
  EXPECT_FALSE(diagnosis.cause.has_value());  // dumps hold no sampler events
}

INSTANTIATE_TEST_SUITE_P(Fixtures, NvrxCase,
                         ::testing::Values("gpu_error_1st", "gpu_error_2nd", "lock_gil_1st", "lock_gil_2nd"));

TEST(Diagnose, IssueTableOfMissingRanks) {
  const auto missing = [](const std::string& name) {
    std::set<uint32_t> ranks;
    const Diagnosis diagnosis = Diagnose(LoadRecordings({kNvrx + "/" + name}));
    for (const auto* stuck : Roots(diagnosis)) {
      ranks.insert(stuck->missing_ranks.begin(), stuck->missing_ranks.end());
    }
    return ranks;
  };
  EXPECT_EQ(missing("gpu_error_1st"), (std::set<uint32_t>{12}));
  EXPECT_EQ(missing("gpu_error_2nd"), (std::set<uint32_t>{9, 14}));
  EXPECT_EQ(missing("lock_gil_1st"), (std::set<uint32_t>{9, 14}));
  EXPECT_EQ(missing("lock_gil_2nd"), (std::set<uint32_t>{10, 15}));
}

TEST(Diagnose, TheFilesCanBeListedOneByOne) {
  std::vector<std::string> files;
  for (int r = 0; r < 16; ++r) files.push_back(kNvrx + "/gpu_error_1st/_dump_" + std::to_string(r));
  const Diagnosis diagnosis = Diagnose(LoadRecordings(files));
  const auto roots = Roots(diagnosis);
  ASSERT_EQ(roots.size(), 1u);
  EXPECT_EQ(roots[0]->group, "74");
}

TEST(Diagnose, ARankWithoutADumpIsMissingAndSaidSo) {
  const fs::path dir = TempDir("no_rank_12");
  for (const auto& entry : fs::directory_iterator(kNvrx + "/gpu_error_1st")) {
    if (entry.path().filename() != "_dump_12") fs::copy(entry.path(), dir / entry.path().filename());
  }
  const Diagnosis diagnosis = Diagnose(LoadRecordings({dir.string()}));
  EXPECT_EQ(diagnosis.ranks_without_file, std::vector<uint32_t>{12});
  bool found = false;
  for (const auto* stuck : Roots(diagnosis)) {
    if (stuck->group == "74") {
      EXPECT_EQ(stuck->missing_ranks, std::vector<uint32_t>{12});
      found = true;
    }
  }
  EXPECT_TRUE(found) << FormatDiagnosis(diagnosis);
  EXPECT_NE(FormatDiagnosis(diagnosis).find("no file for rank(s) 12"), std::string::npos);
}

TEST(Diagnose, ATruncatedPickleIsReadUpToTheCutAndReportedAsPartial) {
  const fs::path dir = TempDir("truncated");
  for (const auto& entry : fs::directory_iterator(kNvrx + "/lock_gil_2nd")) {
    fs::copy(entry.path(), dir / entry.path().filename());
  }
  const fs::path cut = dir / "_dump_9";
  const auto size = fs::file_size(cut);
  fs::resize_file(cut, size * 3 / 4);
  const Diagnosis diagnosis = Diagnose(LoadRecordings({dir.string()}));
  ASSERT_EQ(diagnosis.partial.size(), 1u);
  EXPECT_NE(diagnosis.partial[0].find("_dump_9: byte "), std::string::npos) << diagnosis.partial[0];
  EXPECT_NE(diagnosis.partial[0].find("truncated"), std::string::npos) << diagnosis.partial[0];
  std::set<uint32_t> missing;
  for (const auto* stuck : Roots(diagnosis)) missing.insert(stuck->missing_ranks.begin(), stuck->missing_ranks.end());
  EXPECT_EQ(missing, (std::set<uint32_t>{10, 15})) << FormatDiagnosis(diagnosis);
}

TEST(Diagnose, AnUnreadableDumpAmongOthersCountsItsRankAsWithoutAFile) {
  const fs::path dir = TempDir("garbage");
  for (const auto& entry : fs::directory_iterator(kNvrx + "/gpu_error_1st")) {
    fs::copy(entry.path(), dir / entry.path().filename());
  }
  std::ofstream(dir / "_dump_13", std::ios::trunc) << "not a dump at all";
  const Diagnosis diagnosis = Diagnose(LoadRecordings({dir.string()}));
  EXPECT_EQ(diagnosis.ranks_without_file, std::vector<uint32_t>{13});
  ASSERT_EQ(diagnosis.partial.size(), 1u);
  EXPECT_NE(diagnosis.partial[0].find("_dump_13: byte 0: neither"), std::string::npos) << diagnosis.partial[0];
  const auto roots = Roots(diagnosis);
  ASSERT_FALSE(roots.empty());
  EXPECT_EQ(roots[0]->group, "74");  // rank 12 is still the one missing first (13 now too)
  EXPECT_NE(std::find(roots[0]->missing_ranks.begin(), roots[0]->missing_ranks.end(), 12u),
            roots[0]->missing_ranks.end());
}

// SYNTHETIC JSON: the real pickles passed through Python's json.dump (make_synthetic_json.py), not
// PyTorch's dump_json layout (which writes pg_status as decimal strings, see
// tests/flight_recorder_test.cc for that layout): a JSON dump holding the pickle's types reads to
// the same diagnosis.
TEST(Diagnose, ASyntheticJsonOfThePicklesGivesTheSameDiagnosis) {
  const Diagnosis from_pickle = Diagnose(LoadRecordings({kNvrx + "/lock_gil_2nd"}));
  const Diagnosis from_json = Diagnose(LoadRecordings({kData + "/flight_recorder_json/synthetic_lock_gil_2nd"}));
  EXPECT_EQ(DiagnosisJson(from_json).dump(), DiagnosisJson(from_pickle).dump());
  EXPECT_EQ(Roots(from_json).size(), 2u);
}

TEST(Diagnose, ADumpOfAnotherVersionIsRefused) {
  const fs::path dir = TempDir("version");
  std::ifstream in(kData + "/flight_recorder_json/synthetic_lock_gil_2nd/_dump_0.json");  // synthetic JSON
  std::stringstream text;
  text << in.rdbuf();
  std::string json = text.str();
  const size_t at = json.find("\"2.9\"");
  ASSERT_NE(at, std::string::npos);
  json.replace(at, 5, "\"3.0\"");
  std::ofstream(dir / "_dump_0.json") << json;
  try {
    LoadRecordings({dir.string()});
    FAIL() << "expected an error";
  } catch (const ScenarioError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("_dump_0.json: version: Flight Recorder dump version '3.0' is not supported"),
              std::string::npos)
        << message;
  }
}

// Found by a 10-minute run of fuzz_pickle: a JSON number out of range made nlohmann throw an
// exception petrsim did not catch.
TEST(Diagnose, AJsonNumberOutOfRangeIsAnError) {
  EXPECT_THROW(ParseFlightRecorderDump("{\"version\": 1e999}", "big.json", 0u), ScenarioError);
}

TEST(Diagnose, NotADumpIsRefusedWithTheFileAndByte) {
  const fs::path dir = TempDir("not_a_dump");
  std::ofstream(dir / "notes_0") << "hello";
  try {
    LoadRecordings({dir.string()});
    FAIL() << "expected an error";
  } catch (const ScenarioError& error) {
    EXPECT_NE(std::string(error.what()).find("notes_0: byte 0: neither a petrsim trace"), std::string::npos)
        << error.what();
  }
  EXPECT_THROW(LoadRecordings({(dir / "absent").string()}), ScenarioError);
}

// A simulated hang written as petrsim traces, then diagnosed: the stuck collective is the one
// the simulator reports, the missing rank its stuck rank, the cause its spinning worker; the
// scenario cross-check places it in the plan and calls it a livelock.
TEST(Diagnose, PetrsimTracesOfASimulatedHang) {
  const std::string scenario_path = PETRSIM_SOURCE_DIR "/scenarios/streampetr_trainval_hang.pbtxt";
  Scenario scenario = LoadScenarioFile(scenario_path);
  // The seed job hangs at iteration 40, before any getitem resampled (1 train frame in 2000 has
  // no box); with 1 in 50 some do, so the trace has getitem attempts, and the hang stays where it is.
  scenario.mutable_dataset()->mutable_subdatasets(0)->mutable_synthetic()->set_empty_frame_fraction(0.02);
  const Dataset dataset = BuildDataset(scenario, scenario_path);
  const fs::path dir = TempDir("sim_trace");
  sim::SimResult result;
  {
    TraceDirectoryWriter writer(dir.string(), scenario, scenario_path, scenario.job().world_size(), "sim", "test");
    sim::SimOptions options;
    options.trace = &writer;
    result = sim::Simulate(scenario, dataset, options);
    writer.Finish();
  }
  ASSERT_EQ(result.outcome, Outcome::kHang);
  ASSERT_TRUE(result.collective.has_value());
  EXPECT_EQ(result.collective->iteration, 40u);
  EXPECT_GT(result.resample_attempts, 0u);
  // The trace holds the kinds a post-mortem reads: sampler draws, getitem attempts of the
  // getitems that resampled, batches ready, collectives with their start, exits.
  std::map<int, uint64_t> kinds;
  bool started_recorded = false;
  for (uint32_t r = 0; r < scenario.job().world_size(); ++r) {
    for (const TraceEvent& event : ReadRankTrace(RankTracePath(dir.string(), r)).events) {
      ++kinds[event.kind()];
      started_recorded |= event.kind() == TraceEventKind::collective && event.started_ns() >= event.start_ns();
    }
  }
  EXPECT_GT(kinds[TraceEventKind::sampler_draw], 0u);
  EXPECT_GT(kinds[TraceEventKind::getitem_attempt], 0u);
  EXPECT_GT(kinds[TraceEventKind::batch_ready], 0u);
  EXPECT_GE(kinds[TraceEventKind::livelock], 1u);
  EXPECT_TRUE(started_recorded);
  const Recordings recordings = LoadRecordings({dir.string()});
  EXPECT_EQ(recordings.format, "petrsim");
  const Diagnosis diagnosis = Diagnose(recordings);
  const auto roots = Roots(diagnosis);
  ASSERT_EQ(roots.size(), 1u) << FormatDiagnosis(diagnosis);
  EXPECT_EQ(roots[0]->group, result.collective->process_group);
  EXPECT_EQ(static_cast<uint64_t>(roots[0]->seq), result.collective->seq);
  EXPECT_EQ(roots[0]->missing_ranks, result.stuck_ranks);
  EXPECT_EQ(roots[0]->waiting_ranks, result.waiting_ranks);
  ASSERT_TRUE(roots[0]->iteration.has_value());
  EXPECT_EQ(*roots[0]->iteration, result.collective->iteration);
  ASSERT_TRUE(diagnosis.cause.has_value());
  ASSERT_TRUE(result.stuck.has_value());
  EXPECT_NE(diagnosis.cause->find("worker " + std::to_string(result.stuck->worker) + " of rank " +
                                  std::to_string(result.stuck->rank)),
            std::string::npos)
      << *diagnosis.cause;
  EXPECT_NE(diagnosis.cause->find("scene '" + result.stuck->scene_name + "'"), std::string::npos) << *diagnosis.cause;
  // The simulator's virtual clock starts at 0: times are printed as they are. A host's steady clock
  // has an arbitrary origin: times are measured from the job's first recorded event (issue 28).
  EXPECT_EQ(recordings.origin_ns, 0);
  EXPECT_EQ(diagnosis.cause->find("first recorded event"), std::string::npos);
  Recordings steady = recordings;
  steady.origin_ns = 1'000'000'000;
  const Diagnosis shifted = Diagnose(steady);
  ASSERT_TRUE(shifted.cause.has_value());
  const auto seconds = [](const std::string& text, const std::string& after) {
    const size_t at = text.find(after);
    return at == std::string::npos ? -1.0 : std::stod(text.substr(at + after.size()));
  };
  EXPECT_NEAR(seconds(*shifted.cause, "spinning from "), seconds(*diagnosis.cause, "spinning from ") - 1.0, 1e-3);
  EXPECT_NE(shifted.cause->find("(times from the job's first recorded event)"), std::string::npos) << *shifted.cause;
  // The same cause in fields (the JSON's cause_detail): the simulator's stuck getitem, pool included.
  ASSERT_TRUE(diagnosis.cause_detail.has_value());
  EXPECT_EQ(diagnosis.cause_detail->kind, "livelock");
  EXPECT_EQ(diagnosis.cause_detail->rank, result.stuck->rank);
  ASSERT_TRUE(diagnosis.cause_detail->getitem.has_value());
  ASSERT_TRUE(diagnosis.cause_detail->pool_known);
  const StuckGetitem& detail = *diagnosis.cause_detail->getitem;
  EXPECT_EQ(detail.worker, result.stuck->worker);
  EXPECT_EQ(detail.batch, result.stuck->batch);
  EXPECT_EQ(detail.slot, result.stuck->slot);
  EXPECT_EQ(detail.index, result.stuck->index);
  EXPECT_EQ(detail.group, result.stuck->group);
  EXPECT_EQ(detail.scene_name, result.stuck->scene_name);
  EXPECT_EQ(detail.subdataset_name, result.stuck->subdataset_name);
  EXPECT_EQ(detail.pool_first, result.stuck->pool_first);
  EXPECT_EQ(detail.pool_last, result.stuck->pool_last);
  const nlohmann::json json = DiagnosisJson(diagnosis);
  EXPECT_EQ(json["cause_detail"]["scene_name"], result.stuck->scene_name);
  EXPECT_EQ(json["cause_detail"]["pool"]["first"], result.stuck->pool_first);

  const ScenarioCrossCheck cross = CrossCheck(diagnosis, scenario, scenario_path);
  ASSERT_EQ(cross.placed.size(), 1u);
  EXPECT_TRUE(cross.placed[0].found);
  EXPECT_EQ(cross.placed[0].iteration, result.collective->iteration);
  EXPECT_EQ(cross.placed[0].step, result.collective->step);
  EXPECT_TRUE(cross.consistent) << cross.verdict;
  EXPECT_EQ(cross.hit_rank, result.stuck->rank);
  EXPECT_TRUE(cross.plan_difference.empty()) << cross.plan_difference;
  // The diagnosis ends with what makes the job terminate, proven on the scenario: with --scenario, and without it from
  // the scenario the traces recorded; the global policy is among the proven fixes, in_group's own bounded form not.
  for (const std::vector<Fix>& fixes : {cross.fixes, RecordedScenarioFixes(diagnosis)}) {
    const auto global =
        std::find_if(fixes.begin(), fixes.end(), [](const Fix& f) { return f.set == "resample.policy=global"; });
    ASSERT_NE(global, fixes.end());
    EXPECT_TRUE(global->proven);
    const auto drop =
        std::find_if(fixes.begin(), fixes.end(), [](const Fix& f) { return f.kind == "drop_frames" && !f.recut; });
    ASSERT_NE(drop, fixes.end());
    EXPECT_EQ(drop->scene_name, result.stuck->scene_name);
    EXPECT_EQ(drop->first_index, result.stuck->pool_first);
  }
  EXPECT_EQ(CrossCheckJson(cross)["fixes"].size(), cross.fixes.size());

  // Another release's DDP issues other collectives at startup: the trace carries the scenario it ran, so --scenario
  // says the plans differ and still places the sequence number in the plan that ran.
  Scenario other_release = scenario;
  other_release.mutable_comm()->set_torch_version("2.4");
  const ScenarioCrossCheck differs = CrossCheck(diagnosis, other_release, "other_release");
  EXPECT_NE(differs.plan_difference.find("startup"), std::string::npos) << differs.plan_difference;
  EXPECT_NE(FormatCrossCheck(differs).find("its plan differs from the one the recording ran"), std::string::npos);
  ASSERT_EQ(differs.placed.size(), 1u);
  EXPECT_TRUE(differs.placed[0].found);
  EXPECT_EQ(differs.placed[0].iteration, result.collective->iteration);
  EXPECT_EQ(differs.placed[0].step, result.collective->step);

  // The what-if: with the global policy there is no livelock to find.
  Scenario fixed = scenario;
  fixed.mutable_resample()->set_policy(Resample::global);
  const ScenarioCrossCheck other = CrossCheck(diagnosis, fixed, "fixed");
  EXPECT_FALSE(other.consistent);
  EXPECT_FALSE(other.check_hit);
  EXPECT_TRUE(other.fixes.empty()) << "nothing to fix where nothing hangs";
}

TEST(Diagnose, ACutTraceIsReadUpToTheCut) {
  const std::string scenario_path = PETRSIM_SOURCE_DIR "/scenarios/tiny.pbtxt";
  const Scenario scenario = LoadScenarioFile(scenario_path);
  const Dataset dataset = BuildDataset(scenario, scenario_path);
  const fs::path dir = TempDir("cut_trace");
  {
    TraceDirectoryWriter writer(dir.string(), scenario, scenario_path, scenario.job().world_size(), "sim", "test");
    sim::SimOptions options;
    options.trace = &writer;
    sim::Simulate(scenario, dataset, options);
    writer.Finish();
  }
  const fs::path file = dir / "rank_0.pbtrace";
  fs::resize_file(file, fs::file_size(file) - 3);
  const Diagnosis diagnosis = Diagnose(LoadRecordings({dir.string()}));
  ASSERT_EQ(diagnosis.partial.size(), 1u);
  EXPECT_NE(diagnosis.partial[0].find("rank_0.pbtrace: message "), std::string::npos) << diagnosis.partial[0];
}

// Issue 33, point 3: recordings of many distinct process groups cost time linear in the groups (300 k group names
// in one trace took over 200 s, quadratic in the names). 20 k groups here, as a trace and as a JSON dump of groups
// no pg_config describes; PETRSIM_MANY_GROUPS sets the count (300000 reproduces the issue's case).
TEST(Diagnose, ManyProcessGroupsCostTimeLinearInTheirNames) {
  const char* env = std::getenv("PETRSIM_MANY_GROUPS");
  const uint64_t groups = env != nullptr ? std::strtoull(env, nullptr, 10) : 20000;
  const std::string scenario_path = PETRSIM_SOURCE_DIR "/scenarios/tiny.pbtxt";
  const Scenario scenario = LoadScenarioFile(scenario_path);
  const fs::path dir = TempDir("many_groups_trace");
  {
    TraceDirectoryWriter writer(dir.string(), scenario, scenario_path, scenario.job().world_size(), "sim", "test");
    for (uint64_t g = 0; g < groups; ++g) {
      const std::string name = "g" + std::to_string(g);
      TraceRecord record;
      record.kind = TraceKind::kCollective;
      record.rank = 0;
      record.start_ns = record.end_ns = static_cast<int64_t>(1000 + g);
      record.process_group = name;
      record.seq = 1;
      record.numel = 4;
      record.completed = false;
      writer.Record(record);
    }
    writer.Finish();
  }
  const Recordings traces = LoadRecordings({dir.string()});
  EXPECT_GE(traces.groups.size(), groups);
  const fs::path dumps = TempDir("many_groups_dump");
  nlohmann::json list = nlohmann::json::array();
  for (uint64_t g = 0; g < groups; ++g) {
    list.push_back({{"process_group", {"g" + std::to_string(g), ""}},
                    {"collective_seq_id", 1},
                    {"profiling_name", "nccl:all_reduce"},
                    {"state", "scheduled"},
                    {"is_p2p", false}});
  }
  std::ofstream(dumps / "dump_0.json") << nlohmann::json{{"version", "2.10"}, {"entries", list}}.dump();
  const Recordings dump = LoadRecordings({(dumps / "dump_0.json").string()});
  EXPECT_EQ(dump.groups.size(), groups);
}

// A small Flight Recorder JSON dump: `entries` are (group name, seq, op, dtype, size) pending on
// this rank; every group's status says the rank enqueued up to its last entry (or `enqueued`).
struct Entry {
  std::string group;
  int64_t seq;
  std::string op, dtype;
  int64_t size;
};
void WriteJsonDump(const fs::path& dir, uint32_t rank, const std::vector<std::string>& groups,
                   const std::vector<uint32_t>& members, const std::vector<Entry>& entries,
                   const std::map<std::string, int64_t>& enqueued, const std::string& desc = "") {
  nlohmann::json config = nlohmann::json::object(), status = nlohmann::json::object();
  std::map<std::string, int> ids;
  for (size_t g = 0; g < groups.size(); ++g) {
    ids[groups[g]] = static_cast<int>(g);
    config[groups[g]] = {{"name", groups[g]}, {"desc", desc.empty() ? "group " + groups[g] : desc}, {"ranks", members}};
    const auto it = enqueued.find(groups[g]);
    const int64_t last = it != enqueued.end() ? it->second : 0;
    status[std::to_string(g)] = {
        {"last_enqueued_collective", last}, {"last_started_collective", -1}, {"last_completed_collective", last - 1}};
  }
  nlohmann::json list = nlohmann::json::array();
  int64_t record = 0;
  for (const Entry& e : entries) {
    list.push_back({{"record_id", record++},
                    {"pg_id", ids.at(e.group)},
                    {"process_group", {e.group, desc.empty() ? "group " + e.group : desc}},
                    {"collective_seq_id", e.seq},
                    {"p2p_seq_id", 0},
                    {"op_id", e.seq},
                    {"profiling_name", e.op},
                    {"time_created_ns", 1000 * e.seq + record},
                    {"input_sizes", {{e.size}}},
                    {"input_dtypes", {e.dtype}},
                    {"output_sizes", {{e.size}}},
                    {"output_dtypes", {e.dtype}},
                    {"state", "scheduled"},
                    {"timeout_ms", 600000},
                    {"is_p2p", false}});
  }
  const nlohmann::json dump = {{"version", "2.10"},
                               {"comm_lib_version", "2.27.3"},
                               {"pg_config", config},
                               {"pg_status", status},
                               {"entries", list}};
  std::ofstream(dir / ("dump_" + std::to_string(rank) + ".json")) << dump.dump(1);
}

TEST(Diagnose, ADesyncNamesTheRankThatDiffers) {
  const fs::path dir = TempDir("desync");
  const std::vector<uint32_t> members = {0, 1, 2};
  for (uint32_t r = 0; r < 3; ++r) {
    WriteJsonDump(dir, r, {"0"}, members, {{"0", 5, "nccl:all_reduce", r == 2 ? "Long" : "Float", 1}}, {{"0", 5}});
  }
  const Diagnosis diagnosis = Diagnose(LoadRecordings({dir.string()}));
  ASSERT_EQ(diagnosis.desyncs.size(), 1u) << FormatDiagnosis(diagnosis);
  EXPECT_EQ(diagnosis.desyncs[0].field, "dtype");
  EXPECT_EQ(diagnosis.desyncs[0].culprit_ranks, std::vector<uint32_t>{2});
  EXPECT_EQ(diagnosis.desyncs[0].expected, "Float");
  EXPECT_EQ(diagnosis.desyncs[0].found, "Long");
  EXPECT_TRUE(diagnosis.stuck.empty());  // everyone joined seq 5, with the wrong signature
}

TEST(Diagnose, AWaitForCycleAcrossTwoGroups) {
  // Rank 0 waits in A#1, which rank 1 never joined; rank 1 waits in B#1, which rank 0 never
  // joined (each issued the two groups' collectives in the opposite order).
  const fs::path dir = TempDir("cycle");
  WriteJsonDump(dir, 0, {"A", "B"}, {0, 1}, {{"A", 1, "nccl:all_reduce", "Float", 4}}, {{"A", 1}, {"B", 0}});
  WriteJsonDump(dir, 1, {"A", "B"}, {0, 1}, {{"B", 1, "nccl:all_reduce", "Float", 4}}, {{"A", 0}, {"B", 1}});
  const Diagnosis diagnosis = Diagnose(LoadRecordings({dir.string()}));
  ASSERT_EQ(diagnosis.cycles.size(), 1u) << FormatDiagnosis(diagnosis);
  EXPECT_EQ(diagnosis.cycles[0], (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(diagnosis.stuck.size(), 2u);
  EXPECT_NE(FormatDiagnosis(diagnosis).find("wait-for cycles"), std::string::npos);
}

// The old StreamPETR code skips its denoising reduce_means on a rank whose local batch has no
// GT: the simulator records a desync, and diagnose names the rank whose call differs.
TEST(Diagnose, TheOldCodesConditionalCollectiveIsADesyncOfTheSkippingRank) {
  Scenario scenario = LoadScenarioFile(PETRSIM_SOURCE_DIR "/scenarios/streampetr_trainval_hang.pbtxt");
  scenario.mutable_plan()->mutable_streampetr()->set_old_code_skips_dn_without_gt(true);
  scenario.mutable_filters()->set_filter_empty_gt(false);
  scenario.mutable_job()->set_samples_per_gpu(1);
  // 8 ranks, not the seed's 4: when the mismatch is found, the skipping rank's call must be the odd
  // one out among several (with 4, only it and one other have reached that sequence number).
  scenario.mutable_job()->set_world_size(8);
  const Dataset dataset = BuildDataset(scenario, "scenario");
  const fs::path dir = TempDir("old_code");
  sim::SimResult result;
  {
    TraceDirectoryWriter writer(dir.string(), scenario, "seed", scenario.job().world_size(), "sim", "test");
    sim::SimOptions options;
    options.trace = &writer;
    result = sim::Simulate(scenario, dataset, options);
    writer.Finish();
  }
  ASSERT_EQ(result.outcome, Outcome::kDesync);
  ASSERT_TRUE(result.desync.has_value());
  const Diagnosis diagnosis = Diagnose(LoadRecordings({dir.string()}));
  ASSERT_FALSE(diagnosis.desyncs.empty()) << FormatDiagnosis(diagnosis);
  const DesyncFinding& finding = diagnosis.desyncs[0];
  EXPECT_EQ(static_cast<uint64_t>(finding.seq), result.desync->seq);
  // The skipping rank is the one whose call differs from the others'.
  const uint32_t skipper = result.ranks[result.desync->other_rank].collectives_skipped > 0 ? result.desync->other_rank
                                                                                           : result.desync->first_rank;
  EXPECT_EQ(finding.culprit_ranks, std::vector<uint32_t>{skipper}) << FormatDiagnosis(diagnosis);
}

// The user story of `diagnose --scenario`: Flight Recorder dumps of the seed job (what a real
// StreamPETR job with TORCH_NCCL_TRACE_BUFFER_SIZE would leave: ranks 0, 2 and 3 pending in the
// all_reduce of default_pg, named "0", that rank 1 never enqueued) and the job's scenario give
// the iteration, the step and the pool, and say the dumps are consistent with its livelock.
TEST(Diagnose, FlightRecorderDumpsOfTheSeedJobWithItsScenario) {
  const std::string scenario_path = PETRSIM_SOURCE_DIR "/scenarios/streampetr_trainval_hang.pbtxt";
  const Scenario scenario = LoadScenarioFile(scenario_path);
  const Dataset dataset = BuildDataset(scenario, scenario_path);
  const sim::SimResult result = sim::Simulate(scenario, dataset, sim::SimOptions{});
  ASSERT_TRUE(result.collective.has_value());
  const int64_t seq = static_cast<int64_t>(result.collective->seq);
  const fs::path dir = TempDir("seed_dumps");
  const uint32_t world = scenario.job().world_size();
  ASSERT_EQ(world, 4u);
  ASSERT_EQ(result.stuck_ranks, std::vector<uint32_t>{1});
  const std::vector<uint32_t> members = {0, 1, 2, 3};
  for (uint32_t r = 0; r < world; ++r) {
    const bool stuck = std::find(result.stuck_ranks.begin(), result.stuck_ranks.end(), r) != result.stuck_ranks.end();
    std::vector<Entry> entries;
    if (!stuck) entries.push_back({"0", seq, "nccl:all_reduce", "Float", 1});
    WriteJsonDump(dir, r, {"0"}, members, entries, {{"0", stuck ? seq - 1 : seq}}, "default_pg");
  }
  const Diagnosis diagnosis = Diagnose(LoadRecordings({dir.string()}));
  const auto roots = Roots(diagnosis);
  ASSERT_EQ(roots.size(), 1u) << FormatDiagnosis(diagnosis);
  EXPECT_EQ(roots[0]->missing_ranks, result.stuck_ranks);
  const ScenarioCrossCheck cross = CrossCheck(diagnosis, scenario, scenario_path);
  ASSERT_EQ(cross.placed.size(), 1u);
  EXPECT_EQ(cross.placed[0].plan_group, "default_pg");
  EXPECT_TRUE(cross.placed[0].found);
  EXPECT_EQ(cross.placed[0].iteration, result.collective->iteration);
  EXPECT_EQ(cross.placed[0].step, result.collective->step);
  EXPECT_TRUE(cross.consistent) << cross.verdict;
  EXPECT_NE(cross.verdict.find("scene '" + result.stuck->scene_name + "'"), std::string::npos) << cross.verdict;
  // Dumps from another hang (one collective later) are not what the scenario predicts.
  const fs::path other = TempDir("other_dumps");
  for (uint32_t r = 0; r < world; ++r) {
    const bool stuck = r == 3;
    std::vector<Entry> entries;
    if (!stuck) entries.push_back({"0", seq + 60, "nccl:all_reduce", "Float", 1});
    WriteJsonDump(other, r, {"0"}, members, entries, {{"0", stuck ? seq + 59 : seq + 60}}, "default_pg");
  }
  const Diagnosis elsewhere = Diagnose(LoadRecordings({other.string()}));
  const ScenarioCrossCheck mismatch = CrossCheck(elsewhere, scenario, scenario_path);
  EXPECT_FALSE(mismatch.consistent);
  EXPECT_NE(mismatch.verdict.find("not what the scenario predicts"), std::string::npos) << mismatch.verdict;
}

TEST(LocateCollective, StartupThenIterationsThenPeriodic) {
  Scenario scenario;
  auto* custom = scenario.mutable_plan()->mutable_custom();
  custom->add_startup()->set_name("broadcast params");
  custom->add_per_iteration()->set_name("a");
  custom->add_per_iteration()->set_name("b");
  auto* periodic = custom->add_periodic();
  periodic->mutable_collective()->set_name("log");
  periodic->set_every_iterations(2);
  const ExpandedPlan expanded = ExpandPlan(scenario);
  const auto at = [&](uint64_t seq) {
    const auto position = LocateCollective(expanded, "default_pg", seq, 10);
    if (!position) return std::string("none");
    return position->startup ? "startup " + position->step : std::to_string(position->iteration) + " " + position->step;
  };
  EXPECT_EQ(at(0), "none");
  EXPECT_EQ(at(1), "startup broadcast params");
  EXPECT_EQ(at(2), "0 a");
  EXPECT_EQ(at(3), "0 b");
  EXPECT_EQ(at(4), "1 a");
  EXPECT_EQ(at(5), "1 b");
  EXPECT_EQ(at(6), "1 log");  // after iteration 1, (1 + 1) % 2 == 0
  EXPECT_EQ(at(7), "2 a");
  EXPECT_EQ(at(1 + 10 * 2 + 5), "9 log");
  EXPECT_EQ(at(1 + 10 * 2 + 5 + 1), "none");
  EXPECT_EQ(LocateCollective(expanded, "other_pg", 2, 10).has_value(), false);
}

// Pickles written by hand, opcode by opcode.
std::string Bytes(std::initializer_list<int> values) {
  std::string out;
  for (const int v : values) out.push_back(static_cast<char>(v));
  return out;
}

TEST(Pickle, ReadsPlainDataAndSharesMemoizedObjects) {
  // {'a': [1, -2, 300, 70000], 'b': ('x', None, True, 1.5)} with the list memoized and reused.
  std::string p = Bytes({0x80, 2, '}', 'q',  0,    '(',  'X',  1,   0,    0,    0,    'a', ']',  'q',  1,    '(',
                         'K',  1, 'J', 0xfe, 0xff, 0xff, 0xff, 'M', 0x2c, 0x01, 0x8a, 3,   0x70, 0x11, 0x01, 'e'});
  p += Bytes({'X', 1, 0, 0, 0, 'b', '(', 'X', 1, 0, 0, 0, 'x', 'N', 0x88, 'G', 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 't'});
  p += Bytes({'X', 1, 0, 0, 0, 'c', 'h', 1, 'u', '.'});
  const PickleDocument doc = ParsePickle(p, "test.pkl");
  ASSERT_NE(doc.root, nullptr);
  EXPECT_FALSE(doc.partial.has_value());
  const PickleNode* a = doc.root->Get("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->items.size(), 4u);
  EXPECT_EQ(a->items[0]->integer, 1);
  EXPECT_EQ(a->items[1]->integer, -2);
  EXPECT_EQ(a->items[2]->integer, 300);
  EXPECT_EQ(a->items[3]->integer, 70000);
  const PickleNode* b = doc.root->Get("b");
  ASSERT_NE(b, nullptr);
  ASSERT_EQ(b->type, PickleNode::Type::kTuple);
  EXPECT_EQ(b->items[0]->text, "x");
  EXPECT_EQ(b->items[1]->type, PickleNode::Type::kNone);
  EXPECT_TRUE(b->items[2]->boolean);
  EXPECT_EQ(b->items[3]->real, 1.5);
  EXPECT_EQ(doc.root->Get("c"), a);  // the memo shares the object, as Python does
}

TEST(Pickle, RefusesCodeWithTheOpcodeAndOffset) {
  const std::string p = Bytes({0x80, 2, 'c', 'o', 's', '\n', 's', 'y', 's', 't', 'e', 'm', '\n', '.'});
  try {
    ParsePickle(p, "evil.pkl");
    FAIL() << "expected an error";
  } catch (const PickleError& error) {
    EXPECT_EQ(error.offset(), 2u);
    EXPECT_NE(std::string(error.what()).find("evil.pkl: byte 2: unsupported pickle opcode GLOBAL"), std::string::npos)
        << error.what();
  }
}

TEST(Pickle, RefusesHugeLengthsAndUnknownOpcodes) {
  // BINUNICODE claiming 4 GiB in a 10-byte file.
  EXPECT_THROW(ParsePickle(Bytes({0x80, 2, 'X', 0xff, 0xff, 0xff, 0xff, 'a', '.'}), "big.pkl", false), PickleError);
  try {
    ParsePickle(Bytes({0x80, 2, 0xff}), "odd.pkl");
    FAIL();
  } catch (const PickleError& error) {
    EXPECT_NE(std::string(error.what()).find("odd.pkl: byte 2: unknown pickle opcode 0xff"), std::string::npos);
  }
  try {
    ParsePickle(Bytes({0x00, 'h', 'i'}), "text.pkl");
    FAIL();
  } catch (const PickleError& error) {
    EXPECT_NE(std::string(error.what()).find("text.pkl: byte 0: unknown pickle opcode 0x00 (not a pickle"),
              std::string::npos)
        << error.what();
  }
  EXPECT_THROW(ParsePickle(Bytes({0x80, 2, 0x8a, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, '.'}), "long.pkl"), PickleError);
}

TEST(Pickle, SalvagesWhatWasBuiltBeforeACut) {
  // [1, 2, 3, <cut>: the open MARK's items are added to the list below it.
  const std::string p = Bytes({0x80, 2, ']', '(', 'K', 1, 'K', 2, 'K', 3});
  const PickleDocument doc = ParsePickle(p, "cut.pkl");
  ASSERT_NE(doc.root, nullptr);
  ASSERT_TRUE(doc.partial.has_value());
  EXPECT_NE(doc.partial->find("cut.pkl: byte 10: truncated"), std::string::npos) << *doc.partial;
  EXPECT_EQ(doc.root->items.size(), 3u);
  EXPECT_THROW(ParsePickle(p, "cut.pkl", /*salvage=*/false), PickleError);
}

TEST(Pickle, DeepAndSelfReferencingStructuresDoNotCrash) {
  // 100,000 nested lists: the machine does not recurse.
  std::string deep = Bytes({0x80, 2});
  for (int i = 0; i < 100000; ++i) deep += Bytes({']'});
  for (int i = 0; i < 99999; ++i) deep += Bytes({'a'});
  deep += ".";
  const PickleDocument doc = ParsePickle(deep, "deep.pkl");
  ASSERT_NE(doc.root, nullptr);
  // A list that contains itself, as a Flight Recorder dump's entries: the converter reads a
  // fixed shape (entries must be dicts), so it ends with an error instead of walking the cycle.
  std::string self =
      Bytes({0x80, 2,   '}', 'X', 7, 0, 0, 0,   'v', 'e', 'r', 's', 'i', 'o', 'n', 'X', 3, 0,   0, 0,   '2', '.',
             '9',  's', 'X', 7,   0, 0, 0, 'e', 'n', 't', 'r', 'i', 'e', 's', ']', 'q', 0, 'h', 0, 'a', 's', '.'});
  const fs::path dir = TempDir("self");
  std::ofstream(dir / "_dump_0", std::ios::binary) << self;
  EXPECT_THROW(ReadFlightRecorderDump((dir / "_dump_0").string()), ScenarioError);
}

// Memo references let a small pickle name one value many times: 100,000 entries that are one
// dict whose input_sizes are 1,000 references to one shape of 1,000 ints would expand to 10^11
// ints. The converter's budget refuses it (found by review; a fuzz seed would take long).
TEST(Pickle, AMemoBombIsRefusedNotExpanded) {
  const auto str = [](const std::string& text) {
    std::string out = Bytes({'X'});
    const uint32_t n = static_cast<uint32_t>(text.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
    return out + text;
  };
  std::string p = Bytes({0x80, 2, '}', '('});
  p += str("version") + str("2.9") + str("entries") + Bytes({']', '('});
  // The entry dict, memo 1.
  p += Bytes({'}', 'q', 1, '('});
  p += str("process_group") + str("0") + str("g") + Bytes({0x86});
  p += str("collective_seq_id") + Bytes({'K', 1});
  p += str("profiling_name") + str("nccl:all_reduce") + str("state") + str("scheduled") + str("is_p2p") +
       Bytes({'K', 0});
  p += str("input_sizes") + Bytes({']', '(', ']', 'q', 2, '('});
  for (int i = 0; i < 1000; ++i) p += Bytes({'K', 1});
  p += Bytes({'e'});
  for (int i = 0; i < 999; ++i) p += Bytes({'h', 2});
  p += Bytes({'e', 'u'});
  for (int i = 0; i < 99999; ++i) p += Bytes({'h', 1});
  p += Bytes({'e', 'u', '.'});
  try {
    ParseFlightRecorderDump(p, "bomb.pkl", 0u);
    FAIL() << "expected an error";
  } catch (const ScenarioError& error) {
    EXPECT_NE(std::string(error.what()).find("bomb.pkl: entries["), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("refuses to expand it"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace petrsim
