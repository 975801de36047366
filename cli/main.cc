// The petrsim executable: subcommands over one scenario file.
#include <CLI/CLI.hpp>

#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>

#include "cli/check_command.h"
#include "cli/diagnose_command.h"
#include "cli/export_command.h"
#include "cli/progress_bar.h"
#include "cli/run_command.h"
#include "cli/sample_command.h"
#include "cli/sweep_command.h"
#include "importers/import_command.h"
#include "model/dataset.h"
#include "model/error.h"
#include "model/preflight.h"
#include "model/sampler.h"
#include "model/scenario_loader.h"
#include "model/scenario_override.h"
#include "model/scenario_validation.h"
#include "replay/replay.h"
#include "sim/simulator.h"
#include "trace/directory_writer.h"
#include "trace/fan_out_sink.h"
#include "trace/perfetto_writer.h"

namespace {

constexpr int kExitBadInput = 2;
constexpr const char* kBuildId = "petrsim 0.3 (simulator)";

// Loads the scenario and applies the --set overrides, validating the result again.
petrsim::Scenario Load(const std::string& path, const std::vector<std::string>& sets) {
  petrsim::Scenario scenario = petrsim::LoadScenarioFile(path);
  if (!sets.empty()) {
    petrsim::ApplyOverrides(scenario, sets);
    petrsim::ValidateScenario(scenario, path + " (after --set)");
  }
  return scenario;
}

int RunCheck(const std::string& path, const std::vector<std::string>& sets, bool json) {
  const petrsim::Scenario scenario = Load(path, sets);
  const petrsim::Dataset dataset = petrsim::BuildDataset(scenario, path);
  const petrsim::CheckReport report = petrsim::RunPreflight(scenario, dataset);
  const std::string text = json ? petrsim::FormatCheckJson(scenario, path, dataset, report)
                                : petrsim::FormatCheckReport(scenario, path, dataset, report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return petrsim::CheckExitCode(report);
}

int RunSample(const std::string& path, const std::vector<std::string>& sets, const std::string& ranks,
              uint64_t iterations, bool json) {
  const petrsim::Scenario scenario = Load(path, sets);
  const petrsim::Dataset dataset = petrsim::BuildDataset(scenario, path);
  // Checked here, before any output, so the error names the file and nothing is half-written.
  petrsim::CheckSamplerConstructible(scenario, dataset, path);
  if (iterations > petrsim::kIterationsMax) {
    throw petrsim::ScenarioError("--iterations: must be <= " + std::to_string(petrsim::kIterationsMax) + ", got " +
                                 std::to_string(iterations));
  }
  petrsim::SampleStreamOptions options;
  if (!ranks.empty()) options.ranks = petrsim::ParseRankList(ranks, scenario.job().world_size());
  options.iterations = iterations;
  petrsim::WriteSampleStream(scenario, dataset, options, json, stdout);
  return 0;
}

struct RunFlags {
  std::vector<std::string> sets;
  bool json = false;
  bool no_wall_time = false;
  std::string perfetto;
  std::string trace_dir;
  uint64_t trace_ring = 0;  // keep only the last N events per rank
  uint64_t trace_records_max = petrsim::TraceDirectoryWriter::kRecordsMaxDefault;
};

int RunSimulation(const std::string& path, const RunFlags& flags) {
  const petrsim::Scenario scenario = Load(path, flags.sets);
  const petrsim::Dataset dataset = petrsim::BuildDataset(scenario, path);
  petrsim::CheckSamplerConstructible(scenario, dataset, path);
  petrsim::ProgressBar bar(petrsim::JobIterations(scenario, dataset));
  petrsim::sim::SimOptions options;
  // The writers stream into temporary files and rename them only after the run, so a failed
  // run leaves nothing half-written.
  std::unique_ptr<petrsim::PerfettoWriter> perfetto;
  std::unique_ptr<petrsim::TraceDirectoryWriter> trace;
  petrsim::FanOutSink sinks;
  if (!flags.perfetto.empty()) {
    perfetto = std::make_unique<petrsim::PerfettoWriter>(flags.perfetto);
    sinks.Add(perfetto.get());
  }
  if (!flags.trace_dir.empty()) {
    trace =
        std::make_unique<petrsim::TraceDirectoryWriter>(flags.trace_dir, scenario, path, scenario.job().world_size(),
                                                        "sim", kBuildId, flags.trace_records_max, flags.trace_ring);
    sinks.Add(trace.get());
  }
  if (!sinks.empty()) options.trace = &sinks;
  options.progress = [&bar](int64_t now_ns, uint64_t iterations) { bar.Update(now_ns, iterations); };
  const auto start = std::chrono::steady_clock::now();
  const petrsim::sim::SimResult result = petrsim::sim::Simulate(scenario, dataset, options);
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const std::optional<double> wall = flags.no_wall_time ? std::nullopt : std::optional<double>(wall_ms);
  const std::string text = flags.json ? petrsim::FormatRunJson(scenario, path, dataset, result, wall)
                                      : petrsim::FormatRunReport(scenario, path, dataset, result, wall);
  if (perfetto) {
    perfetto->Finish({{"scenario", path},
                      {"outcome", petrsim::OutcomeName(result.outcome)},
                      {"cause", petrsim::CauseName(result.cause)},
                      {"seed", scenario.seed()},
                      {"job_seed", scenario.job().seed()}});
  }
  if (trace) trace->Finish();
  std::fwrite(text.data(), 1, text.size(), stdout);
  return petrsim::RunExitCode(result);
}

// petrsim_train, the real backend's program (the only one linking LibTorch), beside this one.
std::string TrainProgram(const std::string& who) {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  const auto program = (error ? std::filesystem::path(".") : self.parent_path()) / "petrsim_train";
  if (!std::filesystem::exists(program, error)) {
    throw petrsim::ScenarioError(who + ": " + program.string() +
                                 " not found: the real backend is built only where LibTorch and Gloo are found "
                                 "(Debian libtorch-dev, libgloo-dev; CMake option PETRSIM_WITH_REAL)");
  }
  return program.string();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"petrsim: predict, reproduce and explain hangs of distributed training jobs"};
  app.require_subcommand(0, 1);

  std::string scenario_path;
  bool json = false;
  std::vector<std::string> sets;
  const char* set_help = "override a scenario field, e.g. --set resample.policy=global (repeatable)";
  auto* check =
      app.add_subcommand("check",
                         "Static pre-flight: prove the resample loop terminates, or list every pool it can never "
                         "leave and when the sampler first hits it. Exit 0 proven, 1 livelock possible or job "
                         "fails, 2 bad input.");
  check->add_option("scenario", scenario_path, "scenario file (.pbtxt, .pb or .json)")->required();
  check->add_flag("--json", json, "print a JSON object");
  check->add_option("--set", sets, set_help);

  std::string ranks;
  uint64_t iterations = 0;
  auto* sample = app.add_subcommand("sample", "Print the exact per-rank, per-slot index stream and resample draws.");
  sample->add_option("scenario", scenario_path, "scenario file (.pbtxt, .pb or .json)")->required();
  sample->add_option("--ranks", ranks, "ranks to print, e.g. 0,3,5-7 (default: all)");
  sample->add_option("--iterations", iterations, "iterations to print (default: the job length)");
  sample->add_flag("--json", json, "print a JSON list of rows");
  sample->add_option("--set", sets, set_help);

  petrsim::SweepFlags sweep_flags;
  auto* sweep = petrsim::AddSweepCommand(app, sweep_flags, set_help);
  petrsim::MergeFlags merge_flags;
  auto* merge = petrsim::AddMergeCommand(app, merge_flags);

  petrsim::DiagnoseFlags diagnose_flags;
  auto* diagnose =
      app.add_subcommand("diagnose",
                         "Post-mortem of a hung job from its per-rank recordings: petrsim traces (rank_<r>.pbtrace) "
                         "or PyTorch Flight Recorder dumps (pickle or JSON). Names, per process group, the first "
                         "collective not every member joined and the missing ranks, desyncs, wait-for cycles and "
                         "the cause on the missing rank. Exit 0 nothing stuck, 1 stuck or desync, 2 bad input.");
  diagnose->add_option("paths", diagnose_flags.paths, "a directory of per-rank files, or the files")->required();
  diagnose->add_flag("--json", diagnose_flags.json, "print a JSON object");
  diagnose->add_option("--scenario", diagnose_flags.scenario_path,
                       "the job's scenario: place the stuck collective in its plan and check it "
                       "against the scenario's predicted livelock");
  diagnose->add_option("--set", diagnose_flags.sets, set_help);

  std::string export_dir, export_perfetto;
  auto* export_command = app.add_subcommand("export",
                                            "Write the timeline of recorded per-rank traces (rank_<r>.pbtrace) for "
                                            "ui.perfetto.dev or chrome://tracing.");
  export_command->add_option("trace_dir", export_dir, "directory of rank_<r>.pbtrace files")->required();
  export_command->add_option("--perfetto", export_perfetto, "the Chrome/Perfetto trace-event JSON to write")
      ->required();

  std::string replay_dir, replay_against = "sim";
  std::vector<std::string> replay_sets;
  bool replay_json = false;
  auto* replay =
      app.add_subcommand("replay",
                         "Re-run a recorded job (rank_<r>.pbtrace files) driven by its recorded sample order, "
                         "getitem results and times, and say whether it ends as recorded; with --set, what-if on "
                         "the recorded job. Exit 0 reproduced (or what-if answered), 1 not reproduced, 2 bad input.");
  replay->add_option("trace_dir", replay_dir, "directory of rank_<r>.pbtrace files")->required();
  replay
      ->add_option("--against", replay_against,
                   "the backend to replay on: sim (the simulator), or real (the LibTorch trainer, petrsim_train, on "
                   "as many local Gloo ranks as were recorded; its traces go to a new directory under $TMPDIR)")
      ->check(CLI::IsMember({"sim", "real"}));
  replay->add_option("--set", replay_sets, set_help);
  replay->add_flag("--json", replay_json, "print a JSON object");

  petrsim::ImportFlags import_flags;
  CLI::App* import = petrsim::AddImportCommand(app, import_flags);

  auto* train = app.add_subcommand(
      "train",
      "Train the real LibTorch StreamPETR from the scenario: runs petrsim_train (built beside petrsim when "
      "LibTorch is found) with the same arguments: SCENARIO [--nproc N] [--iterations K] [--timeout-ms T] "
      "[--set f=v] [--trace DIR [--trace-ring N]] [--replay TRACE_DIR]; `build/petrsim_train --help` for details. "
      "Exit 0 every rank finished, 1 a rank failed (sampler watchdog, collective watchdog, a rank killed), 2 bad "
      "input.");
  train->prefix_command();

  std::string bare_scenario;
  RunFlags run_flags;
  app.add_option("scenario", bare_scenario,
                 "scenario to simulate (petrsim SCENARIO): exit 0 completed, 1 hang, desync or "
                 "dead rank, 2 bad input, 3 petrsim's own limit reached");
  app.add_flag("--json", run_flags.json, "print the run's report as a JSON object");
  app.add_option("--set", run_flags.sets, set_help);
  app.add_option("--perfetto", run_flags.perfetto, "write a Chrome/Perfetto trace-event timeline (JSON) to this file");
  app.add_option("--trace-records-max", run_flags.trace_records_max,
                 "with --trace: write at most this many events in all (default 100,000,000); each "
                 "rank's file then ends with a `truncated` event counting the rest");
  app.add_option("--trace-ring", run_flags.trace_ring,
                 "with --trace: keep only the last N events of each rank, like PyTorch's Flight "
                 "Recorder (0: all)");
  app.add_option("--trace", run_flags.trace_dir,
                 "write per-rank trace files (rank_<r>.pbtrace, model/trace.proto) to this directory");
  app.add_flag("--no-wall-time", run_flags.no_wall_time,
               "leave the wall-clock time out of the report (byte-reproducible output)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : kExitBadInput;
  }

  try {
    if (check->parsed()) return RunCheck(scenario_path, sets, json);
    if (sample->parsed()) return RunSample(scenario_path, sets, ranks, iterations, json);
    if (sweep->parsed()) return petrsim::RunSweepCommand(sweep_flags, stdout);
    if (merge->parsed()) return petrsim::RunMergeCommand(merge_flags, stdout);
    if (diagnose->parsed()) return petrsim::RunDiagnose(diagnose_flags);
    if (export_command->parsed()) return petrsim::RunExport(export_dir, export_perfetto);
    if (import->parsed()) return petrsim::RunImport(*import, import_flags, stdout);
    if (train->parsed()) {
      std::vector<std::string> args = {TrainProgram("petrsim train")};
      for (const std::string& arg : train->remaining()) args.push_back(arg);
      std::vector<char*> argv;
      for (auto& arg : args) argv.push_back(arg.data());
      argv.push_back(nullptr);
      std::cout.flush();
      ::execv(argv[0], argv.data());
      throw petrsim::ScenarioError("petrsim train: cannot run " + args[0] + ": " + std::strerror(errno));
    }
    if (replay->parsed()) {
      const petrsim::RecordedJob job = petrsim::LoadRecordedJob(replay_dir);
      std::unique_ptr<petrsim::ReplayBackend> backend;
      if (replay_against == "real") {
        const std::string program = TrainProgram("petrsim replay --against real");
        std::string work = (std::filesystem::temp_directory_path() / "petrsim_replay_XXXXXX").string();
        if (::mkdtemp(work.data()) == nullptr) {
          throw petrsim::ScenarioError("petrsim replay: cannot create a directory under " +
                                       std::filesystem::temp_directory_path().string());
        }
        backend = std::make_unique<petrsim::RealReplayBackend>(program, work);
      } else {
        backend = std::make_unique<petrsim::SimReplayBackend>();
      }
      const petrsim::ReplayReport report = petrsim::Replay(job, *backend, replay_sets);
      if (replay_json) {
        std::cout << petrsim::ReplayJson(report).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
      } else {
        std::cout << petrsim::FormatReplay(job, report);
      }
      return report.reproduced || !replay_sets.empty() ? 0 : 1;
    }
    if (run_flags.trace_dir.empty() &&
        (run_flags.trace_ring != 0 ||
         run_flags.trace_records_max != petrsim::TraceDirectoryWriter::kRecordsMaxDefault)) {
      throw petrsim::ScenarioError("--trace-ring and --trace-records-max need --trace DIR");
    }
    if (!bare_scenario.empty()) return RunSimulation(bare_scenario, run_flags);
    if (run_flags.json || run_flags.no_wall_time || !run_flags.sets.empty() || !run_flags.perfetto.empty() ||
        !run_flags.trace_dir.empty()) {
      throw petrsim::ScenarioError(
          "no scenario given: petrsim SCENARIO [--json] [--set ...] "
          "[--perfetto FILE] [--trace DIR]");
    }
    std::cout << app.help();
    return 0;
  } catch (const petrsim::ScenarioError& error) {
    std::cerr << "petrsim: error: " << error.what() << "\n";
    return kExitBadInput;
  }
}
