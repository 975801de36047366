// The iteration plan (docs/reference/streampetr.md, section 7) with DDP's collectives joined in (plan/ddp_plan.h).
#include "plan/iteration_plan.h"

#include <gtest/gtest.h>

#include "plan/ddp_plan.h"
#include "plan/streampetr_ddp_model.h"

namespace petrsim {
namespace {

uint64_t TrainableNumel(const DdpModel& model) {
  uint64_t total = 0;
  for (const DdpTensor& t : model.tensors()) {
    if (t.kind() != DdpTensor::parameter || !t.requires_grad()) continue;
    uint64_t numel = 1;
    for (uint64_t s : t.shape()) numel *= s;
    total += numel * t.repeat();
  }
  return total;
}

uint64_t BucketNumel(const std::vector<Collective>& list) {
  uint64_t total = 0;
  for (const auto& c : list) {
    if (c.name().starts_with("DDP gradient bucket")) total += c.numel();
  }
  return total;
}

TEST(IterationPlanTest, StreamPetrDefaultIsTheReferenceJobOnTorch19) {
  const ExpandedPlan plan = ExpandPlan(Scenario());
  // Two seed broadcasts (the infinite group sampler), then DDP 1.9's constructor: the shape
  // check and the module state broadcasts (float32, then int64 for BatchNorm's counters).
  ASSERT_GE(plan.startup.size(), 4u);
  EXPECT_EQ(plan.startup[0].name(), "sync_random_seed broadcast 0");
  EXPECT_EQ(plan.startup[1].name(), "sync_random_seed broadcast 1");
  EXPECT_EQ(plan.startup[2].name(), "DDP __init__: parameter shape check");
  EXPECT_EQ(plan.startup[3].op(), Collective::broadcast);
  // Iterations 0 and 1 differ from the later ones: iteration 1 rebuilds the buckets first.
  ASSERT_EQ(plan.leading.size(), 2u);
  EXPECT_EQ(plan.leading[0][0].name(), "reduce_mean(num_total_pos), decoder layer 0");
  EXPECT_EQ(plan.leading[1][0].name(), "DDP bucket rebuild: parameter indices");
  EXPECT_EQ(plan.leading[1][1].name(), "DDP bucket rebuild: bucket sizes");
  EXPECT_EQ(plan.leading[1][2].name(), "reduce_mean(num_total_pos), decoder layer 0");
  EXPECT_EQ(plan.per_iteration[0].name(), "reduce_mean(num_total_pos), decoder layer 0");
  EXPECT_EQ(plan.per_iteration[0].python_frame().rfind("mmdet/core/utils/dist_utils.py, in reduce_mean", 0), 0u);
  // 6 + 6 reduce_means, 1 focal head, 1 len(log_vars), 29 loss terms + total, then the buckets,
  // which hold every trainable parameter in each iteration.
  const uint64_t trainable = TrainableNumel(StreamPetrReferenceDdpModel(6));
  for (uint64_t i = 0; i < 3; ++i) {
    const auto& list = plan.Iteration(i);
    EXPECT_EQ(list[list.size() - 1].name().rfind("DDP gradient bucket", 0), 0u) << i;
    EXPECT_EQ(BucketNumel(list), trainable) << "iteration " << i;
  }
  EXPECT_EQ(plan.leading[1].size(), plan.per_iteration.size() + 2);
  ASSERT_EQ(plan.periodic.size(), 1u);
  EXPECT_EQ(plan.periodic[0].every_iterations(), 50u);
  EXPECT_EQ(plan.periodic[0].collective().reduce_op(), Collective::max);
  EXPECT_EQ(plan.checkpoint_interval, 1758u);
}

// The evaluation hook (CustomDistEvalHook + custom_multi_gpu_test): after the logger's reduce,
// every BatchNorm's running_var then running_mean broadcast from rank 0, then collect_results_cpu's
// barrier (and with gpu_collect the tmpdir name's 512-byte broadcast before it).
TEST(IterationPlanTest, TheEvaluationHooksCollectivesComeEveryEvaluationInterval) {
  Scenario scenario;
  scenario.mutable_plan()->mutable_streampetr()->set_evaluation_interval(100);
  const ExpandedPlan plan = ExpandPlan(scenario);
  const DdpModel model = StreamPetrReferenceDdpModel(6);
  std::vector<const DdpTensor*> means;
  for (const DdpTensor& t : model.tensors()) {
    if (t.kind() == DdpTensor::buffer && t.name().ends_with(".running_mean")) means.push_back(&t);
  }
  ASSERT_GT(means.size(), 50u);  // ResNet-50's BatchNorms
  ASSERT_EQ(plan.periodic.size(), 1 + 2 * means.size() + 1);
  EXPECT_EQ(plan.periodic[0].collective().name(), "logger reduce(MAX) of max memory");
  for (size_t m = 0; m < means.size(); ++m) {
    const std::string module = means[m]->name().substr(0, means[m]->name().size() - 13);
    const Collective& var = plan.periodic[1 + 2 * m].collective();
    const Collective& mean = plan.periodic[2 + 2 * m].collective();
    EXPECT_EQ(var.name(), "evaluation: broadcast " + module + ".running_var");
    EXPECT_EQ(mean.name(), "evaluation: broadcast " + module + ".running_mean");
    EXPECT_EQ(var.op(), Collective::broadcast);
    EXPECT_EQ(mean.numel(), means[m]->shape(0));
    EXPECT_EQ(var.numel(), means[m]->shape(0));
    EXPECT_EQ(plan.periodic[1 + 2 * m].every_iterations(), 100u);
  }
  EXPECT_EQ(plan.periodic.back().collective().op(), Collective::barrier);
  EXPECT_NE(plan.periodic.back().collective().python_frame().find("collect_results_cpu: dist.barrier()"),
            std::string::npos);
  // Placed after iteration 99 (mmcv's every_n_iters), after that iteration's logger reduce.
  const uint64_t before = CollectivesBefore(plan, "default_pg", 99);
  const uint64_t per = plan.per_iteration.size();
  const auto at = LocateCollective(plan, "default_pg", before + per + 2, 1000);
  ASSERT_TRUE(at);
  EXPECT_EQ(at->iteration, 99u);
  EXPECT_EQ(at->step, plan.periodic[1].collective().name());
  EXPECT_EQ(CollectivesBefore(plan, "default_pg", 100), before + per + plan.periodic.size());
  EXPECT_EQ(CollectivesBefore(plan, "default_pg", 101), before + 2 * per + plan.periodic.size());

  // broadcast_bn_buffer=False: the barrier alone; gpu_collect: the tmpdir broadcast first.
  scenario.mutable_plan()->mutable_streampetr()->set_evaluation_broadcast_bn_buffer(false);
  scenario.mutable_plan()->mutable_streampetr()->set_evaluation_gpu_collect(true);
  const ExpandedPlan gpu = ExpandPlan(scenario);
  ASSERT_EQ(gpu.periodic.size(), 3u);
  EXPECT_EQ(gpu.periodic[1].collective().dtype(), Collective::uint8);
  EXPECT_EQ(gpu.periodic[1].collective().numel(), 512u);
  EXPECT_EQ(gpu.periodic[2].collective().op(), Collective::barrier);
}

TEST(IterationPlanTest, EpochSamplersSyncNoSeed) {
  Scenario scenario;
  scenario.mutable_sampler()->set_kind(Sampler::distributed_group);
  const ExpandedPlan plan = ExpandPlan(scenario);
  ASSERT_FALSE(plan.startup.empty());
  EXPECT_EQ(plan.startup[0].name(), "DDP __init__: parameter shape check");
}

TEST(IterationPlanTest, SequenceNumbersCountTheLeadingIterations) {
  Scenario scenario;
  scenario.mutable_comm()->set_torch_version("1.13");
  const ExpandedPlan plan = ExpandPlan(scenario);
  const uint64_t startup = plan.startup.size(), first = plan.leading[0].size(), second = plan.leading[1].size(),
                 later = plan.per_iteration.size();
  EXPECT_EQ(startup, 2u + 2u + 2u);  // seeds; count and shape checks; float32 and int64 state
  EXPECT_EQ(CollectivesBefore(plan, "default_pg", 0), startup);
  EXPECT_EQ(CollectivesBefore(plan, "default_pg", 1), startup + first);
  EXPECT_EQ(CollectivesBefore(plan, "default_pg", 2), startup + first + second);
  // Reference section 8: ... + k * per-iteration + periodic so far (3 logger reduces by 159).
  EXPECT_EQ(CollectivesBefore(plan, "default_pg", 159), startup + first + second + 157 * later + 3);
  EXPECT_EQ(CollectivesBefore(plan, "other_pg", 159), 0u);
  // 44 forward collectives; 1.13 reduces iteration 0's gradients in one bucket, the later
  // iterations in the rebuilt ones, after the rebuild's two broadcasts.
  EXPECT_EQ(first, 44u + 1u);
  EXPECT_GT(later, 44u + 1u);
  EXPECT_EQ(second, later + 2);
}

TEST(IterationPlanTest, OldCodeMarksDenoisingCollectivesConditional) {
  Scenario scenario;
  scenario.mutable_plan()->mutable_streampetr()->set_old_code_skips_dn_without_gt(true);
  const ExpandedPlan plan = ExpandPlan(scenario);
  int conditional = 0;
  for (const auto& c : plan.per_iteration) conditional += c.only_when_local_batch_has_gt();
  EXPECT_EQ(conditional, 6);
}

TEST(IterationPlanTest, CustomPlanIsTakenAsWritten) {
  Scenario scenario;
  auto* step = scenario.mutable_plan()->mutable_custom()->add_per_iteration();
  step->set_name("x");
  step->set_op(Collective::allgather);
  const ExpandedPlan plan = ExpandPlan(scenario);
  ASSERT_EQ(plan.per_iteration.size(), 1u);
  EXPECT_EQ(plan.per_iteration[0].op(), Collective::allgather);
  EXPECT_TRUE(plan.startup.empty());
  EXPECT_TRUE(plan.leading.empty());
}

TEST(IterationPlanTest, CustomPlanWithDdpWrapsTheForwardCollectives) {
  Scenario scenario;
  scenario.mutable_comm()->set_torch_version("1.13.1");
  auto* custom = scenario.mutable_plan()->mutable_custom();
  custom->add_startup()->set_name("seed");
  custom->add_per_iteration()->set_name("loss");
  DdpModel* ddp = scenario.mutable_plan()->mutable_ddp();
  DdpTensor* w = ddp->add_tensors();
  w->add_shape(8);
  w->add_shape(8);
  const ExpandedPlan plan = ExpandPlan(scenario);
  const auto names = [](const std::vector<Collective>& list) {
    std::vector<std::string> out;
    for (const auto& c : list) out.push_back(c.name());
    return out;
  };
  using Names = std::vector<std::string>;
  EXPECT_EQ(names(plan.startup),
            (Names{"seed", "DDP __init__: parameter count check", "DDP __init__: parameter shape check",
                   "DDP __init__: module state broadcast 0 (float32)"}));
  ASSERT_EQ(plan.leading.size(), 2u);
  EXPECT_EQ(names(plan.leading[0]), (Names{"loss", "DDP gradient bucket 0"}));
  EXPECT_EQ(names(plan.leading[1]), (Names{"DDP bucket rebuild: parameter indices", "DDP bucket rebuild: bucket sizes",
                                           "loss", "DDP gradient bucket 0"}));
  EXPECT_EQ(names(plan.per_iteration), (Names{"loss", "DDP gradient bucket 0"}));
}

// The groups in creation order: the world group first, then each other one where the plan first names it (startup,
// the leading iterations, the steady one, the periodic collectives), each once.
TEST(IterationPlanTest, ProcessGroupNamesInCreationOrder) {
  Scenario scenario;
  auto* custom = scenario.mutable_plan()->mutable_custom();
  const auto add = [](Collective* c, const std::string& group) { c->set_process_group(group); };
  add(custom->add_startup(), "b");
  add(custom->add_startup(), "default_pg");
  add(custom->add_per_iteration(), "a");
  add(custom->add_per_iteration(), "b");
  add(custom->add_periodic()->mutable_collective(), "c");
  EXPECT_EQ(ProcessGroupNames(ExpandPlan(scenario)), (std::vector<std::string>{"default_pg", "b", "a", "c"}));
  EXPECT_EQ(ProcessGroupNames(ExpandPlan(Scenario())), (std::vector<std::string>{"default_pg"}));
}

}  // namespace
}  // namespace petrsim
