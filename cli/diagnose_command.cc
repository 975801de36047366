// `petrsim diagnose`; see diagnose_command.h.
#include "cli/diagnose_command.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <iostream>
#include <optional>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "base/json_text.h"
#include "base/temp_files.h"
#include "cli/scenario_args.h"
#include "replay/diagnose.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_override.h"
#include "scenario/scenario_validation.h"

namespace petrsim {

namespace {

// Whether directory `path` holds a file named like one rank's recording: a .pbtrace, or a name whose
// stem ends in a number (a Flight Recorder dump's rank: nccl_trace_rank_3, dump_3.json).
bool HoldsRankNamedFile(const std::string& path) {
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
    std::error_code kind_error;
    if (entry.is_directory(kind_error)) continue;  // not a rank's file (lib64 in /)
    const std::string stem = entry.path().stem().string();
    if (entry.path().extension() == ".pbtrace" ||
        (!stem.empty() && std::isdigit(static_cast<unsigned char>(stem.back())))) {
      return true;
    }
  }
  return false;
}

// LoadRecordings, with a directory that holds no rank's file said as such (`diagnose /` used to
// report only that some unrelated JSON file was not a Flight Recorder dump).
Recordings LoadRecordingsSaid(const std::vector<std::string>& paths) {
  try {
    return LoadRecordings(paths);
  } catch (const ScenarioError& error) {
    std::error_code kind_error;
    if (paths.size() != 1 || !std::filesystem::is_directory(paths.front(), kind_error) ||
        HoldsRankNamedFile(paths.front())) {
      throw;
    }
    throw ScenarioError(paths.front() +
                        ": expected a directory of one job's recordings (petrsim's rank_<r>.pbtrace, Flight Recorder "
                        "dumps named by rank such as nccl_trace_rank_<r>, or training logs), found no file named "
                        "like one; the first file read: " +
                        error.what());
  }
}

// The diagnosis of `flags.paths`: training logs, or traces and dumps (kept in `recordings` for --html, the one reader
// of them after the diagnosis).
Diagnosis DiagnosePaths(const DiagnoseFlags& flags, const std::optional<Scenario>& scenario,
                        std::optional<Recordings>& recordings) {
  size_t logs = 0;
  for (const std::string& path : flags.paths) logs += IsTrainingLogPath(path) ? 1 : 0;
  if (logs > 0 && logs < flags.paths.size()) {
    throw ScenarioError(
        "diagnose: give training logs, or petrsim traces and Flight Recorder dumps, not both in one call");
  }
  if (logs > 0) {
    std::optional<uint32_t> world_size;
    if (scenario) world_size = scenario->job().world_size();
    if (flags.world_size > 0) world_size = flags.world_size;
    return DiagnoseTrainingLog(ReadTrainingLogs(flags.paths), world_size);
  }
  if (flags.world_size > 0)
    throw ScenarioError("diagnose: --world-size is for training logs (traces and dumps say it)");
  Recordings loaded = LoadRecordingsSaid(flags.paths);
  Diagnosis diagnosis = Diagnose(loaded);
  if (!flags.html_path.empty()) recordings = std::move(loaded);
  return diagnosis;
}

}  // namespace

int RunDiagnose(const DiagnoseFlags& flags) {
  if (!flags.sets.empty() && flags.scenario_path.empty()) {
    throw ScenarioError("diagnose: --set and --torch-version need --scenario");
  }
  std::optional<Scenario> scenario;
  if (!flags.scenario_path.empty()) {
    scenario = LoadScenarioFile(flags.scenario_path);
    if (!flags.sets.empty()) {
      ApplyOverrides(*scenario, flags.sets);
      ValidateScenario(*scenario, flags.scenario_path + " (after --set)");
    }
  }
  std::optional<Recordings> recordings;
  const Diagnosis diagnosis = DiagnosePaths(flags, scenario, recordings);
  std::optional<ScenarioCrossCheck> cross;
  if (scenario) {
    const bool release_given = std::any_of(flags.sets.begin(), flags.sets.end(), [](const std::string& set) {
      return set.rfind("comm.torch_version=", 0) == 0;
    });
    const std::vector<std::string> release = ReconcileRelease(diagnosis, *scenario, release_given);
    cross = CrossCheck(diagnosis, *scenario, flags.scenario_path);
    cross->artifact_lines = release;
  }
  // Without --scenario, a livelock in petrsim traces gets its fixes from the scenario the traces recorded.
  const std::vector<Fix> recorded_fixes = cross ? std::vector<Fix>{} : RecordedScenarioFixes(diagnosis);
  // The text report: printed without --json, and part of the page with --html.
  std::string report;
  if (!flags.json || !flags.html_path.empty()) {
    report = FormatDiagnosis(diagnosis);
    if (cross) report += FormatCrossCheck(*cross);
    report += FormatFixes(recorded_fixes, "on the scenario the traces recorded (what ran):");
  }
  // The page first: a path that cannot be written is an error before anything is printed.
  if (!flags.html_path.empty()) {
    try {
      WriteFileAtomically(flags.html_path, DiagnosisHtml(diagnosis, recordings ? &*recordings : nullptr, report));
    } catch (const ScenarioError& error) {
      throw ScenarioError(std::string("--html: ") + error.what());
    }
  }
  if (flags.json) {
    nlohmann::json json = DiagnosisJson(diagnosis);
    if (cross) json["scenario"] = CrossCheckJson(*cross);
    json["fixes"] = FixesJson(cross ? cross->fixes : recorded_fixes);
    std::cout << JsonText(json, 2) << "\n";
  } else {
    std::cout << report;
  }
  return DiagnosisExitCode(diagnosis);
}

CLI::App* AddDiagnoseCommand(CLI::App& app, DiagnoseFlags& flags) {
  auto* diagnose =
      app.add_subcommand("diagnose",
                         "Post-mortem of a hung job from its per-rank recordings: petrsim traces (rank_<r>.pbtrace), "
                         "PyTorch Flight Recorder dumps (pickle or JSON), or its training logs (one combined log or "
                         "one per rank, gzip too: NCCL watchdog lines of PyTorch 1.8-2.5, mmcv/mmengine iteration "
                         "lines, tracebacks). Names, per process group, the first collective not every member "
                         "joined and the missing ranks, desyncs, wait-for cycles and the cause on the missing rank, "
                         "and the ranks that died, were signalled, failed or whose watchdog fired. Exit 0 healthy "
                         "(every rank's recording complete, no failure; a log without a timeout: \"no timeout "
                         "found\"), 1 failed (stuck, desync, death, signal, failed exit, watchdog, spinning worker), 2 "
                         "bad input, 3 incomplete (a rank without a usable file, a file refused, cut short or with "
                         "invalid records, and no failure among the rest).");
  diagnose->add_option("paths", flags.paths, "a directory of per-rank files or logs, or the files")->required();
  diagnose->add_flag("--json", flags.json, "print a JSON object");
  diagnose->add_option("--scenario", flags.scenario_path,
                       "the job's scenario: place the stuck collective in its plan and check it "
                       "against the scenario's predicted livelock");
  diagnose->add_option("--set", flags.sets, kSetHelp);
  AddTorchVersionOption(*diagnose, flags.sets);
  diagnose
      ->add_option("--world-size", flags.world_size,
                   "training logs: the job's rank count, where the log does not say it (no gpu_ids, torchrun "
                   "world size or file per rank)")
      ->check(CLI::Range(1, 1 << 20));
  diagnose->add_option("--html", flags.html_path,
                       "also write the diagnosis as a self-contained HTML page there, with an SVG timeline per rank "
                       "around each stuck collective");
  return diagnose;
}

}  // namespace petrsim
