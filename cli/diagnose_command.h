// `petrsim diagnose PATH...`: the post-mortem of a job from its per-rank recordings (petrsim
// traces or PyTorch Flight Recorder dumps); see replay/diagnose.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace CLI {
class App;
}  // namespace CLI

namespace petrsim {

struct DiagnoseFlags {
  std::vector<std::string> paths;
  bool json = false;
  std::string scenario_path;  // --scenario: the job's scenario, to map and cross-check
  std::vector<std::string> sets;
  uint32_t world_size = 0;  // --world-size: a training log's rank count (0: the log's or the scenario's)
  std::string html_path;    // --html: also write the diagnosis as a page there
};

// Prints the diagnosis; returns 0 when every recorded collective was joined everywhere and
// nothing mismatched, 1 when something is stuck or desynchronised. Throws ScenarioError on
// bad input (exit 2).
int RunDiagnose(const DiagnoseFlags& flags);

CLI::App* AddDiagnoseCommand(CLI::App& app, DiagnoseFlags& flags);

}  // namespace petrsim
