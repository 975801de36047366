// `petrsim diagnose`; see diagnose_command.h.
#include "cli/diagnose_command.h"

#include <iostream>

#include "replay/diagnose.h"

namespace petrsim {

int RunDiagnose(const DiagnoseFlags& flags) {
  const Recordings recordings = LoadRecordings(flags.paths);
  const Diagnosis diagnosis = Diagnose(recordings);
  if (flags.json) {
    std::cout << DiagnosisJson(diagnosis).dump(2) << "\n";
  } else {
    std::cout << FormatDiagnosis(diagnosis);
  }
  return diagnosis.stuck.empty() && diagnosis.desyncs.empty() ? 0 : 1;
}

}  // namespace petrsim
