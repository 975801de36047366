// `petrsim diagnose` on the probe's `stall` events (replay/diagnose_stall.h): traces written here event by event, as
// the probe writes them (a rank file of length-delimited messages, a TraceHeader first).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <google/protobuf/util/delimited_message_util.h>
#include <nlohmann/json.hpp>

#include "proto/trace.pb.h"
#include "replay/diagnose.h"
#include "trace/trace_event.h"

namespace petrsim {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kSecond = 1'000'000'000;
constexpr int64_t kStart = 7'000 * kSecond;  // a steady clock's raw value
const char* const kStack =
    "/usr/lib/python3/dist-packages/torch/utils/data/_utils/worker.py:302 in _worker_loop\n"
    "/usr/lib/python3/dist-packages/torch/utils/data/_utils/fetch.py:58 in <listcomp>\n"
    "/job/stall_job.py:52 in __getitem__";

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("petrsim_diagnose_stall_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

struct RankFile {
  uint32_t rank = 0;
  std::vector<TraceEvent> events;
};

TraceEvent Event(TraceEventKind kind, int64_t start, int64_t end) {
  TraceEvent e;
  e.set_kind(kind);
  e.set_start_ns(kStart + start);
  e.set_end_ns(kStart + end);
  return e;
}

// Collectives 1..`completed` done (iteration 0, 1, ...); `pending`: one more issued and never completed.
void Collectives(RankFile& file, int completed, bool pending) {
  for (int seq = 1; seq <= completed + (pending ? 1 : 0); ++seq) {
    TraceEvent e = Event(TraceEventKind::collective, seq * kSecond / 10, seq * kSecond / 10 + 1000);
    e.set_process_group("default_pg");
    e.set_seq(seq);
    e.set_iteration(seq - 1);
    e.set_numel(1);
    if (seq > completed) {
      e.set_completed(false);
      e.set_end_ns(kStart + 9 * kSecond);
    }
    file.events.push_back(e);
  }
}

TraceEvent Stall(int32_t worker, uint64_t batch, uint32_t slot, int64_t index, int64_t start, const char* stack) {
  TraceEvent e = Event(TraceEventKind::stall, start, start + kSecond);
  e.set_worker(worker);
  e.set_iteration(batch);
  e.set_slot(slot);
  e.set_index(index);
  e.set_text(stack);
  return e;
}

TraceEvent Load(int32_t worker, uint64_t batch, uint32_t slot, int64_t index, int64_t start, int64_t end,
                bool completed) {
  TraceEvent e = Event(TraceEventKind::load, start, end);
  e.set_worker(worker);
  e.set_iteration(batch);
  e.set_slot(slot);
  e.set_index(index);
  e.set_attempts(1);
  if (completed) e.set_final_index(index);
  e.set_completed(completed);
  return e;
}

TraceEvent Exit(const char* text, int64_t at) {
  TraceEvent e = Event(TraceEventKind::process_exit, at, at);
  e.set_text(text);
  return e;
}

std::string Write(const fs::path& dir, const std::vector<RankFile>& files) {
  for (const RankFile& file : files) {
    std::ofstream out(RankTracePath(dir.string(), file.rank), std::ios::binary);
    TraceHeader header;
    header.set_format_version(kTraceFormatVersion);
    header.set_rank(file.rank);
    header.set_world_size(static_cast<uint32_t>(files.size()));
    header.set_backend("gloo");
    header.set_build_id("petrsim_probe test");
    header.set_clock("steady");
    google::protobuf::util::SerializeDelimitedToOstream(header, &out);
    for (const TraceEvent& e : file.events) google::protobuf::util::SerializeDelimitedToOstream(e, &out);
  }
  return dir.string();
}

// Rank 0 waits in seq 3 (iteration 2); rank 1 never issued it (times from its first event, at 0.1 s): its worker 0
// stalled in batch 2, slot 1, index 5 and was terminated with the rank (the open load written completed=false); its
// worker 1 was slow on batch 1 and returned.
std::vector<RankFile> StalledJob(bool open_load) {
  RankFile r0{0, {}}, r1{1, {}};
  Collectives(r0, 2, true);
  r0.events.push_back(Exit("the process ends with an uncaught exception: RuntimeError: timed out", 9 * kSecond));
  Collectives(r1, 2, false);
  r1.events.push_back(Stall(1, 1, 0, 2, kSecond, "/job/stall_job.py:40 in slow_read"));
  r1.events.push_back(Load(1, 1, 0, 2, kSecond, 3 * kSecond, true));
  r1.events.push_back(Stall(0, 2, 1, 5, 2 * kSecond, kStack));
  if (open_load) {
    r1.events.push_back(Exit("killed by SIGTERM", 9 * kSecond));
    r1.events.push_back(Load(0, 2, 1, 5, 2 * kSecond, 9 * kSecond, false));
  }
  return {r0, r1};
}

TEST(DiagnoseStall, ThePlainSpinIsTheCauseWithTheStackItWasSampledIn) {
  const Diagnosis d = Diagnose(LoadRecordings({Write(TempDir("spin"), StalledJob(true))}));
  ASSERT_EQ(d.stuck.size(), 1u);
  EXPECT_EQ(d.stuck[0].missing_ranks, std::vector<uint32_t>{1});
  ASSERT_TRUE(d.cause_detail.has_value());
  EXPECT_EQ(d.cause_detail->kind, "stall");
  EXPECT_EQ(d.cause_detail->rank, 1u);
  ASSERT_TRUE(d.cause.has_value());
  EXPECT_NE(d.cause->find("never returned batch 2 (slot 1, index 5)"), std::string::npos) << *d.cause;
  EXPECT_NE(d.cause->find("at /job/stall_job.py:52 in __getitem__"), std::string::npos) << *d.cause;
  EXPECT_NE(d.cause->find("no resample loop"), std::string::npos) << *d.cause;

  const std::string text = FormatDiagnosis(d);
  EXPECT_NE(text.find("stalled: DataLoader getitems that never returned"), std::string::npos) << text;
  EXPECT_NE(text.find("rank 1 worker 0, batch 2 (slot 1, index 5): running from 1.900 s, sampled at 2.900 s"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("    > /job/stall_job.py:52 in __getitem__\n"), std::string::npos) << text;
  EXPECT_NE(text.find("fetch.py:58 in <listcomp>"), std::string::npos) << text;
  EXPECT_NE(text.find("slow: 1 getitem(s) ran past the probe's stall bound, then returned: rank 1 worker 1 batch 1 "
                      "slot 0 at /job/stall_job.py:40 in slow_read"),
            std::string::npos)
      << text;
  // The stalled section comes right after the stuck collective it explains.
  EXPECT_LT(text.find("stuck:"), text.find("stalled:"));

  const nlohmann::json j = DiagnosisJson(d);
  ASSERT_EQ(j["stalls"].size(), 2u);
  const nlohmann::json& stall = j["stalls"][1];
  EXPECT_EQ(stall["rank"], 1);
  EXPECT_EQ(stall["worker"], 0);
  EXPECT_EQ(stall["batch"], 2);
  EXPECT_EQ(stall["slot"], 1);
  EXPECT_EQ(stall["index"], 5);
  EXPECT_EQ(stall["returned"], false);
  EXPECT_EQ(stall["innermost"], "/job/stall_job.py:52 in __getitem__");
  EXPECT_EQ(stall["stack"].size(), 3u);
  EXPECT_EQ(j["stalls"][0]["returned"], true);
  EXPECT_EQ(j["cause_detail"]["kind"], "stall");
  EXPECT_EQ(j["cause_detail"]["stack"].back(), "/job/stall_job.py:52 in __getitem__");
}

TEST(DiagnoseStall, AJobStillHungHasOnlyTheStallAndItIsTheCause) {
  // Read while the job hangs: no open load, no exit yet; the stall alone says the getitem has not returned.
  const Diagnosis d = Diagnose(LoadRecordings({Write(TempDir("hung"), StalledJob(false))}));
  ASSERT_TRUE(d.cause_detail.has_value());
  EXPECT_EQ(d.cause_detail->kind, "stall");
  ASSERT_TRUE(d.cause.has_value());
  EXPECT_NE(d.cause->find("worker 0 of rank 1 never returned batch 2"), std::string::npos) << *d.cause;
  EXPECT_NE(FormatDiagnosis(d).find("> /job/stall_job.py:52 in __getitem__"), std::string::npos);
}

TEST(DiagnoseStall, ALivelockTheWatchdogStoppedStaysALivelockAndKeepsItsStack) {
  std::vector<RankFile> files = StalledJob(true);
  TraceEvent livelock = Event(TraceEventKind::livelock, 2 * kSecond, 2 * kSecond);
  livelock.set_worker(0);
  livelock.set_iteration(2);
  livelock.set_slot(1);
  livelock.set_index(5);
  livelock.set_text("the resample loop never ends (stopped by the petrsim_probe watchdog after 120 loads of ...)");
  files[1].events.insert(files[1].events.end() - 2, livelock);
  const Diagnosis d = Diagnose(LoadRecordings({Write(TempDir("livelock"), files)}));
  ASSERT_TRUE(d.cause_detail.has_value());
  EXPECT_EQ(d.cause_detail->kind, "livelock");
  EXPECT_NE(d.cause->find("stopped by the petrsim_probe watchdog"), std::string::npos) << *d.cause;
  const nlohmann::json j = DiagnosisJson(d);
  EXPECT_EQ(j["stalls"][1]["livelock"], true);
  EXPECT_EQ(j["cause_detail"]["innermost"], "/job/stall_job.py:52 in __getitem__");
}

TEST(DiagnoseStall, TracesWithoutStallsReportAsBefore) {
  std::vector<RankFile> files = StalledJob(true);
  std::erase_if(files[1].events, [](const TraceEvent& e) { return e.kind() == TraceEventKind::stall; });
  const Diagnosis d = Diagnose(LoadRecordings({Write(TempDir("none"), files)}));
  EXPECT_TRUE(d.stalls.empty());
  ASSERT_TRUE(d.cause_detail.has_value());
  EXPECT_EQ(d.cause_detail->kind, "livelock");  // an open load alone: the getitem never returned
  EXPECT_EQ(FormatDiagnosis(d).find("stalled:"), std::string::npos);
  EXPECT_FALSE(DiagnosisJson(d).contains("stalls"));
}

TEST(DiagnoseStall, ASecondDataLoadersStallIsNamedWithItsLoader) {
  std::vector<RankFile> files = StalledJob(false);
  files[1].events.back().set_loader(1);
  const Diagnosis d = Diagnose(LoadRecordings({Write(TempDir("loader"), files)}));
  ASSERT_EQ(d.stalls.size(), 2u);
  EXPECT_EQ(d.stalls[1].loader, 1u);
  EXPECT_NE(FormatDiagnosis(d).find("rank 1 DataLoader 1 worker 0, batch 2"), std::string::npos);
  EXPECT_NE(d.cause->find("DataLoader 1, no resample loop"), std::string::npos) << *d.cause;
}

}  // namespace
}  // namespace petrsim
