// `petrsim sweep` and `petrsim merge`: the command lines of sweep/ (many simulated runs of one
// scenario, sharded and merged). Options as sweep/sweep.h documents them.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "sweep/sweep.h"

namespace CLI {
class App;
}

namespace petrsim {

struct SweepFlags {
  SweepSpec spec;
  std::vector<std::string> vary;  // --vary path=v1,v2,... (repeatable)
  std::string shard;              // --shard K/N
  bool json = false, csv = false;
  bool quiet = false;  // --quiet: no progress bar
};

struct MergeFlags {
  std::vector<std::string> paths;
  bool json = false, csv = false, runs = false;
  std::string html_path;  // --html FILE
};

// Adds `sweep` to `app`; returns the subcommand.
CLI::App* AddSweepCommand(CLI::App& app, SweepFlags& flags);
// Runs the parsed `sweep` (a progress bar with an ETA on a terminal's stderr unless --quiet),
// writing to `out`. Throws ScenarioError on bad input (exit 2 in main).
int RunSweepCommand(SweepFlags& flags, std::FILE* out);

// Adds `merge` to `app`; returns the subcommand.
CLI::App* AddMergeCommand(CLI::App& app, MergeFlags& flags);
int RunMergeCommand(const MergeFlags& flags, std::FILE* out);

}  // namespace petrsim
