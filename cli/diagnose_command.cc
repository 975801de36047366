// `petrsim diagnose`; see diagnose_command.h.
#include "cli/diagnose_command.h"

#include <iostream>
#include <optional>

#include "model/error.h"
#include "model/scenario_loader.h"
#include "model/scenario_override.h"
#include "model/scenario_validation.h"
#include "replay/diagnose.h"

namespace petrsim {

int RunDiagnose(const DiagnoseFlags& flags) {
  if (!flags.sets.empty() && flags.scenario_path.empty()) throw ScenarioError("diagnose: --set needs --scenario");
  const Recordings recordings = LoadRecordings(flags.paths);
  const Diagnosis diagnosis = Diagnose(recordings);
  std::optional<ScenarioCrossCheck> cross;
  if (!flags.scenario_path.empty()) {
    Scenario scenario = LoadScenarioFile(flags.scenario_path);
    if (!flags.sets.empty()) {
      ApplyOverrides(scenario, flags.sets);
      ValidateScenario(scenario, flags.scenario_path + " (after --set)");
    }
    cross = CrossCheck(diagnosis, scenario, flags.scenario_path);
  }
  if (flags.json) {
    nlohmann::json json = DiagnosisJson(diagnosis);
    if (cross) json["scenario"] = CrossCheckJson(*cross);
    std::cout << json.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::cout << FormatDiagnosis(diagnosis);
    if (cross) std::cout << FormatCrossCheck(*cross);
  }
  return diagnosis.stuck.empty() && diagnosis.desyncs.empty() ? 0 : 1;
}

}  // namespace petrsim
