// The petrsim executable: wiring only. Each subcommand is an AddXCommand/RunX pair in its own
// file (cli/*_command.h, importers/import_command.h); `petrsim SCENARIO` is the simulated run.
#include <algorithm>
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

// Every subcommand with its flags (CLI11 writes into the flags, so they live as long as the app).
struct Commands {
  std::vector<std::string> help_topic;
  CLI::App* help = nullptr;
  petrsim::CheckFlags check_flags;
  CLI::App* check = nullptr;
  petrsim::SampleFlags sample_flags;
  CLI::App* sample = nullptr;
  petrsim::PlanFlags plan_flags;
  CLI::App* plan = nullptr;
  petrsim::SweepFlags sweep_flags;
  CLI::App* sweep = nullptr;
  petrsim::MergeFlags merge_flags;
  CLI::App* merge = nullptr;
  petrsim::DiagnoseFlags diagnose_flags;
  CLI::App* diagnose = nullptr;
  petrsim::ExportFlags export_flags;
  CLI::App* export_command = nullptr;
  petrsim::ReplayFlags replay_flags;
  CLI::App* replay = nullptr;
  petrsim::ImportFlags import_flags;
  CLI::App* import = nullptr;
  CLI::App* train = nullptr;
  petrsim::RunFlags run_flags;
};

void AddCommands(CLI::App& app, Commands& c) {
  c.help = app.add_subcommand("help", "The help of petrsim, or of one command: petrsim help COMMAND [SUBCOMMAND]");
  c.help->add_option("command", c.help_topic, "a command, e.g. plan, or import mmdet3d-config");
  c.check = petrsim::AddCheckCommand(app, c.check_flags);
  c.sample = petrsim::AddSampleCommand(app, c.sample_flags);
  c.plan = petrsim::AddPlanCommand(app, c.plan_flags);
  c.sweep = petrsim::AddSweepCommand(app, c.sweep_flags);
  c.merge = petrsim::AddMergeCommand(app, c.merge_flags);
  c.diagnose = petrsim::AddDiagnoseCommand(app, c.diagnose_flags);
  c.export_command = petrsim::AddExportCommand(app, c.export_flags);
  c.replay = petrsim::AddReplayCommand(app, c.replay_flags);
  c.import = petrsim::AddImportCommand(app, c.import_flags);
  c.train = petrsim::AddTrainCommand(app);
  petrsim::AddRunOptions(app, c.run_flags);
}

// A first word that is neither a command nor a file, but close to a command's name: a typo
// (`petrsim chek S`), said as such rather than as the scenario `chek` with an unexpected argument;
// or a bare word far from every name followed by more arguments, said as no command. True when
// it was said.
bool SaidTypo(const CLI::App& app, int argc, char** argv) {
  if (argc <= 1 || argv[1][0] == '-') return false;
  std::vector<std::string> names;
  for (const CLI::App* command : app.get_subcommands({})) names.push_back(command->get_name());
  std::error_code error;
  const std::string word = argv[1];
  const auto nearest = petrsim::NearestCommand(word, names);
  if (std::filesystem::exists(word, error) || std::filesystem::is_symlink(word, error)) return false;
  if (nearest) {
    std::cerr << "petrsim: error: '" << word << "' is not a command (nor a scenario file): did you mean '" << *nearest
              << "'? (petrsim help lists the commands)\n";
    return true;
  }
  // A bare word (no '.', no '/') followed by more words reads as a command, not as a scenario path
  // (`petrsim frobnicate S.pbtxt` used to blame S.pbtxt as an unexpected argument).
  if (argc <= 2 || word.find_first_of("./") != std::string::npos ||
      std::find(names.begin(), names.end(), word) != names.end()) {
    return false;
  }
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  std::cerr << "petrsim: error: '" << word << "' is not a command (nor a scenario file): expected one of " << list
            << ", or a scenario file (.pbtxt, .pb, .json) first\n";
  return true;
}

// `petrsim help [COMMAND]`.
int RunHelp(const CLI::App& app, const std::vector<std::string>& help_topic) {
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

// The parsed command run; throws ScenarioError on bad input.
int Dispatch(const CLI::App& app, Commands& c) {
  if (c.help->parsed()) return RunHelp(app, c.help_topic);
  if (c.check->parsed()) return petrsim::RunCheckCommand(c.check_flags);
  if (c.sample->parsed()) return petrsim::RunSampleCommand(c.sample_flags);
  if (c.plan->parsed()) return petrsim::RunPlanCommand(c.plan_flags);
  if (c.sweep->parsed()) return petrsim::RunSweepCommand(c.sweep_flags, stdout);
  if (c.merge->parsed()) return petrsim::RunMergeCommand(c.merge_flags, stdout);
  if (c.diagnose->parsed()) return petrsim::RunDiagnose(c.diagnose_flags);
  if (c.export_command->parsed()) return petrsim::RunExport(c.export_flags);
  if (c.import->parsed()) return petrsim::RunImport(*c.import, c.import_flags, stdout);
  if (c.train->parsed()) return petrsim::RunTrainCommand(*c.train);
  if (c.replay->parsed()) return petrsim::RunReplayCommand(c.replay_flags);
  petrsim::CheckRunFlags(c.run_flags);
  if (!c.run_flags.scenario_path.empty()) return petrsim::RunSimulation(c.run_flags);
  std::cout << app.help();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Ctrl-C (or SIGTERM, SIGHUP) removes the temporary files of the outputs being written (the
  // timeline, a trace directory, an imported scenario) before the process dies of it.
  petrsim::InstallTempFileCleanup();
  CLI::App app{"petrsim: predict, reproduce and explain hangs of distributed training jobs"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", std::string("petrsim ") + PETRSIM_VERSION + " (models PyTorch " +
                                        petrsim::SupportedTorchVersions() + "; comm.torch_version picks one)");
  Commands commands;
  AddCommands(app, commands);
  // What a recorded import or check is keyed by (base/run_record.h): the words after the program's name.
  commands.import_flags.command_line.assign(argv + std::min(argc, 1), argv + argc);
  commands.check_flags.command_line = commands.import_flags.command_line;
  if (SaidTypo(app, argc, argv)) return kExitBadInput;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : kExitBadInput;
  }
  try {
    return Dispatch(app, commands);
  } catch (const petrsim::ScenarioError& error) {
    std::cerr << "petrsim: error: " << error.what() << "\n";
    return kExitBadInput;
  }
}
