// `petrsim replay TRACE_DIR [--against sim|real] [--set f=v ...] [--json]`: re-runs a recorded
// job (replay/replay.h) on the simulator or on real Gloo ranks (petrsim_train).
#pragma once

#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace petrsim {

struct ReplayFlags {
  std::string trace_dir;
  std::string against = "sim";
  std::vector<std::string> sets;
  bool json = false;
};
CLI::App* AddReplayCommand(CLI::App& app, ReplayFlags& flags);
// Prints the replay report; returns 0 reproduced (or a what-if answered), 1 not reproduced.
int RunReplayCommand(const ReplayFlags& flags);

}  // namespace petrsim
