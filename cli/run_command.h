// `petrsim SCENARIO`: formats a simulated run (sim/simulator.h) for humans or as JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "check/fixes.h"
#include "cli/perfetto_options.h"
#include "data/dataset.h"
#include "proto/scenario.pb.h"
#include "sim/simulator.h"
#include "trace/directory_writer.h"

namespace CLI {
class App;
}  // namespace CLI

namespace petrsim {

// Exit codes of a run: 0 completed, 1 the job hangs, desyncs or a rank dies, 3 petrsim's own
// limit was reached before the job ended (2 is bad input, as everywhere).
int RunExitCode(const sim::SimResult& result);

// wall_ms: the run's wall-clock time, or nullopt to leave it out (golden files). `sets`: the
// --set overrides the run was given, repeated in its `reproduce` line (quoted for a shell).
std::string FormatRunReport(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                            const sim::SimResult& result, std::optional<double> wall_ms,
                            const std::vector<std::string>& sets = {});

// `text` as one word of a POSIX shell: as is when it holds only characters no shell treats
// specially (letters, digits, and _ - + = . , / : @ %), else in single quotes ("a b" -> 'a b',
// "it's" -> 'it'\''s').
std::string ShellQuote(const std::string& text);
// `fixes`: what makes a job that hangs in its data terminate (check/fixes.h), the report's "fixes".
std::string FormatRunJson(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                          const sim::SimResult& result, std::optional<double> wall_ms,
                          const std::vector<Fix>& fixes = {});

// Virtual nanoseconds as "1835.120 s (0:30:35)".
std::string FormatVirtualTime(int64_t ns);

// `petrsim SCENARIO [--json] [--set f=v ...] [--perfetto FILE [--perfetto-iterations A-B]
// [--perfetto-last SECONDS]] [--trace DIR ...] [--no-wall-time] [--quiet]`: one simulated run and
// its report.
struct RunFlags {
  std::string scenario_path;
  std::vector<std::string> sets;
  bool json = false;
  bool no_wall_time = false;
  bool quiet = false;  // no progress bar
  std::string perfetto;
  PerfettoFlags perfetto_flags;
  std::string trace_dir;
  uint64_t trace_ring = 0;  // keep only the last N events per rank
  uint64_t trace_records_max = TraceDirectoryWriter::kRecordsMaxDefault;
  std::string memory_max;  // --memory-max; empty: half of this machine's memory
};
// Adds the run's positional scenario and options to the top-level `app`.
void AddRunOptions(CLI::App& app, RunFlags& flags);
// Throws ScenarioError when the options do not go together (--trace-ring without --trace, a
// --perfetto window without --perfetto, a bad window, or run options without a scenario).
void CheckRunFlags(const RunFlags& flags);
// Simulates flags.scenario_path, writes the trace files and timeline asked for (atomically, after
// the run), prints the report; returns RunExitCode. With --perfetto-last the simulation runs
// twice: the first run finds where the run ends (it is deterministic), the second writes. A
// progress bar is drawn on stderr when it is a terminal (not with --quiet); a timeline cut at
// its limit is said on stderr.
int RunSimulation(const RunFlags& flags);

}  // namespace petrsim
