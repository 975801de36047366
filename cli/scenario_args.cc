// Scenario arguments; see scenario_args.h.
#include "cli/scenario_args.h"

#include "model/scenario_loader.h"
#include "model/scenario_override.h"
#include "model/scenario_validation.h"

namespace petrsim {

Scenario LoadWithOverrides(const std::string& path, const std::vector<std::string>& sets) {
  Scenario scenario = LoadScenarioFile(path);
  if (!sets.empty()) {
    ApplyOverrides(scenario, sets);
    ValidateScenario(scenario, path + " (after --set)");
  }
  return scenario;
}

}  // namespace petrsim
