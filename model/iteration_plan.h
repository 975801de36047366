// The collectives a training job issues, in order (reference section 7): once at startup, in
// every iteration, and periodically. The StreamPETR plan is generated from a few numbers; a
// custom plan is taken as written. Both backends issue exactly this list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/scenario.pb.h"

namespace petrsim {

struct ExpandedPlan {
  std::vector<Collective> startup;
  std::vector<Collective> per_iteration;
  std::vector<PeriodicCollective> periodic;  // issued after iteration i when (i+1) % every == 0
  uint32_t checkpoint_interval = 0;          // rank 0 only, no collective; 0: never
};

// The plan of `plan`; the StreamPETR plan with its defaults when neither form is given.
ExpandedPlan ExpandPlan(const IterationPlan& plan);

// Collectives issued on `process_group` before iteration `iteration` (0-based) starts: startup
// ones, whole iterations, and periodic ones so far. The first collective of that iteration on
// that group has c10d sequence number CollectivesBefore(...) + 1 (when it is unconditional).
uint64_t CollectivesBefore(const ExpandedPlan& plan, const std::string& process_group, uint64_t iteration);

// Where the collective with c10d sequence number `seq` (from 1) on `process_group` sits in the
// plan: a startup collective, or iteration `iteration`'s step (per-iteration ones in order, then
// the periodic ones due after it). Unconditional plans only: a rank that skipped conditional
// collectives numbers the rest differently. Nothing when the job of `job_iterations` never
// issues it.
struct PlanPosition {
  bool startup = false;
  uint64_t iteration = 0;
  std::string step;
};
std::optional<PlanPosition> LocateCollective(const ExpandedPlan& plan, const std::string& process_group, uint64_t seq,
                                             uint64_t job_iterations);

// The first collective of an iteration on `process_group` (index into per_iteration), or -1.
int FirstCollectiveOfIteration(const ExpandedPlan& plan, const std::string& process_group);

}  // namespace petrsim
