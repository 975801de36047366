// The petrsim executable: wiring only. Each subcommand is an AddXCommand/RunX pair in its own
// file (cli/*_command.h, importers/import_command.h); `petrsim SCENARIO` is the simulated run.
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "base/temp_files.h"
#include "cli/check_command.h"
#include "cli/command_names.h"
#include "cli/diagnose_command.h"
#include "cli/export_command.h"
#include "cli/plan_command.h"
#include "cli/replay_command.h"
#include "cli/run_command.h"
#include "cli/sample_command.h"
#include "cli/sweep_command.h"
#include "cli/train_command.h"
#include "importers/import_command.h"
#include "scenario/torch_version.h"

namespace {
constexpr int kExitBadInput = 2;
}  // namespace

int main(int argc, char** argv) {
  // Ctrl-C (or SIGTERM, SIGHUP) removes the temporary files of the outputs being written (the
  // timeline, a trace directory, an imported scenario) before the process dies of it.
  petrsim::InstallTempFileCleanup();
  CLI::App app{"petrsim: predict, reproduce and explain hangs of distributed training jobs"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string("petrsim ") + PETRSIM_VERSION + " (models PyTorch " +
                                        petrsim::SupportedTorchVersions() + "; comm.torch_version picks one)");
  std::vector<std::string> help_topic;
  auto* help = app.add_subcommand("help", "The help of petrsim, or of one command: petrsim help COMMAND [SUBCOMMAND]");
  help->add_option("command", help_topic, "a command, e.g. plan, or import mmdet3d-config");

  petrsim::CheckFlags check_flags;
  auto* check = petrsim::AddCheckCommand(app, check_flags);
  petrsim::SampleFlags sample_flags;
  auto* sample = petrsim::AddSampleCommand(app, sample_flags);
  petrsim::PlanFlags plan_flags;
  auto* plan = petrsim::AddPlanCommand(app, plan_flags);
  petrsim::SweepFlags sweep_flags;
  auto* sweep = petrsim::AddSweepCommand(app, sweep_flags);
  petrsim::MergeFlags merge_flags;
  auto* merge = petrsim::AddMergeCommand(app, merge_flags);
  petrsim::DiagnoseFlags diagnose_flags;
  auto* diagnose = petrsim::AddDiagnoseCommand(app, diagnose_flags);
  petrsim::ExportFlags export_flags;
  auto* export_command = petrsim::AddExportCommand(app, export_flags);
  petrsim::ReplayFlags replay_flags;
  auto* replay = petrsim::AddReplayCommand(app, replay_flags);
  petrsim::ImportFlags import_flags;
  CLI::App* import = petrsim::AddImportCommand(app, import_flags);
  auto* train = petrsim::AddTrainCommand(app);
  petrsim::RunFlags run_flags;
  petrsim::AddRunOptions(app, run_flags);

  // A first word that is neither a command nor a file, but close to a command's name: a typo
  // (`petrsim chek S`), said as such rather than as the scenario `chek` with an unexpected argument.
  if (argc > 1 && argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* command : app.get_subcommands({})) names.push_back(command->get_name());
    std::error_code error;
    const std::string word = argv[1];
    if (const auto nearest = petrsim::NearestCommand(word, names); nearest && !std::filesystem::exists(word, error)) {
      std::cerr << "petrsim: error: '" << word << "' is not a command (nor a scenario file): did you mean '" << *nearest
                << "'? (petrsim help lists the commands)\n";
      return kExitBadInput;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : kExitBadInput;
  }

  try {
    if (help->parsed()) {
      if (help_topic.empty()) {
        // Not app.help(): it delegates to the parsed subcommand, this one.
        std::cout << app.get_formatter()->make_help(&app, "petrsim", CLI::AppFormatMode::Normal);
        return 0;
      }
      if (const CLI::App* command = petrsim::FindCommand(app, help_topic)) {
        std::cout << command->help();
        return 0;
      }
      std::string topic;
      for (const std::string& word : help_topic) topic += (topic.empty() ? "" : " ") + word;
      throw petrsim::ScenarioError("help: no command named '" + topic +
                                   "' (petrsim help lists them: check, sample, plan, sweep, merge, diagnose, export, "
                                   "replay, import, train)");
    }
    if (check->parsed()) return petrsim::RunCheckCommand(check_flags);
    if (sample->parsed()) return petrsim::RunSampleCommand(sample_flags);
    if (plan->parsed()) return petrsim::RunPlanCommand(plan_flags);
    if (sweep->parsed()) return petrsim::RunSweepCommand(sweep_flags, stdout);
    if (merge->parsed()) return petrsim::RunMergeCommand(merge_flags, stdout);
    if (diagnose->parsed()) return petrsim::RunDiagnose(diagnose_flags);
    if (export_command->parsed()) return petrsim::RunExport(export_flags);
    if (import->parsed()) return petrsim::RunImport(*import, import_flags, stdout);
    if (train->parsed()) return petrsim::RunTrainCommand(*train);
    if (replay->parsed()) return petrsim::RunReplayCommand(replay_flags);
    petrsim::CheckRunFlags(run_flags);
    if (!run_flags.scenario_path.empty()) return petrsim::RunSimulation(run_flags);
    std::cout << app.help();
    return 0;
  } catch (const petrsim::ScenarioError& error) {
    std::cerr << "petrsim: error: " << error.what() << "\n";
    return kExitBadInput;
  }
}
