// `petrsim diagnose`: the probe's `stall` events; see diagnose_stall.h.
#include "replay/diagnose_stall.h"

#include <algorithm>

#include <fmt/format.h>

#include "replay/diagnose.h"
#include "trace/wire_decoder.h"

namespace petrsim::diagnose_internal {
namespace {

// The report the trace reader gives a spin it knows only from an open `load` (diagnose_load.cc).
constexpr std::string_view kResampleReport = "the resample loop never ends";
// Frames of a stack the text report shows (the innermost); the JSON has them all.
constexpr size_t kFramesShown = 12;

std::vector<std::string> StackLines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    if (!line.empty()) lines.emplace_back(line);
    if (end == std::string_view::npos) break;
    text.remove_prefix(end + 1);
  }
  return lines;
}

bool SameGetitem(const WorkerStall& stall, const StuckGetitem& spin) {
  return spin.worker == stall.worker && spin.batch == stall.batch && spin.slot == stall.slot;
}

std::string Innermost(const WorkerStall& stall) {
  return stall.stack.empty() ? std::string("(no Python frame sampled)") : stall.stack.back();
}

// What the cause says of a stalled getitem (the verdict's "DataLoader worker W of rank R never returned batch B
// (slot S, index I): <this>").
std::string StallReport(const WorkerStall& stall) {
  std::string loads = stall.attempts > 1
                          ? fmt::format("{} loads, no resample loop the watchdog stopped", stall.attempts)
                          : std::string("no resample loop");
  if (stall.loading_index >= 0 && stall.loading_index != stall.index) {
    loads += fmt::format(", loading index {}", stall.loading_index);
  }
  return fmt::format("its __getitem__ did not return ({}{}; the probe sampled its Python stack {:.1f} s in, at {})",
                     stall.loader != 0 ? fmt::format("DataLoader {}, ", stall.loader) : std::string(), loads,
                     static_cast<double>(stall.sampled_ns - stall.since_ns) / 1e9, Innermost(stall));
}

const WorkerStall* CauseStall(const Diagnosis& d) {
  if (!d.cause_detail || !d.cause_detail->getitem) return nullptr;
  const CauseDetail& c = *d.cause_detail;
  for (const WorkerStall& stall : d.stalls) {
    if (stall.rank == c.rank && !stall.returned && SameGetitem(stall, *c.getitem)) return &stall;
  }
  return nullptr;
}

}  // namespace

void NoteStall(RankRecording& rank, const TraceEventView& event) {
  WorkerStall& stall = rank.stalls.emplace_back();
  stall.worker = event.worker;
  stall.loader = event.loader;
  stall.batch = event.iteration;
  stall.slot = event.slot;
  stall.index = event.index;
  stall.loading_index = event.final_index;
  stall.attempts = event.attempts;
  stall.since_ns = event.start_ns;
  stall.sampled_ns = event.end_ns;
  stall.stack = StackLines(event.text);
}

void NoteLoadAfterStall(RankRecording& rank, const TraceEventView& event) {
  if (!event.completed || rank.stalls.empty()) return;
  for (WorkerStall& stall : rank.stalls) {
    if (!stall.returned && stall.worker == event.worker && stall.loader == event.loader &&
        stall.batch == event.iteration && stall.slot == event.slot && event.start_ns == stall.since_ns) {
      stall.returned = true;
    }
  }
}

void SettleStalls(RankRecording& rank) {
  for (WorkerStall& stall : rank.stalls) {
    stall.rank = rank.rank;
    if (stall.returned) continue;
    auto spin = std::find_if(rank.spins.begin(), rank.spins.end(),
                             [&](const StuckGetitem& s) { return SameGetitem(stall, s); });
    if (spin == rank.spins.end()) {  // the recording ends with the getitem still running (a job still hung)
      StuckGetitem& added = rank.spins.emplace_back();
      added.rank = rank.rank;
      added.worker = stall.worker;
      added.batch = stall.batch;
      added.slot = stall.slot;
      added.index = stall.index;
      added.since_ns = stall.since_ns;
      added.attempts = stall.attempts;
      added.report = StallReport(stall);
    } else if (spin->report == kResampleReport) {  // known only from its open load: what the stall says instead
      spin->report = StallReport(stall);
      spin->attempts = std::max(spin->attempts, stall.attempts);
    } else {
      stall.livelock = true;  // the watchdog's livelock event named it
    }
  }
}

void ApplyStalls(const Recordings& rec, Diagnosis& d) {
  for (const RankRecording& rank : rec.ranks) {
    for (WorkerStall stall : rank.stalls) {
      stall.since_s = static_cast<double>(stall.since_ns - rec.origin_ns) / 1e9;
      stall.sampled_s = static_cast<double>(stall.sampled_ns - rec.origin_ns) / 1e9;
      stall.from_first_event = rec.origin_ns != 0;
      d.stalls.push_back(std::move(stall));
    }
  }
  const WorkerStall* stall = CauseStall(d);
  if (stall != nullptr && !stall->livelock && d.cause_detail->kind == "livelock") d.cause_detail->kind = "stall";
}

std::string FormatStalls(const Diagnosis& d) {
  std::string out;
  std::vector<const WorkerStall*> returned;
  for (const WorkerStall& stall : d.stalls) {
    if (stall.returned) {
      returned.push_back(&stall);
      continue;
    }
    if (out.empty()) {
      out =
          "\nstalled: DataLoader getitems that never returned, with the Python stack the probe sampled in the worker "
          "(innermost frame last)\n";
    }
    out += fmt::format(
        "  rank {} {}worker {}, batch {} (slot {}, index {}): running from {:.3f} s, sampled at {:.3f} s{}\n",
        stall.rank, stall.loader != 0 ? fmt::format("DataLoader {} ", stall.loader) : std::string(), stall.worker,
        stall.batch, stall.slot, stall.index, stall.since_s, stall.sampled_s,
        stall.from_first_event ? " (times from the job's first recorded event)" : "");
    if (stall.stack.size() > kFramesShown) {
      out += fmt::format("      ({} outer frames left out; diagnose --json has them)\n",
                         stall.stack.size() - kFramesShown);
    }
    const size_t first = stall.stack.size() > kFramesShown ? stall.stack.size() - kFramesShown : 0;
    for (size_t i = first; i < stall.stack.size(); ++i) {
      out += fmt::format("    {} {}\n", i + 1 == stall.stack.size() ? ">" : " ", stall.stack[i]);
    }
    if (stall.stack.empty()) out += "      (no Python frame sampled)\n";
  }
  if (!returned.empty()) {
    std::string which;
    for (size_t i = 0; i < returned.size() && i < 3; ++i) {
      const WorkerStall& s = *returned[i];
      which += fmt::format("{}rank {} worker {} batch {} slot {} at {}", i > 0 ? "; " : "", s.rank, s.worker, s.batch,
                           s.slot, Innermost(s));
    }
    out += fmt::format("\nslow: {} getitem(s) ran past the probe's stall bound, then returned: {}{}\n", returned.size(),
                       which, returned.size() > 3 ? "; ..." : "");
  }
  return out;
}

void AddStallsJson(const Diagnosis& d, nlohmann::json& out) {
  if (d.stalls.empty()) return;  // (recordings without the probe's stall events: the JSON as before)
  nlohmann::json stalls = nlohmann::json::array();
  for (const WorkerStall& s : d.stalls) {
    stalls.push_back({{"rank", s.rank},
                      {"worker", s.worker},
                      {"loader", s.loader},
                      {"batch", s.batch},
                      {"slot", s.slot},
                      {"index", s.index},
                      {"loading_index", s.loading_index},
                      {"attempts", s.attempts},
                      {"since_s", s.since_s},
                      {"sampled_s", s.sampled_s},
                      {"returned", s.returned},
                      {"livelock", s.livelock},
                      {"innermost", s.stack.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.stack.back())},
                      {"stack", s.stack}});
  }
  out["stalls"] = std::move(stalls);
  const WorkerStall* stall = CauseStall(d);
  if (stall != nullptr && out.contains("cause_detail") && out["cause_detail"].is_object()) {
    out["cause_detail"]["stack"] = stall->stack;
    out["cause_detail"]["innermost"] =
        stall->stack.empty() ? nlohmann::json(nullptr) : nlohmann::json(stall->stack.back());
  }
}

}  // namespace petrsim::diagnose_internal
