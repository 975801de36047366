// One rank's walk through the plan (docs/reference/streampetr.md, section 7): the training loop's rules, written
// once, that the simulator (sim/main_process.cc, in virtual time) and the real trainer
// (real/trainer.cc, with tensors and a real process group) both follow step by step:
//   startup collectives; then per iteration: take the batch, the per-iteration collectives in
//   order (a conditional one skipped on a batch without GT), the wait for the non-blocking ones
//   (the end of the backward pass and the optimiser step), the periodic ones due after it
//   ((i + 1) % every == 0), rank 0's checkpoint when due, the end of the iteration; done after
//   the last iteration.
// The driver reads current(), does it (over as much time as it takes: the program keeps no
// clock), and calls Next(). What a step costs and how a collective is issued stay the driver's.
#pragma once

#include <cstdint>
#include <vector>

#include "plan/iteration_plan.h"

namespace petrsim {

class RankProgram {
 public:
  enum class Kind : uint8_t {
    kCollective,       // issue collective(): plan section `section`, index `index` (per-iteration:
                       // in plan.Iteration(iteration)), or skip it
    kLoadBatch,        // take batch `iteration` from the DataLoader, then SetLocalBatchHasGt
    kWaitOutstanding,  // the backward pass ends: wait for the iteration's non-blocking collectives
    kCheckpoint,       // rank 0 saves a checkpoint (no collective)
    kEndIteration,     // iteration `iteration` is over
    kDone,             // every iteration ran
  };
  enum class Section : uint8_t { kStartup, kPerIteration, kPeriodic };

  struct Step {
    Kind kind = Kind::kDone;
    Section section = Section::kStartup;  // kCollective only
    uint32_t index = 0;                   // kCollective: index within its section of the plan
    uint64_t iteration = 0;               // the iteration it belongs to (startup: 0)
    // kCollective: a collective issued only when the rank's batch has GT, on a batch without:
    // the rank does not issue it (and its peers' sequence numbers run ahead).
    bool skipped = false;
    // kCollective: the rank goes on only once it completed (the driver waits for it at once):
    // a blocking collective, and every startup collective whatever the plan says (DDP's
    // construction returns only after its broadcasts). The others stay in flight until
    // kWaitOutstanding (the end of the backward pass), the next iteration's for a periodic one.
    bool wait_at_once = false;
    const Collective* collective = nullptr;  // kCollective
  };

  // `plan` must outlive the program; `iterations` is how many the rank runs.
  RankProgram(const ExpandedPlan& plan, uint32_t rank, uint64_t iterations);

  const Step& current() const { return step_; }
  // The current step is done: move to the next one.
  void Next();
  // After kLoadBatch: whether any sample of the rank's batch has ground truth.
  void SetLocalBatchHasGt(bool has_gt) { local_batch_has_gt_ = has_gt; }
  bool local_batch_has_gt() const { return local_batch_has_gt_; }

 private:
  void BeginIteration();                // kLoadBatch, or kDone after the last iteration
  void AtPerIteration(uint32_t index);  // that step, or kWaitOutstanding past the last
  void AtPeriodic(uint32_t first);      // the first periodic step due from `first`, or what follows
  void SetCollective(Section section, uint32_t index, const Collective& collective);

  const ExpandedPlan* plan_;
  uint32_t rank_;
  uint64_t iterations_;
  uint64_t iteration_ = 0;
  bool local_batch_has_gt_ = true;
  Step step_;
};

// One collective a rank issues, as `petrsim plan` lists it.
struct PlannedCollective {
  uint64_t seq = 0;  // c10d's sequence number on its process group, from 1
  RankProgram::Section section = RankProgram::Section::kStartup;
  uint64_t iteration = 0;  // startup: 0
  const Collective* collective = nullptr;
};

// Every collective rank `rank` issues in `iterations` iterations, in issue order, with the
// sequence numbers c10d gives them, when every batch has GT (a conditional collective is then
// issued; a rank whose batch has none skips it and numbers the rest of its group one lower).
std::vector<PlannedCollective> ListCollectives(const ExpandedPlan& plan, uint32_t rank, uint64_t iterations);

}  // namespace petrsim
