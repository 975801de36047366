// `petrsim plan SCENARIO [--iterations K] [--json] [--set f=v ...]`: every collective the job
// issues, in order, with the sequence number c10d gives it on its process group: the startup
// collectives, then K iterations (the periodic ones where they fall). The listing is rank 0's
// with every batch holding GT (conditional collectives issued); it is the plan `check`, the
// simulator, the real backend and `diagnose --scenario` number collectives by.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/iteration_plan.h"
#include "plan/rank_program.h"
#include "proto/scenario.pb.h"

namespace CLI {
class App;
}  // namespace CLI

namespace petrsim {

struct PlanFlags {
  std::string scenario_path;
  std::vector<std::string> sets;
  uint64_t iterations = 3;
  bool json = false;
};
CLI::App* AddPlanCommand(CLI::App& app, PlanFlags& flags);
// Prints the listing; returns 0. Throws ScenarioError on bad input.
int RunPlanCommand(const PlanFlags& flags);

// The scenario `plan` lists: a scenario file with --set applied, or the scenario a recorded run
// ran, from the header of a trace file (a path ending in .pbtrace) or of rank 0's in a trace
// directory (for the real backend with --plan-sizes model: the plan rewritten for its model).
Scenario LoadPlanScenario(const std::string& path, const std::vector<std::string>& sets);

// The listing as a table (one line per collective) or as JSON.
std::string FormatPlan(const std::string& path, const std::vector<PlannedCollective>& collectives, uint64_t iterations);
std::string FormatPlanJson(const std::string& path, const std::vector<PlannedCollective>& collectives,
                           uint64_t iterations);

}  // namespace petrsim
