// `petrsim train`; see train_command.h.
#include "cli/train_command.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <vector>

#include <CLI/CLI.hpp>

#include "base/error.h"

namespace petrsim {

std::string TrainProgram(const std::string& who) {
  std::error_code error;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", error);
  const auto program = (error ? std::filesystem::path(".") : self.parent_path()) / "petrsim_train";
  if (!std::filesystem::exists(program, error)) {
    throw ScenarioError(who + ": " + program.string() +
                        " not found: the real backend is built only where LibTorch and Gloo are found "
                        "(Debian libtorch-dev, libgloo-dev; CMake option PETRSIM_WITH_REAL)");
  }
  return program.string();
}

CLI::App* AddTrainCommand(CLI::App& app) {
  auto* train = app.add_subcommand(
      "train",
      "Train the real LibTorch StreamPETR from the scenario: runs petrsim_train (built beside petrsim when "
      "LibTorch is found) with the same arguments: SCENARIO [--nproc N] [--iterations K] [--timeout-ms T] "
      "[--backend gloo|nccl] [--plan-sizes scenario|model] [--set f=v] [--trace DIR [--trace-ring N]] "
      "[--replay TRACE_DIR] [--quiet]; --plan-sizes scenario (the default) issues the scenario's collectives with the "
      "simulator's sizes and sequence numbers, model the plan rewritten for the small real model; "
      "`build/petrsim_train --help` for details. Exit 0 every rank finished, 1 a rank failed (sampler watchdog, "
      "collective watchdog, a rank killed), 2 bad input.");
  train->prefix_command();
  return train;
}

int RunTrainCommand(const CLI::App& train) {
  std::vector<std::string> args = {TrainProgram("petrsim train")};
  for (const std::string& arg : train.remaining()) args.push_back(arg);
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  std::cout.flush();
  ::execv(argv[0], argv.data());
  throw ScenarioError("petrsim train: cannot run " + args[0] + ": " + std::strerror(errno));
}

}  // namespace petrsim
