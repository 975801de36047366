// `petrsim export TRACE_DIR --perfetto OUT.json`: the timeline of recorded per-rank traces
// (petrsim's own, from the simulator or the real backend), as `petrsim SCENARIO --perfetto`
// draws a simulated run.
#pragma once

#include <string>

#include "cli/perfetto_options.h"

namespace CLI {
class App;
}  // namespace CLI

namespace petrsim {

struct ExportFlags {
  std::string trace_dir;
  std::string perfetto;
  PerfettoFlags perfetto_flags;  // --perfetto-iterations, --perfetto-last (of the recorded clock), ...
};

// Returns 0. Throws ScenarioError naming the file on bad input; nothing is left at `perfetto`
// then. A timeline cut at its limit is said on stderr.
int RunExport(const ExportFlags& flags);
int RunExport(const std::string& trace_dir, const std::string& perfetto);
CLI::App* AddExportCommand(CLI::App& app, ExportFlags& flags);

}  // namespace petrsim
