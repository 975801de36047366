// The NCCL watchdog's timeout lines (formats/torch_logs/watchdog_lines.h): one golden sequence per release, written out
// from the tables of docs/research/nccl_watchdog_lines.md; the user-log lines of releases the reporters name,
// reproduced from their numbers; and the global rank in `[rank<g>]:`, the group rank in `[Rank <r>]`.
#include "formats/torch_logs/watchdog_lines.h"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

namespace petrsim {
namespace {

using Lines = std::vector<std::string>;

// The values of every golden test below; group and global rank differ so that a swap shows.
WatchdogTimeout Golden(TorchVersion version) {
  WatchdogTimeout t;
  t.version = version;
  t.group_rank = 1;
  t.global_rank = 5;
  t.seq = 42;
  t.op = "ALLREDUCE";
  t.numel_in = 1000;
  t.numel_out = 1000;
  t.timeout_ms = 1800000;
  t.ran_for_ms = 1808453;
  t.last_enqueued_seq = 43;
  t.last_completed_seq = 41;
  t.timestamp = {12, 6, 18, 44, 12, 715298746};
  return t;
}

TEST(WatchdogLines, SeedJobOn19) {
  WatchdogTimeout t;
  t.version = {1, 9};
  t.group_rank = 0;
  t.op = "ALLREDUCE";
  t.timeout_ms = 1800000;
  t.ran_for_ms = 1808453;
  const WatchdogLines out = NcclWatchdogLines(t);
  EXPECT_EQ(
      out.lines,
      (Lines{"[E ProcessGroupNCCL.cpp:566] [Rank 0] Watchdog caught collective operation timeout: "
             "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
             "[E ProcessGroupNCCL.cpp:325] Some NCCL operations have failed or timed out. Due to the asynchronous "
             "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid "
             "this inconsistency, we are taking the entire process down.",
             "terminate called after throwing an instance of 'std::runtime_error'",
             "  what():  [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, "
             "Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out."}));
  EXPECT_TRUE(out.line_numbers_known);
  EXPECT_EQ(out.evidence, "verified from source (v1.9.0)");
}

TEST(WatchdogLines, Golden19) {
  const WatchdogLines out = NcclWatchdogLines(Golden({1, 9}));
  EXPECT_EQ(
      out.lines,
      (Lines{"[E ProcessGroupNCCL.cpp:566] [Rank 1] Watchdog caught collective operation timeout: "
             "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
             "[E ProcessGroupNCCL.cpp:325] Some NCCL operations have failed or timed out. Due to the asynchronous "
             "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid "
             "this inconsistency, we are taking the entire process down.",
             "terminate called after throwing an instance of 'std::runtime_error'",
             "  what():  [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, "
             "Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out."}));
  EXPECT_TRUE(out.line_numbers_known);
}

TEST(WatchdogLines, Golden110IsInferred) {
  const WatchdogLines out = NcclWatchdogLines(Golden({1, 10}));
  EXPECT_EQ(
      out.lines,
      (Lines{"[E ProcessGroupNCCL.cpp:596] [Rank 1] Watchdog caught collective operation timeout: "
             "WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
             "[E ProcessGroupNCCL.cpp:341] Some NCCL operations have failed or timed out. Due to the asynchronous "
             "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid "
             "this inconsistency, we are taking the entire process down.",
             "terminate called after throwing an instance of 'std::runtime_error'",
             "  what():  [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, "
             "Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out."}));
  EXPECT_FALSE(out.line_numbers_known);
}

TEST(WatchdogLines, Golden111And112AreInferred) {
  const Lines expected{
      "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, "
      "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
      "[E ProcessGroupNCCL.cpp:341] Some NCCL operations have failed or timed out. Due to the asynchronous nature of "
      "CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid this inconsistency, we "
      "are taking the entire process down.",
      "terminate called after throwing an instance of 'std::runtime_error'",
      "  what():  [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, "
      "Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out."};
  for (const TorchVersion version : {TorchVersion{1, 11}, TorchVersion{1, 12}}) {
    SCOPED_TRACE(version.ToString());
    const WatchdogLines out = NcclWatchdogLines(Golden(version));
    EXPECT_EQ(out.lines, expected);
    EXPECT_FALSE(out.line_numbers_known);
  }
}

TEST(WatchdogLines, Golden113) {
  const WatchdogLines out = NcclWatchdogLines(Golden({1, 13}));
  EXPECT_EQ(
      out.lines,
      (Lines{"[E ProcessGroupNCCL.cpp:821] [Rank 1] Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=42, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1808453 milliseconds before "
             "timing out.",
             "[E ProcessGroupNCCL.cpp:456] Some NCCL operations have failed or timed out. Due to the asynchronous "
             "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
             "[E ProcessGroupNCCL.cpp:461] To avoid data inconsistency, we are taking the entire process down.",
             "terminate called after throwing an instance of 'std::runtime_error'",
             "  what():  [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, "
             "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out."}));
  EXPECT_TRUE(out.line_numbers_known);
  EXPECT_EQ(out.evidence, "verified from source (1.13.1)");
}

TEST(WatchdogLines, Golden20) {
  const WatchdogLines out = NcclWatchdogLines(Golden({2, 0}));
  EXPECT_EQ(
      out.lines,
      (Lines{"[E ProcessGroupNCCL.cpp:828] [Rank 1] Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=42, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1808453 milliseconds before "
             "timing out.",
             "[E ProcessGroupNCCL.cpp:455] Some NCCL operations have failed or timed out. Due to the asynchronous "
             "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
             "[E ProcessGroupNCCL.cpp:460] To avoid data inconsistency, we are taking the entire process down.",
             "terminate called after throwing an instance of 'std::runtime_error'",
             "  what():  [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, "
             "OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out."}));
  EXPECT_TRUE(out.line_numbers_known);
}

TEST(WatchdogLines, Golden21) {
  const WatchdogLines out = NcclWatchdogLines(Golden({2, 1}));
  EXPECT_EQ(
      out.lines,
      (Lines{"[E ProcessGroupNCCL.cpp:475] [Rank 1] Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, Timeout(ms)=1800000) ran for "
             "1808453 milliseconds before timing out.",
             "[E ProcessGroupNCCL.cpp:489] Some NCCL operations have failed or timed out. Due to the asynchronous "
             "nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
             "[E ProcessGroupNCCL.cpp:495] To avoid data inconsistency, we are taking the entire process down.",
             "[E ProcessGroupNCCL.cpp:916] [Rank 1] NCCL watchdog thread terminated with exception: [Rank 1] "
             "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1000, "
             "NumelOut=1000, Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
             "terminate called after throwing an instance of 'std::runtime_error'",
             "  what():  [Rank 1] NCCL watchdog thread terminated with exception: [Rank 1] Watchdog caught "
             "collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, "
             "Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out."}));
  EXPECT_TRUE(out.line_numbers_known);
}

TEST(WatchdogLines, Golden22) {
  const WatchdogLines out = NcclWatchdogLines(Golden({2, 2}));
  EXPECT_EQ(
      out.lines,
      (Lines{"[rank5]:[E ProcessGroupNCCL.cpp:523] [Rank 1] Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, Timeout(ms)=1800000) ran for 1808453 "
             "milliseconds before timing out.",
             "[rank5]:[E ProcessGroupNCCL.cpp:537] Some NCCL operations have failed or timed out. Due to the "
             "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
             "[rank5]:[E ProcessGroupNCCL.cpp:543] To avoid data inconsistency, we are taking the entire process down.",
             "[rank5]:[E ProcessGroupNCCL.cpp:1182] [Rank 1] NCCL watchdog thread terminated with exception: [Rank 1] "
             "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1000, "
             "NumelOut=1000, Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
             "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:525 (most "
             "recent call first):",
             "terminate called after throwing an instance of 'c10::DistBackendError'",
             "  what():  [Rank 1] NCCL watchdog thread terminated with exception: [Rank 1] Watchdog caught collective "
             "operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, "
             "Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
             "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:525 (most "
             "recent call first):"}));
  EXPECT_TRUE(out.line_numbers_known);
}

TEST(WatchdogLines, Golden23) {
  const WatchdogLines out = NcclWatchdogLines(Golden({2, 3}));
  EXPECT_EQ(
      out.lines,
      (Lines{"[rank5]:[E ProcessGroupNCCL.cpp:563] [Rank 1] Watchdog caught collective operation timeout: "
             "WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, Timeout(ms)=1800000) ran for 1808453 "
             "milliseconds before timing out.",
             "[rank5]:[E ProcessGroupNCCL.cpp:1537] [PG 0 Rank 1] Timeout at NCCL work: 42, last enqueued NCCL work: "
             "43, last completed NCCL work: 41.",
             "[rank5]:[E ProcessGroupNCCL.cpp:577] [Rank 1] Some NCCL operations have failed or timed out. Due to the "
             "asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
             "[rank5]:[E ProcessGroupNCCL.cpp:583] [Rank 1] To avoid data inconsistency, we are taking the entire "
             "process down.",
             "[rank5]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 1] Process group watchdog thread terminated with "
             "exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, "
             "NumelIn=1000, NumelOut=1000, Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
             "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565 (most "
             "recent call first):",
             "terminate called after throwing an instance of 'c10::DistBackendError'",
             "  what():  [PG 0 Rank 1] Process group watchdog thread terminated with exception: [Rank 1] Watchdog "
             "caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, "
             "Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
             "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565 (most "
             "recent call first):"}));
  EXPECT_TRUE(out.line_numbers_known);
}

TEST(WatchdogLines, Golden24) {
  const WatchdogLines out = NcclWatchdogLines(Golden({2, 4}));
  EXPECT_EQ(out.lines,
            (Lines{"[rank5]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective "
                   "operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, "
                   "Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
                   "[rank5]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:1664] [PG 0 (default_pg) Rank 1] Exception "
                   "(either an error or timeout) detected by watchdog at work: 42, last enqueued NCCL work: 43, last "
                   "completed NCCL work: 41.",
                   "[rank5]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:1709] [PG 0 (default_pg) Rank 1] Timeout at "
                   "NCCL work: 42, last enqueued NCCL work: 43, last completed NCCL work: 41.",
                   "[rank5]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:621] [Rank 1] Some NCCL operations have "
                   "failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations "
                   "might run on corrupted/incomplete data.",
                   "[rank5]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:627] [Rank 1] To avoid data inconsistency, "
                   "we are taking the entire process down.",
                   "[rank5]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:1515] [PG 0 (default_pg) Rank 1] Process "
                   "group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective operation "
                   "timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, Timeout(ms)=1800000) "
                   "ran for 1808453 milliseconds before timing out.",
                   "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 "
                   "(most recent call first):",
                   "terminate called after throwing an instance of 'c10::DistBackendError'",
                   "  what():  [PG 0 (default_pg) Rank 1] Process group watchdog thread terminated with exception: "
                   "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, "
                   "NumelIn=1000, NumelOut=1000, Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
                   "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 "
                   "(most recent call first):",
                   "Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1521 "
                   "(most recent call first):"}));
  EXPECT_TRUE(out.line_numbers_known);
}

TEST(WatchdogLines, Golden25) {
  const WatchdogLines out = NcclWatchdogLines(Golden({2, 5}));
  EXPECT_EQ(
      out.lines,
      (Lines{"[rank5]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:616] [Rank 1] Watchdog caught collective "
             "operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, "
             "Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
             "[rank5]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 1] "
             "Exception (either an error or timeout) detected by watchdog at work: 42, last enqueued NCCL work: "
             "43, last completed NCCL work: 41.",
             "[rank5]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:1834] [PG ID 0 PG GUID 0(default_pg) Rank 1] "
             "Timeout at NCCL work: 42, last enqueued NCCL work: 43, last completed NCCL work: 41.",
             "[rank5]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:630] [Rank 1] Some NCCL operations have "
             "failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations "
             "might run on corrupted/incomplete data.",
             "[rank5]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:636] [Rank 1] To avoid data inconsistency, "
             "we are taking the entire process down.",
             "[rank5]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG GUID 0(default_pg) Rank 1] "
             "Process group watchdog thread terminated with exception: [Rank 1] Watchdog caught collective "
             "operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, "
             "Timeout(ms)=1800000) ran for 1808453 milliseconds before timing out.",
             "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 "
             "(most recent call first):",
             "terminate called after throwing an instance of 'c10::DistBackendError'",
             "  what():  [PG ID 0 PG GUID 0(default_pg) Rank 1] Process group watchdog thread terminated with "
             "exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, "
             "OpType=ALLREDUCE, NumelIn=1000, NumelOut=1000, Timeout(ms)=1800000) ran for 1808453 milliseconds "
             "before timing out.",
             "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 "
             "(most recent call first):",
             "Exception raised from ncclCommWatchdog at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1601 "
             "(most recent call first):"}));
  EXPECT_TRUE(out.line_numbers_known);
}

// Only 1.10 to 1.12 lack known line numbers.
TEST(WatchdogLines, LineNumbersKnownExceptFor110To112) {
  for (const auto& [version, known] : std::vector<std::pair<TorchVersion, bool>>{{{1, 9}, true},
                                                                                 {{1, 10}, false},
                                                                                 {{1, 11}, false},
                                                                                 {{1, 12}, false},
                                                                                 {{1, 13}, true},
                                                                                 {{2, 0}, true},
                                                                                 {{2, 1}, true},
                                                                                 {{2, 2}, true},
                                                                                 {{2, 3}, true},
                                                                                 {{2, 4}, true},
                                                                                 {{2, 5}, true}}) {
    SCOPED_TRACE(version.ToString());
    const WatchdogLines out = NcclWatchdogLines(Golden(version));
    EXPECT_EQ(out.line_numbers_known, known);
    EXPECT_FALSE(out.evidence.empty());
    EXPECT_EQ(out.evidence.find("inferred: line numbers unknown") == 0, !known);
  }
}

// User logs whose reporters name the release (research note E10, E16, E19, E22): their values in, their lines out.

// facebookresearch/deit#157, "torch 1.9" (E10).
TEST(WatchdogLinesUserLogs, Torch19Deit157) {
  WatchdogTimeout t;
  t.version = {1, 9};
  t.group_rank = 1;
  t.op = "BROADCAST";
  t.timeout_ms = 1800000;
  t.ran_for_ms = 1802691;
  const Lines lines = NcclWatchdogLines(t).lines;
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(
      lines[1],
      "[E ProcessGroupNCCL.cpp:325] Some NCCL operations have failed or timed out. Due to the asynchronous nature "
      "of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data. To avoid this "
      "inconsistency, we are taking the entire process down.");
  EXPECT_EQ(lines[2], "terminate called after throwing an instance of 'std::runtime_error'");
  EXPECT_EQ(lines[3],
            "  what():  [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(OpType=BROADCAST, "
            "Timeout(ms)=1800000) ran for 1802691 milliseconds before timing out.");
}

// huggingface/accelerate#2174, "PyTorch version (GPU?): 2.1.1+cu118" (E16).
TEST(WatchdogLinesUserLogs, Torch211Accelerate2174) {
  WatchdogTimeout t;
  t.version = {2, 1};
  t.group_rank = 2;
  t.global_rank = 2;
  t.seq = 48490;
  t.op = "ALLREDUCE";
  t.numel_in = 1;
  t.numel_out = 1;
  t.timeout_ms = 1800000;
  t.ran_for_ms = 1800781;
  const Lines lines = NcclWatchdogLines(t).lines;
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_EQ(
      lines[1],
      "[E ProcessGroupNCCL.cpp:489] Some NCCL operations have failed or timed out. Due to the asynchronous nature "
      "of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.");
  EXPECT_EQ(lines[2],
            "[E ProcessGroupNCCL.cpp:495] To avoid data inconsistency, we are taking the entire process down.");
  EXPECT_EQ(lines[3],
            "[E ProcessGroupNCCL.cpp:916] [Rank 2] NCCL watchdog thread terminated with exception: [Rank 2] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=48490, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
            "Timeout(ms)=1800000) ran for 1800781 milliseconds before timing out.");
  EXPECT_EQ(lines[4], "terminate called after throwing an instance of 'std::runtime_error'");
}

// meta-llama/llama-cookbook#567, "pyTorch 2.3.1" (E19); the full 1414 line as the issue has it.
TEST(WatchdogLinesUserLogs, Torch231LlamaCookbook567) {
  WatchdogTimeout t;
  t.version = {2, 3};
  t.group_rank = 1;
  t.global_rank = 1;
  t.pg_name = "0";
  t.seq = 1474236;
  t.op = "_ALLGATHER_BASE";
  t.numel_in = 262675456;
  t.numel_out = 1050701824;
  t.timeout_ms = 600000;
  t.ran_for_ms = 600096;
  const Lines lines = NcclWatchdogLines(t).lines;
  ASSERT_EQ(lines.size(), 9u);
  EXPECT_EQ(lines[3],
            "[rank1]:[E ProcessGroupNCCL.cpp:583] [Rank 1] To avoid data inconsistency, we are taking the "
            "entire process down.");
  EXPECT_EQ(lines[4],
            "[rank1]:[E ProcessGroupNCCL.cpp:1414] [PG 0 Rank 1] Process group watchdog thread terminated with "
            "exception: [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1474236, "
            "OpType=_ALLGATHER_BASE, NumelIn=262675456, NumelOut=1050701824, Timeout(ms)=600000) ran for 600096 "
            "milliseconds before timing out.");
  EXPECT_EQ(
      lines[5],
      "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:565 (most recent "
      "call first):");
}

// mlfoundations/open_clip#1024, "torch version: 2.5.1+cu124" (E22): rank 7's first two lines, each with its own time.
TEST(WatchdogLinesUserLogs, Torch251OpenClip1024) {
  WatchdogTimeout t;
  t.version = {2, 5};
  t.group_rank = 7;
  t.global_rank = 7;
  t.pg_name = "0";
  t.pg_local_id = 0;
  t.pg_desc = "default_pg";
  t.seq = 14217;
  t.op = "ALLGATHER";
  t.numel_in = 65536;
  t.numel_out = 524288;
  t.timeout_ms = 600000;
  t.ran_for_ms = 600002;
  t.last_enqueued_seq = 14221;
  t.last_completed_seq = 14216;
  t.timestamp = {1, 26, 1, 17, 58, 183429932};
  EXPECT_EQ(NcclWatchdogLines(t).lines.at(0),
            "[rank7]:[E126 01:17:58.183429932 ProcessGroupNCCL.cpp:616] [Rank 7] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=14217, OpType=ALLGATHER, NumelIn=65536, NumelOut=524288, Timeout(ms)=600000) ran "
            "for 600002 milliseconds before timing out.");
  t.timestamp = {1, 26, 1, 17, 58, 183820380};
  EXPECT_EQ(NcclWatchdogLines(t).lines.at(1),
            "[rank7]:[E126 01:17:58.183820380 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0(default_pg) Rank 7] "
            "Exception (either an error or timeout) detected by watchdog at work: 14217, last enqueued NCCL work: "
            "14221, last completed NCCL work: 14216.");
}

// hiyouga/LlamaFactory#6269 (version not stated; every number is 2.4.0's): a sub-group without a description.
TEST(WatchdogLinesUserLogs, Torch24ShapedLlamaFactory6269) {
  WatchdogTimeout t;
  t.version = {2, 4};
  t.group_rank = 0;
  t.global_rank = 0;
  t.pg_name = "1";
  t.pg_desc = "";
  t.seq = 7753;
  t.op = "_REDUCE_SCATTER_BASE";
  t.numel_in = 544997376;
  t.numel_out = 68124672;
  t.timeout_ms = 600000;
  t.ran_for_ms = 600061;
  t.last_enqueued_seq = 7755;
  t.last_completed_seq = 7752;
  t.timestamp = {12, 6, 18, 44, 12, 715298746};
  EXPECT_EQ(NcclWatchdogLines(t).lines.at(0),
            "[rank0]:[E1206 18:44:12.715298746 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=7753, OpType=_REDUCE_SCATTER_BASE, NumelIn=544997376, NumelOut=68124672, "
            "Timeout(ms)=600000) ran for 600061 milliseconds before timing out.");
  t.timestamp = {12, 6, 18, 44, 12, 715588844};
  EXPECT_EQ(NcclWatchdogLines(t).lines.at(1),
            "[rank0]:[E1206 18:44:12.715588844 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 0] Exception (either an error or "
            "timeout) detected by watchdog at work: 7753, last enqueued NCCL work: 7755, last completed NCCL work: "
            "7752.");
}

// From 2.2 the line prefix carries the global rank, the message the rank within the group (NVIDIA/nccl#1610's log
// shows `[rank13]:... [Rank 1] ...`); before 2.2 the global rank appears nowhere.
TEST(WatchdogLines, GlobalRankInLinePrefixGroupRankInMessage) {
  for (const TorchVersion version : {TorchVersion{2, 2}, TorchVersion{2, 3}, TorchVersion{2, 4}, TorchVersion{2, 5}}) {
    SCOPED_TRACE(version.ToString());
    WatchdogTimeout t = Golden(version);
    t.group_rank = 1;
    t.global_rank = 13;
    const Lines lines = NcclWatchdogLines(t).lines;
    for (const std::string& line : lines) {
      if (line.starts_with("terminate") || line.starts_with("  what():") || line.starts_with("Exception raised")) {
        EXPECT_EQ(line.find("[rank"), std::string::npos) << line;
      } else {
        EXPECT_TRUE(line.starts_with("[rank13]:[E")) << line;
      }
      EXPECT_EQ(line.find("Rank 13"), std::string::npos) << line;
      EXPECT_EQ(line.find("[rank1]"), std::string::npos) << line;
    }
    EXPECT_NE(lines[0].find("] [Rank 1] Watchdog caught"), std::string::npos) << lines[0];
  }
  for (const TorchVersion version : {TorchVersion{1, 9}, TorchVersion{1, 13}, TorchVersion{2, 0}, TorchVersion{2, 1}}) {
    SCOPED_TRACE(version.ToString());
    WatchdogTimeout t = Golden(version);
    t.group_rank = 1;
    t.global_rank = 13;
    for (const std::string& line : NcclWatchdogLines(t).lines) {
      EXPECT_EQ(line.find("13"), std::string::npos) << line;
      EXPECT_EQ(line.find("[rank"), std::string::npos) << line;
    }
  }
}

// 2.3 knows no group description; 2.4 and 2.5 print one only when set.
TEST(WatchdogLines, GroupDescription) {
  WatchdogTimeout t = Golden({2, 3});
  t.pg_desc = "default_pg";
  EXPECT_EQ(NcclWatchdogLines(t).lines[1].find("default_pg"), std::string::npos);
  t = Golden({2, 4});
  t.pg_name = "3";
  t.pg_desc = "";
  EXPECT_NE(NcclWatchdogLines(t).lines[1].find("] [PG 3 Rank 1] Exception"), std::string::npos);
  t = Golden({2, 5});
  t.pg_name = "7f3a";
  t.pg_local_id = 2;
  t.pg_desc = "";
  EXPECT_NE(NcclWatchdogLines(t).lines[1].find("] [PG ID 2 PG GUID 7f3a Rank 1] Exception"), std::string::npos);
  t.pg_desc = "dp";
  EXPECT_NE(NcclWatchdogLines(t).lines[1].find("] [PG ID 2 PG GUID 7f3a(dp) Rank 1] Exception"), std::string::npos);
}

// The month is not zero-padded (month * 100 + day); the time of day and the nanoseconds are.
TEST(WatchdogLines, TimestampPadding) {
  WatchdogTimeout t = Golden({2, 4});
  t.timestamp = {3, 9, 7, 5, 3, 42};
  EXPECT_TRUE(NcclWatchdogLines(t).lines[0].starts_with("[rank5]:[E309 07:05:03.000000042 ProcessGroupNCCL.cpp:607] "))
      << NcclWatchdogLines(t).lines[0];
}

// The shared field filling both backends print through (CollectiveTimeoutLines): for NCCL every field lands where
// NcclWatchdogLines puts it (the group's creation index is its name and 2.5's local id, its plan name the
// description, the rank both the group and the global rank); for Gloo the one line of its timed-out wait.
TEST(CollectiveTimeoutLines, FillTheNcclFieldsAndGloosLine) {
  CollectiveTimeout c;
  c.version = {2, 5};
  c.rank = 3;
  c.process_group_index = 1;
  c.process_group = "dp";
  c.seq = 110;
  c.op = Collective::broadcast;
  c.numel = {38659125, 38659125};
  c.timeout_ms = 3000;
  c.ran_for_ms = 3011;
  c.last_enqueued_seq = 111;
  c.last_completed_seq = 109;
  c.timestamp = {1, 2, 3, 4, 5, 6};
  WatchdogTimeout t;
  t.version = {2, 5};
  t.group_rank = 3;
  t.global_rank = 3;
  t.pg_name = "1";
  t.pg_local_id = 1;
  t.pg_desc = "dp";
  t.seq = 110;
  t.op = "BROADCAST";
  t.numel_in = 38659125;
  t.numel_out = 38659125;
  t.timeout_ms = 3000;
  t.ran_for_ms = 3011;
  t.last_enqueued_seq = 111;
  t.last_completed_seq = 109;
  t.timestamp = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(CollectiveTimeoutLines(c), NcclWatchdogLines(t).lines);
  EXPECT_NE(CollectiveTimeoutLines(c)[1].find("[PG ID 1 PG GUID 1(dp) Rank 3] Exception"), std::string::npos);
  c.backend = Comm::gloo;
  EXPECT_EQ(CollectiveTimeoutLines(c),
            (Lines{"[Rank 3] RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out "
                   "waiting 3000ms for recv operation to complete"}));
  EXPECT_EQ(CollectiveTimeoutNote(Comm::gloo, {1, 10}), "");
  EXPECT_EQ(CollectiveTimeoutNote(Comm::nccl, {1, 9}), "");
  EXPECT_EQ(CollectiveTimeoutNote(Comm::nccl, {1, 10}),
            "PyTorch 1.10's ProcessGroupNCCL.cpp line numbers are not known: inferred: line numbers unknown (596 from "
            "a 1.10.0a0 snapshot)");
}

TEST(CollectiveTimeoutLines, WorkNumelAndTheVirtualClock) {
  Collective c;
  c.set_op(Collective::allgather);
  c.set_numel(10);
  EXPECT_EQ(NumelOfWork(c, 4).in, 10u);
  EXPECT_EQ(NumelOfWork(c, 4).out, 40u);
  c.set_op(Collective::reduce_scatter);
  EXPECT_EQ(NumelOfWork(c, 4).out, 3u);
  c.set_op(Collective::barrier);
  c.set_numel(0);
  EXPECT_EQ(NumelOfWork(c, 4).in, 1u);
  EXPECT_EQ(NumelOfWork(c, 4).out, 1u);
  // 1810 s after virtual time 0: 1 January, 00:30:10; day 59 is 1 March (no leap years).
  const LogTimestamp at = LogTimestampOfVirtualTime(1'810'000'000'007);
  EXPECT_EQ(std::tie(at.month, at.day, at.hour, at.minute, at.second, at.nanoseconds),
            std::make_tuple(1, 1, 0, 30, 10, 7u));
  const LogTimestamp march = LogTimestampOfVirtualTime(int64_t{59} * 86400 * 1'000'000'000);
  EXPECT_EQ(std::tie(march.month, march.day), std::make_tuple(3, 1));
}

TEST(WatchdogLinesDeathTest, UnsupportedReleaseIsAProgrammerError) {
  WatchdogTimeout t = Golden({1, 8});
  EXPECT_DEATH(NcclWatchdogLines(t), "unsupported PyTorch release");
}

}  // namespace
}  // namespace petrsim
