// The timeline's options, shared by `petrsim SCENARIO --perfetto` and `petrsim export`: a window
// (--perfetto-iterations A-B, --perfetto-last SECONDS), the limit on records
// (--perfetto-records-max), and the notice a timeline cut at that limit gets on stderr.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "trace/perfetto_writer.h"

namespace CLI {
class App;
}  // namespace CLI

namespace petrsim {

struct PerfettoFlags {
  std::string iterations;  // --perfetto-iterations A-B
  std::string last;        // --perfetto-last SECONDS
  uint64_t records_max = PerfettoWriter::kRecordsMaxDefault;
  bool any() const { return !iterations.empty() || !last.empty() || records_max != PerfettoWriter::kRecordsMaxDefault; }
};
// Adds the three options to `command`; `clock` names the seconds of --perfetto-last ("virtual"
// for the simulator, "recorded" for export).
void AddPerfettoOptions(CLI::App& command, PerfettoFlags& flags, const char* clock);

// "A-B" with whole numbers A <= B. Throws ScenarioError naming --perfetto-iterations, what was
// expected and what was found.
std::pair<uint64_t, uint64_t> ParsePerfettoIterations(const std::string& text);
// Seconds > 0 (e.g. "60", "2.5"), as nanoseconds. Throws ScenarioError naming --perfetto-last.
int64_t ParsePerfettoLast(const std::string& text);

// The window of `flags` for a run that ends at `end_ns` (needed only with --perfetto-last).
PerfettoWindow MakePerfettoWindow(const PerfettoFlags& flags, int64_t end_ns);

// The notice for a timeline cut at its limit, or nothing when nothing was cut:
// "petrsim: --perfetto: PATH stops in iteration I, at TIME: its limit of N records was reached
// and M later records were not written; for a complete timeline of a part of the run, give a
// window: --perfetto-iterations A-B or --perfetto-last SECONDS (or raise --perfetto-records-max)".
// `time` formats the record's start time.
std::optional<std::string> PerfettoTruncationNotice(const std::string& path, const PerfettoWriter& writer,
                                                    const std::string& time);

}  // namespace petrsim
