// Training logs as a recording for `petrsim diagnose`: what a hung job's ranks printed (one combined log or one file
// per rank, plain or gzip), read into per-rank findings.
//
// Data flow: ReadTrainingLogs (files → TrainingLog: per rank its watchdog timeouts, the last iteration it logged, its
// Python traceback and how it exited) → DiagnoseTrainingLog (TrainingLog → Diagnosis, the shape a dump's diagnosis has:
// the ranks that timed out wait in a collective, the ranks that never printed a timeout are the missing ones) →
// FormatDiagnosis / DiagnosisJson, and CrossCheck with --scenario.
//
// Recognised, wherever in the line (after any launcher prefix):
//   - ProcessGroupNCCL's watchdog lines of PyTorch 1.8 to 2.5 (docs/research/nccl_watchdog_lines.md): `[Rank r]
//     Watchdog caught collective operation timeout: WorkNCCL(SeqNum=n, OpType=OP, NumelIn=n, NumelOut=n,
//     Timeout(ms)=t) ran for m milliseconds before timing out.` (SeqNum from 1.11, NumelIn/Out from 2.1), 2.3's
//     `[PG p Rank r] Timeout at NCCL work: n, last enqueued NCCL work: e, last completed NCCL work: c.`, 2.5's
//     `[PG ID i PG GUID g(desc) Rank r] Exception (either an error or timeout) detected by watchdog at work: n, ...`,
//     the heartbeat monitor's `Heartbeat monitor timed out!`, `NCCL communicator was aborted on rank r`, and Gloo's
//     `Timed out waiting <t>ms for <op> operation to complete`;
//   - mmcv and mmengine iteration lines: `Epoch [e][i/n]`, `Epoch(train) [e][i/n]`, `Iter [i/n]`,
//     `Iter(train) [i/n]`, with `time:` and `data_time:`; `Set random seed to S`; `gpu_ids = range(0, N)` of the
//     config mmcv prints; torchrun's `global_world_sizes=[N, ...]`; torchrun's failure summary (`rank : r
//     (local_rank: l)`, `exitcode : c`);
//   - Python tracebacks (`Traceback (most recent call last):`, `  File "f", line n, in fn`, the exception line).
// The rank of a line: the c10d `[rank<g>]:` prefix (2.2+), the file's own rank (torchrun --log-dir's
// `<local_rank>/stderr.log`, or `rank<r>` in the file name), Slurm `srun -l`'s `<r>: `, torchrun --tee's
// `[<role><local_rank>]:`, and last the `[Rank r]` of the message.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace petrsim {

struct LogPlace {
  std::string file;
  uint64_t line = 0;  // from 1
};

// One collective a rank's watchdog (or Gloo's waiting call) found past its timeout.
struct LogTimeout {
  std::string pg = "0";  // the process group as printed (`PG <name>`); "0" (the world group) when not printed
  std::string pg_desc;   // 2.4+: `(default_pg)`
  std::optional<uint32_t> group_rank;  // `[Rank r]`
  std::optional<uint64_t> seq;         // SeqNum= (1.11+) or `Timeout at NCCL work: n` (2.3+)
  std::string op;                      // OpType=, e.g. ALLREDUCE; "" unknown (Gloo never prints it)
  std::string gloo_wait;               // Gloo: the transport wait that timed out ("recv"), not the collective
  std::optional<uint64_t> numel_in, numel_out;
  std::optional<uint64_t> timeout_ms, ran_for_ms;
  std::optional<uint64_t> last_enqueued, last_completed;
  std::string backend = "nccl";  // or "gloo"
  std::string source_line;       // `ProcessGroupNCCL.cpp:<n>` of the watchdog line, "" when none
  LogPlace where;                // its first line
};

// An mmcv/mmengine training iteration line: `done` iterations were complete when it was printed.
struct LogIteration {
  uint64_t done = 0;  // iterations complete in the whole run (0-based index of the next one)
  std::optional<uint64_t> epoch;
  uint64_t inner = 0;  // the printed i of [i/n]
  uint64_t of = 0;     // the printed n
  bool by_epoch = false;
  std::optional<double> time_s, data_time_s;
  LogPlace where;
};

struct LogFrame {
  std::string file;
  uint64_t line = 0;
  std::string function;
  std::string code;  // the source line Python prints under it, trimmed; may be empty
};

struct LogTraceback {
  std::vector<LogFrame> frames;  // outermost first, as Python prints them
  std::string exception;         // the last line: "RuntimeError: NCCL communicator was aborted on rank 3."
  LogPlace where;
};

struct RankLog {
  uint32_t rank = 0;
  std::string source;                // its own file, or "" for a combined log
  uint64_t lines = 0;                // lines attributed to it
  std::vector<LogTimeout> timeouts;  // distinct collectives, in order
  std::optional<LogIteration> last_iteration;
  std::vector<LogTraceback> tracebacks;
  bool communicator_aborted = false;  // `NCCL communicator was aborted`
  bool heartbeat_timeout = false;     // 2.3+: the heartbeat monitor fired
  std::optional<int64_t> exit_code;   // torchrun's failure summary
};

struct TrainingLog {
  std::vector<std::string> files;
  uint64_t bytes = 0, lines = 0;
  std::map<uint32_t, RankLog> ranks;  // ranks something was attributed to
  uint32_t per_rank_files = 0;        // files that belong to one rank each
  std::optional<uint32_t> world_size;
  std::string world_size_from;                 // where the world size was read: "gpu_ids = range(0, 8) (train.log:12)"
  std::optional<int64_t> seed;                 // `Set random seed to S`
  std::optional<LogIteration> last_iteration;  // the job's last iteration line (whichever rank printed it)
  std::optional<uint64_t> log_interval;        // from consecutive iteration lines, or `log_config` interval
  std::string torch_release;                   // the releases the watchdog lines' format fits, "" when none
  std::string torch_version;       // the environment block's `PyTorch: 1.13.1+cu117`, "" when the log has none
  std::string torch_version_from;  // where: "train.log:7"
  std::vector<std::string> notes;  // lines cut short, unattributed lines, assumptions
  uint64_t unattributed = 0;       // recognised lines without a rank
};

// The most ranks a log's job may have: a rank a log names (in a line or a file name) is below it, and so is the world
// size it states (a larger one is ignored). The diagnosis lists every rank of the world, so this bounds its size.
inline constexpr uint32_t kLogRanksMax = 1u << 20;

// A gzip log inflates to at most kGzipRatioMax times its compressed size (past its first kGzipFreeBytes): deflate
// reaches ~1000x only on data no log has (a "gzip bomb"); a log that does is refused, to be read gunzipped.
inline constexpr uint64_t kGzipRatioMax = 200;
inline constexpr uint64_t kGzipFreeBytes = uint64_t{64} << 20;

// True when `path` (a regular file) reads as a training log: gzip, or text that is not a Flight Recorder JSON dump.
bool LooksLikeTrainingLog(const std::string& path);

// True when `path` is a training log, or a directory of them (some *.log, *.txt, *.out, *.err, or .gz of them, at
// any depth, and no petrsim trace or Flight Recorder dump at its top).
bool IsTrainingLogPath(const std::string& path);

// Reads PATHS (files, or directories searched recursively for *.log, *.txt, *.out, *.err and their .gz). Throws
// ScenarioError naming the file (and line) for: a binary file, a file that cannot be read, lines of two different
// jobs mixed (two seeds, two iteration totals, one rank timing out in two collectives of one group), a rank past
// kLogRanksMax, a gzip past kGzipRatioMax, a line longer than 32 MiB. A file is read a window at a time (32 MiB of
// lines and 1 MiB past them, for a traceback's frames): memory stays constant in the log's size.
TrainingLog ReadTrainingLogs(const std::vector<std::string>& paths);

// `Set random seed to S`, as mmcv's and mmdet3d's train scripts print the seed they drew.
struct LoggedSeed {
  int64_t seed = 0;
  bool negative = false;  // S was printed with a minus sign
  uint64_t line = 0;      // the line of the text it is on, from 1
};
// The first `Set random seed to S` of `text` (a log, or one line of it); nullopt when there is none or no number
// follows it. One reader for `petrsim diagnose` (ReadTrainingLogs, which refuses two different seeds in one log)
// and `petrsim import` (the seed the job ran with).
std::optional<LoggedSeed> FindLoggedSeed(std::string_view text);

// The inclusive range of the iteration a job that logged `last` every `interval` iterations hung in.
struct IterationBound {
  uint64_t first = 0, last = 0;
};
IterationBound HangIterationBound(const LogIteration& last, uint64_t interval);

}  // namespace petrsim
