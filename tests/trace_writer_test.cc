// Per-rank trace files: records come back from ReadRankTrace as they went in, in order, with
// the header; truncated and corrupt files fail with the file and the byte offset; an
// unfinished writer leaves no files.
#include "trace/directory_writer.h"
#include "trace/rank_writer.h"
#include "trace/reader.h"
#include "trace/trace_event.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "base/error.h"
#include "cli/plan_command.h"
#include "replay/diagnose.h"
#include "replay/replay.h"
#include "tests/scenario_text.h"

namespace petrsim {
namespace {

namespace fs = std::filesystem;

class TraceWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ =
        fs::temp_directory_path() / (std::string("petrsim_trace_") + info->name() + "_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    directory_ = (root_ / "trace").string();  // created by the writer
    scenario_ = testing::ShippedScenario("tiny.pbtxt");
  }
  void TearDown() override { fs::remove_all(root_); }

  static std::string ReadBytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
  }
  static void WriteBytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << bytes;
  }
  // The message of the ScenarioError that reading `path` throws ("" if it reads).
  static std::string ReadError(const std::string& path) {
    try {
      ReadRankTrace(path);
    } catch (const ScenarioError& error) {
      return error.what();
    }
    return "";
  }

  fs::path root_;
  std::string directory_;
  Scenario scenario_;
};

// Records of every kind, with strings that live only as long as the call.
std::vector<TraceRecord> SampleRecords(std::vector<std::string>& strings) {
  strings = {"default_pg", "reduce_mean(loss)", "watchdog line \"quoted\""};
  std::vector<TraceRecord> records;
  TraceRecord load;
  load.kind = TraceKind::kLoad;
  load.rank = 1;
  load.worker = 3;
  load.start_ns = 100;
  load.end_ns = 250;
  load.iteration = 5;
  load.slot = 1;
  load.index = 40;
  load.final_index = 38;
  load.attempts = 4;
  records.push_back(load);
  TraceRecord wait;
  wait.kind = TraceKind::kDataWait;
  wait.rank = 0;
  wait.start_ns = 0;
  wait.end_ns = 90;
  records.push_back(wait);
  TraceRecord collective;
  collective.kind = TraceKind::kCollective;
  collective.rank = 1;
  collective.start_ns = 300;
  collective.end_ns = 1'800'000'000'300;
  collective.iteration = 5;
  collective.process_group = strings[0];
  collective.seq = 12;
  collective.op = Collective::allgather;
  collective.numel = 256;
  collective.completed = false;
  collective.text = strings[1];
  records.push_back(collective);
  TraceRecord compute;
  compute.kind = TraceKind::kCompute;
  compute.rank = 1;
  compute.start_ns = 260;
  compute.end_ns = 300;
  compute.iteration = 5;
  records.push_back(compute);
  TraceRecord watchdog;
  watchdog.kind = TraceKind::kWatchdog;
  watchdog.rank = 1;
  watchdog.start_ns = watchdog.end_ns = 1'800'000'000'300;
  watchdog.text = strings[2];
  records.push_back(watchdog);
  TraceRecord livelock;
  livelock.kind = TraceKind::kLivelock;
  livelock.rank = 0;
  livelock.worker = 0;
  livelock.start_ns = livelock.end_ns = 70;
  livelock.index = 9;
  livelock.final_index = 11;
  records.push_back(livelock);
  return records;
}

// Records of the kinds the post-mortem issue added, each field away from its default.
std::vector<TraceRecord> MoreRecords(std::vector<std::string>& strings) {
  strings = {"default_pg", "finished its iterations (exit 0)"};
  std::vector<TraceRecord> records;
  TraceRecord collective;
  collective.kind = TraceKind::kCollective;
  collective.rank = 1;
  collective.start_ns = 300;
  collective.end_ns = 400;
  collective.process_group = strings[0];
  collective.seq = 12;
  collective.completed = false;  // a load or collective still pending at the end
  records.push_back(collective);
  TraceRecord draw;
  draw.kind = TraceKind::kSamplerDraw;
  draw.rank = 1;
  draw.start_ns = draw.end_ns = 20;
  draw.iteration = 6;
  draw.slot = 1;
  draw.index = 77;
  draw.group = 13;
  records.push_back(draw);
  TraceRecord attempt;
  attempt.kind = TraceKind::kGetItemAttempt;
  attempt.rank = 1;
  attempt.worker = 2;
  attempt.start_ns = attempt.end_ns = 30;
  attempt.index = 77;
  attempt.final_index = 75;
  attempt.gt_count = 0;  // rejected: no GT
  attempt.attempts = 1;
  records.push_back(attempt);
  TraceRecord accepted = attempt;
  accepted.index = 75;
  accepted.final_index = -1;
  accepted.gt_count = 4;
  accepted.accepted = true;
  accepted.attempts = 2;
  records.push_back(accepted);
  TraceRecord ready;
  ready.kind = TraceKind::kBatchReady;
  ready.rank = 0;
  ready.worker = 1;
  ready.start_ns = ready.end_ns = 40;
  ready.iteration = 6;
  records.push_back(ready);
  TraceRecord started = collective;
  started.completed = true;
  started.started_ns = 310;
  started.dtype = Collective::int64;
  records.push_back(started);
  TraceRecord exit;
  exit.kind = TraceKind::kProcessExit;
  exit.rank = 0;
  exit.start_ns = exit.end_ns = 2000;
  exit.text = strings[1];
  records.push_back(exit);
  return records;
}

void ExpectSameRecord(const TraceRecord& a, const TraceRecord& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.rank, b.rank);
  EXPECT_EQ(a.worker, b.worker);
  EXPECT_EQ(a.start_ns, b.start_ns);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.iteration, b.iteration);
  EXPECT_EQ(a.slot, b.slot);
  EXPECT_EQ(a.index, b.index);
  EXPECT_EQ(a.final_index, b.final_index);
  EXPECT_EQ(a.attempts, b.attempts);
  EXPECT_EQ(a.process_group, b.process_group);
  EXPECT_EQ(a.seq, b.seq);
  EXPECT_EQ(a.op, b.op);
  EXPECT_EQ(a.numel, b.numel);
  EXPECT_EQ(a.completed, b.completed);
  EXPECT_EQ(a.text, b.text);
  EXPECT_EQ(a.dtype, b.dtype);
  EXPECT_EQ(a.started_ns, b.started_ns);
  EXPECT_EQ(a.group, b.group);
  EXPECT_EQ(a.gt_count, b.gt_count);
  EXPECT_EQ(a.accepted, b.accepted);
}

TEST_F(TraceWriterTest, RecordsRoundTripWithTheHeaderInOrder) {
  std::vector<std::string> strings;
  const std::vector<TraceRecord> records = SampleRecords(strings);
  {
    TraceDirectoryWriter writer(directory_, scenario_, "scenarios/tiny.pbtxt", 3, "sim", "test-build");
    for (const auto& record : records) writer.Record(record);
    writer.Finish();
  }
  std::vector<TraceRecord> expected[3];
  for (const auto& record : records) expected[record.rank].push_back(record);
  for (uint32_t rank = 0; rank < 3; ++rank) {
    SCOPED_TRACE(rank);
    const std::string path = RankTracePath(directory_, rank);
    EXPECT_EQ(path, directory_ + "/rank_" + std::to_string(rank) + ".pbtrace");
    EXPECT_FALSE(fs::exists(path + ".tmp"));
    const RankTrace trace = ReadRankTrace(path);
    EXPECT_EQ(trace.header.format_version(), kTraceFormatVersion);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(trace.header.scenario(), scenario_));
    EXPECT_EQ(trace.header.scenario_path(), "scenarios/tiny.pbtxt");
    EXPECT_EQ(trace.header.seed(), scenario_.seed());
    EXPECT_TRUE(trace.header.has_rank());
    EXPECT_EQ(trace.header.rank(), rank);
    EXPECT_EQ(trace.header.world_size(), 3u);
    EXPECT_EQ(trace.header.backend(), "sim");
    EXPECT_EQ(trace.header.build_id(), "test-build");
    EXPECT_EQ(trace.header.clock(), "virtual");
    // Rank 2 recorded nothing: its file holds the header alone.
    ASSERT_EQ(trace.events.size(), expected[rank].size());
    for (size_t i = 0; i < trace.events.size(); ++i) {
      SCOPED_TRACE(i);
      ExpectSameRecord(ToTraceRecord(trace.events[i], rank), expected[rank][i]);
    }
  }
  // Defaults stay off the wire: a main-process data wait carries no worker.
  const RankTrace rank0 = ReadRankTrace(RankTracePath(directory_, 0));
  EXPECT_FALSE(rank0.events[0].has_worker());
  EXPECT_TRUE(rank0.events[0].has_kind());
  EXPECT_TRUE(rank0.events[0].has_start_ns());
}

TEST_F(TraceWriterTest, NewKindsAndFieldsRoundTrip) {
  std::vector<std::string> strings;
  const std::vector<TraceRecord> records = MoreRecords(strings);
  {
    TraceDirectoryWriter writer(directory_, scenario_, "tiny.pbtxt", 2, "sim", "b");
    for (const auto& record : records) writer.Record(record);
    writer.Finish();
  }
  std::vector<RankTrace> traces = {ReadRankTrace(RankTracePath(directory_, 0)),
                                   ReadRankTrace(RankTracePath(directory_, 1))};
  size_t next[2] = {0, 0};
  for (const auto& record : records) {
    const auto& events = traces[record.rank].events;
    ASSERT_LT(next[record.rank], events.size());
    ExpectSameRecord(ToTraceRecord(events[next[record.rank]++], record.rank), record);
  }
  EXPECT_EQ(next[0], traces[0].events.size());
  EXPECT_EQ(next[1], traces[1].events.size());
}

TEST_F(TraceWriterTest, ManyRecordsOverManyRanksKeepTheirOrder) {
  // Enough to append each rank's buffer several times.
  constexpr uint32_t kRanks = 4;
  constexpr int kRecords = 40'000;
  {
    TraceDirectoryWriter writer(directory_, scenario_, "tiny.pbtxt", kRanks, "gloo", "b");
    for (int i = 0; i < kRecords; ++i) {
      TraceRecord record;
      record.kind = TraceKind::kCompute;
      record.rank = static_cast<uint32_t>(i) % kRanks;
      record.start_ns = i;
      record.end_ns = int64_t{i} + 7;
      record.iteration = static_cast<uint64_t>(i);
      writer.Record(record);
    }
    EXPECT_EQ(writer.records_written(), static_cast<uint64_t>(kRecords));
    writer.Finish();
  }
  for (uint32_t rank = 0; rank < kRanks; ++rank) {
    const RankTrace trace = ReadRankTrace(RankTracePath(directory_, rank));
    EXPECT_EQ(trace.header.clock(), "steady");
    ASSERT_EQ(trace.events.size(), kRecords / kRanks);
    for (size_t i = 0; i < trace.events.size(); ++i) {
      ASSERT_EQ(trace.events[i].iteration(), i * kRanks + rank);
    }
  }
}

TEST_F(TraceWriterTest, RecordsPastTheLimitEndEachFileWithATruncatedEvent) {
  std::vector<std::string> strings;
  {
    TraceDirectoryWriter writer(directory_, scenario_, "tiny.pbtxt", 2, "sim", "b",
                                /*records_max=*/2);
    for (const auto& record : SampleRecords(strings)) writer.Record(record);
    EXPECT_EQ(writer.records_written(), 2u);
    EXPECT_EQ(writer.records_truncated(), 4u);
    writer.Finish();
  }
  // Written: rank 1's load, rank 0's wait. Dropped: three of rank 1, one of rank 0.
  const RankTrace rank0 = ReadRankTrace(RankTracePath(directory_, 0));
  ASSERT_EQ(rank0.events.size(), 2u);
  EXPECT_EQ(rank0.events[0].kind(), TraceEventKind::data_wait);
  EXPECT_EQ(rank0.events[1].kind(), TraceEventKind::truncated);
  EXPECT_EQ(rank0.events[1].records_dropped(), 1u);
  const RankTrace rank1 = ReadRankTrace(RankTracePath(directory_, 1));
  ASSERT_EQ(rank1.events.size(), 2u);
  EXPECT_EQ(rank1.events[1].kind(), TraceEventKind::truncated);
  EXPECT_EQ(rank1.events[1].records_dropped(), 3u);
}

TEST_F(TraceWriterTest, ATruncatedFileNamesTheFileTheMessageAndTheOffset) {
  std::vector<std::string> strings;
  {
    TraceDirectoryWriter writer(directory_, scenario_, "tiny.pbtxt", 2, "sim", "b");
    for (const auto& record : SampleRecords(strings)) writer.Record(record);
    writer.Finish();
  }
  const std::string path = RankTracePath(directory_, 1);
  const std::string bytes = ReadBytes(path);
  const RankTrace whole = ReadRankTrace(path);
  ASSERT_EQ(whole.events.size(), 4u);
  const size_t last_size = whole.events.back().ByteSizeLong();
  const size_t last_offset = bytes.size() - last_size - 1;  // a one-byte length prefix

  // Cut inside the last event.
  const std::string cut = root_.string() + "/cut.pbtrace";
  WriteBytes(cut, bytes.substr(0, bytes.size() - 2));
  std::string message = ReadError(cut);
  EXPECT_NE(message.find(cut), std::string::npos) << message;
  EXPECT_NE(message.find("message 4 (a TraceEvent) at byte " + std::to_string(last_offset)), std::string::npos)
      << message;
  EXPECT_NE(message.find("truncated"), std::string::npos) << message;

  // Cut inside the header's length prefix (the header is longer than 127 bytes).
  WriteBytes(cut, bytes.substr(0, 1));
  message = ReadError(cut);
  EXPECT_NE(message.find("message 0 (the TraceHeader) at byte 0"), std::string::npos) << message;

  // Cut right after the length prefix of the last event.
  WriteBytes(cut, bytes.substr(0, last_offset + 1));
  message = ReadError(cut);
  EXPECT_NE(message.find("at byte " + std::to_string(last_offset)), std::string::npos) << message;

  // Cut between messages: a shorter but valid trace.
  WriteBytes(cut, bytes.substr(0, last_offset));
  EXPECT_EQ(ReadRankTrace(cut).events.size(), 3u);
}

TEST_F(TraceWriterTest, CorruptEmptyAndNewerFilesAreRefused) {
  const std::string path = root_.string() + "/bad.pbtrace";
  fs::create_directories(root_);
  WriteBytes(path, "");
  EXPECT_NE(ReadError(path).find("empty"), std::string::npos) << ReadError(path);

  // A length prefix with a message of bytes that do not parse (an end-group tag).
  WriteBytes(path, std::string("\x02\x0c\x00", 3));
  EXPECT_NE(ReadError(path).find("corrupt"), std::string::npos) << ReadError(path);

  WriteBytes(path, std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x7f", 9));
  EXPECT_NE(ReadError(path).find("corrupt"), std::string::npos) << ReadError(path);

  TraceHeader header;
  header.set_format_version(kTraceFormatVersion + 1);
  const std::string body = header.SerializeAsString();
  WriteBytes(path, std::string(1, static_cast<char>(body.size())) + body);
  EXPECT_NE(ReadError(path).find("format_version 2"), std::string::npos) << ReadError(path);

  // Issue 33, point 6: a trace cut before its first event (no header) is not "a newer format": the
  // event's kind (collective = 3) reads as format_version 3, its other fields with other wire types.
  TraceEvent event;
  event.set_kind(TraceEventKind::collective);
  event.set_start_ns(5);
  const std::string event_body = event.SerializeAsString();
  WriteBytes(path, std::string(1, static_cast<char>(event_body.size())) + event_body);
  EXPECT_NE(ReadError(path).find("bad.pbtrace: not a petrsim trace: expected its header first"), std::string::npos)
      << ReadError(path);

  EXPECT_NE(ReadError(root_.string() + "/missing.pbtrace").find("missing.pbtrace: cannot open"), std::string::npos);
}

TEST_F(TraceWriterTest, AnUnfinishedWriterLeavesNoFiles) {
  {
    TraceDirectoryWriter writer(directory_, scenario_, "tiny.pbtxt", 2, "sim", "b");
    // Enough for rank 0's buffer to be appended to its tmp file.
    for (int i = 0; i < 20'000; ++i) {
      TraceRecord record;
      record.kind = TraceKind::kCompute;
      record.start_ns = i;
      record.end_ns = i;
      writer.Record(record);
    }
    EXPECT_TRUE(fs::exists(RankTracePath(directory_, 0) + ".tmp"));
  }
  EXPECT_TRUE(fs::is_directory(directory_));
  EXPECT_TRUE(fs::is_empty(directory_));
}

TEST_F(TraceWriterTest, ADirectoryThatCannotBeCreatedIsNamed) {
  fs::create_directories(root_);
  WriteBytes(root_.string() + "/file", "x");
  const std::string bad = root_.string() + "/file/trace";
  try {
    TraceDirectoryWriter writer(bad, scenario_, "tiny.pbtxt", 2, "sim", "b");
    FAIL() << "created";
  } catch (const ScenarioError& error) {
    EXPECT_NE(std::string(error.what()).find(bad), std::string::npos) << error.what();
  }
}

// Writes `bad` as the scenario of a one-rank trace in `directory` and expects plan, diagnose and replay
// to refuse it, naming the header and saying `expected`.
void ExpectHeaderRefused(const std::string& directory, const Scenario& bad, const std::string& expected) {
  {
    TraceDirectoryWriter writer(directory, bad, "bad.pbtxt", 1, "sim", "b");
    writer.Finish();
  }
  const std::string rank0 = RankTracePath(directory, 0);
  const auto expect_refused = [&](const std::function<void()>& call, const char* what) {
    try {
      call();
      ADD_FAILURE() << what << " accepted the header's scenario";
    } catch (const ScenarioError& error) {
      const std::string message = error.what();
      EXPECT_NE(message.find(rank0 + " (the scenario in its header)"), std::string::npos) << what << ": " << message;
      EXPECT_NE(message.find(expected), std::string::npos) << what << ": " << message;
    }
  };
  expect_refused([&] { LoadPlanScenario(directory, {}); }, "plan");
  expect_refused([&] { LoadRecordings({directory}); }, "diagnose");
  expect_refused([&] { LoadRecordedJob(directory); }, "replay");
}

// A trace header's scenario is input like a scenario file: plan, diagnose and replay validate it
// before expanding its plan (a grad_ready_order out of range would index past the parameters).
TEST_F(TraceWriterTest, AnInvalidScenarioInTheHeaderIsRefusedByPlanDiagnoseAndReplay) {
  Scenario bad = testing::ScenarioFromText(R"(
    dataset { subdatasets { name: "d" explicit { scenes { gt_counts: [1, 1, 1, 1] } scenes { gt_counts: [1, 1, 1, 1] } } } }
    job { world_size: 1 samples_per_gpu: 1 workers_per_gpu: 0 iterations: 2 }
    plan { custom {} ddp { tensors { name: "w" shape: [4] } } }
  )");
  bad.mutable_plan()->mutable_ddp()->add_grad_ready_order(4'000'000'000u);  // as a hostile file could hold it
  ExpectHeaderRefused(directory_, bad, "plan.ddp.grad_ready_order[0]: must be < 1");
}

// Issue 33, point 2: a size in the header that would expand the plan beyond memory (4e9 loss terms
// ended in bad_alloc near 6 GB in plan TRACE and replay --against sim) is refused with an estimate.
TEST_F(TraceWriterTest, AnUnboundedSizeInTheHeaderIsRefusedBeforeThePlanIsExpanded) {
  Scenario bad = testing::ScenarioFromText(R"(
    dataset { subdatasets { name: "d" explicit { scenes { gt_counts: [1, 1, 1, 1] } scenes { gt_counts: [1, 1, 1, 1] } } } }
    job { world_size: 1 samples_per_gpu: 1 workers_per_gpu: 0 iterations: 2 }
  )");
  bad.mutable_plan()->mutable_streampetr()->set_focal_head_loss_terms(4'000'000'000u);
  ExpectHeaderRefused(directory_, bad,
                      "plan.streampetr.focal_head_loss_terms: must be <= 1000 (one all-reduce per term in every "
                      "iteration: the plan would hold about 596.0 GiB for them), got 4000000000");
}

// The fast decoder (ScanTraceEvents) and protobuf's parser (ForEachTraceEvent) read every
// event of every kind alike, including a field from a later format that both skip.
TEST_F(TraceWriterTest, TheFastScanReadsWhatProtobufReads) {
  std::vector<std::string> strings_a, strings_b;
  std::vector<TraceRecord> records = SampleRecords(strings_a);
  for (const auto& record : MoreRecords(strings_b)) records.push_back(record);
  {
    TraceDirectoryWriter writer(directory_, scenario_, "tiny.pbtxt", 2, "sim", "b");
    for (const auto& record : records) writer.Record(record);
    writer.Finish();
  }
  // Append an event with a field number no reader knows (a later format's).
  const std::string path = RankTracePath(directory_, 1);
  {
    TraceEvent later;
    later.set_kind(TraceEventKind::iteration);
    later.set_start_ns(5);
    later.set_end_ns(6);
    later.set_loader(3);  // a second DataLoader's (the probe's field 22)
    std::string body = later.SerializeAsString();
    body += std::string("\xd0\x06\x2a", 3);  // field 106, varint 42
    std::string bytes = ReadBytes(path);
    bytes += static_cast<char>(body.size());
    bytes += body;
    WriteBytes(path, bytes);
  }
  for (uint32_t r = 0; r < 2; ++r) {
    std::vector<TraceEvent> slow;
    ForEachTraceEvent(
        RankTracePath(directory_, r), [&](const TraceEvent& e) { slow.push_back(e); }, nullptr);
    size_t i = 0;
    ScanTraceEvents(
        RankTracePath(directory_, r),
        [&](const TraceEventView& v) {
          ASSERT_LT(i, slow.size());
          const TraceEvent& e = slow[i++];
          EXPECT_EQ(v.kind, e.kind());
          EXPECT_EQ(v.worker, e.worker());
          EXPECT_EQ(v.start_ns, e.start_ns());
          EXPECT_EQ(v.end_ns, e.end_ns());
          EXPECT_EQ(v.iteration, e.iteration());
          EXPECT_EQ(v.slot, e.slot());
          EXPECT_EQ(v.index, e.index());
          EXPECT_EQ(v.final_index, e.final_index());
          EXPECT_EQ(v.attempts, e.attempts());
          EXPECT_EQ(v.process_group, e.process_group());
          EXPECT_EQ(v.seq, e.seq());
          EXPECT_EQ(v.op, e.op());
          EXPECT_EQ(v.numel, e.numel());
          EXPECT_EQ(v.completed, e.completed());
          EXPECT_EQ(v.text, e.text());
          EXPECT_EQ(v.records_dropped, e.records_dropped());
          EXPECT_EQ(v.dtype, e.dtype());
          EXPECT_EQ(v.started_ns, e.started_ns());
          EXPECT_EQ(v.group, e.group());
          EXPECT_EQ(v.gt_count, e.gt_count());
          EXPECT_EQ(v.accepted, e.accepted());
          EXPECT_EQ(v.loader, e.loader());
        },
        nullptr);
    EXPECT_EQ(i, slow.size());
  }
  // A cut file: the same prefix and the same error.
  const std::string cut = root_.string() + "/cut.pbtrace";
  const std::string bytes = ReadBytes(path);
  WriteBytes(cut, bytes.substr(0, bytes.size() - 2));
  std::string slow_error, fast_error;
  size_t slow_count = 0, fast_count = 0;
  ForEachTraceEvent(
      cut, [&](const TraceEvent&) { ++slow_count; }, &slow_error);
  ScanTraceEvents(
      cut, [&](const TraceEventView&) { ++fast_count; }, &fast_error);
  EXPECT_EQ(fast_count, slow_count);
  EXPECT_NE(fast_error.find("truncated"), std::string::npos) << fast_error;
  EXPECT_NE(fast_error.find(cut + ": message "), std::string::npos) << fast_error;
}

// Found by fuzz_trace: tags as protobuf's parser reads them. A 6-byte tag is an error for both
// readers; a 5-byte tag wider than 32 bits wraps to an unknown field both skip.
TEST_F(TraceWriterTest, LongTagsAreReadAsProtobufReadsThem) {
  {
    TraceDirectoryWriter writer(directory_, scenario_, "tiny.pbtxt", 1, "sim", "b");
    writer.Finish();
  }
  const std::string path = RankTracePath(directory_, 0);
  const std::string event(
      "\x08\x00\x10\x01\x18\x90\x92\xd0\x69\xb1\xa8\x9b\x9a\xd2\x01\x28\x03\x38\x13\x40\x13\x48\x01", 23);
  WriteBytes(path, ReadBytes(path) + std::string(1, static_cast<char>(event.size())) + event);
  std::string slow_error, fast_error;
  ForEachTraceEvent(
      path, [](const TraceEvent&) {}, &slow_error);
  ScanTraceEvents(
      path, [](const TraceEventView&) {}, &fast_error);
  EXPECT_NE(slow_error.find("message 1 (a TraceEvent)"), std::string::npos) << slow_error;
  EXPECT_EQ(fast_error, slow_error);

  // kind 3, then a 5-byte tag 90 fe ff ff 7f (wraps to field 536870882, varint) with value b5 01.
  {
    TraceDirectoryWriter writer(directory_, scenario_, "tiny.pbtxt", 1, "sim", "b");
    writer.Finish();
  }
  const std::string wraps("\x08\x03\x90\xfe\xff\xff\x7f\xb5\x01", 9);
  WriteBytes(path, ReadBytes(path) + std::string(1, static_cast<char>(wraps.size())) + wraps);
  size_t slow_count = 0, fast_count = 0;
  slow_error.clear();
  fast_error.clear();
  ForEachTraceEvent(
      path, [&](const TraceEvent&) { ++slow_count; }, &slow_error);
  ScanTraceEvents(
      path,
      [&](const TraceEventView& v) {
        ++fast_count;
        EXPECT_EQ(v.kind, TraceEventKind::collective);
      },
      &fast_error);
  EXPECT_EQ(slow_error, "");
  EXPECT_EQ(fast_error, "");
  EXPECT_EQ(slow_count, 1u);
  EXPECT_EQ(fast_count, 1u);
}

TEST_F(TraceWriterTest, RingModeKeepsTheLastEventsOfEachRankAndCountsTheRest) {
  {
    TraceDirectoryWriter writer(directory_, scenario_, "tiny.pbtxt", 2, "sim", "test",
                                TraceDirectoryWriter::kRecordsMaxDefault, /*ring_events=*/10);
    for (uint64_t i = 0; i < 25; ++i) {
      TraceRecord record;
      record.kind = TraceKind::kIteration;
      record.rank = 0;
      record.start_ns = static_cast<int64_t>(i);
      record.end_ns = static_cast<int64_t>(i + 1);
      record.iteration = i;
      writer.Record(record);
    }
    TraceRecord one;
    one.kind = TraceKind::kIteration;
    one.rank = 1;
    writer.Record(one);
    writer.Finish();
  }
  const RankTrace rank0 = ReadRankTrace(RankTracePath(directory_, 0));
  ASSERT_EQ(rank0.events.size(), 11u);
  EXPECT_EQ(rank0.events[0].kind(), TraceEventKind::truncated);
  EXPECT_EQ(rank0.events[0].records_dropped(), 15u);
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(rank0.events[i + 1].iteration(), 15 + i);
  EXPECT_EQ(ReadRankTrace(RankTracePath(directory_, 1)).events.size(), 1u);
}

// The process writer, in a child process that dies: what a killed or aborted rank leaves.
TraceRecord Iteration(uint64_t i, TraceKind kind = TraceKind::kIteration) {
  TraceRecord record;
  record.kind = kind;
  record.start_ns = static_cast<int64_t>(i);
  record.end_ns = static_cast<int64_t>(i);
  record.iteration = i;
  return record;
}

// Runs `body` in a child process and returns how it ended (the wait status).
template <class Body>
int InChild(Body body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    try {
      body();
    } catch (...) {
      ::_exit(1);  // never run the rest of the suite in the child
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

TEST_F(TraceWriterTest, AStreamingRankKilledWithSigkillLeavesAReadablePrefix) {
  fs::create_directories(root_);
  const std::string path = (root_ / "rank_0.pbtrace").string();
  const int status = InChild([&] {
    RankTraceWriter writer(path, scenario_, "tiny.pbtxt", 0, 2, "gloo", "test", RankTraceWriter::Mode::kStream);
    for (uint64_t i = 0; i < 1000; ++i) writer.Record(Iteration(i));
    writer.Record(Iteration(1000, TraceKind::kCollective));              // flushed at once
    for (uint64_t i = 1001; i < 1010; ++i) writer.Record(Iteration(i));  // still buffered
    ::kill(::getpid(), SIGKILL);
  });
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  std::string partial;
  const RankTrace trace = ReadRankTrace(path, &partial);
  EXPECT_EQ(partial, "");
  EXPECT_EQ(trace.header.rank(), 0u);
  EXPECT_EQ(trace.header.backend(), "gloo");
  ASSERT_EQ(trace.events.size(), 1001u);  // every event up to the collective
  for (uint64_t i = 0; i <= 1000; ++i) EXPECT_EQ(trace.events[i].iteration(), i);
}

TEST_F(TraceWriterTest, ARingRankDumpsItsLastEventsOnSigabrtAndSigterm) {
  fs::create_directories(root_);
  for (const int signal : {SIGABRT, SIGTERM}) {
    const std::string path = (root_ / ("rank_1_" + std::to_string(signal) + ".pbtrace")).string();
    const int status = InChild([&] {
      RankTraceWriter writer(path, scenario_, "tiny.pbtxt", 1, 2, "nccl", "test", RankTraceWriter::Mode::kRing, 100);
      RankTraceWriter::InstallSignalDump(&writer);
      for (uint64_t i = 0; i < 10000; ++i) writer.Record(Iteration(i));
      ::raise(signal);
    });
    ASSERT_TRUE(WIFSIGNALED(status)) << signal;
    EXPECT_EQ(WTERMSIG(status), signal);
    const RankTrace trace = ReadRankTrace(path);
    EXPECT_EQ(trace.header.rank(), 1u);
    ASSERT_EQ(trace.events.size(), 101u) << signal;
    EXPECT_EQ(trace.events[0].kind(), TraceEventKind::truncated);
    EXPECT_EQ(trace.events[0].records_dropped(), 9900u);
    for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(trace.events[i + 1].iteration(), 9900 + i);
    EXPECT_FALSE(fs::exists(path + ".tmp"));
  }
}

TEST_F(TraceWriterTest, ARingRankDumpsAtExitAndOnDemand) {
  fs::create_directories(root_);
  const std::string path = (root_ / "rank_0.pbtrace").string();
  {
    RankTraceWriter writer(path, scenario_, "tiny.pbtxt", 0, 1, "gloo", "test", RankTraceWriter::Mode::kRing, 3);
    for (uint64_t i = 0; i < 5; ++i) writer.Record(Iteration(i));
    ASSERT_TRUE(writer.Dump());                        // the watchdog fired
    EXPECT_EQ(ReadRankTrace(path).events.size(), 4u);  // the truncated event, then 3
    writer.Record(Iteration(5));
    // A long text is shortened to fit its slot; the event stays readable.
    TraceRecord watchdog = Iteration(6, TraceKind::kWatchdog);
    const std::string line(5000, 'w');
    watchdog.text = line;
    writer.Record(watchdog);
  }  // exit
  const RankTrace trace = ReadRankTrace(path);
  ASSERT_EQ(trace.events.size(), 4u);
  EXPECT_EQ(trace.events[0].kind(), TraceEventKind::truncated);
  EXPECT_EQ(trace.events[0].records_dropped(), 4u);
  EXPECT_EQ(trace.events[1].iteration(), 4u);
  EXPECT_EQ(trace.events[2].iteration(), 5u);
  EXPECT_EQ(trace.events[3].kind(), TraceEventKind::watchdog);
  EXPECT_GT(trace.events[3].text().size(), 400u);
  EXPECT_LT(trace.events[3].text().size(), RankTraceWriter::kRingSlotBytes);
  EXPECT_THROW(RankTraceWriter("/nonexistent-dir/rank_0.pbtrace", scenario_, "tiny.pbtxt", 0, 1, "gloo", "test",
                               RankTraceWriter::Mode::kStream),
               ScenarioError);
}

}  // namespace
}  // namespace petrsim
