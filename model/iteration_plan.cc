// Iteration plans; see iteration_plan.h.
#include "model/iteration_plan.h"

#include <string>

namespace petrsim {
namespace {

Collective Make(const std::string& name, Collective::Op op, Collective::ReduceOp reduce_op, uint64_t numel,
                Collective::Dtype dtype, bool blocking) {
  Collective collective;
  collective.set_name(name);
  collective.set_op(op);
  collective.set_reduce_op(reduce_op);
  collective.set_numel(numel);
  collective.set_dtype(dtype);
  collective.set_blocking(blocking);
  return collective;
}

ExpandedPlan StreamPetr(const StreamPetrPlan& p) {
  ExpandedPlan plan;
  // Startup: the sampler class is built twice, each syncing its seed from rank 0 as an int32
  // tensor; then DDP broadcasts the module state (one 250 MB broadcast bucket holds 37M fp32).
  for (int i = 0; i < 2; ++i) {
    plan.startup.push_back(Make("sync_random_seed broadcast " + std::to_string(i), Collective::broadcast,
                                Collective::sum, 1, Collective::int32, true));
  }
  plan.startup.push_back(Make("DDP parameter broadcast", Collective::broadcast, Collective::sum, p.parameters(),
                              Collective::float32, true));

  // StreamPETRHead.loss: one reduce_mean(num_total_pos) per decoder layer, then the same for the
  // denoising queries; each is followed by .item() (blocking).
  for (uint32_t layer = 0; layer < p.decoder_layers(); ++layer) {
    plan.per_iteration.push_back(Make("reduce_mean(num_total_pos), decoder layer " + std::to_string(layer),
                                      Collective::allreduce, Collective::sum, 1, Collective::float32, true));
  }
  if (p.denoising()) {
    for (uint32_t layer = 0; layer < p.decoder_layers(); ++layer) {
      Collective dn = Make("reduce_mean(num_total_pos), denoising, decoder layer " + std::to_string(layer),
                           Collective::allreduce, Collective::sum, 1, Collective::float32, true);
      dn.set_only_when_local_batch_has_gt(p.old_code_skips_dn_without_gt());
      plan.per_iteration.push_back(dn);
    }
  }
  // FocalHead.loss: one reduce_mean.
  plan.per_iteration.push_back(Make("reduce_mean(num_total_pos), focal head", Collective::allreduce, Collective::sum, 1,
                                    Collective::float32, true));
  // mmdet _parse_losses: the length of log_vars (int64), then each loss term and the total.
  plan.per_iteration.push_back(
      Make("_parse_losses: len(log_vars)", Collective::allreduce, Collective::sum, 1, Collective::int64, true));
  const uint32_t loss_terms = 2 * p.decoder_layers() * (p.denoising() ? 2 : 1) + p.focal_head_loss_terms();
  for (uint32_t term = 0; term < loss_terms + 1; ++term) {
    const std::string name =
        term < loss_terms ? "_parse_losses: loss term " + std::to_string(term) : "_parse_losses: total loss";
    plan.per_iteration.push_back(Make(name, Collective::allreduce, Collective::sum, 1, Collective::float32, true));
  }
  // Backward: DDP gradient buckets, the first capped at first_bucket_mb, the rest at
  // bucket_cap_mb, all fp32 (asynchronous, waited for before the optimizer step).
  const uint64_t mib = 1024 * 1024;
  uint64_t remaining = p.parameters();
  uint64_t cap = uint64_t{p.first_bucket_mb()} * mib / 4;
  for (int bucket = 0; remaining > 0; ++bucket) {
    const uint64_t numel = remaining < cap ? remaining : cap;
    Collective grads = Make("DDP gradient bucket " + std::to_string(bucket), Collective::allreduce, Collective::sum,
                            numel, Collective::float32, false);
    plan.per_iteration.push_back(grads);
    remaining -= numel;
    cap = uint64_t{p.bucket_cap_mb()} * mib / 4;
  }
  if (p.log_interval() > 0) {
    PeriodicCollective logger;
    *logger.mutable_collective() =
        Make("logger reduce(MAX) of max memory", Collective::reduce, Collective::max, 1, Collective::int32, true);
    logger.set_every_iterations(p.log_interval());
    plan.periodic.push_back(logger);
  }
  plan.checkpoint_interval = p.checkpoint_interval();
  return plan;
}

}  // namespace

ExpandedPlan ExpandPlan(const IterationPlan& plan) {
  if (plan.has_custom()) {
    ExpandedPlan expanded;
    expanded.startup.assign(plan.custom().startup().begin(), plan.custom().startup().end());
    expanded.per_iteration.assign(plan.custom().per_iteration().begin(), plan.custom().per_iteration().end());
    expanded.periodic.assign(plan.custom().periodic().begin(), plan.custom().periodic().end());
    expanded.checkpoint_interval = plan.custom().checkpoint_interval();
    return expanded;
  }
  return StreamPetr(plan.streampetr());
}

uint64_t CollectivesBefore(const ExpandedPlan& plan, const std::string& process_group, uint64_t iteration) {
  uint64_t startup = 0, per_iteration = 0, periodic = 0;
  for (const auto& c : plan.startup) startup += c.process_group() == process_group;
  for (const auto& c : plan.per_iteration) per_iteration += c.process_group() == process_group;
  for (const auto& p : plan.periodic) {
    if (p.collective().process_group() == process_group) periodic += iteration / p.every_iterations();
  }
  return startup + iteration * per_iteration + periodic;
}

int FirstCollectiveOfIteration(const ExpandedPlan& plan, const std::string& process_group) {
  for (size_t i = 0; i < plan.per_iteration.size(); ++i) {
    if (plan.per_iteration[i].process_group() == process_group) return static_cast<int>(i);
  }
  return -1;
}

std::optional<PlanPosition> LocateCollective(const ExpandedPlan& plan, const std::string& process_group, uint64_t seq,
                                             uint64_t job_iterations) {
  if (seq == 0) return std::nullopt;
  std::vector<const Collective*> startup;
  for (const auto& c : plan.startup) {
    if (c.process_group() == process_group) startup.push_back(&c);
  }
  if (seq <= startup.size()) return PlanPosition{true, 0, startup[seq - 1]->name()};
  // The iteration i with CollectivesBefore(i) < seq <= CollectivesBefore(i + 1).
  uint64_t low = 0, high = job_iterations;  // invariant: the answer is in [low, high)
  if (high == 0 || CollectivesBefore(plan, process_group, high) < seq) return std::nullopt;
  while (high - low > 1) {
    const uint64_t mid = low + (high - low) / 2;
    if (CollectivesBefore(plan, process_group, mid) < seq) {
      low = mid;
    } else {
      high = mid;
    }
  }
  uint64_t k = seq - CollectivesBefore(plan, process_group, low) - 1;
  for (const auto& c : plan.per_iteration) {
    if (c.process_group() != process_group) continue;
    if (k == 0) return PlanPosition{false, low, c.name()};
    --k;
  }
  for (const auto& p : plan.periodic) {
    if (p.collective().process_group() != process_group || (low + 1) % p.every_iterations() != 0) continue;
    if (k == 0) return PlanPosition{false, low, p.collective().name()};
    --k;
  }
  return std::nullopt;
}

}  // namespace petrsim
