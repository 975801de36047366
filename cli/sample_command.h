// `petrsim sample`: prints the exact sample stream (data/sample_stream.h).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/sample_stream.h"
#include "proto/scenario.pb.h"

namespace CLI {
class App;
}  // namespace CLI

namespace petrsim {

// Parses "0,3,5-7" into rank numbers, each < world_size. Throws ScenarioError naming --ranks.
std::vector<uint32_t> ParseRankList(const std::string& text, uint32_t world_size);

// Writes the stream as a table or as a JSON list to `out`, only the rows of iterations >= `from`.
// Returns the number of rows written.
uint64_t WriteSampleStream(const Scenario& scenario, const Dataset& dataset, const SampleStreamOptions& options,
                           bool json, std::FILE* out, uint64_t from = 0);

// --from's value: a whole number, the first iteration to print, below `job_iterations`. Throws
// ScenarioError naming --from, what was expected and what was found.
uint64_t ParseSampleFrom(const std::string& text, uint64_t job_iterations);

// The line before the rows: "iterations 100..149 of 42192, ranks 0-7: 800 rows" (the stream of a
// rank ends early after a livelock: the rows are counted, not assumed).
std::string SampleHeader(uint64_t first, uint64_t end, uint64_t job_iterations, const std::vector<uint32_t>& ranks,
                         uint32_t world_size, uint64_t rows);

// `petrsim sample SCENARIO [--ranks LIST] [--from N] [--iterations K] [--json] [--set f=v ...]`:
// iterations N..N+K-1 (default: from 0, to the end of the job), after a line that says which
// and how many rows follow (on stderr with --json, so stdout stays one JSON list).
struct SampleFlags {
  std::string scenario_path;
  std::vector<std::string> sets;
  std::string ranks;
  std::string from;  // --from N: the first iteration printed; empty: 0
  uint64_t iterations = 0;
  bool json = false;
};
CLI::App* AddSampleCommand(CLI::App& app, SampleFlags& flags);
// Prints the sample stream; returns 0. Throws ScenarioError on bad input, before any output.
int RunSampleCommand(const SampleFlags& flags);

}  // namespace petrsim
