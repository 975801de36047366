// The NCCL watchdog's timeout lines per PyTorch release; see watchdog_lines.h and docs/research/nccl_watchdog_lines.md.
#include "formats/torch_logs/watchdog_lines.h"

#include <fmt/format.h>

#include <array>
#include <ctime>

#include "base/assert.h"
#include "scenario/outcome.h"

namespace petrsim {
namespace {

// Where each line comes from in ProcessGroupNCCL.cpp: the __LINE__ of its LOG(ERROR), or for an `Exception raised from`
// line the line where the c10 error is built. 0: the release prints no such line, or (watchdog_error in 2.2 and 2.3)
// it does but no log shows the number, so the line is left out.
struct ReleaseFacts {
  TorchVersion version;
  int watchdog;             // "[Rank r] Watchdog caught collective operation timeout: WorkNCCL(...) ran for ..."
  int detected;             // "[PG ...] Exception (either an error or timeout) detected by watchdog at work: ..."
  int timeout_at;           // "[PG ...] Timeout at NCCL work: ..."
  int some_failed;          // "Some NCCL operations have failed or timed out. ..."
  int tear_down;            // "To avoid data inconsistency, ..."; 0: the sentence is in some_failed's line (to 1.12)
  int thread_terminated;    // "... watchdog thread terminated with exception: <the watchdog message>"
  int check_timeout_error;  // checkTimeout's c10::DistBackendError, whose trace the message carries
  int watchdog_error;       // ncclCommWatchdog's c10::DistBackendError, the one rethrown to std::terminate
  bool line_numbers_known;
  const char* evidence;
};

constexpr std::array<ReleaseFacts, 11> kReleases{{
    // v1.9.0's source (E2): abortTimedOutCollectives logs at 566, workCleanupLoop's handleNCCLGuard at 325 and
    // rethrows the stored std::runtime_error. A 1.9 user log agrees (E10).
    {{1, 9}, 566, 0, 0, 325, 0, 0, 0, 0, true, "verified from source (v1.9.0)"},
    // Inferred: no 1.10 source or versioned log. 596 is a 1.10.0a0 development snapshot's watchdog line (E6; its
    // follow-up is 350); 341 is the combined follow-up of a log whose version only its repository's README gives
    // (E24). No SeqNum: the snapshot has none, and the work that added it postdates the 1.10 release (section 2).
    {{1, 10}, 596, 0, 0, 341, 0, 0, 0, 0, false, "inferred: line numbers unknown (596 from a 1.10.0a0 snapshot)"},
    // Inferred: no 1.11 or 1.12 source or versioned log. SeqNum most likely first shipped in 1.11 (section 2). 737 is
    // the only SeqNum line without NumelIn seen before 1.13's 821, in a log of unstated version (E25); nothing shows
    // the follow-up's number, so 1.10's is kept. The follow-up is still the single combined line: the split into
    // "Some NCCL ..." and "To avoid data inconsistency ..." came with the error handling modes (pytorch#84386,
    // 2022-09-01), after the 1.12 release.
    {{1, 11}, 737, 0, 0, 341, 0, 0, 0, 0, false, "inferred: line numbers unknown (737 from a log of unstated version)"},
    {{1, 12}, 737, 0, 0, 341, 0, 0, 0, 0, false, "inferred: line numbers unknown (737 from a log of unstated version)"},
    // 1.13.1's source (E3, Debian's repack of the release tarball).
    {{1, 13}, 821, 0, 0, 456, 461, 0, 0, 0, true, "verified from source (1.13.1)"},
    // A GPU vendor's import of 2.0.0 (E4); a user log has the same 455 / 460 (E15).
    {{2, 0}, 828, 0, 0, 455, 460, 0, 0, 0, true, "verified from a vendor copy of the 2.0.0 source"},
    // 2.1.1 user log (E16) for 489 / 495 / 916; 475 from logs of unstated version in the same layout (E17).
    {{2, 1}, 475, 0, 0, 489, 495, 916, 0, 0, true, "from a user log (2.1.1); 475 from logs of unstated version"},
    // Logs of unstated version (E20, E21, E23), attributed to 2.2 by inference: `[rank<g>]:` present (added after the
    // 2.1 cut), c10::DistBackendError, frames still in workCleanupLoop.
    {{2, 2}, 523, 0, 0, 537, 543, 1182, 525, 0, true, "inferred: user logs of unstated version"},
    // 2.3.1 user log (E19) for 583 / 1414 / 565; 563 / 1537 / 577 from a log of unstated version (E19b).
    {{2, 3}, 563, 0, 1537, 577, 583, 1414, 565, 0, true, "from a user log (2.3.1); 563, 1537, 577 from another"},
    // A GPU vendor's import of 2.4.0 (E5); user logs agree on every number (E12, E13).
    {{2, 4}, 607, 1664, 1709, 621, 627, 1515, 609, 1521, true, "verified from a vendor copy of the 2.4.0 source"},
    // 2.5.1 user log (E22) and a 2.5.0 source build's (E22b); 1601 from logs of unstated version with the same
    // numbers (E23b).
    {{2, 5}, 616, 1785, 1834, 630, 636, 1595, 618, 1601, true, "from user logs (2.5.1, 2.5.0)"},
}};

constexpr TorchVersion kSeqNumSince{1, 11}, kNumelSince{2, 1}, kGlobalRankSince{2, 2}, kDistBackendErrorSince{2, 2},
    kWorkPrefixSince{2, 3}, kTimestampSince{2, 4}, kPgGuidSince{2, 5};

const ReleaseFacts& FactsOf(TorchVersion version) {
  for (const ReleaseFacts& facts : kReleases) {
    if (facts.version == version) return facts;
  }
  PETRSIM_ASSERT(false && "NcclWatchdogLines: unsupported PyTorch release");
  return kReleases.front();
}

// WorkNCCL's operator<<. It never shows TensorShape= here: the watchdog walks copies made without the outputs.
std::string WorkText(const WatchdogTimeout& t) {
  if (t.version < kSeqNumSince) return fmt::format("WorkNCCL(OpType={}, Timeout(ms)={})", t.op, t.timeout_ms);
  if (t.version < kNumelSince) {
    return fmt::format("WorkNCCL(SeqNum={}, OpType={}, Timeout(ms)={})", t.seq, t.op, t.timeout_ms);
  }
  return fmt::format("WorkNCCL(SeqNum={}, OpType={}, NumelIn={}, NumelOut={}, Timeout(ms)={})", t.seq, t.op, t.numel_in,
                     t.numel_out, t.timeout_ms);
}

// c10's log prefix: `[E ProcessGroupNCCL.cpp:<line>] `; from 2.2 after `[rank<global>]:`; from 2.4 with the time.
std::string LogPrefix(const WatchdogTimeout& t, int line) {
  const std::string rank = t.version >= kGlobalRankSince ? fmt::format("[rank{}]:", t.global_rank) : std::string();
  if (t.version < kTimestampSince) return fmt::format("{}[E ProcessGroupNCCL.cpp:{}] ", rank, line);
  const LogTimestamp& time = t.timestamp;
  return fmt::format("{}[E{} {:02}:{:02}:{:02}.{:09} ProcessGroupNCCL.cpp:{}] ", rank, time.month * 100 + time.day,
                     time.hour, time.minute, time.second, time.nanoseconds, line);
}

// The process group's prefix (createLogPrefix), from 2.3. Only 2.5's form with a description is in a log; the one
// without is inferred from 2.4's rule (the description in parentheses only when set).
std::string GroupPrefix(const WatchdogTimeout& t) {
  const bool described = t.version >= kTimestampSince && !t.pg_desc.empty();
  const std::string desc = described ? fmt::format("({})", t.pg_desc) : std::string();
  if (t.version >= kPgGuidSince) {
    return fmt::format("[PG ID {} PG GUID {}{} Rank {}] ", t.pg_local_id, t.pg_name, desc, t.group_rank);
  }
  return fmt::format("[PG {}{}{} Rank {}] ", t.pg_name, described ? " " : "", desc, t.group_rank);
}

// The first line of a c10 error's backtrace, as the pip wheels (built from ../torch) print it.
std::string ExceptionRaisedFrom(const char* function, int line) {
  return fmt::format(
      "Exception raised from {} at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:{} (most recent call first):",
      function, line);
}

void CheckTimestamp(const LogTimestamp& time) {
  PETRSIM_ASSERT(time.month >= 1);
  PETRSIM_ASSERT(time.month <= 12);
  PETRSIM_ASSERT(time.day >= 1);
  PETRSIM_ASSERT(time.day <= 31);
  PETRSIM_ASSERT(time.hour >= 0);
  PETRSIM_ASSERT(time.hour <= 23);
  PETRSIM_ASSERT(time.minute >= 0);
  PETRSIM_ASSERT(time.minute <= 59);
  PETRSIM_ASSERT(time.second >= 0);
  PETRSIM_ASSERT(time.second <= 60);  // a leap second
  PETRSIM_ASSERT(time.nanoseconds <= 999999999);
}

}  // namespace

WatchdogLines NcclWatchdogLines(const WatchdogTimeout& t) {
  const ReleaseFacts& facts = FactsOf(t.version);
  CheckTimestamp(t.timestamp);
  WatchdogLines out;
  out.line_numbers_known = facts.line_numbers_known;
  out.evidence = facts.evidence;
  auto& lines = out.lines;

  const std::string message = fmt::format(
      "[Rank {}] Watchdog caught collective operation timeout: {} ran for {} milliseconds before timing out.",
      t.group_rank, WorkText(t), t.ran_for_ms);
  lines.push_back(LogPrefix(t, facts.watchdog) + message);

  const std::string seqs = fmt::format("{}, last enqueued NCCL work: {}, last completed NCCL work: {}.", t.seq,
                                       t.last_enqueued_seq, t.last_completed_seq);
  if (facts.detected != 0) {
    lines.push_back(LogPrefix(t, facts.detected) + GroupPrefix(t) +
                    "Exception (either an error or timeout) detected by watchdog at work: " + seqs);
  }
  if (facts.timeout_at != 0) {
    lines.push_back(LogPrefix(t, facts.timeout_at) + GroupPrefix(t) + "Timeout at NCCL work: " + seqs);
  }

  // handleNCCLGuard / handleException, on the thread that then rethrows the watchdog's error.
  const std::string work_prefix = t.version >= kWorkPrefixSince ? fmt::format("[Rank {}] ", t.group_rank) : "";
  const std::string some_failed =
      "Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU "
      "operations might run on corrupted/incomplete data.";
  if (facts.tear_down == 0) {
    lines.push_back(LogPrefix(t, facts.some_failed) + work_prefix + some_failed +
                    " To avoid this inconsistency, we are taking the entire process down.");
  } else {
    lines.push_back(LogPrefix(t, facts.some_failed) + work_prefix + some_failed);
    lines.push_back(LogPrefix(t, facts.tear_down) + work_prefix +
                    "To avoid data inconsistency, we are taking the entire process down.");
  }

  // Up to 2.0 the rethrown error is the watchdog's own std::runtime_error. From 2.1 the watchdog thread catches it,
  // logs it with a head of its own and rethrows a new error with that text; from 2.2 both are c10 errors, whose what()
  // carries a backtrace: the checkTimeout one inside the message, the rethrow's own after it.
  std::string what = message;
  if (facts.thread_terminated != 0) {
    const std::string head =
        t.version < kWorkPrefixSince
            ? fmt::format("[Rank {}] NCCL watchdog thread terminated with exception: ", t.group_rank)
            : GroupPrefix(t) + "Process group watchdog thread terminated with exception: ";
    what = head + message;
    lines.push_back(LogPrefix(t, facts.thread_terminated) + what);
    if (facts.check_timeout_error != 0) lines.push_back(ExceptionRaisedFrom("checkTimeout", facts.check_timeout_error));
  }
  // libstdc++'s std::terminate handler.
  lines.push_back(fmt::format("terminate called after throwing an instance of '{}'",
                              t.version < kDistBackendErrorSince ? "std::runtime_error" : "c10::DistBackendError"));
  lines.push_back("  what():  " + what);
  if (facts.check_timeout_error != 0) lines.push_back(ExceptionRaisedFrom("checkTimeout", facts.check_timeout_error));
  if (facts.watchdog_error != 0) lines.push_back(ExceptionRaisedFrom("ncclCommWatchdog", facts.watchdog_error));
  return out;
}

WorkNumel NumelOfWork(const Collective& collective, uint32_t world_size) {
  const uint64_t n = world_size;
  WorkNumel numel;
  numel.in = collective.op() == Collective::barrier ? 1 : collective.numel();
  numel.out = numel.in;
  if (collective.op() == Collective::allgather) numel.out = numel.in * n;
  if (collective.op() == Collective::reduce_scatter) numel.out = (numel.in + n - 1) / n;
  return numel;
}

std::vector<std::string> CollectiveTimeoutLines(const CollectiveTimeout& t) {
  if (t.backend != Comm::nccl) {
    return {
        fmt::format("[Rank {}] RuntimeError: [../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] "
                    "Timed out waiting {}ms for recv operation to complete",
                    t.rank, t.timeout_ms)};
  }
  WatchdogTimeout timeout;
  timeout.version = t.version;
  timeout.group_rank = t.rank;
  timeout.global_rank = t.rank;
  timeout.pg_name = std::to_string(t.process_group_index);  // groups are numbered as created, the world group first
  timeout.pg_local_id = t.process_group_index;
  timeout.pg_desc = t.process_group;
  timeout.seq = t.seq;
  timeout.op = OpTypeName(t.op);
  timeout.numel_in = t.numel.in;
  timeout.numel_out = t.numel.out;
  timeout.timeout_ms = t.timeout_ms;
  timeout.ran_for_ms = t.ran_for_ms;
  timeout.last_enqueued_seq = t.last_enqueued_seq;
  timeout.last_completed_seq = t.last_completed_seq;
  timeout.timestamp = t.timestamp;
  return NcclWatchdogLines(timeout).lines;
}

std::string CollectiveTimeoutNote(Comm::Backend backend, TorchVersion version) {
  if (backend != Comm::nccl) return "";
  const ReleaseFacts& facts = FactsOf(version);
  if (facts.line_numbers_known) return "";
  return fmt::format("PyTorch {}'s ProcessGroupNCCL.cpp line numbers are not known: {}", version.ToString(),
                     facts.evidence);
}

LogTimestamp LogTimestampOfVirtualTime(int64_t ns) {
  static constexpr std::array<int, 12> kDays{31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  PETRSIM_ASSERT(ns >= 0);
  const int64_t seconds = ns / 1'000'000'000;
  int64_t day = (seconds / 86400) % 365;
  int month = 0;
  while (day >= kDays[month]) day -= kDays[month++];
  LogTimestamp time;
  time.month = month + 1;
  time.day = static_cast<int>(day) + 1;
  time.hour = static_cast<int>(seconds / 3600 % 24);
  time.minute = static_cast<int>(seconds / 60 % 60);
  time.second = static_cast<int>(seconds % 60);
  time.nanoseconds = static_cast<uint32_t>(ns % 1'000'000'000);
  return time;
}

LogTimestamp LogTimestampOfLocalTime(std::chrono::system_clock::time_point now) {
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  std::tm local{};
  ::localtime_r(&seconds, &local);
  LogTimestamp time;
  time.month = local.tm_mon + 1;
  time.day = local.tm_mday;
  time.hour = local.tm_hour;
  time.minute = local.tm_min;
  time.second = local.tm_sec;
  time.nanoseconds = static_cast<uint32_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count() % 1'000'000'000);
  return time;
}

}  // namespace petrsim
