// The Perfetto timeline: the JSON parses, ranks and threads are named, times keep every
// nanosecond, hung collectives stand out, the record limit holds and an unfinished writer
// leaves nothing behind.
#include "trace/perfetto_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "base/error.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_override.h"
#include "sim/simulator.h"

namespace petrsim {
namespace {

namespace fs = std::filesystem;

class PerfettoWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ = fs::temp_directory_path() /
                 (std::string("petrsim_perfetto_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(directory_);
    fs::create_directories(directory_);
    path_ = (directory_ / "timeline.json").string();
  }
  void TearDown() override { fs::remove_all(directory_); }

  static std::string ReadText(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  fs::path directory_;
  std::string path_;
};

// Five records over two ranks, in the order a simulator would emit them (not time order).
void RecordSample(PerfettoWriter& writer) {
  TraceRecord load;
  load.kind = TraceKind::kLoad;
  load.rank = 0;
  load.worker = 1;
  load.start_ns = 1'234'567;
  load.end_ns = 2'000'000;
  load.iteration = 4;
  load.slot = 1;
  load.index = 17;
  load.final_index = 12;
  load.attempts = 3;
  writer.Record(load);

  const std::string group = "default_pg";  // the views must be copied, not kept
  const std::string step = "reduce_mean(loss)";
  TraceRecord done;
  done.kind = TraceKind::kCollective;
  done.rank = 0;
  done.start_ns = 3'000'001;
  done.end_ns = 3'500'000;
  done.iteration = 4;
  done.process_group = group;
  done.seq = 9;
  done.op = Collective::allreduce;
  done.numel = 1;
  done.text = step;
  writer.Record(done);

  TraceRecord hung = done;
  hung.rank = 1;
  hung.start_ns = 3'000'000;
  hung.end_ns = 1'803'000'000'000;
  hung.completed = false;
  writer.Record(hung);

  TraceRecord iteration;
  iteration.kind = TraceKind::kIteration;
  iteration.rank = 0;
  iteration.start_ns = 0;
  iteration.end_ns = 4'000'000;
  iteration.iteration = 4;
  writer.Record(iteration);

  const std::string line = "[Rank 1] Watchdog caught collective operation timeout: \"x\"\n";
  TraceRecord watchdog;
  watchdog.kind = TraceKind::kWatchdog;
  watchdog.rank = 1;
  watchdog.start_ns = watchdog.end_ns = 1'800'003'000'000;
  watchdog.text = line;
  writer.Record(watchdog);
}

const nlohmann::json* FindEvent(const nlohmann::json& events, const std::string& ph, const std::string& name, int pid) {
  for (const auto& event : events) {
    if (event["ph"] == ph && event["name"] == name && event["pid"] == pid) return &event;
  }
  return nullptr;
}

TEST_F(PerfettoWriterTest, WritesATimelineThatParses) {
  {
    PerfettoWriter writer(path_);
    RecordSample(writer);
    writer.Finish({{"outcome", "hang"}, {"seed", 7}});
    EXPECT_EQ(writer.records_written(), 5u);
  }
  ASSERT_TRUE(fs::exists(path_));
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
  const std::string text = ReadText(path_);
  const auto json = nlohmann::json::parse(text);
  EXPECT_EQ(json["displayTimeUnit"], "ms");
  EXPECT_EQ(json["otherData"]["outcome"], "hang");
  EXPECT_EQ(json["otherData"]["seed"], 7);
  EXPECT_EQ(json["otherData"]["records"], 5);
  EXPECT_EQ(json["otherData"]["truncated_records"], 0);
  const auto& events = json["traceEvents"];

  // One process per rank, named, and threads named and ordered main first.
  for (int rank : {0, 1}) {
    const auto* process = FindEvent(events, "M", "process_name", rank);
    ASSERT_NE(process, nullptr) << rank;
    EXPECT_EQ((*process)["args"]["name"], "rank " + std::to_string(rank));
  }
  std::map<std::pair<int, int64_t>, std::string> thread_names;
  std::map<std::pair<int, int64_t>, int64_t> sort_index;
  for (const auto& event : events) {
    if (event["ph"] != "M") continue;
    const auto key = std::make_pair(event["pid"].get<int>(), event["tid"].get<int64_t>());
    if (event["name"] == "thread_name") thread_names[key] = event["args"]["name"];
    if (event["name"] == "thread_sort_index") sort_index[key] = event["args"]["sort_index"];
  }
  EXPECT_EQ(thread_names[std::make_pair(0, int64_t{0})], "main");
  EXPECT_EQ(thread_names[std::make_pair(0, int64_t{2})], "worker 1");
  EXPECT_EQ(thread_names[std::make_pair(0, PerfettoWriter::kIterationsTid)], "iterations");
  EXPECT_EQ(thread_names[std::make_pair(1, int64_t{0})], "main");
  EXPECT_LT(sort_index[std::make_pair(0, int64_t{0})], sort_index[std::make_pair(0, int64_t{2})]);
  EXPECT_EQ(thread_names.size(), 4u);  // no thread named twice, none invented

  // The load: on worker 1's thread, microseconds with every nanosecond.
  const auto* load = FindEvent(events, "X", "load idx 17 -> 12", 0);
  ASSERT_NE(load, nullptr);
  EXPECT_EQ((*load)["tid"], 2);
  EXPECT_DOUBLE_EQ((*load)["ts"].get<double>(), 1234.567);
  EXPECT_DOUBLE_EQ((*load)["dur"].get<double>(), 765.433);
  EXPECT_EQ((*load)["args"]["attempts"], 3);
  EXPECT_EQ((*load)["args"]["slot"], 1);
  EXPECT_NE(text.find("\"ts\":1234.567,\"dur\":765.433"), std::string::npos);

  // The completed collective on main, the hung one stands out.
  const auto* done = FindEvent(events, "X", "reduce_mean(loss)", 0);
  ASSERT_NE(done, nullptr);
  EXPECT_EQ((*done)["tid"], 0);
  EXPECT_FALSE(done->contains("cname"));
  EXPECT_EQ((*done)["args"]["group"], "default_pg");
  EXPECT_EQ((*done)["args"]["seq"], 9);
  EXPECT_EQ((*done)["args"]["op"], "ALLREDUCE");
  EXPECT_EQ((*done)["args"]["completed"], true);
  EXPECT_NE(text.find("\"ts\":3000.001,\"dur\":499.999"), std::string::npos);
  const auto* hung = FindEvent(events, "X", "HUNG: reduce_mean(loss)", 1);
  ASSERT_NE(hung, nullptr);
  EXPECT_EQ((*hung)["cname"], "terrible");
  EXPECT_EQ((*hung)["args"]["completed"], false);
  EXPECT_NE(text.find("\"ts\":3000.000,\"dur\":1802997000.000"), std::string::npos);

  const auto* iteration = FindEvent(events, "X", "iteration 4", 0);
  ASSERT_NE(iteration, nullptr);
  EXPECT_EQ((*iteration)["tid"], PerfettoWriter::kIterationsTid);

  // The watchdog: a process-scoped instant carrying its line, quotes and newline intact.
  const auto* watchdog = FindEvent(events, "i", "watchdog", 1);
  ASSERT_NE(watchdog, nullptr);
  EXPECT_EQ((*watchdog)["s"], "p");
  EXPECT_FALSE(watchdog->contains("dur"));
  EXPECT_DOUBLE_EQ((*watchdog)["ts"].get<double>(), 1800003000.0);
  EXPECT_EQ((*watchdog)["args"]["text"], "[Rank 1] Watchdog caught collective operation timeout: \"x\"\n");
}

TEST_F(PerfettoWriterTest, CountsRecordsPastTheLimitWithoutWritingThem) {
  {
    PerfettoWriter writer(path_, /*records_max=*/2);
    RecordSample(writer);
    EXPECT_EQ(writer.records_written(), 2u);
    EXPECT_EQ(writer.records_truncated(), 3u);
    writer.Finish(nullptr);
  }
  const auto json = nlohmann::json::parse(ReadText(path_));
  EXPECT_EQ(json["otherData"]["truncated_records"], 3);
  EXPECT_EQ(json["otherData"]["records"], 2);
  int slices = 0;
  for (const auto& event : json["traceEvents"]) slices += event["ph"] != "M";
  EXPECT_EQ(slices, 2);
}

TEST_F(PerfettoWriterTest, SaysWhereTheLimitCutTheTimeline) {
  PerfettoWriter writer(path_, /*records_max=*/2);
  EXPECT_FALSE(writer.truncated_at());
  RecordSample(writer);
  // The third record, the first not written: rank 1's hung collective of iteration 4.
  ASSERT_TRUE(writer.truncated_at());
  EXPECT_EQ(writer.truncated_at()->iteration, 4u);
  EXPECT_EQ(writer.truncated_at()->at_ns, 3'000'000);
  writer.Finish(nullptr);
  EXPECT_EQ(nlohmann::json::parse(ReadText(path_))["otherData"]["records_max"], 2);
}

// One compute slice per rank and iteration 0..5, iteration k from k s to k s + 0.5 s.
void RecordIterations(PerfettoWriter& writer) {
  for (uint64_t k = 0; k < 6; ++k) {
    for (uint32_t rank = 0; rank < 2; ++rank) {
      TraceRecord compute;
      compute.kind = TraceKind::kCompute;
      compute.rank = rank;
      compute.iteration = k;
      compute.start_ns = static_cast<int64_t>(k) * 1'000'000'000;
      compute.end_ns = compute.start_ns + 500'000'000;
      writer.Record(compute);
    }
  }
}

std::vector<uint64_t> SliceIterations(const nlohmann::json& json) {
  std::vector<uint64_t> out;
  for (const auto& event : json["traceEvents"]) {
    if (event["ph"] == "X") out.push_back(event["args"]["iteration"]);
  }
  return out;
}

TEST_F(PerfettoWriterTest, AnIterationWindowKeepsOnlyItsIterations) {
  PerfettoWindow window;
  window.first_iteration = 2;
  window.last_iteration = 3;
  {
    PerfettoWriter writer(path_, PerfettoWriter::kRecordsMaxDefault, window);
    RecordIterations(writer);
    EXPECT_EQ(writer.records_written(), 4u);
    EXPECT_EQ(writer.records_outside_window(), 8u);
    writer.Finish(nullptr);
  }
  const auto json = nlohmann::json::parse(ReadText(path_));
  EXPECT_EQ(SliceIterations(json), (std::vector<uint64_t>{2, 2, 3, 3}));
  EXPECT_EQ(json["otherData"]["window"]["iterations"], nlohmann::json({2, 3}));
  EXPECT_EQ(json["otherData"]["records_outside_window"], 8);
  EXPECT_EQ(json["otherData"]["truncated_records"], 0);
}

TEST_F(PerfettoWriterTest, ATimeWindowKeepsWhatEndsInIt) {
  PerfettoWindow window;
  window.from_ns = 4'200'000'000;  // iteration 4 ends at 4.5 s: in; 3 ends at 3.5 s: out
  {
    PerfettoWriter writer(path_, PerfettoWriter::kRecordsMaxDefault, window);
    RecordIterations(writer);
    writer.Finish(nullptr);
  }
  const auto json = nlohmann::json::parse(ReadText(path_));
  EXPECT_EQ(SliceIterations(json), (std::vector<uint64_t>{4, 4, 5, 5}));
  EXPECT_EQ(json["otherData"]["window"]["from_ns"], 4'200'000'000);
}

TEST_F(PerfettoWriterTest, TheLimitCountsOnlyRecordsInTheWindow) {
  PerfettoWindow window;
  window.first_iteration = 1;
  window.last_iteration = 5;
  PerfettoWriter writer(path_, /*records_max=*/3, window);
  RecordIterations(writer);
  EXPECT_EQ(writer.records_written(), 3u);
  EXPECT_EQ(writer.records_outside_window(), 2u);
  EXPECT_EQ(writer.records_truncated(), 7u);
  ASSERT_TRUE(writer.truncated_at());
  EXPECT_EQ(writer.truncated_at()->iteration, 2u);  // rank 1's slice of iteration 2
  EXPECT_EQ(writer.truncated_at()->at_ns, 2'000'000'000);
  writer.Finish(nullptr);
}

TEST_F(PerfettoWriterTest, AnUnfinishedWriterLeavesNoFile) {
  {
    PerfettoWriter writer(path_);
    RecordSample(writer);
    EXPECT_TRUE(fs::exists(path_ + ".tmp"));
  }
  EXPECT_FALSE(fs::exists(path_));
  EXPECT_FALSE(fs::exists(path_ + ".tmp"));
  EXPECT_TRUE(fs::is_empty(directory_));
}

TEST_F(PerfettoWriterTest, ManyRecordsStreamThroughTheBuffer) {
  constexpr int kRecords = 20'000;  // several buffer flushes
  {
    PerfettoWriter writer(path_);
    for (int i = 0; i < kRecords; ++i) {
      TraceRecord record;
      record.kind = TraceKind::kCompute;
      record.rank = static_cast<uint32_t>(i % 3);
      record.start_ns = int64_t{i} * 1000;
      record.end_ns = record.start_ns + 999;
      record.iteration = static_cast<uint64_t>(i);
      writer.Record(record);
    }
    writer.Finish(nullptr);
  }
  const auto json = nlohmann::json::parse(ReadText(path_));
  int slices = 0;
  for (const auto& event : json["traceEvents"]) slices += event["ph"] == "X";
  EXPECT_EQ(slices, kRecords);
}

TEST_F(PerfettoWriterTest, OddTextStaysValidJson) {
  {
    PerfettoWriter writer(path_);
    const std::string odd = "tab\tquote\"back\\slash bad\xff utf8 \x01";
    TraceRecord record;
    record.kind = TraceKind::kRankDied;
    record.rank = 3;
    record.text = odd;
    writer.Record(record);
    writer.Finish(nullptr);
  }
  const auto json = nlohmann::json::parse(ReadText(path_));
  const auto* died = FindEvent(json["traceEvents"], "i", "rank died", 3);
  ASSERT_NE(died, nullptr);
  const std::string text = (*died)["args"]["text"];
  EXPECT_EQ(text.rfind("tab\tquote\"back\\slash bad", 0), 0u) << text;
  EXPECT_NE(text.find("\xef\xbf\xbd"), std::string::npos) << text;  // U+FFFD for the bad byte
  EXPECT_EQ(text.back(), '\x01');
}

TEST_F(PerfettoWriterTest, AnUnwritableDirectoryNamesThePath) {
  const std::string bad = (directory_ / "missing" / "timeline.json").string();
  try {
    PerfettoWriter writer(bad);
    FAIL() << "opened";
  } catch (const ScenarioError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find(bad), std::string::npos) << message;
    EXPECT_NE(message.find("No such file or directory"), std::string::npos) << message;
  }
}

// A simulated run's timeline: on every track, slices nest or follow one another (Perfetto and
// chrome://tracing draw overlapping slices of one track wrongly), and the hang is there.
TEST_F(PerfettoWriterTest, ASimulatedRunNestsOnEveryTrack) {
  Scenario scenario = LoadScenarioFile(std::string(PETRSIM_SOURCE_DIR) + "/scenarios/streampetr_trainval_hang.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "test");
  PerfettoWriter writer(path_);
  sim::SimOptions options;
  options.trace = &writer;
  const sim::SimResult result = sim::Simulate(scenario, dataset, options);
  ASSERT_EQ(result.outcome, Outcome::kHang);
  writer.Finish(nullptr);

  const nlohmann::json timeline = nlohmann::json::parse(ReadText(path_));
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> tracks;
  int hung = 0, async_slices = 0;
  for (const auto& event : timeline["traceEvents"]) {
    if (event["ph"] != "X") continue;
    // Microseconds with 3 decimals: back to integer nanoseconds.
    const auto start = static_cast<int64_t>(std::llround(event["ts"].get<double>() * 1000));
    const auto end = start + static_cast<int64_t>(std::llround(event["dur"].get<double>() * 1000));
    tracks[{event["pid"].get<int64_t>(), event["tid"].get<int64_t>()}].emplace_back(start, -end);
    const std::string name = event["name"];
    hung += name.rfind("HUNG: ", 0) == 0;
    async_slices += event["tid"].get<int64_t>() >= PerfettoWriter::kAsyncCollectivesTid &&
                    event["tid"].get<int64_t>() < PerfettoWriter::kAsyncCollectivesTid + PerfettoWriter::kAsyncLanes;
  }
  EXPECT_EQ(hung, 3);  // every waiting rank's last collective: ranks 0, 2 and 3 (rank 1 is stuck)
  EXPECT_GT(async_slices, 1000);
  for (auto& [track, slices] : tracks) {
    std::sort(slices.begin(), slices.end());  // by start, then the longest first
    std::vector<int64_t> open_ends;
    for (const auto& [start, negative_end] : slices) {
      const int64_t end = -negative_end;
      while (!open_ends.empty() && open_ends.back() <= start) open_ends.pop_back();
      ASSERT_TRUE(open_ends.empty() || end <= open_ends.back())
          << "rank " << track.first << " track " << track.second << ": a slice from " << start << " to " << end
          << " ns overlaps one ending at " << open_ends.back();
      open_ends.push_back(end);
    }
  }
}

}  // namespace
}  // namespace petrsim
