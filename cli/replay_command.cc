// `petrsim replay`; see replay_command.h.
#include "cli/replay_command.h"

#include <stdlib.h>

#include <filesystem>
#include <iostream>
#include <memory>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_text.h"
#include "cli/scenario_args.h"
#include "cli/train_command.h"
#include "replay/replay.h"

namespace petrsim {

CLI::App* AddReplayCommand(CLI::App& app, ReplayFlags& flags) {
  auto* replay =
      app.add_subcommand("replay",
                         "Re-run a recorded job (rank_<r>.pbtrace files) driven by its recorded sample order, "
                         "getitem results and times, and say whether it ends as recorded; with --set, what-if on "
                         "the recorded job. Exit 0 reproduced (or what-if answered), 1 not reproduced, 2 bad input.");
  replay->add_option("trace_dir", flags.trace_dir, "directory of rank_<r>.pbtrace files")->required();
  replay
      ->add_option("--against", flags.against,
                   "the backend to replay on: sim (the simulator), or real (the LibTorch trainer, petrsim_train, on "
                   "as many local Gloo ranks as were recorded; its traces go to a new directory under $TMPDIR)")
      ->check(CLI::IsMember({"sim", "real"}));
  replay->add_option("--set", flags.sets, kSetHelp);
  AddTorchVersionOption(*replay, flags.sets);
  replay->add_flag("--json", flags.json, "print a JSON object");
  return replay;
}

int RunReplayCommand(const ReplayFlags& flags) {
  const RecordedJob job = LoadRecordedJob(flags.trace_dir);
  std::unique_ptr<ReplayBackend> backend;
  if (flags.against == "real") {
    const std::string program = TrainProgram("petrsim replay --against real");
    std::string work = (std::filesystem::temp_directory_path() / "petrsim_replay_XXXXXX").string();
    if (::mkdtemp(work.data()) == nullptr) {
      throw ScenarioError("petrsim replay: cannot create a directory under " +
                          std::filesystem::temp_directory_path().string());
    }
    backend = std::make_unique<RealReplayBackend>(program, work);
  } else {
    backend = std::make_unique<SimReplayBackend>();
  }
  const ReplayReport report = Replay(job, *backend, flags.sets);
  if (flags.json) {
    std::cout << JsonText(ReplayJson(report), 2) << "\n";
  } else {
    std::cout << FormatReplay(job, report);
  }
  return report.reproduced || !flags.sets.empty() ? 0 : 1;
}

}  // namespace petrsim
