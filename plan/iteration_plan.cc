// Iteration plans; see iteration_plan.h.
#include "plan/iteration_plan.h"

#include <algorithm>
#include <string>

#include "plan/ddp_plan.h"
#include "plan/streampetr_ddp_model.h"
#include "scenario/torch_version.h"

namespace petrsim {
namespace {

Collective Make(const std::string& name, Collective::Op op, Collective::ReduceOp reduce_op, uint64_t numel,
                Collective::Dtype dtype, bool blocking, const std::string& frame) {
  Collective collective;
  collective.set_name(name);
  collective.set_op(op);
  collective.set_reduce_op(reduce_op);
  collective.set_numel(numel);
  collective.set_dtype(dtype);
  collective.set_blocking(blocking);
  collective.set_python_frame(frame);
  return collective;
}

// The frames the reference job's ranks show (mmdet 2.x / mmcv 1.x file and function names).
const char kReduceMeanFrame[] =
    "mmdet/core/utils/dist_utils.py, in reduce_mean: dist.all_reduce(tensor.div_(dist.get_world_size()), "
    "op=dist.ReduceOp.SUM)";
const char kLogVarLengthFrame[] = "mmdet/models/detectors/base.py, in _parse_losses: dist.all_reduce(log_var_length)";
const char kLossValueFrame[] =
    "mmdet/models/detectors/base.py, in _parse_losses: dist.all_reduce(loss_value.div_(dist.get_world_size()))";
const char kSeedFrame[] = "mmdet/core/utils/dist_utils.py, in sync_random_seed: dist.broadcast(random_num, src=0)";
const char kBnBroadcastFrame[] =
    "projects/mmdet3d_plugin/core/evaluation/eval_hooks.py, in _do_evaluate: dist.broadcast(module.";
const char kDirBroadcastFrame[] =
    "projects/mmdet3d_plugin/core/apis/test.py, in collect_results_cpu: dist.broadcast(dir_tensor, 0)";
const char kBarrierFrame[] = "projects/mmdet3d_plugin/core/apis/test.py, in collect_results_cpu: dist.barrier()";
const char kLoggerFrame[] =
    "mmcv/runner/hooks/logger/text.py, in _get_max_memory: dist.reduce(mem_mb, 0, op=dist.ReduceOp.MAX)";

// The model's own collectives: the StreamPETR plan's (docs/reference/streampetr.md, section 7) without DDP's.
struct ModelPlan {
  std::vector<Collective> startup;
  std::vector<Collective> forward;
  std::vector<PeriodicCollective> periodic;
  uint32_t checkpoint_interval = 0;
};

ModelPlan StreamPetr(const StreamPetrPlan& p, Sampler::Kind sampler) {
  ModelPlan plan;
  // Startup: StreamPETR's infinite group sampler is built twice, each syncing its seed from
  // rank 0 as an int32 tensor; the epoch samplers broadcast nothing.
  if (sampler == Sampler::infinite_group_each_sample_in_batch) {
    for (int i = 0; i < 2; ++i) {
      plan.startup.push_back(Make("sync_random_seed broadcast " + std::to_string(i), Collective::broadcast,
                                  Collective::sum, 1, Collective::int32, true, kSeedFrame));
    }
  }
  // StreamPETRHead.loss: one reduce_mean(num_total_pos) per decoder layer, then the same for the
  // denoising queries; each is followed by .item() (blocking).
  for (uint32_t layer = 0; layer < p.decoder_layers(); ++layer) {
    plan.forward.push_back(Make("reduce_mean(num_total_pos), decoder layer " + std::to_string(layer),
                                Collective::allreduce, Collective::sum, 1, Collective::float32, true,
                                kReduceMeanFrame));
  }
  if (p.denoising()) {
    for (uint32_t layer = 0; layer < p.decoder_layers(); ++layer) {
      Collective dn = Make("reduce_mean(num_total_pos), denoising, decoder layer " + std::to_string(layer),
                           Collective::allreduce, Collective::sum, 1, Collective::float32, true, kReduceMeanFrame);
      dn.set_only_when_local_batch_has_gt(p.old_code_skips_dn_without_gt());
      plan.forward.push_back(dn);
    }
  }
  // FocalHead.loss: one reduce_mean.
  plan.forward.push_back(Make("reduce_mean(num_total_pos), focal head", Collective::allreduce, Collective::sum, 1,
                              Collective::float32, true, kReduceMeanFrame));
  // mmdet _parse_losses: the length of log_vars (int64), then each loss term and the total.
  plan.forward.push_back(Make("_parse_losses: len(log_vars)", Collective::allreduce, Collective::sum, 1,
                              Collective::int64, true, kLogVarLengthFrame));
  const uint32_t loss_terms = 2 * p.decoder_layers() * (p.denoising() ? 2 : 1) + p.focal_head_loss_terms();
  for (uint32_t term = 0; term < loss_terms + 1; ++term) {
    const std::string name =
        term < loss_terms ? "_parse_losses: loss term " + std::to_string(term) : "_parse_losses: total loss";
    plan.forward.push_back(
        Make(name, Collective::allreduce, Collective::sum, 1, Collective::float32, true, kLossValueFrame));
  }
  if (p.log_interval() > 0) {
    PeriodicCollective logger;
    *logger.mutable_collective() = Make("logger reduce(MAX) of max memory", Collective::reduce, Collective::max, 1,
                                        Collective::int32, true, kLoggerFrame);
    logger.set_every_iterations(p.log_interval());
    plan.periodic.push_back(logger);
  }
  plan.checkpoint_interval = p.checkpoint_interval();
  return plan;
}

// The evaluation hook's collectives (StreamPetrPlan.evaluation_interval), each due every `interval` iterations:
// the BatchNorm buffers of `ddp` (running_var, then running_mean, per module), then the results' collection.
std::vector<PeriodicCollective> Evaluation(const StreamPetrPlan& p, const DdpModel& ddp) {
  std::vector<PeriodicCollective> out;
  const auto add = [&](Collective c) {
    PeriodicCollective& periodic = out.emplace_back();
    *periodic.mutable_collective() = std::move(c);
    periodic.set_every_iterations(p.evaluation_interval());
  };
  const auto numel = [](const DdpTensor& t) {
    uint64_t n = 1;
    for (const uint64_t d : t.shape()) n *= d;
    return n;
  };
  if (p.evaluation_broadcast_bn_buffer()) {
    // A BatchNorm registers running_mean, running_var, num_batches_tracked in that order; `repeat`
    // stands for consecutive tensors of one kind, so a module's buffers are never folded together.
    const auto& tensors = ddp.tensors();
    for (int i = 0; i + 1 < tensors.size(); ++i) {
      const DdpTensor& mean = tensors[i];
      const DdpTensor& var = tensors[i + 1];
      if (mean.kind() != DdpTensor::buffer || var.kind() != DdpTensor::buffer ||
          !mean.name().ends_with("running_mean") || !var.name().ends_with("running_var") ||
          mean.name().substr(0, mean.name().size() - 12) != var.name().substr(0, var.name().size() - 11)) {
        continue;
      }
      const std::string module =
          mean.name().size() > 13 ? mean.name().substr(0, mean.name().size() - 13) : std::string("(root)");
      for (uint32_t k = 0; k < mean.repeat(); ++k) {
        const std::string name = mean.repeat() > 1 ? module + "#" + std::to_string(k) : module;
        add(Make("evaluation: broadcast " + name + ".running_var", Collective::broadcast, Collective::sum, numel(var),
                 var.dtype(), true, std::string(kBnBroadcastFrame) + "running_var, 0)"));
        add(Make("evaluation: broadcast " + name + ".running_mean", Collective::broadcast, Collective::sum, numel(mean),
                 mean.dtype(), true, std::string(kBnBroadcastFrame) + "running_mean, 0)"));
      }
    }
  }
  if (p.evaluation_gpu_collect()) {
    add(Make("evaluation: collect_results broadcast of the tmpdir name", Collective::broadcast, Collective::sum, 512,
             Collective::uint8, true, kDirBroadcastFrame));
  }
  add(Make("evaluation: collect_results barrier", Collective::barrier, Collective::sum, 1, Collective::float32, true,
           kBarrierFrame));
  return out;
}

}  // namespace

ExpandedPlan ExpandPlan(const Scenario& scenario) {
  const IterationPlan& source = scenario.plan();
  ModelPlan model;
  DdpModel ddp;
  bool has_ddp = source.has_ddp();
  if (source.has_custom()) {
    const CustomPlan& custom = source.custom();
    model.startup.assign(custom.startup().begin(), custom.startup().end());
    model.forward.assign(custom.per_iteration().begin(), custom.per_iteration().end());
    model.periodic.assign(custom.periodic().begin(), custom.periodic().end());
    model.checkpoint_interval = custom.checkpoint_interval();
    if (has_ddp) ddp = source.ddp();
  } else {
    model = StreamPetr(source.streampetr(), scenario.sampler().kind());
    ddp = has_ddp ? source.ddp() : StreamPetrReferenceDdpModel(source.streampetr().decoder_layers());
    has_ddp = true;
    if (source.streampetr().evaluation_interval() > 0) {
      const std::vector<PeriodicCollective> evaluation = Evaluation(source.streampetr(), ddp);
      model.periodic.insert(model.periodic.end(), evaluation.begin(), evaluation.end());
    }
  }

  ExpandedPlan plan;
  plan.startup = model.startup;
  plan.periodic = model.periodic;
  plan.checkpoint_interval = model.checkpoint_interval;
  if (!has_ddp) {
    plan.per_iteration = model.forward;
    return plan;
  }
  const TorchVersion version = ScenarioTorchVersion(scenario);
  const DdpCollectives collectives = DdpPlan(ddp, version);
  plan.startup.insert(plan.startup.end(), collectives.construction.begin(), collectives.construction.end());
  std::vector<std::vector<Collective>> phases(kDdpPhases);
  for (size_t phase = 0; phase < kDdpPhases; ++phase) {
    std::vector<Collective>& list = phases[phase];
    list = collectives.forward[phase];
    list.insert(list.end(), model.forward.begin(), model.forward.end());
    list.insert(list.end(), collectives.backward[phase].begin(), collectives.backward[phase].end());
  }
  plan.per_iteration = std::move(phases.back());
  phases.pop_back();
  plan.leading = std::move(phases);
  return plan;
}

std::vector<std::string> ProcessGroupNames(const ExpandedPlan& plan) {
  std::vector<std::string> names{"default_pg"};
  const auto add = [&](const Collective& c) {
    if (std::find(names.begin(), names.end(), c.process_group()) == names.end()) names.push_back(c.process_group());
  };
  for (const Collective& c : plan.startup) add(c);
  for (uint64_t i = 0; i <= plan.leading.size(); ++i) {
    for (const Collective& c : plan.Iteration(i)) add(c);
  }
  for (const PeriodicCollective& p : plan.periodic) add(p.collective());
  return names;
}

uint64_t CollectivesBefore(const ExpandedPlan& plan, const std::string& process_group, uint64_t iteration) {
  const auto count = [&](const std::vector<Collective>& list) {
    uint64_t n = 0;
    for (const auto& c : list) n += c.process_group() == process_group;
    return n;
  };
  uint64_t total = count(plan.startup);
  const uint64_t leading = std::min<uint64_t>(iteration, plan.leading.size());
  for (uint64_t i = 0; i < leading; ++i) total += count(plan.leading[i]);
  total += (iteration - leading) * count(plan.per_iteration);
  for (const auto& p : plan.periodic) {
    if (p.collective().process_group() == process_group) total += iteration / p.every_iterations();
  }
  return total;
}

std::optional<PlanPosition> LocateCollective(const ExpandedPlan& plan, const std::string& process_group, uint64_t seq,
                                             uint64_t job_iterations) {
  if (seq == 0) return std::nullopt;
  std::vector<const Collective*> startup;
  for (const auto& c : plan.startup) {
    if (c.process_group() == process_group) startup.push_back(&c);
  }
  if (seq <= startup.size()) return PlanPosition{true, 0, startup[seq - 1]->name(), startup[seq - 1]};
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
  for (const auto& c : plan.Iteration(low)) {
    if (c.process_group() != process_group) continue;
    if (k == 0) return PlanPosition{false, low, c.name(), &c};
    --k;
  }
  for (const auto& p : plan.periodic) {
    if (p.collective().process_group() != process_group || (low + 1) % p.every_iterations() != 0) continue;
    if (k == 0) return PlanPosition{false, low, p.collective().name(), &p.collective()};
    --k;
  }
  return std::nullopt;
}

}  // namespace petrsim
