// What makes a job that `check` finds stuck terminate, each candidate proven by re-running the
// pre-flight (check/preflight.h) on the scenario with that change applied:
// - "resample_policy": every other resample.policy (global, next_valid_in_group,
//   drop_empty_groups, in_subdataset, bounded), applied like `--set resample.policy=P`;
// - "filter_empty_gt": `--set filters.filter_empty_gt=false` (frames without GT are trained on);
// - "drop_frames": one per pool of the report, the frames to remove from the info files; proven
//   together (every pool's frames removed at once) by rebuilding the dataset without them. A
//   scene that loses frames is cut into chunks again; where that leaves a chunk without GT, its
//   frames are removed too (a few rounds at most) and listed as drop_frames fixes with `recut`.
// A fix is proven iff the re-run check exits 0 (report.job_fails is false: CheckExitCode's rule):
// every getitem ends with a sample and the sampler works. A bounded policy that raises its error
// is not a fix. Pure and deterministic, like the rest of check/.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "check/preflight.h"
#include "data/dataset.h"
#include "proto/scenario.pb.h"

namespace petrsim {

struct Fix {
  std::string kind;  // "resample_policy", "filter_empty_gt" or "drop_frames"
  std::string set;   // the --set text that applies it, e.g. "resample.policy=global"; "" for drop_frames
  bool proven = false;
  // What the re-run check found: why it terminates (proven), or why not (the verdict, or the
  // error that building the changed scenario raised).
  std::string detail;

  // drop_frames only: the pool's frames, as the info files know them. Dataset indices and frames
  // within the scene are inclusive ranges (frames as given in the scenario, counted from 0).
  uint32_t subdataset = 0;
  std::string subdataset_name;
  std::string scene_name;            // the scene of the pool's first frame
  std::string scene_token;           // nuScenes scene token when the scene name is one (imported from
                                     // info pickles, scenes are named by their scene_token); else ""
  std::string last_subdataset_name;  // the sub-dataset and scene of the pool's last frame (the
  std::string last_scene_name;       // same as the first's unless the pool spans scenes)
  uint64_t scenes_spanned = 0;
  int64_t first_index = 0;  // dataset indices
  int64_t last_index = 0;
  uint32_t first_frame_in_scene = 0;  // in scene_name
  uint32_t last_frame_in_scene = 0;   // in last_scene_name
  uint64_t frames = 0;
  std::string first_sample_token;  // the scenario's Frame.token of the first and last frame, when
  std::string last_sample_token;   // the scenario gives one (imported datasets do); else ""
  // Every frame's (sub-dataset name, sample token), when every frame has a token; else empty.
  std::vector<std::pair<std::string, std::string>> sample_tokens;
  // Not a pool of the report: frames that removing the pools' frames leaves in a chunk without
  // GT (the scene's chunks are cut again from fewer frames), removed as well.
  bool recut = false;
  // What the user changes (check/user_change.h): "config: ...", "code: ..." or "data: ..." lines; empty when not
  // proven.
  std::vector<std::string> change;
};

// Whether `report` shows a problem a fix is sought for: the job fails (check exits 1) and there
// is a livelock / bounded error pool, or a bounded getitem gives up. A sampler that cannot be
// built or uneven batches alone get no fixes.
bool NeedsFixes(const CheckReport& report);

// The fixes of `report`, in the order above (policies, filter_empty_gt, drop_frames), each tried
// and marked proven or not; empty when !NeedsFixes(report). `scenario` must be validated and
// `dataset` and `report` built from it (BuildDataset, RunPreflight); `display_name` prefixes the
// messages of errors the changed scenarios raise. Each candidate is applied to the scenario with
// its dataset written out as per-frame GT counts after the filters (scene and sub-dataset names
// kept), which builds the same dataset without generating synthetic boxes again, then validated,
// built (or `dataset` reused where the change cannot alter it) and checked: one RunPreflight per
// candidate. Never throws ScenarioError for a candidate: a changed scenario that is invalid or
// fails to build is listed with proven=false and why.
std::vector<Fix> ProveFixes(const Scenario& scenario, const Dataset& dataset, const std::string& display_name,
                            const CheckReport& report);

// The fixes as `check` prints them: a heading line, then per fix one line, indented by two
// spaces: `--set TEXT  proven: DETAIL` (or `not a fix: DETAIL`); drop_frames fixes one line each
// (`drop from the info files: ...`) and their shared result on the line after the last of them.
// Empty when `fixes` is.
std::vector<std::string> FixLines(const std::vector<Fix>& fixes);

// The fixes as JSON, `check --json`'s and `diagnose --json --scenario`'s "fixes": [{kind, set (null for
// drop_frames), proven, detail}, and for drop_frames subdataset, subdataset_name, scene, scene_token,
// last_subdataset_name, last_scene, scenes_spanned, first_frame, last_frame (dataset indices),
// first_frame_in_scene, last_frame_in_scene, frames, first_sample_token, last_sample_token, recut].
nlohmann::json FixesJson(const std::vector<Fix>& fixes);

}  // namespace petrsim
