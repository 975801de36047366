// The collectives a training job issues, in order (docs/reference/streampetr.md, section 7): once at startup, in
// every iteration, and periodically. The StreamPETR plan is generated from a few numbers; a
// custom plan is taken as written. With a DDP model (plan.ddp; the StreamPETR plan's default)
// the collectives DistributedDataParallel issues in the scenario's PyTorch release join them
// (plan/ddp_plan.h): at construction, and in each iteration the rebuild and buffer broadcasts
// before the forward's collectives and the gradient buckets after them, so iterations 0 and 1
// may differ from the later ones. Both backends issue exactly this list.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "proto/scenario.pb.h"

namespace petrsim {

struct ExpandedPlan {
  std::vector<Collective> startup;
  // The collectives of iteration i < leading.size() (DDP's first iterations), in order.
  std::vector<std::vector<Collective>> leading;
  // The collectives of every later iteration, in order.
  std::vector<Collective> per_iteration;
  std::vector<PeriodicCollective> periodic;  // issued after iteration i when (i+1) % every == 0
  uint32_t checkpoint_interval = 0;          // rank 0 only, no collective; 0: never

  // The collectives of iteration `iteration`, in order.
  // Which distinct list iteration `iteration` runs: its own leading one, or leading.size() for
  // per_iteration.
  size_t Phase(uint64_t iteration) const {
    return iteration < leading.size() ? static_cast<size_t>(iteration) : leading.size();
  }
  const std::vector<Collective>& Iteration(uint64_t iteration) const {
    return iteration < leading.size() ? leading[iteration] : per_iteration;
  }
};

// The plan of `scenario` (its plan, sampler, DDP model and PyTorch release); the StreamPETR plan
// with its defaults when neither form is given. The scenario must be valid.
ExpandedPlan ExpandPlan(const Scenario& scenario);

// The job's process groups in the order it creates them: the world group "default_pg" first, then each other group
// in the order the plan first names it (startup, the distinct iterations, the periodic collectives). A group's index
// here is the name PyTorch's logs give it (`PG 0` is the world group), in both backends.
std::vector<std::string> ProcessGroupNames(const ExpandedPlan& plan);

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
  const Collective* collective = nullptr;  // in `plan`
};
std::optional<PlanPosition> LocateCollective(const ExpandedPlan& plan, const std::string& process_group, uint64_t seq,
                                             uint64_t job_iterations);

}  // namespace petrsim
