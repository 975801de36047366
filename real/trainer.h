// The real backend's training loop for one rank (issue "real backend", Distributed training):
// the scenario's sampler and resample policy (data/, unchanged) pick the frames; DataLoader
// worker threads (real/threaded_loader.h, batch k on worker k mod W, prefetch, in-order
// consumption, each worker with the numpy seed PyTorch's worker_init_fn gives it) load them
// under the sampler watchdog and render them; the scaled-down StreamPETR is trained with AdamW;
// and the scenario's iteration plan (plan/iteration_plan, the list the simulator issues) is
// issued collective by collective as real c10d calls (plan/rank_program walks the plan; real/c10d_backend issues it) in
// plan order, with the scenario's timeout:
//   - startup: sync_random_seed broadcasts carry the seed, DDP's first float32 module state
//     broadcast carries the parameters (every rank takes rank 0's);
//   - reduce_mean(num_total_pos) steps carry the local GT count / world size (the first one's
//     sum, clamped at 1, normalises the losses, as mmdet does); the denoising and focal-head
//     ones carry the same count (the scaled-down model has neither head);
//   - _parse_losses steps carry len(log_vars), each layer's classification and regression loss
//     (terms of heads the model lacks carry 0) and the total;
//   - DDP gradient buckets carry the gradients flattened in reverse parameter order, cut where
//     the plan cuts them (zeros past the model's parameters), launched without waiting and
//     waited for before the optimizer step, then averaged;
//   - conditional steps (only_when_local_batch_has_gt) are skipped when the local batch has no
//     GT, as the old StreamPETR code did; any other step carries zeros of its size and dtype.
// The plan the real job runs (MakeRealJob) is by default the scenario's, as the simulator runs
// it (PlanSizes::kScenario: the same collectives, sizes and sequence numbers; the real model's
// gradients packed into the plan's DDP buckets and padded with zeros, its parameters into DDP's
// module state broadcast); with PlanSizes::kModel, the StreamPETR plan is rewritten for the real
// model's tensors as DDP sees them (plan.ddp). Either way the model is built with the plan's
// decoder layers.
//
// Hang diagnosis: each rank publishes its progress (last sequence number per process group, its
// iteration, what it is doing) to the TCPStore every 100 ms. A sampler watchdog livelock is
// reported at once in user terms and stops the whole job through the store; a collective that
// fails or times out makes the rank print which ranks never arrived at that sequence number and
// what they were doing, stop the job the same way, and fail; on a timeout it also gives the lines
// the scenario's PyTorch release would print for it (formats/torch_logs/watchdog_lines.h, as the simulator
// prints them). Every rank's trace is written before it ends (streamed, or its ring dumped).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "data/dataset.h"
#include "proto/scenario.pb.h"
#include "real/streampetr_model.h"
#include "trace/replay_source.h"

namespace petrsim::real {

// The sizes of the real job's collectives (`--plan-sizes`).
enum class PlanSizes : uint8_t {
  // The scenario's plan as ExpandPlan gives it, as the simulator runs it: the same collectives,
  // sizes and sequence numbers (the StreamPETR plan's DDP collectives are those of its reference
  // model unless plan.ddp says otherwise). The real model's gradients are packed into the plan's
  // gradient buckets and its parameters into DDP's module state broadcast, padded with zeros; a
  // plan whose buckets hold fewer elements than the model has parameters is refused.
  kScenario,
  // The StreamPETR plan rewritten for the real model (plan.ddp: its tensors as DDP sees them):
  // small collectives, a fast CPU step; its DDP collectives and the sequence numbers after them
  // differ from the simulator's on the scenario as given (the same as the simulator's on
  // RealJob::scenario). A custom plan is taken as written either way.
  kModel,
};
// "scenario" and "model" (--plan-sizes); nothing for anything else.
std::optional<PlanSizes> ParsePlanSizes(std::string_view text);

struct TrainOptions {
  uint32_t rank = 0;
  uint32_t world_size = 1;
  int32_t local_rank = 0;  // the GPU of an NCCL rank
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 0;  // the TCPStore's port
  bool serve_store = true;   // rank 0 serves the TCPStore (false: someone else does, e.g. a test)
  uint64_t iterations = 10;
  int64_t timeout_ms = 0;  // 0: the scenario's comm.timeout_ms
  // The optimiser and its schedule as StreamPETR's configs set them (AdamW with weight decay
  // 0.01; mmcv's CosineAnnealing over the run down to min_lr_ratio x the base rate, after a linear
  // warmup from warmup_ratio x; gradients clipped to an L2 norm of grad_clip_norm after DDP has
  // averaged them), with the base rate and the warmup set for short CPU runs (the configs:
  // lr 4e-4, warmup_iters 500 of 42,192). grad_clip_norm <= 0 turns clipping off.
  double learning_rate = 1e-3;
  uint64_t warmup_iterations = 30;
  double warmup_ratio = 1.0 / 3;
  double min_lr_ratio = 1e-3;
  double grad_clip_norm = 35;
  ModelConfig model;  // decoder_layers is taken from a StreamPETR plan
  PlanSizes plan_sizes = PlanSizes::kScenario;
  // Whose lines a collective timeout prints (what PyTorch would print for it): this backend's
  // (NCCL's watchdog, or Gloo's timed-out wait) when set, else the scenario's comm.backend.
  // petrsim_train sets it to the scenario's backend as written when --backend replaces it, so a
  // Gloo run of an NCCL scenario prints the NCCL lines the simulator prints for that scenario.
  std::optional<Comm::Backend> watchdog_lines_backend;
  uint32_t boxes_max = 8;  // boxes rendered per frame (GT count capped)
  // Records the rank's trace (proto/trace.proto) to this file when set: streamed, or the last
  // trace_ring events when trace_ring > 0 (dumped on exit, SIGTERM and SIGABRT).
  std::string trace_path;
  uint64_t trace_ring = 0;
  // The rank is its own process (petrsim_train): when another rank stops the job, this one
  // writes its trace and exits with status 1 at once, even from inside a collective; the
  // scenario's dead_rank fault for this rank kills it with SIGKILL at its time. As threads of
  // one process (tests), ranks instead fail at their next wait, and dead_rank is not applied.
  bool own_process = false;
  // A recorded job to re-run (`petrsim replay --against real`, through the simulator's seam):
  // the sampler's index of each (batch, slot) it recorded replaces the sampler's draw, and a
  // recorded getitem that returned replaces the resample loop (a recorded livelock or error is
  // run again by the policy, under the watchdog). Not owned; may be null.
  const ReplaySource* replay = nullptr;
  // Called on the rank's main thread after each iteration with (iterations done, iterations):
  // petrsim_train's progress bar. May be empty.
  std::function<void(uint64_t done, uint64_t total)> on_iteration;
};

struct TrainResult {
  std::vector<double> losses;  // per iteration, this rank's (its sum over its boxes / the mean box count)
  // Per iteration, the loss mmdet logs: `_parse_losses`' all-reduced mean over the ranks (the
  // sum over every rank's boxes / their count); this rank's own where that collective did not run.
  std::vector<double> logged_losses;
  std::vector<double> learning_rates;  // per iteration, the rate the optimiser stepped with
  uint64_t parameters_hash = 0;        // of every parameter's bytes at the end
  uint64_t gradient_buckets = 0;       // gradient-bucket all-reduces per iteration
  uint64_t collectives = 0;            // c10d calls issued in all
  double step_ms = 0;                  // mean wall time of an iteration after the first (0: fewer than 2)
};

// The job the real backend runs for `scenario`: the scenario (with kModel, its StreamPETR plan's
// DDP model replaced by the real model's tensors; a custom plan is taken as written) and the
// model configuration with the plan's decoder layers. The simulator run on `scenario` predicts
// the real run: with kScenario that is the scenario as given. Throws ScenarioError when, with
// kScenario, the plan's DDP gradient buckets of some iteration, or its float32 module state
// broadcast, hold fewer elements than the real model has parameters (saying so, and naming
// --plan-sizes model).
struct RealJob {
  Scenario scenario;
  ModelConfig model;
  uint64_t parameters = 0;
  PlanSizes plan_sizes = PlanSizes::kScenario;
};
RealJob MakeRealJob(const Scenario& scenario, const ModelConfig& model, PlanSizes sizes = PlanSizes::kScenario);

// The learning rate of `iteration` (0-based) of `iterations` under `options`' schedule: mmcv's
// CosineAnnealingLrUpdaterHook with a linear warmup, evaluated per iteration.
double LearningRateAt(const TrainOptions& options, uint64_t iteration, uint64_t iterations);

// Runs `options.iterations` iterations of rank `options.rank`. Throws SampleLivelockError when
// the sampler watchdog fires, CollectiveError when a collective fails or times out, and
// JobStoppedError when another rank stopped the job (threads only; see own_process).
TrainResult TrainRank(const Scenario& scenario, const Dataset& dataset, const TrainOptions& options);

// How a real rank's job fails (base/error.h's JobError: the programs exit 1).
struct SampleLivelockError : JobError {
  using JobError::JobError;
};
struct CollectiveError : JobError {
  using JobError::JobError;
  // On a timeout: the lines the scenario's PyTorch release would print for it (NCCL's watchdog or
  // Gloo's timed-out wait; formats/torch_logs/watchdog_lines.h's CollectiveTimeoutLines, as the simulator
  // prints them), a heading naming the release and backend, and a note when the release's line
  // numbers are not known. Empty otherwise.
  std::string job_log_heading;
  std::vector<std::string> job_log;
  std::string job_log_note;
};
struct JobStoppedError : JobError {
  using JobError::JobError;
};

// A hash of the parameters' bytes (equal on every rank when they are in sync).
uint64_t HashParameters(torch::nn::Module& module);

}  // namespace petrsim::real
