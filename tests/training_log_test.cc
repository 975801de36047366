// Training logs for `petrsim diagnose` (formats/torch_logs/training_log.h): every release's watchdog lines as
// formats/torch_logs/watchdog_lines.h writes them (read from PyTorch's source and users' logs,
// docs/research/nccl_watchdog_lines.md), lines users posted in public issues (quoted verbatim), launcher prefixes,
// per-rank files, mmcv/mmengine iteration lines, tracebacks, gzip, and bad logs.
#include <gtest/gtest.h>
#include <zlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "base/error.h"
#include "formats/torch_logs/training_log.h"
#include "formats/torch_logs/watchdog_lines.h"
#include "replay/diagnose.h"
#include "scenario/torch_version.h"

namespace petrsim {
namespace {

namespace fs = std::filesystem;

const std::string kLogs = PETRSIM_SOURCE_DIR "/tests/data/logs";

fs::path TempDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("petrsim_log_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string Write(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

TrainingLog ReadText(const std::string& name, const std::string& text) {
  return ReadTrainingLogs({Write(TempDir(name) / "train.log", text)});
}

std::string Join(const std::vector<std::string>& lines, const std::string& prefix = "") {
  std::string out;
  for (const std::string& line : lines) out += prefix + line + "\n";
  return out;
}

// --- Every release's lines, as the simulator and the real backend print them ---------------------------------------

TEST(TrainingLog, ReadsTheWatchdogLinesOfEveryRelease) {
  for (const char* release : {"1.9", "1.10", "1.11", "1.12", "1.13", "2.0", "2.1", "2.2", "2.3", "2.4", "2.5"}) {
    SCOPED_TRACE(release);
    const TorchVersion version = *ParseTorchVersion(release);
    std::string text;
    for (uint32_t r = 0; r < 3; ++r) {  // rank 3 of 4 prints nothing
      WatchdogTimeout t;
      t.version = version;
      t.group_rank = r;
      t.global_rank = r;
      t.seq = 8120;
      t.op = "ALLREDUCE";
      t.numel_in = t.numel_out = 1;
      t.timeout_ms = 1800000;
      t.ran_for_ms = 1801700 + r;
      t.last_enqueued_seq = 8120;
      t.last_completed_seq = 8119;
      text += Join(NcclWatchdogLines(t).lines);
    }
    const TrainingLog log = ReadText(std::string("release_") + release, text);
    ASSERT_EQ(log.ranks.size(), 3u);
    const bool has_seq = version >= *ParseTorchVersion("1.11");
    const bool has_numel = version >= *ParseTorchVersion("2.1");
    for (uint32_t r = 0; r < 3; ++r) {
      const RankLog& rank = log.ranks.at(r);
      ASSERT_EQ(rank.timeouts.size(), 1u) << "rank " << r << ": one timeout, however often its lines repeat it";
      const LogTimeout& t = rank.timeouts[0];
      EXPECT_EQ(t.op, "ALLREDUCE");
      EXPECT_EQ(t.timeout_ms, 1800000u);
      EXPECT_EQ(t.ran_for_ms, 1801700u + r);
      EXPECT_EQ(t.seq.has_value(), has_seq);
      if (has_seq) {
        EXPECT_EQ(*t.seq, 8120u);
      }
      EXPECT_EQ(t.numel_in.has_value(), has_numel);
      EXPECT_EQ(t.group_rank, r);
      EXPECT_EQ(t.pg, "0");
      if (version >= *ParseTorchVersion("2.3")) {
        EXPECT_EQ(t.last_enqueued, 8120u);
        EXPECT_EQ(t.last_completed, 8119u);
      }
    }
    const Diagnosis d = DiagnoseTrainingLog(log, 4);
    ASSERT_EQ(d.stuck.size(), 1u);
    EXPECT_EQ(d.stuck[0].waiting_ranks, (std::vector<uint32_t>{0, 1, 2}));
    EXPECT_EQ(d.stuck[0].missing_ranks, (std::vector<uint32_t>{3}));
    EXPECT_EQ(d.suspects, (std::vector<uint32_t>{3}));
    EXPECT_EQ(d.stuck[0].seq, has_seq ? 8120 : 0);
    EXPECT_FALSE(log.torch_release.empty());
  }
}

TEST(TrainingLog, NamesTheReleaseByTheWatchdogLineNumber) {
  const auto release_of = [](const char* release) {
    WatchdogTimeout t;
    t.version = *ParseTorchVersion(release);
    t.seq = 5;
    t.ran_for_ms = 10;
    return ReadText(std::string("name_") + release, Join(NcclWatchdogLines(t).lines)).torch_release;
  };
  EXPECT_EQ(release_of("1.9"), "1.9");
  EXPECT_EQ(release_of("1.13"), "1.13");
  EXPECT_EQ(release_of("2.4"), "2.4");
  EXPECT_EQ(release_of("2.5"), "2.5");
}

// --- Lines users posted in public issues, verbatim -------------------------------------------------------------------

TEST(TrainingLog, ReadsLinesUsersPosted) {
  // facebookresearch/deit#157 ("torch 1.9"): the what(): line of a BROADCAST, no SeqNum.
  {
    const TrainingLog log = ReadText(
        "deit",
        Join({"[E ProcessGroupNCCL.cpp:325] Some NCCL operations have failed or timed out. Due to the "
              "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete "
              "data. To avoid this inconsistency, we are taking the entire process down.",
              "terminate called after throwing an instance of 'std::runtime_error'",
              "  what():  [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(OpType=BROADCAST, "
              "Timeout(ms)=1800000) ran for 1802691 milliseconds before timing out."}));
    ASSERT_EQ(log.ranks.count(1), 1u);
    const LogTimeout& t = log.ranks.at(1).timeouts.at(0);
    EXPECT_EQ(t.op, "BROADCAST");
    EXPECT_FALSE(t.seq);
    EXPECT_EQ(t.ran_for_ms, 1802691u);
  }
  // huggingface/accelerate#2174 ("2.1.1+cu118").
  {
    const TrainingLog log =
        ReadText("accelerate", Join({"[E ProcessGroupNCCL.cpp:916] [Rank 2] NCCL watchdog thread terminated with "
                                     "exception: [Rank 2] Watchdog caught collective operation timeout: "
                                     "WorkNCCL(SeqNum=48490, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
                                     "Timeout(ms)=1800000) ran for 1800781 milliseconds before timing out."}));
    const LogTimeout& t = log.ranks.at(2).timeouts.at(0);
    EXPECT_EQ(t.seq, 48490u);
    EXPECT_EQ(t.numel_in, 1u);
    EXPECT_EQ(t.ran_for_ms, 1800781u);
  }
  // meta-llama/llama-cookbook#567 ("pyTorch 2.3.1"): an allgather, `[rank1]:` prefix.
  {
    const TrainingLog log = ReadText(
        "llama", Join({"[rank1]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 1] Process group watchdog thread terminated "
                       "with exception: [Rank 1] Watchdog caught collective operation timeout: "
                       "WorkNCCL(SeqNum=1474236, OpType=_ALLGATHER_BASE, NumelIn=262675456, NumelOut=1050701824, "
                       "Timeout(ms)=600000) ran for 600058 milliseconds before timing out."}));
    const LogTimeout& t = log.ranks.at(1).timeouts.at(0);
    EXPECT_EQ(t.op, "_ALLGATHER_BASE");
    EXPECT_EQ(t.numel_out, 1050701824u);
    EXPECT_EQ(t.timeout_ms, 600000u);
  }
  // OFA-Sys/OFA#271 (SeqNum without NumelIn: 1.11-2.0).
  {
    const TrainingLog log = ReadText(
        "ofa", Join({"[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: "
                     "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds "
                     "before timing out."}));
    EXPECT_EQ(log.ranks.at(1).timeouts.at(0).seq, 469508u);
    EXPECT_EQ(log.torch_release, "1.11 to 2.0");
  }
  // pytorch/pytorch#123023's test output (the 2.4 timestamp form) and mlfoundations/open_clip#1024 (2.5.1).
  {
    const TrainingLog log = ReadText(
        "stamp", Join({"[E329 19:15:11.775879730 ProcessGroupNCCL.cpp:565] [Rank 0] Watchdog caught collective "
                       "operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=10, NumelOut=10, "
                       "Timeout(ms)=10000) ran for 10087 milliseconds before timing out.",
                       "[rank7]:[E1206 10:00:00.000000000 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) "
                       "Rank 7] Exception (either an error or timeout) detected by watchdog at work: 4096, last "
                       "enqueued NCCL work: 4096, last completed NCCL work: 4095."}));
    EXPECT_EQ(log.ranks.at(0).timeouts.at(0).seq, 2u);
    EXPECT_EQ(log.ranks.at(0).timeouts.at(0).numel_in, 10u);
    // A 2.5 status line alone is no timeout (2.5 prints it for errors too).
    const Diagnosis d = DiagnoseTrainingLog(log, 8);
    ASSERT_EQ(d.stuck.size(), 1u);
    EXPECT_EQ(d.stuck[0].waiting_ranks, (std::vector<uint32_t>{0}));
  }
}

// --- Prefixes and files ----------------------------------------------------------------------------------------------

const char kLine19[] =
    "[E ProcessGroupNCCL.cpp:566] [Rank {}] Watchdog caught collective operation timeout: "
    "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1801700 milliseconds before timing out.";

std::string Line19(uint32_t rank) {
  std::string line = kLine19;
  line.replace(line.find("{}"), 2, std::to_string(rank));
  return line;
}

TEST(TrainingLog, TakesTheRankFromLauncherPrefixes) {
  // srun -l (right-aligned with 16 tasks), torchrun --tee, and c10d's `[rank<g>]:` winning over the tee's local rank
  // on a second node (the message's `[Rank r]` is the group rank; the world group's equals the global one).
  const TrainingLog log = ReadText("prefixes", Join({" 3: " + Line19(3), "12: " + Line19(12), "[default5]:" + Line19(5),
                                                     "[default1]:[rank9]:" + Line19(9), "[trainer2]:" + Line19(2)}));
  for (uint32_t r : {3u, 12u, 5u, 9u, 2u}) EXPECT_EQ(log.ranks.count(r), 1u) << r;
  EXPECT_EQ(log.ranks.count(1), 0u);
}

TEST(TrainingLog, ReadsPerRankFilesOfTorchrunsLogDir) {
  const fs::path root = TempDir("logdir");
  const fs::path dir = root / "run_abc" / "attempt_0";
  for (uint32_t r = 0; r < 4; ++r) {
    // The file's own rank counts: its lines have no prefix and rank 3's no watchdog line.
    Write(dir / std::to_string(r) / "stdout.log", "hello\n");
    Write(dir / std::to_string(r) / "stderr.log", r == 3 ? std::string("a warning\n") : Line19(0) + "\n");
  }
  const TrainingLog log = ReadTrainingLogs({root.string()});
  EXPECT_EQ(log.per_rank_files, 4u);
  EXPECT_EQ(log.world_size, 4u);
  const Diagnosis d = DiagnoseTrainingLog(log, std::nullopt);
  ASSERT_EQ(d.stuck.size(), 1u);
  EXPECT_EQ(d.stuck[0].waiting_ranks, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(d.suspects, (std::vector<uint32_t>{3}));
  EXPECT_TRUE(d.ranks_without_file.empty());
}

TEST(TrainingLog, WorldSizeFromTheLogOrUnknown) {
  EXPECT_EQ(ReadText("gpu_ids", "gpu_ids = range(0, 16)\n" + Line19(0) + "\n").world_size, 16u);
  EXPECT_EQ(ReadText("torchrun",
                     "INFO:torch.distributed.elastic.agent.server.api:[default] Rank assignment: "
                     "global_world_sizes=[8, 8, 8, 8, 8, 8, 8, 8]\n")
                .world_size,
            8u);
  const TrainingLog unknown = ReadText("unknown", Line19(0) + "\n" + Line19(2) + "\n");
  EXPECT_FALSE(unknown.world_size);
  const Diagnosis d = DiagnoseTrainingLog(unknown, std::nullopt);
  EXPECT_FALSE(d.world_size_known);
  EXPECT_EQ(d.world_size, 3u);
  EXPECT_EQ(d.suspects, (std::vector<uint32_t>{1}));
}

// --- Iteration lines, seeds, tracebacks ------------------------------------------------------------------------------

TEST(TrainingLog, ReadsMmcvAndMmengineIterationLines) {
  const std::string p = "2022-11-08 10:02:11,532 - mmdet - INFO - ";
  // mmcv IterBasedRunner: `Iter [i/max_iters]` after iteration i-1 (0-based) completed.
  TrainingLog log = ReadText("iter", Join({p + "Iter [50/42192]\tlr: 2.000e-04, eta: 6:23:14, time: 0.561, "
                                               "data_time: 0.052, memory: 9133, loss: 19.4407",
                                           p + "Iter [100/42192]\tlr: 2.000e-04, eta: 6:23:14, time: 0.570, "
                                               "data_time: 0.050, memory: 9133, loss: 19.1",
                                           p + "Iter(val) [1000]\t"}));
  ASSERT_TRUE(log.last_iteration);
  EXPECT_EQ(log.last_iteration->done, 100u);
  EXPECT_DOUBLE_EQ(*log.last_iteration->time_s, 0.570);
  EXPECT_DOUBLE_EQ(*log.last_iteration->data_time_s, 0.050);
  EXPECT_EQ(log.log_interval, 50u);
  EXPECT_EQ(log.ranks.at(0).last_iteration->done, 100u) << "mmcv logs from rank 0";
  const IterationBound b = HangIterationBound(*log.last_iteration, 50);
  EXPECT_EQ(b.first, 100u);
  EXPECT_EQ(b.last, 149u);
  // mmcv EpochBasedRunner (old and new forms) and mmengine's padded forms.
  log = ReadText("epoch", Join({p + "Epoch [1][1700/1758]\tlr: 2.000e-04, eta: 1 day, 2:00:00, time: 0.512, "
                                    "data_time: 0.012, memory: 9000, loss: 1.0",
                                p + "Epoch(train) [1][1750/1758]\tlr: 2.000e-04, time: 0.5, data_time: 0.01",
                                "12/06 18:44:12 - mmengine - INFO - Epoch(train)  [2][  50/1758]  lr: 2.0000e-04  "
                                "eta: 6:23:14  time: 0.5612  data_time: 0.0521  memory: 9133  loss: 19.4407"}));
  EXPECT_EQ(log.last_iteration->done, 1758u + 50u);
  EXPECT_EQ(log.last_iteration->epoch, 2u);
  EXPECT_DOUBLE_EQ(*log.last_iteration->time_s, 0.5612);
  EXPECT_EQ(log.log_interval, 50u);
  // The epoch's last iterations (fewer than the interval) are not logged: the hang may be in the next epoch.
  LogIteration end_of_epoch;
  end_of_epoch.by_epoch = true;
  end_of_epoch.epoch = 1;
  end_of_epoch.inner = 1750;
  end_of_epoch.of = 1758;
  end_of_epoch.done = 1750;
  const IterationBound across = HangIterationBound(end_of_epoch, 50);
  EXPECT_EQ(across.first, 1750u);
  EXPECT_EQ(across.last, 1758u + 49u);
  log = ReadText("mmengine_iter",
                 "06/12 18:00:00 - mmengine - INFO - Iter(train) [  150/42192]  lr: 2.0000e-04  "
                 "time: 0.5612  data_time: 0.0521\n");
  EXPECT_EQ(log.last_iteration->done, 150u);
  EXPECT_FALSE(log.last_iteration->by_epoch);
}

TEST(TrainingLog, TheConfigsLogIntervalWins) {
  const TrainingLog log = ReadText(
      "interval", Join({"log_config = dict(", "    interval=10,", "    hooks=[dict(type='TextLoggerHook')])",
                        "Iter [50/100]\tlr: 1.000e-04, time: 0.5, data_time: 0.1", "Iter [100/100]\tlr: 1.000e-04"}));
  EXPECT_EQ(log.log_interval, 10u);
}

TEST(TrainingLog, ReadsTracebacksPerRank) {
  // Two ranks' tracebacks interleaved line by line (torchrun --tee), Python 3.11's ^^^ markers included.
  const std::vector<std::string> tb = {
      "Traceback (most recent call last):",
      "  File \"tools/train.py\", line 257, in <module>",
      "    main()",
      "  File \"/opt/conda/lib/python3.8/site-packages/mmdet/core/utils/dist_utils.py\", line 59, in reduce_mean",
      "    dist.all_reduce(tensor.div_(dist.get_world_size()), op=dist.ReduceOp.SUM)",
      "    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
      "  File \"/usr/lib/python3/dist-packages/torch/distributed/distributed_c10d.py\", line 1536, in all_reduce",
      "    work.wait()",
      "RuntimeError: NCCL communicator was aborted on rank {}."};
  std::string text;
  for (const std::string& line : tb) {
    for (uint32_t r : {0u, 1u}) {
      std::string l = line;
      if (const size_t at = l.find("{}"); at != std::string::npos) l.replace(at, 2, std::to_string(r));
      text += "[default" + std::to_string(r) + "]:" + l + "\n";
    }
  }
  const TrainingLog log = ReadText("traceback", text);
  for (uint32_t r : {0u, 1u}) {
    const RankLog& rank = log.ranks.at(r);
    ASSERT_EQ(rank.tracebacks.size(), 1u);
    const LogTraceback& t = rank.tracebacks[0];
    ASSERT_EQ(t.frames.size(), 3u);
    EXPECT_EQ(t.frames[1].function, "reduce_mean");
    EXPECT_EQ(t.frames[1].line, 59u);
    EXPECT_EQ(t.frames[1].code, "dist.all_reduce(tensor.div_(dist.get_world_size()), op=dist.ReduceOp.SUM)");
    EXPECT_EQ(t.exception, "RuntimeError: NCCL communicator was aborted on rank " + std::to_string(r) + ".");
    EXPECT_TRUE(rank.communicator_aborted);
  }
}

TEST(TrainingLog, ASyntheticEightRankLog) {
  // SYNTHETIC: a log written by hand (not the seed job's; that is seed_job_excerpt.log, below) in PyTorch 1.9's and
  // mmcv's formats: 7 of 8 ranks' watchdog lines, mmcv's config and iteration lines, one traceback. Its first line is
  // the comment that says so, so its records start at line 2.
  const std::string path = kLogs + "/synthetic_8ranks_torch1.9.log";
  const TrainingLog log = ReadTrainingLogs({path});
  EXPECT_EQ(log.world_size, 8u);
  EXPECT_EQ(log.world_size_from, "gpu_ids = range(0, 8) (" + path + ":34)");
  EXPECT_EQ(log.seed, 0);
  EXPECT_EQ(log.log_interval, 50u);
  EXPECT_EQ(log.torch_release, "1.9");
  ASSERT_TRUE(log.last_iteration);
  EXPECT_EQ(log.last_iteration->done, 150u);
  EXPECT_EQ(log.last_iteration->where.line, 42u);
  const Diagnosis d = DiagnoseTrainingLog(log, std::nullopt);
  ASSERT_EQ(d.stuck.size(), 1u);
  EXPECT_EQ(d.stuck[0].op, "ALLREDUCE");
  EXPECT_EQ(d.stuck[0].missing_ranks, (std::vector<uint32_t>{7}));
  ASSERT_TRUE(d.hang_iterations);
  EXPECT_EQ(d.hang_iterations->first, 150u);
  EXPECT_EQ(d.hang_iterations->last, 199u);
  const RankLog& rank3 = d.log->ranks.at(3);
  ASSERT_EQ(rank3.tracebacks.size(), 1u);
  EXPECT_EQ(rank3.tracebacks[0].frames.back().function, "all_reduce");
  // A scenario of another world size (the seed's 4) does not override what the log states: its 8 ranks name rank 7
  // as the missing one, and the difference is noted.
  const Diagnosis given4 = DiagnoseTrainingLog(log, 4u);
  EXPECT_EQ(given4.world_size, 8u);
  ASSERT_EQ(given4.stuck.size(), 1u);
  EXPECT_EQ(given4.stuck[0].missing_ranks, (std::vector<uint32_t>{7}));
  EXPECT_EQ(given4.suspects, (std::vector<uint32_t>{7}));
  const auto& notes = given4.log->notes;
  EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [](const std::string& n) {
    return n.find("the log's count is used") != std::string::npos;
  })) << ::testing::PrintToString(notes);
}

TEST(TrainingLog, TheSeedJobsRealExcerpt) {
  // The seed job's only real log (15 lines the user posted): PyTorch 1.9's watchdog lines (no SeqNum) of ranks 0, 2
  // and 3, rank 1 prints nothing; no config block, no iteration line, no seed, so no world size either.
  const TrainingLog log = ReadTrainingLogs({kLogs + "/seed_job_excerpt.log"});
  EXPECT_EQ(log.lines, 15u);
  EXPECT_FALSE(log.world_size.has_value());
  EXPECT_FALSE(log.seed.has_value());
  EXPECT_FALSE(log.last_iteration.has_value());
  EXPECT_FALSE(log.log_interval.has_value());
  EXPECT_EQ(log.torch_release, "1.9");
  const std::map<uint32_t, uint64_t> ran_for = {{0, 1808453}, {2, 1808498}, {3, 1808594}};
  for (const auto& [r, ms] : ran_for) {
    SCOPED_TRACE(r);
    ASSERT_EQ(log.ranks.count(r), 1u);
    const RankLog& rank = log.ranks.at(r);
    ASSERT_EQ(rank.timeouts.size(), 1u);  // rank 0's terminate `what():` repeats its line: one collective
    const LogTimeout& t = rank.timeouts[0];
    EXPECT_EQ(t.op, "ALLREDUCE");
    EXPECT_FALSE(t.seq.has_value());
    EXPECT_EQ(t.timeout_ms, 1800000u);
    EXPECT_EQ(t.ran_for_ms, ms);
    EXPECT_EQ(t.source_line, "ProcessGroupNCCL.cpp:566");
  }
  EXPECT_TRUE(log.ranks.count(1) == 0 || log.ranks.at(1).timeouts.empty());
  EXPECT_TRUE(log.ranks.at(3).communicator_aborted);  // "NCCL communicator was aborted on rank 3."

  // Alone, the ranks seen (0-3) are a lower bound of the world; rank 1 is the one missing.
  const Diagnosis alone = DiagnoseTrainingLog(log, std::nullopt);
  EXPECT_FALSE(alone.world_size_known);
  EXPECT_EQ(alone.world_size, 4u);
  ASSERT_EQ(alone.stuck.size(), 1u);
  EXPECT_EQ(alone.stuck[0].op, "ALLREDUCE");
  EXPECT_EQ(alone.stuck[0].seq, 0);  // no SeqNum in 1.9
  EXPECT_EQ(alone.stuck[0].missing_ranks, (std::vector<uint32_t>{1}));
  EXPECT_EQ(alone.stuck[0].waiting_ranks, (std::vector<uint32_t>{0, 2, 3}));
  EXPECT_EQ(alone.suspects, (std::vector<uint32_t>{1}));
  EXPECT_FALSE(alone.hang_iterations.has_value());
  ASSERT_TRUE(alone.cause_detail.has_value());
  EXPECT_EQ(alone.cause_detail->kind, "never_reached");
  EXPECT_EQ(alone.cause_detail->rank, 1u);
  // With the seed scenario's 4 ranks the world is known, and the finding the same.
  const Diagnosis given4 = DiagnoseTrainingLog(log, 4u);
  EXPECT_TRUE(given4.world_size_known);
  EXPECT_EQ(given4.world_size, 4u);
  ASSERT_EQ(given4.stuck.size(), 1u);
  EXPECT_EQ(given4.stuck[0].missing_ranks, (std::vector<uint32_t>{1}));
}

TEST(TrainingLog, ReadsTorchrunsFailureSummaryAndTheHeartbeatMonitor) {
  // torchrun's ChildFailedError summary (torch/distributed/elastic/multiprocessing/errors) and 2.3's heartbeat monitor.
  const TrainingLog log =
      ReadText("summary",
               Join({"[rank2]:[E ProcessGroupNCCL.cpp:1316] [PG 0 Rank 2] Heartbeat monitor timed out! Process will be "
                     "terminated after dumping debug info. workMetaList_.size()=1",
                     "============================================================", "tools/train.py FAILED",
                     "------------------------------------------------------------",
                     "Failures:", "[1]:", "  time      : 2024-06-01_10:21:36", "  host      : node01",
                     "  rank      : 1 (local_rank: 1)", "  exitcode  : -6 (pid: 12346)", "  error_file: <N/A>",
                     "  traceback : Signal 6 (SIGABRT) received by PID 12346",
                     "------------------------------------------------------------",
                     "Root Cause (first observed failure):", "[0]:", "  time      : 2024-06-01_10:21:35",
                     "  host      : node01", "  rank      : 0 (local_rank: 0)", "  exitcode  : 1 (pid: 12345)"}));
  EXPECT_TRUE(log.ranks.at(2).heartbeat_timeout);
  EXPECT_EQ(log.ranks.at(1).exit_code, -6);
  EXPECT_EQ(log.ranks.at(0).exit_code, 1);
}

// --- gzip and bad logs -----------------------------------------------------------------------------------------------

// `text` as one gzip member, made in memory (ctest runs this file's cases as processes side by
// side: a shared scratch file would let one read another's half-written member).
std::string Gzip(const std::string& text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

TEST(TrainingLog, ReadsGzipIncludingConcatenatedMembers) {
  const std::string gz = Gzip(Line19(0) + "\n") + Gzip(Line19(1) + "\n");
  const TrainingLog log = ReadTrainingLogs({Write(TempDir("gz") / "train.log.gz", gz)});
  EXPECT_EQ(log.ranks.size(), 2u);
  EXPECT_TRUE(log.notes.empty());
  // Cut short: read up to the cut, said in a note.
  const std::string big = Gzip(Line19(0) + "\n" + std::string(100000, 'x') + "\n" + Line19(1) + "\n");
  const TrainingLog cut = ReadTrainingLogs({Write(TempDir("gz_cut") / "train.log.gz", big.substr(0, big.size() / 2))});
  EXPECT_EQ(cut.ranks.count(0), 1u);
  ASSERT_FALSE(cut.notes.empty());
  EXPECT_NE(cut.notes[0].find("ends early"), std::string::npos);
}

void ExpectError(const std::string& name, const std::string& text, const std::string& fragment) {
  try {
    ReadText(name, text);
    ADD_FAILURE() << name << ": no error";
  } catch (const ScenarioError& error) {
    EXPECT_NE(std::string(error.what()).find(fragment), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("train.log"), std::string::npos) << error.what();
  }
}

// Issue 33, point 5: a gzip of its header only is no empty log but a cut file (it read as an empty log, exit 0), and
// a `[Rank r]` past the ranks petrsim holds is refused, not cut to 32 bits (2^64-1 read as rank 4294967295).
TEST(TrainingLog, RefusesAGzipHeaderAndARankPastTheLimit) {
  const std::string header = Gzip("").substr(0, 10);
  try {
    ReadTrainingLogs({Write(TempDir("gz_header") / "train.log.gz", header)});
    ADD_FAILURE() << "no error for a gzip header";
  } catch (const ScenarioError& error) {
    EXPECT_NE(std::string(error.what()).find("a gzip stream of 10 byte(s) that ends before any of its data"),
              std::string::npos)
        << error.what();
  }
  ExpectError("rank past the limit",
              "[E ProcessGroupNCCL.cpp:828] [Rank 18446744073709551615] Watchdog caught collective operation timeout: "
              "WorkNCCL(SeqNum=1, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800001 milliseconds before timing "
              "out.\n",
              "[Rank 18446744073709551615]: expected a rank of the job, below 1048576");
}

// Issue 33, point 3: a rank past kLogRanksMax is refused with its line (a log of the seed job and one `[Rank 16000000]`
// line listed sixteen million ranks and aborted at 3 GB); one below it is read.
TEST(TrainingLog, RefusesARankPastTheLogsLimitWithItsLine) {
  ExpectError("rank_past_log_limit", Line19(0) + "\n" + Line19(16000000) + "\n",
              "train.log:2: [Rank 16000000]: expected a rank of the job, below 1048576");
  ExpectError("pg_rank_past_log_limit",
              Line19(0) + "\n[PG 0 (default_pg) Rank " + std::to_string(kLogRanksMax) +
                  "] Timeout at NCCL work: 7, last enqueued NCCL work: 7, last completed NCCL work: 6.\n",
              "train.log:2: [Rank 1048576]: expected a rank of the job, below 1048576");
  const TrainingLog log = ReadText("rank_below_log_limit", Line19(0) + "\n" + Line19(kLogRanksMax - 1) + "\n");
  EXPECT_EQ(log.ranks.size(), 2u);
  EXPECT_EQ(log.ranks.rbegin()->first, kLogRanksMax - 1);
  // A rank by the file's name too.
  const fs::path dir = TempDir("file_rank_past_limit");
  Write(dir / "rank0.log", Line19(0) + "\n");
  Write(dir / "rank16000000.log", Line19(1) + "\n");
  try {
    ReadTrainingLogs({dir.string()});
    ADD_FAILURE() << "no error for a file rank past the limit";
  } catch (const ScenarioError& error) {
    EXPECT_NE(std::string(error.what()).find("rank16000000.log: rank 16000000 by its name"), std::string::npos)
        << error.what();
  }
}

// Issue 33, point 3: a gzip that inflates past kGzipRatioMax times its size is refused as it is read (a 46 MB gzip
// of 10 GB held all of it in memory); what inflates within the limit is read. The bomb is ~70 MB of newlines (what
// the free allowance lets through, and some), 300 KB compressed: cheap to make here.
TEST(TrainingLog, RefusesAGzipBombAsItInflates) {
  const std::string bomb = Gzip(Line19(0) + "\n" + std::string(kGzipFreeBytes + (4u << 20), '\n'));
  ASSERT_LT(bomb.size() * kGzipRatioMax, kGzipFreeBytes);
  try {
    ReadTrainingLogs({Write(TempDir("gz_bomb") / "train.log.gz", bomb)});
    ADD_FAILURE() << "no error for a gzip bomb";
  } catch (const ScenarioError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find("train.log.gz: byte "), std::string::npos) << what;
    EXPECT_NE(what.find("more than 200 times its size (petrsim's limit on a compressed log"), std::string::npos)
        << what;
  }
}

// Issue 33, point 3: a log is read a window at a time (32 MiB), not whole: lines straddling a window's end, a
// traceback whose frames lie in the next window, and the line numbers after it read as in one piece; a line longer
// than a window is refused with its byte.
TEST(TrainingLog, ReadsALogLongerThanAWindowAsOnePiece) {
  std::string text = Line19(0) + "\n";
  const std::string filler(99, 'x');
  while (text.size() < (size_t{32} << 20) - 150) text += filler + "\n";
  text += "[default1]:Traceback (most recent call last):\n";
  text += "[default1]:  File \"tools/train.py\", line 257, in <module>\n";
  text += "[default1]:    main()\n";
  text += "[default1]:RuntimeError: NCCL communicator was aborted on rank 1.\n";
  const uint64_t lines_before = static_cast<uint64_t>(std::count(text.begin(), text.end(), '\n'));
  text += Line19(2) + "\n";
  const TrainingLog log = ReadText("windows", text);
  ASSERT_EQ(log.ranks.count(1), 1u);
  ASSERT_EQ(log.ranks.at(1).tracebacks.size(), 1u);
  const LogTraceback& tb = log.ranks.at(1).tracebacks[0];
  ASSERT_EQ(tb.frames.size(), 1u);
  EXPECT_EQ(tb.frames[0].code, "main()");
  EXPECT_EQ(tb.exception, "RuntimeError: NCCL communicator was aborted on rank 1.");
  EXPECT_EQ(tb.where.line, lines_before - 3);
  ASSERT_EQ(log.ranks.at(2).timeouts.size(), 1u);
  EXPECT_EQ(log.ranks.at(2).timeouts[0].where.line, lines_before + 1);
  EXPECT_EQ(log.lines, lines_before + 1);
  EXPECT_EQ(log.bytes, text.size());
  ExpectError("long_line", Line19(0) + "\n" + std::string((size_t{33} << 20), 'x') + "\n",
              "byte " + std::to_string(Line19(0).size() + 1) + ": a line longer than 32 MiB");
}

TEST(TrainingLog, BadLogsGetAClearError) {
  ExpectError("binary",
              std::string("\x7f"
                          "ELF\x02\x01\x01\0\0\0",
                          10) +
                  std::string(200, '\x01'),
              "binary");
  ExpectError("nul", Line19(0) + "\n" + std::string(70000, 'x') + std::string("abc\0def\n", 8), "a NUL byte");
  ExpectError("two_seeds", "Set random seed to 0, deterministic: False\nSet random seed to 1, deterministic: False\n",
              "two different jobs");
  ExpectError("two_totals", "Iter [50/42192]\tlr: 1e-4\nIter [100/10000]\tlr: 1e-4\n", "two different jobs");
  ExpectError("backwards", "Iter [150/42192]\tlr: 1e-4\nIter [50/42192]\tlr: 1e-4\n", "two runs");
  ExpectError("two_timeouts",
              "[E ProcessGroupNCCL.cpp:821] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=49, "
              "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1800100 milliseconds before timing out.\n"
              "[E ProcessGroupNCCL.cpp:821] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=7, "
              "OpType=BROADCAST, Timeout(ms)=1800000) ran for 1800200 milliseconds before timing out.\n",
              "two different jobs");
  ExpectError("two_world_sizes", "gpu_ids = range(0, 8)\ngpu_ids = range(0, 4)\n", "two different jobs");
}

TEST(TrainingLog, ALineCutShortIsReadAndNoted) {
  const std::string line = Line19(2);
  const TrainingLog log = ReadText("cut", line.substr(0, line.find("Timeout(ms)")) + "\n");
  ASSERT_EQ(log.ranks.count(2), 1u);
  EXPECT_EQ(log.ranks.at(2).timeouts.at(0).op, "ALLREDUCE");
  ASSERT_FALSE(log.notes.empty());
  EXPECT_NE(log.notes[0].find("cut short"), std::string::npos);
}

TEST(TrainingLog, ALogWithoutATimeoutHasNothingStuck) {
  const TrainingLog log = ReadText("none", "Iter [50/42192]\tlr: 1e-4, time: 0.5\nall done\n");
  const Diagnosis d = DiagnoseTrainingLog(log, 8);
  EXPECT_TRUE(d.stuck.empty());
  EXPECT_FALSE(d.cause);
  EXPECT_NE(FormatDiagnosis(d).find("no timeout found"), std::string::npos);
}

TEST(TrainingLog, TellsLogsFromDumps) {
  const fs::path dir = TempDir("sniff");
  EXPECT_TRUE(LooksLikeTrainingLog(Write(dir / "a.log", "[rank0]:[E ProcessGroupNCCL.cpp:607] x\n")));
  EXPECT_FALSE(LooksLikeTrainingLog(Write(dir / "dump.json", "{\"version\": \"2.4\"}")));
  EXPECT_FALSE(LooksLikeTrainingLog(Write(dir / "old.json", "[{\"record_id\": 0}]")));
  EXPECT_FALSE(LooksLikeTrainingLog(Write(dir / "dump.pkl", std::string("\x80\x04\x95", 3))));
  EXPECT_TRUE(IsTrainingLogPath(dir / "a.log"));
  EXPECT_FALSE(IsTrainingLogPath(dir.string())) << "a directory with dumps at its top is not a log directory";
}

}  // namespace
}  // namespace petrsim
