// `petrsim sample`: prints the exact sample stream (model/sample_stream.h).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "model/dataset.h"
#include "model/sample_stream.h"
#include "model/scenario.pb.h"

namespace CLI {
class App;
}  // namespace CLI

namespace petrsim {

// Parses "0,3,5-7" into rank numbers, each < world_size. Throws ScenarioError naming --ranks.
std::vector<uint32_t> ParseRankList(const std::string& text, uint32_t world_size);

// Writes the stream as a table or as a JSON list to `out`. Returns the number of rows.
uint64_t WriteSampleStream(const Scenario& scenario, const Dataset& dataset, const SampleStreamOptions& options,
                           bool json, std::FILE* out);

// `petrsim sample SCENARIO [--ranks LIST] [--iterations K] [--json] [--set f=v ...]`.
struct SampleFlags {
  std::string scenario_path;
  std::vector<std::string> sets;
  std::string ranks;
  uint64_t iterations = 0;
  bool json = false;
};
CLI::App* AddSampleCommand(CLI::App& app, SampleFlags& flags);
// Prints the sample stream; returns 0. Throws ScenarioError on bad input, before any output.
int RunSampleCommand(const SampleFlags& flags);

}  // namespace petrsim
