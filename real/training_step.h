// The step of the real trainer (TrainRank's tensors): the scaled-down StreamPETR, its streaming
// memory and its optimiser, and what each of the plan's collectives carries (trainer.h lists
// it): the startup broadcasts, the per-iteration reductions the losses need, the gradient
// buckets, then DDP's averaging, the clipping and the optimiser step. One iteration: Forward,
// then Input for each per-iteration collective in plan order (the losses computed when a step
// first needs them, the backward pass when the first gradient bucket does), then Backward,
// the buckets' completion (their Done writes the reduced gradients back) and Finish.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "data/dataset.h"
#include "plan/iteration_plan.h"
#include "real/batch_loader.h"
#include "real/collective_issuer.h"
#include "real/geometry.h"
#include "real/memory.h"
#include "real/trainer.h"

namespace petrsim::real {

// LibTorch's default generator is one per process: ranks that are threads of one process
// (tests) build their models one at a time under this lock, so each rank's initial parameters
// are those of a process of its own.
std::mutex& ModelInitMutex();

class TrainingStep {
 public:
  // Builds the model with the scenario's seed (ranks that are threads of one process take turns,
  // so each starts as a process of its own would) and its optimiser.
  TrainingStep(const RealJob& job, const ExpandedPlan& plan, const TrainOptions& options);

  // What a startup collective carries (the head of its values; zeros follow): the seed, the
  // parameters (DDP's broadcast: its Done takes rank 0's), or nothing.
  std::vector<double> StartupInput(const Collective& step, CollectiveIssuer::Done* done);

  // The forward pass on a loaded batch: the memory carried by the ego motion (or cleared where
  // the stream broke), the model's predictions; the iteration's losses and gradients are reset.
  void Forward(const LoadedBatch& batch, const Dataset& dataset);
  int64_t positives() const { return positives_; }  // GT boxes in the rank's batch

  // What a per-iteration collective carries (the head of its values; zeros follow), and what its
  // result does (Done may stay empty).
  std::vector<double> Input(const Collective& step, CollectiveIssuer::Done* done);

  // The backward pass, once per iteration (a no-op when a gradient bucket already ran it).
  void Backward();

  struct Figures {
    double loss = 0;         // this rank's
    double logged_loss = 0;  // the _parse_losses mean over the ranks (this rank's without it)
    double learning_rate = 0;
  };
  // After every bucket completed: DDP's average, the clipping, the optimiser step at iteration
  // `iteration`'s rate.
  Figures Finish(uint64_t iteration);

  uint64_t gradient_buckets() const { return gradient_buckets_; }  // in a later iteration
  uint64_t ParametersHash() { return HashParameters(*model_); }

 private:
  void Losses();

  const RealJob& job_;
  const TrainOptions& options_;
  uint32_t batch_size_;
  StreamPetr model_;
  std::vector<torch::Tensor> params_;
  std::unique_ptr<torch::optim::AdamW> optimizer_;
  // The plan's gradient buckets: where each starts in the flattened gradients (reverse parameter
  // order; past the parameters a bucket is padding), and the loss terms _parse_losses reduces.
  std::map<const Collective*, int64_t> bucket_offset_;
  uint64_t gradient_buckets_ = 0;
  int64_t parameter_elements_ = 0;
  int64_t loss_terms_ = 0;
  // The data's fixed tensors and the stream's state.
  torch::Tensor img2lidar_;
  torch::Tensor weights_;
  StreamingMemory memory_;
  std::vector<Mat4> last_pose_;
  // The iteration's state.
  std::optional<Prediction> prediction_;
  std::vector<torch::Tensor> labels_, targets_;
  int64_t positives_ = 0;
  std::optional<double> avg_factor_;
  std::vector<torch::Tensor> layer_terms_;  // per layer: classification, regression
  torch::Tensor total_;
  torch::Tensor flat_grads_;
  int64_t term_ = 0;
  std::optional<double> logged_;
};

}  // namespace petrsim::real
