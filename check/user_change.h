// A proven fix (check/fixes.h) as the change the user makes to their job: a config edit, a code change to the
// dataset class, or a data change, written against the user's own files where the scenario records them
// (Scenario.user_source, from `petrsim import mmdet3d-config`), and in mmdet3d's general terms otherwise. The
// fix's `--set` stays its what-if form. docs/user_guide.md ("What each resample.policy means in your Python")
// says the same per policy. Pure, like the rest of check/.
#pragma once

#include <string>
#include <vector>

#include "check/fixes.h"
#include "proto/scenario.pb.h"

namespace petrsim {

// One line or a few, each starting with "config:", "code:" or "data:"; empty for a fix that is not proven.
std::vector<std::string> UserChange(const Scenario& scenario, const Fix& fix);

// The data fix's frames as a Python script the user runs (stdlib pickle, and numpy as the info files already need):
// per info file, the infos to drop by sample token (imported scenarios), written to `<info>.petrsim_fixed.pkl` beside
// it; a scenario without tokens gets the frames by sub-dataset, scene and frame in a comment and a script that
// refuses to guess. `drops` are the drop_frames fixes of one ProveFixes call.
std::string DropScript(const Scenario& scenario, const std::vector<Fix>& drops, const std::string& scenario_path);

}  // namespace petrsim
