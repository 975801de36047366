// `petrsim check`: formats the pre-flight report (check/preflight.h) for humans or as JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "check/fixes.h"
#include "check/preflight.h"
#include "data/dataset.h"
#include "proto/scenario.pb.h"

namespace CLI {
class App;
}  // namespace CLI

namespace petrsim {

// Exit codes of `check`: 0 when every getitem is proven to end with a sample and the sampler
// works; 1 when a livelock is possible or the job fails another way (the sampler cannot be
// built, a bounded getitem gives up in the exact replay, uneven batches); 2 on bad input.
int CheckExitCode(const CheckReport& report);

// `fixes` (ProveFixes, check/fixes.h) are printed before the verdict (text: FixLines) or as
// the "fixes" key (JSON: FixesJson, check/fixes.h).
std::string FormatCheckReport(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                              const CheckReport& report, const std::vector<Fix>& fixes = {});
std::string FormatCheckJson(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                            const CheckReport& report, const std::vector<Fix>& fixes = {});

// `petrsim check SCENARIO [--json] [--set f=v ...]`.
struct CheckFlags {
  std::string scenario_path;
  std::vector<std::string> sets;
  bool json = false;
  std::string memory_max;   // --memory-max; empty: half of this machine's memory
  std::string write_drops;  // --write-drops: the data fix as a Python script (check/user_change.h)
  bool no_cache = false;    // --no-cache: check again even on unchanged files
  // What a recorded check is keyed by (base/run_record.h): main's words after the program's name;
  // empty: nothing is recorded.
  std::vector<std::string> command_line;
};
CLI::App* AddCheckCommand(CLI::App& app, CheckFlags& flags);
// Prints the pre-flight report; returns CheckExitCode. Throws ScenarioError on bad input.
int RunCheckCommand(const CheckFlags& flags);

}  // namespace petrsim
