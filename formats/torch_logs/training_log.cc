// The line grammars of training logs (see training_log.h): launcher prefixes, the marker scan, LogParser (each
// release's watchdog lines, mmcv/mmengine iteration markers, tracebacks, torchrun's summary) and the seed.
//
// A log of a gigabyte is read in two passes: the files are mapped (gzip ones inflated into memory), split into one
// chunk a thread at line boundaries, and each thread finds the lines that hold one of a few markers (most lines of a
// log hold none); then one pass in line order parses those lines, keeping per-rank state (a rank's open traceback is
// read ahead in the buffer, following that rank's lines).
#include "formats/torch_logs/training_log.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <map>
#include <string_view>
#include <thread>

#include <fmt/format.h>

#include "base/assert.h"
#include "base/error.h"
#include "base/utf8.h"
#include "formats/torch_logs/training_log_internal.h"

namespace petrsim {
namespace {

using std::string_view;

// ---------------------------------------------------------------------------------------------
// Small parsing helpers.

bool ConsumeUint(string_view s, size_t& pos, uint64_t& value) {
  const auto [end, ec] = std::from_chars(s.data() + pos, s.data() + s.size(), value);
  if (ec != std::errc() || end == s.data() + pos) return false;
  pos = static_cast<size_t>(end - s.data());
  return true;
}

std::optional<uint64_t> UintAfter(string_view s, string_view key, size_t from = 0) {
  const size_t at = s.find(key, from);
  if (at == string_view::npos) return std::nullopt;
  size_t pos = at + key.size();
  uint64_t value = 0;
  if (!ConsumeUint(s, pos, value)) return std::nullopt;
  return value;
}

std::optional<double> DoubleAfter(string_view s, string_view key) {
  const size_t at = s.find(key);
  if (at == string_view::npos) return std::nullopt;
  const size_t pos = at + key.size();
  double value = 0;
  const auto [end, ec] = std::from_chars(s.data() + pos, s.data() + s.size(), value);
  if (ec != std::errc() || end == s.data() + pos) return std::nullopt;
  return value;
}

string_view Trim(string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

namespace training_log_internal {

// The launcher prefixes at the start of a line, and the rest.
struct Prefixed {
  std::optional<uint32_t> c10d_rank;  // `[rank<g>]:`
  std::optional<uint32_t> tee_rank;   // torchrun --tee `[<role><local_rank>]:`
  std::optional<uint32_t> srun_rank;  // `srun -l`: `<r>: `
  string_view rest;
};

}  // namespace training_log_internal

namespace {

using training_log_internal::Prefixed;

Prefixed SplitPrefixes(string_view line) {
  Prefixed out;
  size_t pos = 0;
  // srun -l: the task number, right-aligned, then ": ".
  {
    size_t p = 0;
    while (p < line.size() && line[p] == ' ') ++p;
    uint64_t r = 0;
    size_t q = p;
    if (q < line.size() && std::isdigit(static_cast<unsigned char>(line[q])) && ConsumeUint(line, q, r) &&
        q + 1 < line.size() && line[q] == ':' && line[q + 1] == ' ' && q - p <= 7) {
      out.srun_rank = static_cast<uint32_t>(r);
      pos = q + 2;
    }
  }
  // A wrapper may indent the lines it passes on (petrsim_train's "  [rank0]:[E..."): look past the indent for a
  // prefix, but keep it when none follows (a traceback's `  File` lines are indented).
  if (!out.srun_rank) {
    size_t probe = pos;
    while (probe < line.size() && (line[probe] == ' ' || line[probe] == '\t')) ++probe;
    if (probe < line.size() && line[probe] == '[') pos = probe;
  }
  for (;;) {
    if (pos >= line.size() || line[pos] != '[') break;
    const size_t close = line.find("]:", pos);
    if (close == string_view::npos || close - pos > 40) break;
    const string_view inside = line.substr(pos + 1, close - pos - 1);
    size_t digits = inside.size();
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(inside[digits - 1]))) --digits;
    if (digits == inside.size() || digits == 0) break;
    const string_view role = inside.substr(0, digits);
    if (!std::all_of(role.begin(), role.end(),
                     [](char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '-'; })) {
      break;
    }
    uint64_t r = 0;
    size_t q = digits;
    if (!ConsumeUint(inside, q, r) || r > (1u << 24)) break;
    if (role == "rank") {
      out.c10d_rank = static_cast<uint32_t>(r);
    } else {
      out.tee_rank = static_cast<uint32_t>(r);
    }
    pos = close + 2;
  }
  out.rest = line.substr(pos);
  return out;
}

// The markers a line must hold to be looked at in the second pass.
constexpr string_view kMarkers[] = {
    "Watchdog caught",
    "Timeout at NCCL work",
    "detected by watchdog at work",
    "Heartbeat monitor",
    "communicator was aborted",
    "Timed out waiting",
    "Epoch",
    "Iter",
    "Traceback (most recent",
    "Set random seed",
    "gpu_ids",
    "global_world_sizes",
    "GPU number",
    "log_config",
    "exitcode",
    "local_rank:",
};

bool HasMarker(string_view line) {
  for (const string_view marker : kMarkers) {
    if (line.size() >= marker.size() && line.find(marker) != string_view::npos) return true;
  }
  return false;
}

// The first pass's filter: a shift-and automaton over the markers' first four bytes (15 x 4 bits of one word), so
// that a line costs a few operations a byte; a line where one of them occurs is then checked with HasMarker.
class MarkerFilter {
 public:
  MarkerFilter() {
    static_assert(std::size(kMarkers) * 4 <= 64);
    unsigned base = 0;
    for (const string_view marker : kMarkers) {
      for (unsigned j = 0; j < 4; ++j) table_[static_cast<unsigned char>(marker[j])] |= uint64_t{1} << (base + j);
      init_ |= uint64_t{1} << base;
      final_ |= uint64_t{1} << (base + 3);
      base += 4;
    }
  }
  bool MayMatch(const char* p, const char* end) const {
    uint64_t state = 0;
    for (; p < end; ++p) {
      state = ((state << 1) | init_) & table_[static_cast<unsigned char>(*p)];
      if ((state & final_) != 0) return true;
    }
    return false;
  }

 private:
  uint64_t table_[256] = {};
  uint64_t init_ = 0, final_ = 0;
};

struct MarkedLine {
  size_t begin = 0, end = 0;  // byte range of the line (without the newline)
  uint64_t line = 0;          // line number within its chunk, from 0
};

struct ChunkScan {
  std::vector<MarkedLine> marked;
  uint64_t lines = 0;
  std::optional<size_t> nul;  // offset of a NUL byte
};

ChunkScan ScanChunk(string_view text, size_t begin, size_t end) {
  static const MarkerFilter filter;
  ChunkScan scan;
  const char* base = text.data();
  size_t pos = begin;
  while (pos < end) {
    const void* nl = std::memchr(base + pos, '\n', end - pos);
    const size_t line_end = nl != nullptr ? static_cast<size_t>(static_cast<const char*>(nl) - base) : end;
    const string_view line(base + pos, line_end - pos);
    if (filter.MayMatch(line.data(), line.data() + line.size()) && HasMarker(line))
      scan.marked.push_back(MarkedLine{pos, line_end, scan.lines});
    ++scan.lines;
    pos = line_end + 1;
  }
  if (!scan.nul) {
    const void* nul = std::memchr(base + begin, '\0', end - begin);
    if (nul != nullptr) scan.nul = static_cast<size_t>(static_cast<const char*>(nul) - base);
  }
  return scan;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The second pass.

namespace training_log_internal {

void LogParser::BeginFile(const FileContext& file) {
  file_ = &file;
  file_lines_ = 0;
}

void LogParser::ParseWindow(string_view text, size_t end, uint64_t offset) {
  text_ = text;
  const unsigned threads = std::max(1u, std::min(8u, std::thread::hardware_concurrency()));
  const size_t want = end < (8u << 20) ? 1 : threads;
  std::vector<size_t> cuts{0};
  for (size_t i = 1; i < want; ++i) {
    size_t cut = end * i / want;
    const size_t nl = text.substr(0, end).find('\n', cut);
    cut = nl == string_view::npos ? end : nl + 1;
    if (cut > cuts.back()) cuts.push_back(cut);
  }
  cuts.push_back(end);
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<ChunkScan> scans(cuts.size() - 1);
  {
    std::vector<std::thread> pool;
    for (size_t i = 1; i < scans.size(); ++i) {
      pool.emplace_back([&, i] { scans[i] = ScanChunk(text, cuts[i], cuts[i + 1]); });
    }
    if (!scans.empty()) scans[0] = ScanChunk(text, cuts[0], cuts[1]);
    for (auto& t : pool) t.join();
  }
  for (size_t i = 0; i < scans.size(); ++i) {
    if (scans[i].nul) {
      throw ScenarioError(fmt::format("{}: byte {}: expected a text training log, found binary data (a NUL byte)",
                                      file_->path, offset + *scans[i].nul));
    }
    for (const MarkedLine& m : scans[i].marked) {
      ParseLine(file_lines_ + m.line + 1, m.begin, string_view(text.data() + m.begin, m.end - m.begin));
    }
    file_lines_ += scans[i].lines;
  }
}

void LogParser::EndFile() {
  log_.lines += file_lines_;
  // Lines per rank for a file of one rank.
  if (file_->rank) log_.ranks[*file_->rank].lines += file_lines_;
}

LogPlace LogParser::Here(uint64_t line) const { return LogPlace{file_->path, line}; }

std::string LogParser::At(uint64_t line) const { return fmt::format("{}:{}", file_->path, line); }

// The rank of a line, by the most reliable source it has; `message_rank` is the `[Rank r]` of a world-group message.
std::optional<uint32_t> LogParser::RankOf(const Prefixed& p, std::optional<uint32_t> message_rank) {
  if (p.c10d_rank) return p.c10d_rank;
  if (file_->rank) return file_->rank;
  if (p.srun_rank) return p.srun_rank;
  if (p.tee_rank) return p.tee_rank;
  return message_rank;
}

RankLog& LogParser::Rank(uint32_t r) {
  CheckedRank(r, line_);
  RankLog& rank = log_.ranks[r];
  rank.rank = r;
  if (file_->rank && *file_->rank == r && rank.source.empty()) rank.source = file_->path;
  return rank;
}

void LogParser::ParseLine(uint64_t number, size_t offset, string_view line) {
  line_ = number;
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const Prefixed p = SplitPrefixes(line);
  const string_view rest = p.rest;
  if (rest.find("Watchdog caught") != string_view::npos) return Watchdog(number, p);
  if (rest.find("Timeout at NCCL work") != string_view::npos ||
      rest.find("detected by watchdog at work") != string_view::npos) {
    return WorkStatus(number, p);
  }
  if (rest.find("Heartbeat monitor") != string_view::npos) {
    if (const auto r = RankOf(p, MessageRank(rest, number))) Rank(*r).heartbeat_timeout = true;
    return;
  }
  if (const size_t at = rest.find("communicator was aborted"); at != string_view::npos) {
    std::optional<uint32_t> on;
    if (const auto r = UintAfter(rest, "aborted on rank ", at)) on = CheckedRank(*r, number);
    if (const auto r = RankOf(p, on)) Rank(*r).communicator_aborted = true;
    return;
  }
  if (rest.find("Timed out waiting") != string_view::npos) return GlooTimeout(number, p);
  if (rest.find("Traceback (most recent call last)") != string_view::npos) {
    return Traceback(number, offset, line.size(), p);
  }
  if (rest.find("Epoch") != string_view::npos || rest.find("Iter") != string_view::npos) {
    if (Iteration(number, p)) return;
  }
  if (rest.find("Set random seed to ") != string_view::npos) return Seed(number, rest);
  if (const size_t at = rest.find("gpu_ids = range(0, "); at != string_view::npos) return GpuIds(number, rest, at);
  if (const auto n = CountAfter(number, rest, "global_world_sizes=[", ",]")) {
    SetWorldSize(*n, fmt::format("torchrun's global_world_sizes ({})", At(number)));
    return;
  }
  if (const auto n = CountAfter(number, rest, "GPU number: ", " \t\r,.;)")) {
    SetWorldSize(*n, fmt::format("GPU number: {} ({})", *n, At(number)));
    return;
  }
  if (rest.find("log_config") != string_view::npos) {
    // `log_config = dict(interval=50, ...)`, or as mmcv's pretty_text prints it, over the next lines.
    const string_view ahead = text_.substr(offset, 400);
    const size_t close = ahead.find(')');
    if (const auto n = UintAfter(ahead.substr(0, close), "interval=")) config_interval_ = *n;
    return;
  }
  // torchrun's failure summary: `  rank      : 3 (local_rank: 3)` then `  exitcode  : -6 (pid: ...)`.
  if (rest.find("local_rank:") != string_view::npos) {
    const string_view t = Trim(rest);
    if (t.rfind("rank", 0) == 0) {
      if (const auto r = UintAfter(t, ": ")) summary_rank_ = CheckedRank(*r, number);
    }
    return;
  }
  if (const size_t at = rest.find("exitcode"); at != string_view::npos && summary_rank_) {
    ExitCode(rest.substr(at + 8));
  }
}

// `Set random seed to S` (the line's first): one seed per job.
void LogParser::Seed(uint64_t number, string_view rest) {
  const std::optional<LoggedSeed> seed = FindLoggedSeed(rest);
  if (!seed) return;
  PETRSIM_ASSERT(seed->line == 1);  // `rest` is one line
  const int64_t value = seed->seed;
  if (log_.seed && *log_.seed != value) {
    throw ScenarioError(fmt::format(
        "{}: `Set random seed to {}`, but {} set the seed to {}: lines of two different jobs (or two runs) are "
        "mixed in the log; give petrsim one run's log",
        At(number), value, seed_at_, *log_.seed));
  }
  log_.seed = value;
  seed_at_ = At(number);
}

// torchrun's summary `exitcode  : -6 (pid: ...)` (`after`: what follows "exitcode") of the rank the
// summary's line before named.
void LogParser::ExitCode(string_view after) {
  const string_view t = Trim(after);
  size_t pos = t.find(':');
  if (pos == string_view::npos) return;
  ++pos;
  while (pos < t.size() && t[pos] == ' ') ++pos;
  const bool negative = pos < t.size() && t[pos] == '-';
  if (negative) ++pos;
  uint64_t code = 0;
  if (ConsumeUint(t, pos, code)) {
    Rank(*summary_rank_).exit_code = negative ? -static_cast<int64_t>(code) : static_cast<int64_t>(code);
  }
  summary_rank_.reset();
}

// A rank a line names (line `number`; `bracketed`: as `[Rank r]`): past the limit on a log's ranks it is refused,
// never cut to 32 bits.
uint32_t LogParser::CheckedRank(uint64_t r, uint64_t number, bool bracketed) const {
  if (r >= kLogRanksMax) {
    throw ScenarioError(
        fmt::format("{}: {}: expected a rank of the job, below {} (petrsim's limit on the ranks of a log's job)",
                    At(number), bracketed ? fmt::format("[Rank {}]", r) : fmt::format("rank {}", r), kLogRanksMax));
  }
  return static_cast<uint32_t>(r);
}

// The count after `key` in a line, where one of `ends` (or the line's end) closes it: 10**12 is not 10. Nothing when
// the key is not there or no digit follows it.
std::optional<uint64_t> LogParser::CountAfter(uint64_t number, string_view rest, string_view key,
                                              string_view ends) const {
  const size_t at = rest.find(key);
  if (at == string_view::npos) return std::nullopt;
  size_t pos = at + key.size();
  uint64_t n = 0;
  if (!ConsumeUint(rest, pos, n)) return std::nullopt;
  if (pos < rest.size() && ends.find(rest[pos]) == string_view::npos) {
    throw ScenarioError(fmt::format("{}: {}: expected {}N with N the job's rank count", At(number),
                                    EscapedBytes(rest.substr(at, std::min<size_t>(rest.size() - at, 60))), key));
  }
  return n;
}

// `gpu_ids = range(0, N)` (mmcv's config dump): only a plain count closes the range; 10**12 is not 10, nor a count
// past the log's ranks their count.
void LogParser::GpuIds(uint64_t number, string_view rest, size_t at) {
  size_t pos = at + std::string_view("gpu_ids = range(0, ").size();
  uint64_t n = 0;
  if (!ConsumeUint(rest, pos, n) || pos >= rest.size() || rest[pos] != ')' || n < 1 || n > kLogRanksMax) {
    const string_view shown = rest.substr(at, std::min<size_t>(rest.size() - at, 60));
    throw ScenarioError(
        fmt::format("{}: {}: expected gpu_ids = range(0, N) with N the job's GPU count in [1, {}] "
                    "(petrsim's limit on the ranks of a log's job)",
                    At(number), EscapedBytes(shown), kLogRanksMax));
  }
  SetWorldSize(n, fmt::format("gpu_ids = range(0, {}) ({})", n, At(number)));
}

void LogParser::SetWorldSize(uint64_t n, std::string from) {
  if (n > kLogRanksMax) {
    throw ScenarioError(fmt::format(
        "{}: world size {}: expected at most {} (petrsim's limit on the ranks of a log's job)", from, n, kLogRanksMax));
  }
  if (n == 0) return;
  if (log_.world_size && *log_.world_size != n) {
    throw ScenarioError(fmt::format(
        "{}: world size {}, but {} says {}: lines of two different jobs are mixed in the log; give petrsim one "
        "run's log",
        from, n, log_.world_size_from, *log_.world_size));
  }
  log_.world_size = static_cast<uint32_t>(n);
  log_.world_size_from = std::move(from);
}

// `[Rank r]` or `[PG ... Rank r]` of a message (line `number`). A rank past the limit on a log's ranks is refused
// rather than cut to 32 bits.
std::optional<uint32_t> LogParser::MessageRank(string_view rest, uint64_t number) const {
  for (size_t at = rest.find("Rank "); at != string_view::npos; at = rest.find("Rank ", at + 1)) {
    if (at > 0 && rest[at - 1] != '[' && rest[at - 1] != ' ') continue;
    size_t pos = at + 5;
    uint64_t r = 0;
    if (!ConsumeUint(rest, pos, r) || pos >= rest.size() || rest[pos] != ']') continue;
    return CheckedRank(r, number, /*bracketed=*/true);
  }
  return std::nullopt;
}

// `PG <name>` / `PG <name> (<desc>)` (2.3, 2.4) or `PG ID <id> PG GUID <guid>(<desc>)` (2.5) before ` Rank r]`.
void LogParser::MessageGroup(string_view rest, std::string& pg, std::string& desc) {
  const size_t open = rest.find("[PG ");
  if (open == string_view::npos) return;
  const size_t close = rest.find(" Rank ", open);
  if (close == string_view::npos) return;
  string_view inside = rest.substr(open + 4, close - open - 4);
  if (const size_t guid = inside.find("PG GUID "); guid != string_view::npos) inside = inside.substr(guid + 8);
  const size_t paren = inside.find('(');
  if (paren != string_view::npos) {
    const size_t end = inside.find(')', paren);
    desc = std::string(inside.substr(paren + 1, (end == string_view::npos ? inside.size() : end) - paren - 1));
    inside = Trim(inside.substr(0, paren));
  }
  pg = std::string(Trim(inside));
}

void LogParser::Watchdog(uint64_t number, const Prefixed& p) {
  const string_view rest = p.rest;
  const size_t at = rest.find("Watchdog caught");
  // `[Rank r]` right before it (1.9-2.5) names the rank in the group.
  const auto group_rank = MessageRank(rest.substr(0, at), number);
  LogTimeout t;
  t.group_rank = group_rank;
  t.where = Here(number);
  MessageGroup(rest, t.pg, t.pg_desc);
  if (const size_t src = rest.find("ProcessGroupNCCL.cpp:"); src != string_view::npos && src < at) {
    size_t pos = src + 21;
    uint64_t n = 0;
    if (ConsumeUint(rest, pos, n)) t.source_line = fmt::format("ProcessGroupNCCL.cpp:{}", n);
  }
  const size_t work = rest.find("WorkNCCL(", at);
  bool complete = false;
  if (work != string_view::npos) {
    const string_view w = rest.substr(work);
    t.seq = UintAfter(w, "SeqNum=");
    if (const size_t op = w.find("OpType="); op != string_view::npos) {
      size_t end = op + 7;
      while (end < w.size() && (std::isalnum(static_cast<unsigned char>(w[end])) || w[end] == '_')) ++end;
      t.op = std::string(w.substr(op + 7, end - op - 7));
    }
    t.numel_in = UintAfter(w, "NumelIn=");
    t.numel_out = UintAfter(w, "NumelOut=");
    t.timeout_ms = UintAfter(w, "Timeout(ms)=");
    t.ran_for_ms = UintAfter(w, "ran for ");
    complete = w.find("before timing out") != string_view::npos;
  }
  if (!complete) {
    Note(fmt::format("{}: a watchdog line cut short; read what it holds", At(number)));
  }
  // The world group's `[Rank r]` is the global rank; another group's is not.
  const bool world = t.pg == "0" || t.pg_desc == "default_pg";
  const auto rank = RankOf(p, world ? group_rank : std::nullopt);
  if (!rank) {
    ++log_.unattributed;
    Note(fmt::format("{}: a watchdog line of no known rank (group rank {}); left out", At(number),
                     group_rank ? std::to_string(*group_rank) : "?"));
    return;
  }
  Merge(*rank, std::move(t), number);
}

// 2.3+: the group, sequence numbers and progress of the work the watchdog caught.
void LogParser::WorkStatus(uint64_t number, const Prefixed& p) {
  const string_view rest = p.rest;
  LogTimeout t;
  t.where = Here(number);
  t.group_rank = MessageRank(rest, number);
  MessageGroup(rest, t.pg, t.pg_desc);
  t.seq = rest.find("Timeout at NCCL work: ") != string_view::npos ? UintAfter(rest, "Timeout at NCCL work: ")
                                                                   : UintAfter(rest, "detected by watchdog at work: ");
  t.last_enqueued = UintAfter(rest, "last enqueued NCCL work: ");
  t.last_completed = UintAfter(rest, "last completed NCCL work: ");
  const bool world = t.pg == "0" || t.pg_desc == "default_pg";
  const auto rank = RankOf(p, world ? t.group_rank : std::nullopt);
  if (!rank || !t.seq) return;
  // 2.5 prints this line for errors too; it belongs to a timeout only when a watchdog line names the same work.
  Merge(*rank, std::move(t), number, /*status_only=*/true);
}

void LogParser::GlooTimeout(uint64_t number, const Prefixed& p) {
  const string_view rest = p.rest;
  LogTimeout t;
  t.backend = "gloo";
  t.where = Here(number);
  t.group_rank = MessageRank(rest, number);
  t.timeout_ms = UintAfter(rest, "Timed out waiting ");
  // `Timed out waiting 5000ms for recv operation`: the transport wait, not the collective.
  if (const size_t f = rest.find("ms for "); f != string_view::npos) {
    const size_t end = rest.find(" operation", f);
    if (end != string_view::npos) t.gloo_wait = std::string(rest.substr(f + 7, end - f - 7));
  }
  const auto rank = RankOf(p, t.group_rank);
  if (!rank) {
    ++log_.unattributed;
    return;
  }
  Merge(*rank, std::move(t), number);
}

void LogParser::Merge(uint32_t r, LogTimeout t, uint64_t number, bool status_only) {
  RankLog& rank = Rank(r);
  for (LogTimeout& have : rank.timeouts) {
    const bool same = (t.seq && have.seq)
                          ? *t.seq == *have.seq && (have.pg == t.pg || t.pg == "0" || have.pg == "0")
                          : (t.op.empty() || have.op.empty() || t.op == have.op) &&
                                (!t.timeout_ms || !have.timeout_ms || *t.timeout_ms == *have.timeout_ms);
    if (!same) continue;
    // The same work printed again (what():, `watchdog thread terminated with exception: ...`): fill in.
    if (have.pg == "0" && t.pg != "0") have.pg = t.pg;
    if (have.pg_desc.empty()) have.pg_desc = t.pg_desc;
    if (have.op.empty()) have.op = t.op;
    if (!have.seq) have.seq = t.seq;
    if (!have.numel_in) have.numel_in = t.numel_in;
    if (!have.numel_out) have.numel_out = t.numel_out;
    if (!have.timeout_ms) have.timeout_ms = t.timeout_ms;
    if (!have.ran_for_ms) have.ran_for_ms = t.ran_for_ms;
    if (!have.last_enqueued) have.last_enqueued = t.last_enqueued;
    if (!have.last_completed) have.last_completed = t.last_completed;
    if (have.source_line.empty()) have.source_line = t.source_line;
    if (!have.group_rank) have.group_rank = t.group_rank;
    return;
  }
  if (status_only) {
    // A status line with no watchdog line yet: keep it; a watchdog line of the same work fills it in.
    rank.timeouts.push_back(std::move(t));
    return;
  }
  for (const LogTimeout& have : rank.timeouts) {
    if (have.pg != t.pg || have.backend != t.backend || have.op.empty()) continue;
    throw ScenarioError(fmt::format(
        "{}: rank {} times out in {}{} on process group {}, but {}:{} has it time out in {}{}: one rank times out "
        "once; lines of two different jobs (or two runs) are mixed in the log; give petrsim one run's log",
        At(number), r, t.op.empty() ? "a collective" : t.op, t.seq ? fmt::format(" SeqNum {}", *t.seq) : "", t.pg,
        have.where.file, have.where.line, have.op, have.seq ? fmt::format(" SeqNum {}", *have.seq) : ""));
  }
  rank.timeouts.push_back(std::move(t));
}

// `Epoch [e][i/n]`, `Epoch(train) [e][i/n]`, `Iter [i/n]`, `Iter(train) [i/n]` (mmengine pads with spaces): the
// first of them in `rest` into `it`, and where it ends (npos when there is none).
size_t LogParser::IterationMarker(string_view rest, LogIteration& it) {
  for (const bool by_epoch : {true, false}) {
    const string_view key = by_epoch ? "Epoch" : "Iter";
    for (size_t at = rest.find(key); at != string_view::npos; at = rest.find(key, at + 1)) {
      size_t q = at + key.size();
      if (rest.substr(q, 7) == "(train)") q += 7;
      while (q < rest.size() && rest[q] == ' ') ++q;
      if (q >= rest.size() || rest[q] != '[') continue;
      ++q;
      uint64_t a = 0, b = 0, c = 0;
      while (q < rest.size() && rest[q] == ' ') ++q;
      if (!ConsumeUint(rest, q, a)) continue;
      if (by_epoch) {
        if (rest.substr(q, 2) != "][") continue;
        q += 2;
        while (q < rest.size() && rest[q] == ' ') ++q;
        if (!ConsumeUint(rest, q, b)) continue;
      } else {
        b = a;
      }
      if (q >= rest.size() || rest[q] != '/') continue;
      ++q;
      if (!ConsumeUint(rest, q, c) || q >= rest.size() || rest[q] != ']') continue;
      if (c == 0 || b > c || (by_epoch && a == 0)) continue;
      it.by_epoch = by_epoch;
      if (by_epoch) it.epoch = a;
      it.inner = b;
      it.of = c;
      it.done = by_epoch ? (a - 1) * c + b : b;
      return q;
    }
  }
  return string_view::npos;
}

// An iteration line: the job's and its rank's last iteration, and the logging interval.
bool LogParser::Iteration(uint64_t number, const Prefixed& p) {
  const string_view rest = p.rest;
  LogIteration it;
  const size_t pos = IterationMarker(rest, it);
  if (pos == string_view::npos) return false;
  // The grammar takes only [i/n] with 0 < n and i <= n, and epochs from 1.
  PETRSIM_ASSERT(it.of > 0);
  PETRSIM_ASSERT(it.inner <= it.of);
  if (it.by_epoch) PETRSIM_ASSERT(it.epoch.value_or(0) >= 1);
  const string_view tail = rest.substr(pos);
  it.time_s = DoubleAfter(tail, " time: ");
  if (!it.time_s) it.time_s = DoubleAfter(tail, "\ttime: ");
  it.data_time_s = DoubleAfter(tail, "data_time: ");
  it.where = Here(number);
  if (log_.last_iteration) {
    const LogIteration& prev = *log_.last_iteration;
    if (prev.by_epoch != it.by_epoch || prev.of != it.of) {
      throw ScenarioError(fmt::format(
          "{}: an iteration line of {} iterations {}, but {}:{} counts {} {}: lines of two different jobs are "
          "mixed in the log; give petrsim one run's log",
          At(number), it.of, it.by_epoch ? "per epoch" : "in all", prev.where.file, prev.where.line, prev.of,
          prev.by_epoch ? "per epoch" : "in all"));
    }
    if (it.done < prev.done) {
      throw ScenarioError(fmt::format(
          "{}: iteration {} logged after iteration {} ({}:{}): the log goes back, so it holds two runs (a restart, "
          "or two jobs); give petrsim the log of the run that hung",
          At(number), it.done, prev.done, prev.where.file, prev.where.line));
    }
    if (it.done > prev.done && (!min_step_ || it.done - prev.done < *min_step_)) {
      // An epoch's last, shorter interval is not the interval.
      if (!(it.by_epoch && prev.epoch && it.epoch && *it.epoch != *prev.epoch)) min_step_ = it.done - prev.done;
    }
  }
  // A log never goes back (refused above): the job's last iteration is the furthest.
  if (log_.last_iteration) PETRSIM_ASSERT(it.done >= log_.last_iteration->done);
  log_.last_iteration = it;
  // mmcv and mmengine log from rank 0 only: an iteration line of no other rank is rank 0's.
  Rank(RankOf(p, std::nullopt).value_or(0)).last_iteration = it;
  return true;
}

// A traceback: read ahead, following the lines of the same rank (or, unprefixed, the next lines).
void LogParser::Traceback(uint64_t number, size_t offset, size_t length, const Prefixed& head) {
  const auto head_rank = RankOf(head, std::nullopt);
  const bool by_prefix = head.c10d_rank || head.srun_rank || head.tee_rank;
  LogTraceback tb;
  tb.where = Here(number);
  size_t pos = offset + length + 1;
  int budget = 4000;  // lines looked at
  bool expect_code = false;
  while (pos < text_.size() && budget-- > 0) {
    const size_t nl = text_.find('\n', pos);
    string_view line = text_.substr(pos, (nl == string_view::npos ? text_.size() : nl) - pos);
    pos = nl == string_view::npos ? text_.size() : nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const Prefixed p = SplitPrefixes(line);
    if (by_prefix) {
      const auto r = p.c10d_rank ? p.c10d_rank : p.srun_rank ? p.srun_rank : p.tee_rank;
      if (!r || r != (head.c10d_rank ? head.c10d_rank : head.srun_rank ? head.srun_rank : head.tee_rank)) continue;
    }
    const string_view rest = p.rest;
    if (rest.rfind("  File \"", 0) == 0) {
      LogFrame f;
      const size_t q = rest.find('"', 8);
      if (q == string_view::npos) break;
      f.file = std::string(rest.substr(8, q - 8));
      if (const auto n = UintAfter(rest, ", line ", q)) f.line = *n;
      if (const size_t in = rest.find(", in ", q); in != string_view::npos)
        f.function = std::string(Trim(rest.substr(in + 5)));
      tb.frames.push_back(std::move(f));
      expect_code = true;
      continue;
    }
    if (rest.rfind("    ", 0) == 0) {
      const string_view code = Trim(rest);
      const bool marker = !code.empty() && code.find_first_not_of("^~ ") == string_view::npos;
      if (expect_code && !marker && !tb.frames.empty() && tb.frames.back().code.empty()) {
        tb.frames.back().code = std::string(code);
      }
      continue;
    }
    if (Trim(rest).empty()) continue;
    tb.exception = std::string(Trim(rest));
    break;
  }
  std::optional<uint32_t> rank = head_rank;
  if (!rank) {
    // An unprefixed combined log: the exception may name the rank ("... aborted on rank 3.").
    if (const auto r = UintAfter(tb.exception, "on rank ")) rank = static_cast<uint32_t>(*r);
  }
  if (!rank) {
    ++log_.unattributed;
    Note(fmt::format("{}: a Python traceback of no known rank ({}); left out", At(number),
                     tb.exception.empty() ? "no exception line" : tb.exception));
    return;
  }
  if (tb.exception.empty()) Note(fmt::format("{}: a Python traceback cut short", At(number)));
  if (tb.exception.find("communicator was aborted") != std::string::npos) Rank(*rank).communicator_aborted = true;
  Rank(*rank).tracebacks.push_back(std::move(tb));
}

void LogParser::Note(std::string note) {
  if (log_.notes.size() < 20) {
    log_.notes.push_back(std::move(note));
  } else if (log_.notes.size() == 20) {
    log_.notes.push_back("(more notes left out)");
  }
}

// The releases a watchdog line's format fits, from its fields and ProcessGroupNCCL.cpp line.
std::string ReleaseOfFormat(const TrainingLog& log) {
  for (const auto& [r, rank] : log.ranks) {
    for (const LogTimeout& t : rank.timeouts) {
      if (t.backend != "nccl" || t.op.empty()) continue;
      static const std::map<std::string, std::string> kByLine = {
          {"ProcessGroupNCCL.cpp:485", "1.8"},  {"ProcessGroupNCCL.cpp:566", "1.9"},
          {"ProcessGroupNCCL.cpp:821", "1.13"}, {"ProcessGroupNCCL.cpp:828", "2.0"},
          {"ProcessGroupNCCL.cpp:475", "2.1"},  {"ProcessGroupNCCL.cpp:523", "2.2"},
          {"ProcessGroupNCCL.cpp:563", "2.3"},  {"ProcessGroupNCCL.cpp:607", "2.4"},
          {"ProcessGroupNCCL.cpp:616", "2.5"},
      };
      if (const auto it = kByLine.find(t.source_line); it != kByLine.end()) return it->second;
      if (t.numel_in) return "2.1 or later";
      if (t.seq) return "1.11 to 2.0";
      return "1.8 to 1.10";
    }
  }
  return "";
}

}  // namespace training_log_internal

std::optional<LoggedSeed> FindLoggedSeed(std::string_view text) {
  const size_t at = text.find("Set random seed to ");
  if (at == string_view::npos) return std::nullopt;
  size_t pos = at + 19;
  LoggedSeed out;
  out.negative = pos < text.size() && text[pos] == '-';
  if (out.negative) ++pos;
  uint64_t seed = 0;
  if (!ConsumeUint(text, pos, seed)) return std::nullopt;
  out.seed = out.negative ? -static_cast<int64_t>(seed) : static_cast<int64_t>(seed);
  out.line = 1 + static_cast<uint64_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
  return out;
}

IterationBound HangIterationBound(const LogIteration& last, uint64_t interval) {
  IterationBound bound;
  bound.first = last.done;
  const uint64_t step = std::max<uint64_t>(interval, 1);
  bound.last = last.done + step - 1;
  if (last.by_epoch && last.epoch) {
    // The epoch's last iterations (fewer than the interval) are not logged: the hang may be in the next epoch's first
    // interval.
    const uint64_t epoch_end = *last.epoch * last.of;  // iterations done when the epoch ends
    if (bound.last >= epoch_end) bound.last = epoch_end + step - 1;
  }
  return bound;
}

}  // namespace petrsim