// One rank's walk through the plan; see rank_program.h.
#include "plan/rank_program.h"

#include <map>
#include <string>

#include "base/assert.h"

namespace petrsim {

RankProgram::RankProgram(const ExpandedPlan& plan, uint32_t rank, uint64_t iterations)
    : plan_(&plan), rank_(rank), iterations_(iterations) {
  if (!plan.startup.empty()) {
    SetCollective(Section::kStartup, 0, plan.startup[0]);
  } else {
    BeginIteration();
  }
}

void RankProgram::SetCollective(Section section, uint32_t index, const Collective& collective) {
  step_.kind = Kind::kCollective;
  step_.section = section;
  step_.index = index;
  step_.collective = &collective;
  step_.skipped =
      section == Section::kPerIteration && collective.only_when_local_batch_has_gt() && !local_batch_has_gt_;
  step_.wait_at_once = collective.blocking() || section == Section::kStartup;
}

void RankProgram::BeginIteration() {
  step_ = Step{};
  step_.kind = iteration_ >= iterations_ ? Kind::kDone : Kind::kLoadBatch;
  step_.iteration = iteration_;
}

void RankProgram::AtPerIteration(uint32_t index) {
  const std::vector<Collective>& list = plan_->Iteration(iteration_);
  if (index < list.size()) {
    SetCollective(Section::kPerIteration, index, list[index]);
    return;
  }
  step_.kind = Kind::kWaitOutstanding;
  step_.collective = nullptr;
  step_.skipped = false;
  step_.wait_at_once = false;
}

void RankProgram::AtPeriodic(uint32_t first) {
  for (uint32_t i = first; i < plan_->periodic.size(); ++i) {
    if ((iteration_ + 1) % plan_->periodic[i].every_iterations() == 0) {
      SetCollective(Section::kPeriodic, i, plan_->periodic[i].collective());
      return;
    }
  }
  step_.collective = nullptr;
  step_.skipped = false;
  step_.wait_at_once = false;
  const uint32_t every = plan_->checkpoint_interval;
  step_.kind = rank_ == 0 && every != 0 && (iteration_ + 1) % every == 0 ? Kind::kCheckpoint : Kind::kEndIteration;
}

void RankProgram::Next() {
  switch (step_.kind) {
    case Kind::kCollective:
      switch (step_.section) {
        case Section::kStartup:
          if (step_.index + 1 < plan_->startup.size()) {
            SetCollective(Section::kStartup, step_.index + 1, plan_->startup[step_.index + 1]);
          } else {
            BeginIteration();
          }
          return;
        case Section::kPerIteration:
          AtPerIteration(step_.index + 1);
          return;
        case Section::kPeriodic:
          AtPeriodic(step_.index + 1);
          return;
      }
      return;
    case Kind::kLoadBatch:
      AtPerIteration(0);
      return;
    case Kind::kWaitOutstanding:
      AtPeriodic(0);
      return;
    case Kind::kCheckpoint:
      step_.kind = Kind::kEndIteration;
      return;
    case Kind::kEndIteration:
      ++iteration_;
      BeginIteration();
      return;
    case Kind::kDone:
      PETRSIM_ASSERT(false && "RankProgram::Next after kDone");
      return;
  }
}

std::vector<PlannedCollective> ListCollectives(const ExpandedPlan& plan, uint32_t rank, uint64_t iterations) {
  std::vector<PlannedCollective> out;
  std::map<std::string, uint64_t> seqs;
  for (RankProgram program(plan, rank, iterations); program.current().kind != RankProgram::Kind::kDone;
       program.Next()) {
    const RankProgram::Step& at = program.current();
    if (at.kind == RankProgram::Kind::kLoadBatch) program.SetLocalBatchHasGt(true);
    if (at.kind != RankProgram::Kind::kCollective || at.skipped) continue;
    out.push_back(PlannedCollective{++seqs[at.collective->process_group()], at.section, at.iteration, at.collective});
  }
  return out;
}

}  // namespace petrsim
