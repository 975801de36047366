// Validation of two scenario messages that the plan and the data read, kept here so that the
// scenario's validation (scenario_validation.h) needs nothing above scenario/: the DDP model
// (plan.ddp, read by plan/ddp_plan.h) and the pipeline (read by data/pipeline_draws.h). Each
// returns its problems, "field: what is wrong, got X"; empty when the message is valid.
#pragma once

#include <string>
#include <vector>

#include "proto/scenario.pb.h"

namespace petrsim {

// State_dict keys a DDP model may stand for in all (each tensor's repeat x (1 + its
// state_dict_aliases)): the plan unrolls every one; real models have thousands at most.
inline constexpr uint64_t kDdpStateDictKeysMax = 1'000'000;

// Problems with `model`, fields relative to `prefix` (e.g. "plan.ddp").
std::vector<std::string> ValidateDdpModel(const DdpModel& model, const std::string& prefix);

// Problems with `pipeline`, fields under "pipeline".
std::vector<std::string> ValidatePipeline(const Pipeline& pipeline);

}  // namespace petrsim
