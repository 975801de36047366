// `petrsim train ...`: runs petrsim_train, the real backend's program (the only one linking
// LibTorch), built beside petrsim, with the same arguments.
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace petrsim {

CLI::App* AddTrainCommand(CLI::App& app);
// Replaces this process with petrsim_train and the arguments `train` left unparsed; returns only
// by throwing ScenarioError (petrsim_train missing or not runnable).
int RunTrainCommand(const CLI::App& train);

// The path of petrsim_train beside this executable; throws ScenarioError, naming `who`, where
// it was not built.
std::string TrainProgram(const std::string& who);

}  // namespace petrsim
