// `petrsim check`: formats the pre-flight report (model/preflight.h) for humans or as JSON.
#pragma once

#include <string>

#include "model/dataset.h"
#include "model/preflight.h"
#include "model/scenario.pb.h"

namespace petrsim {

// Exit codes of `check`: 0 when every getitem is proven to end with a sample and the sampler
// works; 1 when a livelock is possible or the job fails another way (the sampler cannot be
// built, a bounded getitem gives up in the exact replay, uneven batches); 2 on bad input.
int CheckExitCode(const CheckReport& report);

std::string FormatCheckReport(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                              const CheckReport& report);
std::string FormatCheckJson(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                            const CheckReport& report);

}  // namespace petrsim
