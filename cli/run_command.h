// `petrsim SCENARIO`: formats a simulated run (sim/simulator.h) for humans or as JSON.
#pragma once

#include <optional>
#include <string>

#include "model/dataset.h"
#include "model/scenario.pb.h"
#include "sim/simulator.h"

namespace petrsim {

// Exit codes of a run: 0 completed, 1 the job hangs, desyncs or a rank dies, 3 petrsim's own
// limit was reached before the job ended (2 is bad input, as everywhere).
int RunExitCode(const sim::SimResult& result);

// wall_ms: the run's wall-clock time, or nullopt to leave it out (golden files).
std::string FormatRunReport(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                            const sim::SimResult& result, std::optional<double> wall_ms);
std::string FormatRunJson(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                          const sim::SimResult& result, std::optional<double> wall_ms);

// Virtual nanoseconds as "1835.120 s (0:30:35)".
std::string FormatVirtualTime(int64_t ns);

}  // namespace petrsim
