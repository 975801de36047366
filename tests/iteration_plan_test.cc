// The StreamPETR iteration plan of reference section 7.
#include "model/iteration_plan.h"

#include <gtest/gtest.h>

namespace petrsim {
namespace {

TEST(IterationPlanTest, StreamPetrDefaultCounts) {
  const ExpandedPlan plan = ExpandPlan(IterationPlan());
  EXPECT_EQ(plan.startup.size(), 3u);  // two seed broadcasts + DDP parameter broadcast
  // 6 + 6 reduce_means, 1 focal head, 1 len(log_vars), 29 loss terms + total, 7 DDP buckets.
  EXPECT_EQ(plan.per_iteration.size(), 6u + 6u + 1u + 1u + 30u + 7u);
  EXPECT_EQ(plan.per_iteration[0].name(), "reduce_mean(num_total_pos), decoder layer 0");
  EXPECT_EQ(plan.per_iteration[0].op(), Collective::allreduce);
  EXPECT_EQ(plan.per_iteration[0].numel(), 1u);
  ASSERT_EQ(plan.periodic.size(), 1u);
  EXPECT_EQ(plan.periodic[0].every_iterations(), 50u);
  EXPECT_EQ(plan.periodic[0].collective().reduce_op(), Collective::max);
  EXPECT_EQ(plan.checkpoint_interval, 1758u);
  uint64_t gradients = 0;
  for (const auto& c : plan.per_iteration) {
    if (c.name().rfind("DDP gradient bucket", 0) == 0) gradients += c.numel();
  }
  EXPECT_EQ(gradients, 37000000u);
}

TEST(IterationPlanTest, SequenceNumberOfAnIterationsFirstCollective) {
  const ExpandedPlan plan = ExpandPlan(IterationPlan());
  // Reference section 8: startup + k * per-iteration + periodic so far + 1.
  EXPECT_EQ(CollectivesBefore(plan, "default_pg", 0) + 1, 4u);
  EXPECT_EQ(CollectivesBefore(plan, "default_pg", 159) + 1, 3u + 159u * 51u + 3u + 1u);
  EXPECT_EQ(CollectivesBefore(plan, "other_pg", 159), 0u);
  EXPECT_EQ(FirstCollectiveOfIteration(plan, "default_pg"), 0);
}

TEST(IterationPlanTest, OldCodeMarksDenoisingCollectivesConditional) {
  IterationPlan source;
  source.mutable_streampetr()->set_old_code_skips_dn_without_gt(true);
  const ExpandedPlan plan = ExpandPlan(source);
  int conditional = 0;
  for (const auto& c : plan.per_iteration) conditional += c.only_when_local_batch_has_gt();
  EXPECT_EQ(conditional, 6);
}

TEST(IterationPlanTest, CustomPlanIsTakenAsWritten) {
  IterationPlan source;
  auto* step = source.mutable_custom()->add_per_iteration();
  step->set_name("x");
  step->set_op(Collective::allgather);
  const ExpandedPlan plan = ExpandPlan(source);
  ASSERT_EQ(plan.per_iteration.size(), 1u);
  EXPECT_EQ(plan.per_iteration[0].op(), Collective::allgather);
  EXPECT_TRUE(plan.startup.empty());
}

}  // namespace
}  // namespace petrsim
