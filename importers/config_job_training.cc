// The training around a config's dataset (config_job_builder.h): the model's plan fields, the sampler the
// train script builds, the job's length, the evaluation hook, the backend and the seed.
#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/error.h"
#include "importers/config_field_reader.h"
#include "importers/config_job_builder.h"
#include "importers/dataset_semantics.h"
#include "importers/dataset_source.h"
#include "plan/streampetr_ddp_model.h"

namespace petrsim::config_job {

void ConfigJobBuilder::ReadModel() {
  const ConfigDict* model = r_.Dict(config_.Find("model"), "model");
  if (pipeline_seen_) {
    const ConfigValue* grid = Get(model, "use_grid_mask");
    pipeline_.mutable_grid_mask()->set_use(r_.Bool(grid, "model.use_grid_mask").value_or(false));
    Record("pipeline.grid_mask.use", pipeline_.grid_mask().use() ? "true" : "false",
           grid ? From(grid, "model.use_grid_mask") : "default (Petr3D: use_grid_mask=False)");
    *s().mutable_pipeline() = pipeline_;
  }
  StreamPetrPlan* plan = s().mutable_plan()->mutable_streampetr();
  if (const ConfigValue* layers = config_.Find("model.pts_bbox_head.transformer.decoder.num_layers")) {
    const auto v = r_.Int(layers, "model.pts_bbox_head.transformer.decoder.num_layers", 1, 1000);
    if (v) {
      plan->set_decoder_layers(static_cast<uint32_t>(*v));
      Record("plan.streampetr.decoder_layers", std::to_string(*v), From(layers, "decoder.num_layers"));
    }
  }
  if (const ConfigValue* dn = config_.Find("model.pts_bbox_head.with_dn")) {
    const bool v = *r_.Bool(dn, "model.pts_bbox_head.with_dn");
    plan->set_denoising(v);
    Record("plan.streampetr.denoising", v ? "true" : "false", From(dn, "model.pts_bbox_head.with_dn"));
  }
  if (const ConfigValue* unused = config_.Find("find_unused_parameters")) {
    const bool v = *r_.Bool(unused, "find_unused_parameters");
    if (v) {
      // plan.ddp replaces the reference model as a whole: write it out with the flag.
      *s().mutable_plan()->mutable_ddp() = StreamPetrReferenceDdpModel(plan->decoder_layers());
      s().mutable_plan()->mutable_ddp()->set_find_unused_parameters(true);
    }
    Record("plan.ddp.find_unused_parameters", v ? "true" : "false", From(unused, "find_unused_parameters"));
  }
  for (const auto& [key, field] : {std::pair{"log_config.interval", "log_interval"},
                                   std::pair{"checkpoint_config.interval", "checkpoint_interval"}}) {
    const ConfigValue* interval = config_.Find(key);
    const auto v = r_.Int(interval, key, 0, 1 << 30);
    if (!v) continue;
    if (std::string_view(field) == "log_interval") {
      plan->set_log_interval(static_cast<uint32_t>(*v));
    } else {
      plan->set_checkpoint_interval(static_cast<uint32_t>(*v));
    }
    Record(fmt::format("plan.streampetr.{}", field), std::to_string(*v), From(interval, key));
  }
  if (!s().plan().streampetr().ByteSizeLong()) s().mutable_plan()->clear_streampetr();
  if (!s().plan().ByteSizeLong()) s().clear_plan();
}

// The sampler the codebase's train script builds for `data.train` (it decides the index stream).
void ConfigJobBuilder::ReadSampler() {
  const DatasetSemantics& sem = Semantics();
  const ConfigValue* shuffler = config_.Find("data.shuffler_sampler");
  const ConfigValue* type_value = config_.Find("data.shuffler_sampler.type");
  const bool iter_runner = runner_type_ == "IterBasedRunner";
  const auto set = [&](Sampler::Kind kind, const std::string& from) {
    s().mutable_sampler()->set_kind(kind);
    Record("sampler.kind", Sampler::Kind_Name(kind), from);
  };
  switch (sem.script) {
    case TrainScript::kMmdet3dTrainModel:
    case TrainScript::kSparse4dCustomTrain: {
      if (shuffler != nullptr) {
        out_.notes.push_back(fmt::format("data.shuffler_sampler ({}) is not read by {}'s train script [{}]",
                                         shuffler->where, sem.codebase, sem.script_source));
      }
      if (!iter_runner) {
        set(Sampler::distributed_group,
            fmt::format("{} runner: DistributedGroupSampler [{}]", runner_type_, sem.script_source));
      } else if (sem.script == TrainScript::kSparse4dCustomTrain) {
        set(Sampler::infinite_group_each_sample_in_batch,
            fmt::format("IterBasedRunner: InfiniteGroupEachSampleInBatchSampler [{}]", sem.script_source));
        out_.notes.push_back(fmt::format(
            "Sparse4D's InfiniteGroupEachSampleInBatchSampler also skips the head of a group's buffer (p=0.5) and "
            "reverses a new group (p=0.1) with numpy draws in the main process [Sparse4D@db711ad5 "
            "projects/mmdet3d_plugin/datasets/samplers/infinite_group_each_sample_in_batch_sampler.py:122-160]; "
            "petrsim streams the same groups without them: the pools, and so the verdict, are the same, the "
            "exact iteration of a hang may differ"));
      } else {
        set(Sampler::distributed_group,
            fmt::format("IterBasedRunner: mmdet's InfiniteGroupBatchSampler, which petrsim models as its "
                        "DistributedGroupSampler (the same pools; another index order) [{}]",
                        sem.script_source));
      }
      return;
    }
    case TrainScript::kStreamPetrCustomTrain:
    case TrainScript::kBevformerCustomTrain:
      if (shuffler == nullptr) {
        throw ScenarioError(
            fmt::format("{}: data.shuffler_sampler: {}'s train script reads cfg.data.shuffler_sampler (and "
                        "nonshuffler_sampler), so the real job stops with AttributeError before training [{}]: add "
                        "shuffler_sampler=dict(type='DistributedGroupSampler') to `data`",
                        config_.path, sem.codebase, sem.script_source));
      }
      if (sem.script == TrainScript::kStreamPetrCustomTrain && iter_runner && shuffler->is_none()) {
        r_.Fail(shuffler, "data.shuffler_sampler",
                fmt::format("is None with an IterBasedRunner: {}'s builder reads shuffler_sampler['type'] then, a "
                            "TypeError before training [{}]",
                            sem.codebase, sem.script_source));
      }
      if (Get(data_, "samples_per_gpu") == nullptr && Get(data_, "imgs_per_gpu") == nullptr) {
        throw ScenarioError(fmt::format(
            "{}: data.samples_per_gpu: {}'s train script reads cfg.data.samples_per_gpu, so the real job stops with "
            "AttributeError without it [{}]",
            config_.path, sem.codebase, sem.script_source));
      }
      break;
  }
  ReadShufflerSampler(shuffler, type_value, iter_runner);
}

// The sampler of a train script that reads data.shuffler_sampler (StreamPETR's, Far3D's, BEVFormer's).
void ConfigJobBuilder::ReadShufflerSampler(const ConfigValue* shuffler, const ConfigValue* type_value,
                                           bool iter_runner) {
  const DatasetSemantics& sem = Semantics();
  const auto set = [&](Sampler::Kind kind, const std::string& from) {
    s().mutable_sampler()->set_kind(kind);
    Record("sampler.kind", Sampler::Kind_Name(kind), from);
  };
  const std::string kind =
      shuffler != nullptr && shuffler->is_none()
          ? "DistributedGroupSampler"
          : r_.String(type_value, "data.shuffler_sampler.type").value_or("DistributedGroupSampler");
  const std::string from = type_value ? From(type_value, "data.shuffler_sampler.type")
                                      : fmt::format("default (DistributedGroupSampler) [{}]", sem.script_source);
  if (kind == "InfiniteGroupEachSampleInBatchSampler" && sem.script == TrainScript::kStreamPetrCustomTrain) {
    if (!iter_runner) {
      r_.Fail(type_value, "data.shuffler_sampler.type",
              fmt::format("InfiniteGroupEachSampleInBatchSampler becomes the batch sampler only with an "
                          "IterBasedRunner [{}]; with runner '{}' the builder uses it as a plain sampler, which "
                          "petrsim does not model",
                          sem.script_source, runner_type_));
    }
    set(Sampler::infinite_group_each_sample_in_batch, from);
  } else if (kind == "DistributedGroupSampler") {
    set(Sampler::distributed_group, from);
  } else if (kind == "DistributedSampler") {
    set(Sampler::distributed, from);
  } else {
    r_.Fail(
        type_value, "data.shuffler_sampler.type",
        fmt::format("expected {}DistributedGroupSampler or DistributedSampler, found '{}'",
                    sem.script == TrainScript::kStreamPetrCustomTrain ? "InfiniteGroupEachSampleInBatchSampler, " : "",
                    kind));
  }
}

// The runner: its type decides the sampler, and max_iters or max_epochs the job's length.
void ConfigJobBuilder::ReadLength() {
  const DatasetSemantics& sem = Semantics();
  const ConfigValue* per_epoch = config_.Find("num_iters_per_epoch");
  iterations_per_epoch_ = r_.Int(per_epoch, "num_iters_per_epoch", 1, int64_t{1} << 40);
  const ConfigDict* runner = r_.Dict(config_.Find("runner"), "runner");
  const ConfigValue* total_epochs = config_.Find("total_epochs");
  const ConfigValue* epochs_value = nullptr;
  std::string epochs_from;
  if (runner != nullptr) {
    const auto type = r_.String(Get(runner, "type"), "runner.type");
    if (!type)
      r_.Fail(config_.Find("runner"), "runner.type", "a runner needs a type (IterBasedRunner, EpochBasedRunner)");
    runner_type_ = *type;
    epochs_value = Get(runner, "max_epochs");
    epochs_from = "runner.max_epochs";
  } else if (sem.script == TrainScript::kStreamPetrCustomTrain) {
    throw ScenarioError(fmt::format(
        "{}: runner: {}'s train script reads cfg.runner while it builds the data loaders, before its total_epochs "
        "fallback, so the real job stops with AttributeError [{}]: add runner = dict(type='EpochBasedRunner', "
        "max_epochs=N) or dict(type='IterBasedRunner', max_iters=N)",
        config_.path, sem.codebase, sem.script_source));
  } else {
    // mmdet3d's train_model (and BEVFormer's, Sparse4D's): a config without `runner` gets
    // EpochBasedRunner(max_epochs=total_epochs), with a warning.
    runner_type_ = "EpochBasedRunner";
    if (total_epochs == nullptr) return;
    epochs_value = total_epochs;
    epochs_from =
        fmt::format("total_epochs, no runner: the train script builds an EpochBasedRunner [{}]", sem.script_source);
  }
  if (runner_type_ == "IterBasedRunner") {
    const auto v = r_.Int(Get(runner, "max_iters"), "runner.max_iters", 1, int64_t{1} << 40);
    if (!v) r_.Fail(config_.Find("runner"), "runner.max_iters", "an IterBasedRunner needs max_iters");
    s().mutable_job()->set_iterations(static_cast<uint64_t>(*v));
    Record("job.iterations", std::to_string(*v), From(Get(runner, "max_iters"), "runner.max_iters"));
  } else if (runner_type_ == "EpochBasedRunner" || runner_type_ == "EpochBasedRunner_video") {
    by_epoch_ = true;
    const std::string key = runner != nullptr ? "runner.max_epochs" : "total_epochs";
    const auto v = r_.Int(epochs_value, key, 1, 1 << 20);
    if (!v) {
      r_.Fail(runner != nullptr ? config_.Find("runner") : epochs_value, key,
              "an EpochBasedRunner needs max_epochs (an int), found nothing");
    }
    s().mutable_job()->set_epochs(static_cast<uint32_t>(*v));
    Record("job.epochs", std::to_string(*v), From(epochs_value, epochs_from));
    if (iterations_per_epoch_) {
      s().mutable_job()->set_iterations_per_epoch(static_cast<uint64_t>(*iterations_per_epoch_));
      Record("job.iterations_per_epoch", std::to_string(*iterations_per_epoch_),
             From(per_epoch, "num_iters_per_epoch"));
    }
  } else {
    r_.Fail(
        Get(runner, "type"), "runner.type",
        fmt::format("expected IterBasedRunner, EpochBasedRunner or EpochBasedRunner_video, found '{}'", runner_type_));
  }
}

// The evaluation hook (registered by mmdet's train script unless --no-validate): its collectives in
// the plan every evaluation.interval iterations (epochs for an epoch-based runner).
void ConfigJobBuilder::ReadEvaluation() {
  const ConfigValue* eval = config_.Find("evaluation.interval");
  if (eval == nullptr) return;
  const auto v = r_.Int(eval, "evaluation.interval", 1, int64_t{1} << 40);
  if (!v) return;
  std::optional<int64_t> iterations = *v;
  if (by_epoch_) {
    iterations = iterations_per_epoch_ ? std::optional<int64_t>(*v * *iterations_per_epoch_) : std::nullopt;
  }
  if (!iterations || *iterations > int64_t{UINT32_MAX}) {
    out_.notes.push_back(fmt::format(
        "evaluation.interval = {} epoch(s) ({}): without num_iters_per_epoch petrsim cannot place the evaluation "
        "hook's collectives in the plan (set plan.streampetr.evaluation_interval to its iteration count)",
        *v, eval->where));
    return;
  }
  StreamPetrPlan* plan = s().mutable_plan()->mutable_streampetr();
  plan->set_evaluation_interval(static_cast<uint32_t>(*iterations));
  Record("plan.streampetr.evaluation_interval", std::to_string(*iterations),
         From(eval, by_epoch_ ? "evaluation.interval, epochs x num_iters_per_epoch" : "evaluation.interval"));
  if (const ConfigValue* bn = config_.Find("evaluation.broadcast_bn_buffer")) {
    const auto b = r_.Bool(bn, "evaluation.broadcast_bn_buffer");
    plan->set_evaluation_broadcast_bn_buffer(b.value_or(true));
    Record("plan.streampetr.evaluation_broadcast_bn_buffer", *b ? "true" : "false",
           From(bn, "evaluation.broadcast_bn_buffer"));
  }
  if (const ConfigValue* gpu = config_.Find("evaluation.gpu_collect")) {
    const auto b = r_.Bool(gpu, "evaluation.gpu_collect");
    plan->set_evaluation_gpu_collect(b.value_or(false));
    Record("plan.streampetr.evaluation_gpu_collect", *b ? "true" : "false", From(gpu, "evaluation.gpu_collect"));
  }
}

void ConfigJobBuilder::ReadCommAndSeed() {
  if (const ConfigValue* backend = config_.Find("dist_params.backend")) {
    const std::string v = r_.String(backend, "dist_params.backend").value_or("None");
    if (v == "nccl") {
      s().mutable_comm()->set_backend(Comm::nccl);
    } else if (v == "gloo") {
      s().mutable_comm()->set_backend(Comm::gloo);
    } else {
      r_.Fail(backend, "dist_params.backend", fmt::format("expected 'nccl' or 'gloo', found '{}'", v));
    }
    Record("comm.backend", v, From(backend, "dist_params.backend"));
  }
  // mmcv's init_dist passes dist_params on to torch.distributed.init_process_group: a timeout there
  // is a datetime.timedelta, a call this reader never evaluates; any other value is the wrong type.
  if (const ConfigValue* timeout = config_.Find("dist_params.timeout")) {
    r_.RequireKnown(timeout, "dist_params.timeout");
    r_.Fail(timeout, "dist_params.timeout",
            fmt::format("expected a datetime.timedelta (init_process_group's timeout), found {}", timeout->Repr()));
  }
  if (const ConfigValue* params = config_.Find("dist_params")) {
    Record("comm.timeout_ms", "1800000",
           fmt::format("{} (dist_params sets no timeout: PyTorch's default, 30 minutes)", params->where));
  }
  // Every codebase's tools/train.py takes --seed (default 0) and overwrites cfg.seed with it before the
  // dataset and the loaders are built: a `seed` in the config has no effect on the job.
  constexpr const char* kSeedSource =
      "tools/train.py --seed, default 0, then cfg.seed = args.seed: StreamPETR@95f64702 tools/train.py:52,203-208; "
      "mmdet3d@47285b3f tools/train.py:65,210-215; the same in PETR, BEVFormer, BEVDet, Sparse4D, Far3D";
  s().mutable_job()->set_seed(0);
  Record("job.seed", "0", fmt::format("the train script's default [{}]", kSeedSource));
  if (const ConfigValue* seed = config_.Find("seed"); seed != nullptr && !seed->is_none()) {
    out_.notes.push_back(fmt::format(
        "seed = {} ({}) has no effect: the train script overwrites cfg.seed with its --seed (default 0); if the job "
        "ran with --seed S, set --set job.seed=S (a training log's `Set random seed to S` line names it)",
        seed->Repr(), seed->where));
  } else {
    out_.notes.push_back(
        "the config sets no seed: the job's seed is the train script's --seed, 0 unless it was given (a training "
        "log's `Set random seed to S` line names it; set it with --set job.seed=S)");
  }
}

}  // namespace petrsim::config_job
