// The petrsim executable: subcommands over one scenario file.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <iostream>

#include "cli/check_command.h"
#include "cli/sample_command.h"
#include "model/dataset.h"
#include "model/error.h"
#include "model/preflight.h"
#include "model/sampler.h"
#include "model/scenario_loader.h"
#include "model/scenario_validation.h"

namespace {

constexpr int kExitBadInput = 2;

int RunCheck(const std::string& path, bool json) {
  const petrsim::Scenario scenario = petrsim::LoadScenarioFile(path);
  const petrsim::Dataset dataset = petrsim::BuildDataset(scenario, path);
  const petrsim::CheckReport report = petrsim::RunPreflight(scenario, dataset);
  const std::string text = json ? petrsim::FormatCheckJson(scenario, path, dataset, report)
                                : petrsim::FormatCheckReport(scenario, path, dataset, report);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return petrsim::CheckExitCode(report);
}

int RunSample(const std::string& path, const std::string& ranks, uint64_t iterations, bool json) {
  const petrsim::Scenario scenario = petrsim::LoadScenarioFile(path);
  const petrsim::Dataset dataset = petrsim::BuildDataset(scenario, path);
  // Checked here, before any output, so the error names the file and nothing is half-written.
  petrsim::CheckSamplerConstructible(scenario, dataset, path);
  if (iterations > petrsim::kIterationsMax) {
    throw petrsim::ScenarioError("--iterations: must be <= " +
                                 std::to_string(petrsim::kIterationsMax) + ", got " +
                                 std::to_string(iterations));
  }
  petrsim::SampleStreamOptions options;
  if (!ranks.empty()) options.ranks = petrsim::ParseRankList(ranks, scenario.job().world_size());
  options.iterations = iterations;
  petrsim::WriteSampleStream(scenario, dataset, options, json, stdout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"petrsim: predict, reproduce and explain hangs of distributed training jobs"};
  app.require_subcommand(0, 1);

  std::string scenario_path;
  bool json = false;
  auto* check = app.add_subcommand(
      "check",
      "Static pre-flight: prove the resample loop terminates, or list every pool it can never "
      "leave and when the sampler first hits it. Exit 0 proven, 1 livelock possible or job "
      "fails, 2 bad input.");
  check->add_option("scenario", scenario_path, "scenario file (.pbtxt, .pb or .json)")->required();
  check->add_flag("--json", json, "print a JSON object");

  std::string ranks;
  uint64_t iterations = 0;
  auto* sample = app.add_subcommand(
      "sample", "Print the exact per-rank, per-slot index stream and resample draws.");
  sample->add_option("scenario", scenario_path, "scenario file (.pbtxt, .pb or .json)")->required();
  sample->add_option("--ranks", ranks, "ranks to print, e.g. 0,3,5-7 (default: all)");
  sample->add_option("--iterations", iterations, "iterations to print (default: the job length)");
  sample->add_flag("--json", json, "print a JSON list of rows");

  std::string bare_scenario;
  app.add_option("scenario", bare_scenario, "scenario to simulate (petrsim SCENARIO)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : kExitBadInput;
  }

  try {
    if (check->parsed()) return RunCheck(scenario_path, json);
    if (sample->parsed()) return RunSample(scenario_path, ranks, iterations, json);
    if (!bare_scenario.empty()) {
      std::cerr << "petrsim: the discrete-event simulator (petrsim SCENARIO) is not built yet; "
                   "use `petrsim check " << bare_scenario << "` or `petrsim sample "
                << bare_scenario << "`\n";
      return kExitBadInput;
    }
    std::cout << app.help();
    return 0;
  } catch (const petrsim::ScenarioError& error) {
    std::cerr << "petrsim: error: " << error.what() << "\n";
    return kExitBadInput;
  }
}
