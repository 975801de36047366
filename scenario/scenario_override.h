// `--set field.path=value` overrides of a loaded scenario (what-if controls), resolved against
// the scenario.proto schema by protobuf reflection, so every field is settable without new code.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "proto/scenario.pb.h"

namespace petrsim {

// Applies one override "path=value" to `scenario`, e.g. "resample.policy=global",
// "job.world_size=64", "cost.jitter_fraction=0", "dataset.subdatasets[1].synthetic.scenes=200",
// "comm.timeout_ms=600000".
//
// The path is a '.'-separated list of field names exactly as in scenario.proto. A repeated field
// takes an index, `name[i]`; i == the current size appends an element. A repeated scalar leaf may
// instead take the whole list, `name=a,b,c` (an empty value clears it). Entering a message that is
// a oneof member, or setting a scalar oneof member, selects that case and clears the other one.
// Values are parsed strictly: decimal integers in range, finite numbers, true/false/1/0, enum
// value names as in scenario.proto or their numbers, strings verbatim.
//
// Throws ScenarioError naming the override text, the path that failed, what was expected and
// what was found, e.g. "--set job.world_size=abc: job.world_size expects an unsigned 32-bit
// integer, got 'abc'". On error `scenario` is left unchanged.
void ApplyOverride(Scenario& scenario, std::string_view override_text);

// Applies `overrides` in order, all or nothing: on the first error `scenario` is left unchanged.
// Does not validate: the caller runs ValidateScenario (scenario/scenario_validation.h) afterwards,
// so an override that makes the scenario invalid is rejected with the usual message.
void ApplyOverrides(Scenario& scenario, const std::vector<std::string>& overrides);

}  // namespace petrsim
