// `petrsim sample`: prints the exact sample stream (model/sample_stream.h).
#pragma once

#include <cstdio>
#include <string>

#include "model/dataset.h"
#include "model/sample_stream.h"
#include "model/scenario.pb.h"

namespace petrsim {

// Parses "0,3,5-7" into rank numbers, each < world_size. Throws ScenarioError naming --ranks.
std::vector<uint32_t> ParseRankList(const std::string& text, uint32_t world_size);

// Writes the stream as a table or as a JSON list to `out`. Returns the number of rows.
uint64_t WriteSampleStream(const Scenario& scenario, const Dataset& dataset, const SampleStreamOptions& options,
                           bool json, std::FILE* out);

}  // namespace petrsim
