// `petrsim diagnose` on training logs: a TrainingLog as a Diagnosis, and its log section as text and JSON; see
// diagnose.h and training_log.h.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "base/assert.h"
#include "replay/diagnose.h"
#include "replay/diagnose_internal.h"

namespace petrsim {

using diagnose_internal::RankList;

namespace {

// A watchdog timeout, not a 2.5 status line of an error with no watchdog line.
bool IsTimeout(const LogTimeout& t) { return !t.op.empty() || t.timeout_ms.has_value(); }

}  // namespace

namespace diagnose_internal {

// The frame a rank waits in: its traceback's innermost frame outside torch (the caller of the collective).
const LogFrame* WaitingFrame(const RankLog& rank) {
  for (auto tb = rank.tracebacks.rbegin(); tb != rank.tracebacks.rend(); ++tb) {
    for (auto f = tb->frames.rbegin(); f != tb->frames.rend(); ++f) {
      const bool in_torch = f->file.find("/torch/") != std::string::npos || f->file.rfind("torch/", 0) == 0;
      if (!in_torch) return &*f;
    }
  }
  return nullptr;
}

std::string FrameText(const LogFrame& f) {
  return fmt::format("{}:{} in {}{}", f.file, f.line, f.function, f.code.empty() ? "" : ": " + f.code);
}

}  // namespace diagnose_internal

using diagnose_internal::FrameText;
using diagnose_internal::WaitingFrame;

namespace {

// The world size of a log's diagnosis: the log's when it says one (a different `given_world_size` is noted), else
// `given_world_size` when set; when neither, the ranks seen (world_size_known false).
void SettleWorldSize(TrainingLog& log, std::optional<uint32_t> given_world_size, Diagnosis& d) {
  uint32_t seen = 0;
  for (const auto& [r, rank] : log.ranks) seen = std::max(seen, r + 1);
  if (given_world_size && log.world_size && *log.world_size != *given_world_size) {
    // What the job printed is what ran: its count names the missing ranks, and the difference is said.
    d.world_size = std::max(*log.world_size, seen);
    log.notes.push_back(
        fmt::format("the log says {} ranks ({}), the scenario (or --world-size) {}: the log's count is "
                    "used",
                    *log.world_size, log.world_size_from, *given_world_size));
  } else if (given_world_size) {
    d.world_size = *given_world_size;
    if (seen > *given_world_size) {
      log.notes.push_back(
          fmt::format("the log names rank {}, beyond the scenario's {} ranks", seen - 1, *given_world_size));
    }
  } else if (log.world_size) {
    d.world_size = std::max(*log.world_size, seen);
  } else {
    d.world_size = seen;
    d.world_size_known = false;
  }
}

// The collectives the ranks time out in, by (group, sequence number), with the ranks that wait in each; and per group
// the ranks that timed out in any of its collectives.
struct LogTimeouts {
  std::map<std::pair<std::string, int64_t>, StuckCollective> by_work;
  std::map<std::string, std::set<uint32_t>> timed_out;  // by group
};

LogTimeouts CollectTimeouts(const TrainingLog& log, Diagnosis& d) {
  LogTimeouts out;
  for (const auto& [r, rank] : log.ranks) {
    for (const LogTimeout& t : rank.timeouts) {
      if (!IsTimeout(t)) continue;
      ++d.calls;
      StuckCollective& s = out.by_work[{t.pg, t.seq ? static_cast<int64_t>(*t.seq) : 0}];
      if (s.waiting_ranks.empty()) {
        s.group = t.pg;
        s.desc = !t.pg_desc.empty() ? t.pg_desc : t.pg == "0" ? "default_pg" : "";
        s.seq = t.seq ? static_cast<int64_t>(*t.seq) : 0;
        s.op = t.op.empty() ? "?" : t.op;
        if (t.numel_in) s.sizes = {{static_cast<int64_t>(*t.numel_in)}};
      }
      if (s.op == "?" && !t.op.empty()) s.op = t.op;
      s.waiting_ranks.push_back(r);
      out.timed_out[t.pg].insert(r);
    }
  }
  return out;
}

// The stuck collectives, root ones (the lowest sequence number of each group) first: each missing the ranks of the
// world that did not time out in its group.
void AddStuck(const TrainingLog& log, LogTimeouts& timeouts, const std::set<uint32_t>& with_file, Diagnosis& d) {
  std::map<std::string, int64_t> lowest_seq;
  for (const auto& [key, s] : timeouts.by_work) {
    auto [it, fresh] = lowest_seq.emplace(key.first, key.second);
    if (!fresh) it->second = std::min(it->second, key.second);
  }
  for (auto& [key, s] : timeouts.by_work) {
    std::sort(s.waiting_ranks.begin(), s.waiting_ranks.end());
    const std::set<uint32_t>& waiting = timeouts.timed_out[key.first];
    for (uint32_t r = 0; r < d.world_size; ++r) {
      if (waiting.count(r) > 0) continue;
      s.missing_ranks.push_back(r);
      if (log.per_rank_files > 0 && with_file.count(r) == 0) s.without_file.push_back(r);
    }
    // The ranks that printed a timeout in the group are never among its missing ones.
    for (const uint32_t r : s.waiting_ranks) PETRSIM_ASSERT(waiting.count(r) > 0);
    s.root = key.second == lowest_seq[key.first];
    d.stuck.push_back(std::move(s));
  }
  std::stable_sort(d.stuck.begin(), d.stuck.end(),
                   [](const StuckCollective& a, const StuckCollective& b) { return a.root && !b.root; });
}

// The ranks that never printed a timeout (suspects), and the cause they point at.
void NeverReachedCause(const TrainingLog& log, const LogTimeouts& timeouts, Diagnosis& d) {
  std::set<uint32_t> any_timeout;
  for (const auto& [pg, ranks] : timeouts.timed_out) any_timeout.insert(ranks.begin(), ranks.end());
  for (uint32_t r = 0; r < d.world_size; ++r) {
    if (any_timeout.count(r) == 0) d.suspects.push_back(r);
  }
  if (d.stuck.empty() || d.suspects.empty()) return;
  std::string when;
  if (d.hang_iterations) {
    when = fmt::format(", in iteration {}..{} (the last iteration logged was {}, every {})", d.hang_iterations->first,
                       d.hang_iterations->last, log.last_iteration->done, *log.log_interval);
  }
  d.cause = fmt::format(
      "rank(s) {} never printed a timeout: they never reached the collective the others wait in{}; a log holds no "
      "sampler or worker events: run with --scenario to check the data",
      RankList(d.suspects), when);
  d.cause_detail = CauseDetail{"never_reached", d.suspects.front(), std::nullopt, std::nullopt};
}

}  // namespace

Diagnosis DiagnoseTrainingLog(TrainingLog log, std::optional<uint32_t> given_world_size) {
  Diagnosis d;
  d.format = "training_log";
  SettleWorldSize(log, given_world_size, d);
  LogTimeouts timeouts = CollectTimeouts(log, d);
  std::set<uint32_t> with_file;
  if (log.per_rank_files > 0) {
    for (const auto& [r, rank] : log.ranks) {
      if (!rank.source.empty()) with_file.insert(r);
    }
  }
  AddStuck(log, timeouts, with_file, d);
  PETRSIM_ASSERT(std::is_partitioned(d.stuck.begin(), d.stuck.end(), [](const StuckCollective& s) { return s.root; }));
  if (log.per_rank_files > 0) {
    for (uint32_t r = 0; r < d.world_size; ++r) {
      if (with_file.count(r) == 0) d.ranks_without_file.push_back(r);
    }
  }
  d.events = log.lines;
  if (log.last_iteration && log.log_interval)
    d.hang_iterations = HangIterationBound(*log.last_iteration, *log.log_interval);
  NeverReachedCause(log, timeouts, d);
  d.log = std::move(log);
  return d;
}

namespace diagnose_internal {
namespace {

// Ranks the log never names, this many or more in a row, share one row of the table.
constexpr uint32_t kSilentRunRow = 32;

// The table of ranks: what each timed out in, for how long, its last iteration and the frame it waits in.
std::string RankTable(const Diagnosis& d) {
  const TrainingLog& log = *d.log;
  std::string out;
  const uint32_t rows = d.world_size > 0 ? d.world_size : static_cast<uint32_t>(log.ranks.size());
  for (uint32_t r = 0; r < rows; ++r) {
    // The first rank from r on that the log names; a long run of ranks it never names is one row (a world of a
    // million ranks printed a line each).
    const auto next = log.ranks.lower_bound(r);
    const uint32_t run_end = next == log.ranks.end() ? rows : std::min(rows, next->first);
    if (run_end - r >= kSilentRunRow) {
      out += fmt::format("  {:<5} {:<40} {:<22} {:<16} {}\n", fmt::format("{}-{}", r, run_end - 1),
                         "- (never printed a timeout)", "-", "-", "-");
      r = run_end - 1;
      continue;
    }
    std::string timeout = "- (never printed a timeout)", waited = "-", iteration = "-", frame = "-";
    if (run_end == r) {  // the log names rank r
      const RankLog& rank = next->second;
      for (const LogTimeout& t : rank.timeouts) {
        if (!IsTimeout(t)) continue;
        const std::string group = !t.pg_desc.empty() ? t.pg_desc : t.pg == "0" ? "default_pg" : "pg " + t.pg;
        timeout = fmt::format("{} {}{}{}",
                              !t.op.empty()         ? t.op
                              : t.gloo_wait.empty() ? "?"
                                                    : "? (Gloo " + t.gloo_wait + ")",
                              group, t.seq ? fmt::format(" seq {}", *t.seq) : "",
                              t.numel_in ? fmt::format(" numel {}", *t.numel_in) : "");
        waited = fmt::format("{} of {}", t.ran_for_ms ? std::to_string(*t.ran_for_ms) : "?",
                             t.timeout_ms ? std::to_string(*t.timeout_ms) : "?");
        break;
      }
      if (rank.last_iteration) iteration = std::to_string(rank.last_iteration->done);
      if (const LogFrame* f = WaitingFrame(rank)) frame = FrameText(*f);
      if (rank.exit_code) frame += fmt::format(" (exit {})", *rank.exit_code);
      if (rank.communicator_aborted) frame += " (communicator aborted)";
      if (rank.heartbeat_timeout) frame += " (heartbeat monitor fired)";
    }
    out += fmt::format("  {:<5} {:<40} {:<22} {:<16} {}\n", r, timeout, waited, iteration, frame);
  }
  return out;
}

}  // namespace

std::string FormatLogSection(const Diagnosis& d) {
  const TrainingLog& log = *d.log;
  std::string out = fmt::format("\ntraining log: {} file(s), {} lines", log.files.size(), log.lines);
  if (!log.torch_release.empty()) out += fmt::format("; watchdog lines of PyTorch {}", log.torch_release);
  if (log.seed) out += fmt::format("; seed {}", *log.seed);
  out += "\n";
  if (!d.world_size_known) {
    out += fmt::format(
        "  world size: not in the log (no gpu_ids, torchrun world size or file per rank): at least {} ranks; ranks "
        "above {} cannot be named (give --world-size N or --scenario)\n",
        d.world_size, d.world_size == 0 ? 0 : d.world_size - 1);
  } else if (!log.world_size_from.empty()) {
    out += fmt::format("  world size {}: {}\n", d.world_size, log.world_size_from);
  }
  out += fmt::format("  {:<5} {:<40} {:<22} {:<16} {}\n", "rank", "timed out in", "waited (ms)", "last iteration",
                     "frame (traceback)");
  out += RankTable(d);
  if (log.last_iteration) {
    const LogIteration& it = *log.last_iteration;
    out += fmt::format("  last iteration line: {} [{}{}/{}] at {}:{} ({} iterations done{})\n",
                       it.by_epoch ? "Epoch" : "Iter", it.epoch ? fmt::format("{}][", *it.epoch) : "", it.inner, it.of,
                       it.where.file, it.where.line, it.done,
                       it.time_s ? fmt::format(", {:.3f} s an iteration", *it.time_s) : "");
    if (d.hang_iterations) {
      out += fmt::format("  hang: in iteration {}..{} (logged every {} iterations)\n", d.hang_iterations->first,
                         d.hang_iterations->last, *log.log_interval);
    } else {
      out += fmt::format("  hang: in iteration {} or later (log interval unknown)\n", it.done);
    }
  }
  if (!d.suspects.empty() && !d.stuck.empty()) {
    out += fmt::format("  suspects: rank(s) {} printed no timeout\n", RankList(d.suspects));
  }
  if (log.unattributed > 0) out += fmt::format("  {} recognised line(s) of no known rank\n", log.unattributed);
  for (const std::string& note : log.notes) out += fmt::format("  note: {}\n", note);
  return out;
}

nlohmann::json LogJson(const Diagnosis& d) {
  const TrainingLog& log = *d.log;
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& [r, rank] : log.ranks) {
    nlohmann::json timeouts = nlohmann::json::array();
    for (const LogTimeout& t : rank.timeouts) {
      if (!IsTimeout(t)) continue;
      const auto opt = [](const std::optional<uint64_t>& v) {
        return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
      };
      timeouts.push_back({{"pg_id", t.pg},
                          {"desc", t.pg_desc},
                          {"seq", opt(t.seq)},
                          {"op", t.op},
                          {"numel_in", opt(t.numel_in)},
                          {"numel_out", opt(t.numel_out)},
                          {"timeout_ms", opt(t.timeout_ms)},
                          {"ran_for_ms", opt(t.ran_for_ms)},
                          {"last_enqueued", opt(t.last_enqueued)},
                          {"last_completed", opt(t.last_completed)},
                          {"backend", t.backend},
                          {"gloo_wait", t.gloo_wait},
                          {"line", fmt::format("{}:{}", t.where.file, t.where.line)}});
    }
    nlohmann::json frame = nullptr;
    if (const LogFrame* f = WaitingFrame(rank)) {
      frame = {{"file", f->file}, {"line", f->line}, {"function", f->function}, {"code", f->code}};
    }
    ranks.push_back({{"rank", r},
                     {"file", rank.source},
                     {"timeouts", timeouts},
                     {"last_iteration", rank.last_iteration ? nlohmann::json(rank.last_iteration->done) : nullptr},
                     {"frame", frame},
                     {"exception", rank.tracebacks.empty() ? nlohmann::json(nullptr)
                                                           : nlohmann::json(rank.tracebacks.back().exception)},
                     {"communicator_aborted", rank.communicator_aborted},
                     {"heartbeat_timeout", rank.heartbeat_timeout},
                     {"exit_code", rank.exit_code ? nlohmann::json(*rank.exit_code) : nullptr}});
  }
  nlohmann::json last = nullptr;
  if (log.last_iteration) {
    const LogIteration& it = *log.last_iteration;
    last = {{"done", it.done},
            {"epoch", it.epoch ? nlohmann::json(*it.epoch) : nullptr},
            {"inner", it.inner},
            {"of", it.of},
            {"time_s", it.time_s ? nlohmann::json(*it.time_s) : nullptr},
            {"line", fmt::format("{}:{}", it.where.file, it.where.line)}};
  }
  return {{"files", log.files},
          {"lines", log.lines},
          {"world_size_known", d.world_size_known},
          {"world_size_from", log.world_size_from},
          {"torch_release", log.torch_release},
          {"seed", log.seed ? nlohmann::json(*log.seed) : nullptr},
          {"log_interval", log.log_interval ? nlohmann::json(*log.log_interval) : nullptr},
          {"last_iteration", last},
          {"hang_iterations",
           d.hang_iterations ? nlohmann::json({{"first", d.hang_iterations->first}, {"last", d.hang_iterations->last}})
                             : nullptr},
          {"suspects", d.suspects},
          {"ranks", ranks},
          {"unattributed_lines", log.unattributed},
          {"notes", log.notes}};
}

}  // namespace diagnose_internal

}  // namespace petrsim
