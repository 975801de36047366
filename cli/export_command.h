// `petrsim export TRACE_DIR --perfetto OUT.json`: the timeline of recorded per-rank traces
// (petrsim's own, from the simulator or the real backend), as `petrsim SCENARIO --perfetto`
// draws a simulated run.
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace petrsim {

// Returns 0. Throws ScenarioError naming the file on bad input; nothing is left at `perfetto`
// then.
int RunExport(const std::string& trace_dir, const std::string& perfetto);

struct ExportFlags {
  std::string trace_dir;
  std::string perfetto;
};
CLI::App* AddExportCommand(CLI::App& app, ExportFlags& flags);

}  // namespace petrsim
