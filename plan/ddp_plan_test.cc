// DDP's collectives per release (plan/ddp_plan.h). The 1.13 expectations are the traces of
// real DDP in docs/research/ddp_collectives.md section 3 (torch 1.13.1, Gloo, 2 ranks), written
// out by hand; tests/real_ddp/ddp_vs_plan.py checks seeded models against real DDP in CI.
#include "plan/ddp_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace petrsim {
namespace {

DdpTensor* Add(DdpModel& model, const std::string& name, DdpTensor::Kind kind, std::vector<uint64_t> shape,
               Collective::Dtype dtype = Collective::float32) {
  DdpTensor* t = model.add_tensors();
  t->set_name(name);
  t->set_kind(kind);
  for (uint64_t s : shape) t->add_shape(s);
  t->set_dtype(dtype);
  return t;
}

void Linear(DdpModel& model, const std::string& name, uint64_t in, uint64_t out) {
  Add(model, name + ".weight", DdpTensor::parameter, {out, in});
  Add(model, name + ".bias", DdpTensor::parameter, {out});
}

// Model A of the research note: a root float64[3] buffer, l1, bn, l2, l3, l4, unused.
DdpModel ModelA() {
  DdpModel model;
  Add(model, "dbuf", DdpTensor::buffer, {3}, Collective::float64);
  Linear(model, "l1", 1024, 1024);
  Add(model, "bn.weight", DdpTensor::parameter, {1024});
  Add(model, "bn.bias", DdpTensor::parameter, {1024});
  Add(model, "bn.running_mean", DdpTensor::buffer, {1024});
  Add(model, "bn.running_var", DdpTensor::buffer, {1024});
  Add(model, "bn.num_batches_tracked", DdpTensor::buffer, {}, Collective::int64);
  for (const char* name : {"l2", "l3", "l4", "unused"}) Linear(model, name, 1024, 1024);
  return model;
}

// "OP dtype[numel]" per collective.
std::vector<std::string> Describe(const std::vector<Collective>& list) {
  std::vector<std::string> out;
  for (const Collective& c : list) {
    out.push_back(Collective::Op_Name(c.op()) + " " + Collective::Dtype_Name(c.dtype()) + "[" +
                  std::to_string(c.numel()) + "]");
  }
  return out;
}

using Lines = std::vector<std::string>;
const TorchVersion k113{1, 13};

TEST(DdpPlan, ModelAWithDefaultArguments113) {
  const DdpCollectives d = DdpPlan(ModelA(), k113);
  EXPECT_EQ(Describe(d.construction), (Lines{"allgather int64[1]", "broadcast int64[34]", "broadcast float32[5252096]",
                                             "broadcast float64[3]", "broadcast int64[1]"}));
  const Lines buffers{"broadcast float64[3]", "broadcast float32[2048]", "broadcast int64[1]"};
  EXPECT_EQ(Describe(d.forward[0]), buffers);
  EXPECT_EQ(Describe(d.backward[0]), (Lines{"allreduce float32[5250048]"}));
  Lines rebuild{"broadcast int32[13]", "broadcast int32[2]"};
  rebuild.insert(rebuild.end(), buffers.begin(), buffers.end());
  EXPECT_EQ(Describe(d.forward[1]), rebuild);
  const Lines rebuilt{"allreduce float32[1049600]", "allreduce float32[4200448]"};
  EXPECT_EQ(Describe(d.backward[1]), rebuilt);
  EXPECT_EQ(Describe(d.forward[2]), buffers);
  EXPECT_EQ(Describe(d.backward[2]), rebuilt);
  for (const auto& c : d.backward[2]) EXPECT_FALSE(c.blocking());
  for (const auto& c : d.forward[1]) EXPECT_TRUE(c.blocking());
}

TEST(DdpPlan, ModelAFindUnusedParameters113) {
  DdpModel model = ModelA();
  model.set_find_unused_parameters(true);
  const DdpCollectives d = DdpPlan(model, k113);
  EXPECT_EQ(d.construction.size(), 5u);
  const Lines buckets{"allreduce float32[4201472]", "allreduce float32[1048576]", "allreduce int32[12]"};
  for (size_t phase = 0; phase < kDdpPhases; ++phase) {
    EXPECT_EQ(Describe(d.forward[phase]),
              (Lines{"broadcast float64[3]", "broadcast float32[2048]", "broadcast int64[1]"}))
        << "no rebuild, phase " << phase;
    EXPECT_EQ(Describe(d.backward[phase]), buckets) << phase;
  }
}

TEST(DdpPlan, ModelANoBufferBroadcastSmallBuckets113) {
  DdpModel model = ModelA();
  model.set_broadcast_buffers(false);
  model.set_bucket_cap_mb(5);
  const DdpCollectives d = DdpPlan(model, k113);
  // 1.13 still broadcasts the buffers at construction.
  EXPECT_EQ(Describe(d.construction), (Lines{"allgather int64[1]", "broadcast int64[34]", "broadcast float32[5252096]",
                                             "broadcast float64[3]", "broadcast int64[1]"}));
  EXPECT_TRUE(d.forward[0].empty());
  EXPECT_EQ(Describe(d.backward[0]), (Lines{"allreduce float32[5250048]"}));
  EXPECT_EQ(Describe(d.forward[1]), (Lines{"broadcast int32[13]", "broadcast int32[3]"}));
  EXPECT_EQ(Describe(d.backward[1]),
            (Lines{"allreduce float32[1049600]", "allreduce float32[2099200]", "allreduce float32[2101248]"}));
  EXPECT_TRUE(d.forward[2].empty());
}

TEST(DdpPlan, MixedDtypesOneFirstBucketPerDtype113) {
  DdpModel model;
  Add(model, "scale", DdpTensor::parameter, {10}, Collective::float64);
  Linear(model, "a", 8, 8);
  Linear(model, "b", 8, 8);
  const DdpCollectives d = DdpPlan(model, k113);
  EXPECT_EQ(Describe(d.construction),
            (Lines{"allgather int64[1]", "broadcast int64[14]", "broadcast float64[10]", "broadcast float32[144]"}));
  EXPECT_EQ(Describe(d.backward[0]), (Lines{"allreduce float32[144]", "allreduce float64[10]"}));
  EXPECT_EQ(Describe(d.forward[1]), (Lines{"broadcast int32[6]", "broadcast int32[2]"}));
  // After the rebuild both buckets are left open (all under 1 MiB): PyTorch appends them dtype by
  // dtype in the reverse of the dtypes' first appearance in the ready order (a.bias, a.weight,
  // b..., then scale) [ran 1.13: dist._compute_bucket_assignment_by_size with tensor indices].
  EXPECT_EQ(Describe(d.backward[1]), (Lines{"allreduce float64[10]", "allreduce float32[144]"}));
}

// a: Linear(8, 8), b: Linear(512, 512), c: Linear(8, 8); b's weight and bias are 1 MiB + 2 KiB.
DdpModel SmallBigSmall() {
  DdpModel model;
  Linear(model, "a", 8, 8);
  Linear(model, "b", 512, 512);
  Linear(model, "c", 8, 8);
  model.set_broadcast_buffers(false);
  return model;
}

TEST(DdpPlan, RebuiltBucketsFollowTheGradientReadyOrder113) {
  // Without grad_ready_order the rebuild takes the reverse of registration: c, then b closes the
  // 1 MiB first bucket, a is left over.
  DdpModel model = SmallBigSmall();
  DdpCollectives d = DdpPlan(model, k113);
  EXPECT_EQ(Describe(d.backward[1]), (Lines{"allreduce float32[262728]", "allreduce float32[72]"}));
  EXPECT_EQ(Describe(d.backward[2]), Describe(d.backward[1]));
  // A forward that uses c first, then a, then b: b's gradient is ready first and fills the first
  // bucket alone; a and c share the second.
  for (const uint32_t position : {3, 2, 1, 0, 5, 4}) model.add_grad_ready_order(position);
  EXPECT_TRUE(ValidateDdpModel(model, "plan.ddp").empty());
  d = DdpPlan(model, k113);
  EXPECT_EQ(Describe(d.backward[1]), (Lines{"allreduce float32[262656]", "allreduce float32[144]"}));
  EXPECT_EQ(Describe(d.backward[2]), Describe(d.backward[1]));
  // Iteration 0 does not know the order yet (one bucket per dtype in 1.12+; registration order
  // in 1.9), and the rebuild broadcasts the same counts.
  EXPECT_EQ(Describe(d.backward[0]), (Lines{"allreduce float32[262800]"}));
  EXPECT_EQ(Describe(d.forward[1]), (Lines{"broadcast int32[7]", "broadcast int32[2]"}));
  EXPECT_EQ(Describe(DdpPlan(model, TorchVersion{1, 9}).backward[1]), Describe(d.backward[1]));
  // find_unused_parameters never rebuilds: the order changes nothing.
  model.set_find_unused_parameters(true);
  DdpModel reverse = model;
  reverse.clear_grad_ready_order();
  EXPECT_EQ(Describe(DdpPlan(model, k113).backward[2]), Describe(DdpPlan(reverse, k113).backward[2]));
}

TEST(DdpPlan, GradReadyOrderMustBeAPermutationOfTheTrainableParameters) {
  DdpModel model = SmallBigSmall();
  model.mutable_tensors(0)->set_requires_grad(false);  // a.weight: 5 trainable parameters left
  for (const uint32_t position : {0, 1, 2, 3}) model.add_grad_ready_order(position);
  EXPECT_EQ(ValidateDdpModel(model, "plan.ddp"),
            (Lines{"plan.ddp.grad_ready_order: must list each position of the 5 parameters that require grad (0 to "
                   "4) once, got 4 positions"}));
  model.add_grad_ready_order(5);
  EXPECT_EQ(ValidateDdpModel(model, "plan.ddp"),
            (Lines{"plan.ddp.grad_ready_order[4]: must be < 5 (the parameters that require grad), got 5"}));
  model.set_grad_ready_order(4, 1);
  EXPECT_EQ(ValidateDdpModel(model, "plan.ddp"),
            (Lines{"plan.ddp.grad_ready_order[4]: must list each position of the 5 parameters that require grad (0 "
                   "to 4) once, got 1 again (first at grad_ready_order[1])"}));
  model.set_grad_ready_order(4, 4);
  EXPECT_TRUE(ValidateDdpModel(model, "plan.ddp").empty());
  // `repeat` counts: a Linear(8, 8) weight listed with repeat 3 stands for 3 positions.
  DdpModel repeated;
  Add(repeated, "w", DdpTensor::parameter, {8, 8})->set_repeat(3);
  for (const uint32_t position : {2, 0, 1}) repeated.add_grad_ready_order(position);
  EXPECT_TRUE(ValidateDdpModel(repeated, "plan.ddp").empty());
}

TEST(DdpPlan, NonPersistentAndFrozenTensors113) {
  // Model B of the note (Linear(8,8), BatchNorm1d(8), a non-persistent float32[5] buffer), with
  // the linear layer's bias frozen: it is broadcast at construction, not checked or reduced.
  DdpModel model;
  Add(model, "extra", DdpTensor::buffer, {5})->set_persistent(false);
  Linear(model, "l", 8, 8);
  model.mutable_tensors(2)->set_requires_grad(false);
  Add(model, "bn.weight", DdpTensor::parameter, {8});
  Add(model, "bn.bias", DdpTensor::parameter, {8});
  Add(model, "bn.running_mean", DdpTensor::buffer, {8});
  Add(model, "bn.running_var", DdpTensor::buffer, {8});
  Add(model, "bn.num_batches_tracked", DdpTensor::buffer, {}, Collective::int64);
  const DdpCollectives d = DdpPlan(model, k113);
  EXPECT_EQ(Describe(d.construction),
            (Lines{"allgather int64[1]", "broadcast int64[8]", "broadcast float32[109]", "broadcast int64[1]"}));
  EXPECT_EQ(Describe(d.forward[0]), (Lines{"broadcast float32[21]", "broadcast int64[1]"}));
  EXPECT_EQ(Describe(d.backward[0]), (Lines{"allreduce float32[80]"}));
  EXPECT_EQ(Describe(d.forward[1]).front(), "broadcast int32[4]");
}

TEST(DdpPlan, ReleasesDiffer) {
  DdpModel model = ModelA();
  model.set_broadcast_buffers(false);
  // 1.9 and 1.10: no parameter count check; state_dict() order (no non-persistent buffers, the
  // root's float64 buffer first); iteration 0 cut at [1 MiB, 25 MiB] like find_unused.
  for (const TorchVersion v : {TorchVersion{1, 9}, TorchVersion{1, 10}}) {
    const DdpCollectives d = DdpPlan(model, v);
    EXPECT_EQ(Describe(d.construction), (Lines{"broadcast int64[34]", "broadcast float64[3]",
                                               "broadcast float32[5252096]", "broadcast int64[1]"}))
        << v.ToString();
    EXPECT_EQ(Describe(d.backward[0]), (Lines{"allreduce float32[4201472]", "allreduce float32[1048576]"}));
    EXPECT_EQ(Describe(d.forward[1]), (Lines{"broadcast int32[13]", "broadcast int32[2]"}));
  }
  // 1.11: parameters then buffers, still no count check and [1, 25] MiB in iteration 0.
  const DdpCollectives d111 = DdpPlan(model, {1, 11});
  EXPECT_EQ(Describe(d111.construction),
            (Lines{"broadcast int64[34]", "broadcast float32[5252096]", "broadcast float64[3]", "broadcast int64[1]"}));
  EXPECT_EQ(d111.backward[0].size(), 2u);
  // 1.12: the count check and the single first bucket.
  const DdpCollectives d112 = DdpPlan(model, {1, 12});
  EXPECT_EQ(d112.construction.size(), 5u);
  EXPECT_EQ(Describe(d112.backward[0]), (Lines{"allreduce float32[5250048]"}));
  // 2.0 still broadcasts the buffers at construction; 2.1 on leaves them out without
  // broadcast_buffers.
  EXPECT_EQ(DdpPlan(model, {2, 0}).construction.size(), 5u);
  for (const TorchVersion v : {TorchVersion{2, 1}, TorchVersion{2, 5}}) {
    EXPECT_EQ(Describe(DdpPlan(model, v).construction),
              (Lines{"allgather int64[1]", "broadcast int64[34]", "broadcast float32[5250048]"}))
        << v.ToString();
  }
  model.set_broadcast_buffers(true);
  EXPECT_EQ(DdpPlan(model, {2, 1}).construction.size(), 5u);
}

TEST(DdpPlan, SharedParameterIsBroadcastPerKeyBy19Only) {
  DdpModel model;
  Linear(model, "a", 4, 4);
  model.mutable_tensors(0)->set_state_dict_aliases(2);  // a.weight also under two more keys
  EXPECT_EQ(Describe(DdpPlan(model, {1, 9}).construction), (Lines{"broadcast int64[6]", "broadcast float32[52]"}));
  EXPECT_EQ(Describe(DdpPlan(model, {1, 11}).construction), (Lines{"broadcast int64[6]", "broadcast float32[20]"}));
}

TEST(DdpPlan, BroadcastBucketsCloseAt250MiB) {
  // 80 float32 [1024, 1024] weights = 320 MiB (shape check: 80 x 2 sizes and 2 strides): 63 x 4 MiB
  // reach 252 MiB, the rest is 68 MiB.
  DdpModel model;
  DdpTensor* w = Add(model, "w", DdpTensor::parameter, {1024, 1024});
  w->set_repeat(80);
  const DdpCollectives d = DdpPlan(model, k113);
  EXPECT_EQ(Describe(d.construction), (Lines{"allgather int64[1]", "broadcast int64[320]",
                                             "broadcast float32[66060288]", "broadcast float32[17825792]"}));
}

TEST(DdpPlan, ValidationNamesTheField) {
  DdpModel model;
  Add(model, "w", DdpTensor::parameter, {4, 0});
  Add(model, "b", DdpTensor::buffer, {4})->set_requires_grad(true);
  model.set_bucket_cap_mb(0);
  const std::vector<std::string> problems = ValidateDdpModel(model, "plan.ddp");
  ASSERT_EQ(problems.size(), 3u);
  EXPECT_EQ(problems[0], "plan.ddp.bucket_cap_mb: must be in (0, 10^6] MiB, got 0");
  EXPECT_EQ(problems[1], "plan.ddp.tensors[0].shape[1]: must be in [1, 2^40], got 0");
  EXPECT_EQ(problems[2], "plan.ddp.tensors[1].requires_grad: is for parameters only (this is a buffer), got true");
}

}  // namespace
}  // namespace petrsim
