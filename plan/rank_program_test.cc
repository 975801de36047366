// One rank's walk through the plan (plan/rank_program.h), the rules the simulator and the real
// trainer both follow: the order of the steps, the skipped conditional collectives, the
// periodic ones, rank 0's checkpoint; and, over the StreamPETR plan, the sequence numbers the
// walk reaches agree with iteration_plan's arithmetic (CollectivesBefore).
#include "plan/rank_program.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "plan/iteration_plan.h"

namespace petrsim {
namespace {

Collective Named(const std::string& name, bool blocking = true, bool conditional = false) {
  Collective c;
  c.set_name(name);
  c.set_blocking(blocking);
  c.set_only_when_local_batch_has_gt(conditional);
  return c;
}

ExpandedPlan SmallPlan() {
  ExpandedPlan plan;
  plan.startup = {Named("seed")};
  plan.per_iteration = {Named("count"), Named("gt only", true, true), Named("bucket", false)};
  PeriodicCollective every2;
  every2.set_every_iterations(2);
  *every2.mutable_collective() = Named("log");
  plan.periodic = {every2};
  plan.checkpoint_interval = 3;
  return plan;
}

// The walk as text, one token per step; `has_gt(iteration)` answers kLoadBatch.
std::vector<std::string> Walk(
    const ExpandedPlan& plan, uint32_t rank, uint64_t iterations,
    bool (*has_gt)(uint64_t) = [](uint64_t) { return true; }) {
  std::vector<std::string> out;
  RankProgram program(plan, rank, iterations);
  for (; program.current().kind != RankProgram::Kind::kDone; program.Next()) {
    const auto& at = program.current();
    switch (at.kind) {
      case RankProgram::Kind::kCollective:
        out.push_back((at.skipped ? "skip " : "") + at.collective->name());
        break;
      case RankProgram::Kind::kLoadBatch:
        out.push_back("load " + std::to_string(at.iteration));
        program.SetLocalBatchHasGt(has_gt(at.iteration));
        break;
      case RankProgram::Kind::kWaitOutstanding:
        out.push_back("wait");
        break;
      case RankProgram::Kind::kCheckpoint:
        out.push_back("checkpoint");
        break;
      case RankProgram::Kind::kEndIteration:
        out.push_back("end " + std::to_string(at.iteration));
        break;
      case RankProgram::Kind::kDone:
        break;
    }
  }
  return out;
}

TEST(RankProgram, WalksStartupThenEachIterationsStepsPeriodicOnesAndRankZerosCheckpoint) {
  const ExpandedPlan plan = SmallPlan();
  const std::vector<std::string> rank0 = {
      "seed",                                                                 // startup
      "load 0", "count", "gt only", "bucket", "wait", "end 0",                // iteration 0
      "load 1", "count", "gt only", "bucket", "wait", "log",        "end 1",  // (1 + 1) % 2 == 0
      "load 2", "count", "gt only", "bucket", "wait", "checkpoint", "end 2",  // (2 + 1) % 3 == 0
      "load 3", "count", "gt only", "bucket", "wait", "log",        "end 3"};
  EXPECT_EQ(Walk(plan, 0, 4), rank0);
  // Other ranks save no checkpoint.
  std::vector<std::string> rank1 = rank0;
  std::erase(rank1, "checkpoint");
  EXPECT_EQ(Walk(plan, 1, 4), rank1);
}

TEST(RankProgram, SkipsAConditionalCollectiveOnABatchWithoutGt) {
  const auto walk = Walk(SmallPlan(), 1, 2, [](uint64_t iteration) { return iteration != 1; });
  const std::vector<std::string> expected = {"seed",   "load 0", "count",        "gt only", "bucket", "wait", "end 0",
                                             "load 1", "count",  "skip gt only", "bucket",  "wait",   "log",  "end 1"};
  EXPECT_EQ(walk, expected);
}

TEST(RankProgram, WaitsAtOnceForBlockingAndEveryStartupCollectiveOnly) {
  // The rule both drivers follow: a blocking collective, and a startup one even when the plan
  // calls it non-blocking, is waited for before the next step; the others stay in flight until
  // kWaitOutstanding (a periodic one until the next iteration's).
  ExpandedPlan plan = SmallPlan();
  plan.startup.push_back(Named("async startup", /*blocking=*/false));
  plan.periodic[0].mutable_collective()->set_blocking(false);
  std::map<std::string, bool> wait_at_once;
  RankProgram program(plan, 0, 2);
  for (; program.current().kind != RankProgram::Kind::kDone; program.Next()) {
    const auto& at = program.current();
    if (at.kind == RankProgram::Kind::kCollective) {
      wait_at_once[at.collective->name()] = at.wait_at_once;
    } else {
      EXPECT_FALSE(at.wait_at_once);
    }
  }
  const std::map<std::string, bool> expected = {{"seed", true},    {"async startup", true}, {"count", true},
                                                {"gt only", true}, {"bucket", false},       {"log", false}};
  EXPECT_EQ(wait_at_once, expected);
}

TEST(RankProgram, RunsNoIterationWhenItHasNone) {
  EXPECT_EQ(Walk(SmallPlan(), 0, 0), (std::vector<std::string>{"seed"}));
  ExpandedPlan empty;
  EXPECT_TRUE(Walk(empty, 0, 0).empty());
  EXPECT_EQ(Walk(empty, 0, 1), (std::vector<std::string>{"load 0", "wait", "end 0"}));
}

TEST(RankProgram, ReachesTheSequenceNumbersIterationPlanCounts) {
  // The StreamPETR plan with its defaults, every batch with GT: after each iteration's load, the
  // collectives issued so far on each process group are CollectivesBefore(plan, group, i).
  const ExpandedPlan plan = ExpandPlan(Scenario());
  std::map<std::string, uint64_t> issued;
  RankProgram program(plan, 0, 7);
  uint64_t loads = 0;
  for (; program.current().kind != RankProgram::Kind::kDone; program.Next()) {
    const auto& at = program.current();
    if (at.kind == RankProgram::Kind::kCollective && !at.skipped) ++issued[at.collective->process_group()];
    if (at.kind == RankProgram::Kind::kLoadBatch) {
      ++loads;
      for (const auto& [group, count] : issued) {
        EXPECT_EQ(count, CollectivesBefore(plan, group, at.iteration)) << group << " before iteration " << at.iteration;
      }
    }
  }
  EXPECT_EQ(loads, 7u);
  for (const auto& [group, count] : issued) EXPECT_EQ(count, CollectivesBefore(plan, group, 7)) << group;
}

TEST(RankProgram, ListsTheCollectivesWhereLocateCollectiveFindsThem) {
  // `petrsim plan`'s listing and `diagnose --scenario`'s arithmetic agree on every collective of
  // the StreamPETR plan (startup, per iteration, periodic) over 25 iterations.
  const ExpandedPlan plan = ExpandPlan(Scenario());
  const uint64_t iterations = 25;
  const std::vector<PlannedCollective> listed = ListCollectives(plan, 0, iterations);
  ASSERT_FALSE(listed.empty());
  for (const PlannedCollective& c : listed) {
    const auto where = LocateCollective(plan, c.collective->process_group(), c.seq, iterations);
    ASSERT_TRUE(where.has_value()) << c.collective->process_group() << " seq " << c.seq;
    EXPECT_EQ(where->startup, c.section == RankProgram::Section::kStartup) << "seq " << c.seq;
    EXPECT_EQ(where->iteration, c.iteration) << "seq " << c.seq;
    EXPECT_EQ(where->step, c.collective->name()) << "seq " << c.seq;
  }
  // Past the last one, nothing.
  EXPECT_FALSE(LocateCollective(plan, "default_pg", listed.back().seq + 1, iterations).has_value());
}

}  // namespace
}  // namespace petrsim
