// `petrsim SCENARIO`: formats a simulated run (sim/simulator.h) for humans or as JSON.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/dataset.h"
#include "model/scenario.pb.h"
#include "sim/simulator.h"
#include "trace/directory_writer.h"

namespace CLI {
class App;
}  // namespace CLI

namespace petrsim {

// Exit codes of a run: 0 completed, 1 the job hangs, desyncs or a rank dies, 3 petrsim's own
// limit was reached before the job ended (2 is bad input, as everywhere).
int RunExitCode(const sim::SimResult& result);

// wall_ms: the run's wall-clock time, or nullopt to leave it out (golden files).
std::string FormatRunReport(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                            const sim::SimResult& result, std::optional<double> wall_ms);
std::string FormatRunJson(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                          const sim::SimResult& result, std::optional<double> wall_ms);

// Virtual nanoseconds as "1835.120 s (0:30:35)".
std::string FormatVirtualTime(int64_t ns);

// `petrsim SCENARIO [--json] [--set f=v ...] [--perfetto FILE] [--trace DIR ...] [--no-wall-time]`:
// one simulated run and its report.
struct RunFlags {
  std::string scenario_path;
  std::vector<std::string> sets;
  bool json = false;
  bool no_wall_time = false;
  std::string perfetto;
  std::string trace_dir;
  uint64_t trace_ring = 0;  // keep only the last N events per rank
  uint64_t trace_records_max = TraceDirectoryWriter::kRecordsMaxDefault;
  std::string memory_max;  // --memory-max; empty: half of this machine's memory
};
// Adds the run's positional scenario and options to the top-level `app`.
void AddRunOptions(CLI::App& app, RunFlags& flags);
// Throws ScenarioError when the options do not go together (--trace-ring without --trace, or
// run options without a scenario).
void CheckRunFlags(const RunFlags& flags);
// Simulates flags.scenario_path, writes the trace files and timeline asked for (atomically, after
// the run), prints the report; returns RunExitCode.
int RunSimulation(const RunFlags& flags);

}  // namespace petrsim
