// The real trainer's step; see training_step.h.
#include "real/training_step.h"

#include <algorithm>

#include "real/losses.h"

namespace petrsim::real {
namespace {

std::vector<double> Values(const torch::Tensor& tensor) {
  const auto t = tensor.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

torch::Tensor AsTensor(const std::vector<double>& values) { return torch::tensor(values, torch::kFloat64); }

}  // namespace

std::mutex& ModelInitMutex() {
  static std::mutex mutex;
  return mutex;
}

TrainingStep::TrainingStep(const RealJob& job, const ExpandedPlan& plan, const TrainOptions& options)
    : job_(job),
      options_(options),
      batch_size_(job.scenario.job().samples_per_gpu()),
      model_(nullptr),
      memory_(batch_size_, job.model.memory_len, job.model.channels),
      last_pose_(batch_size_, Mat4::Identity()) {
  {
    std::lock_guard<std::mutex> lock(ModelInitMutex());
    torch::manual_seed(static_cast<uint64_t>(job.scenario.job().seed()));
    model_ = StreamPetr(job.model);
  }
  params_ = model_->parameters();
  optimizer_ = std::make_unique<torch::optim::AdamW>(
      params_, torch::optim::AdamWOptions(options.learning_rate).weight_decay(0.01));
  // Each distinct iteration of the plan cuts the same flattened gradients its own way; past the
  // model's parameters its buckets carry zeros.
  for (uint64_t i = 0; i <= plan.leading.size(); ++i) {
    int64_t elements = 0;
    for (const Collective& step : plan.Iteration(i)) {
      if (step.name().starts_with("DDP gradient bucket")) {
        bucket_offset_[&step] = elements;
        elements += static_cast<int64_t>(step.numel());
      }
    }
  }
  for (const Collective& step : plan.per_iteration) {
    gradient_buckets_ += step.name().starts_with("DDP gradient bucket");
    loss_terms_ += step.name().starts_with("_parse_losses: loss term");
  }
  for (const auto& p : params_) parameter_elements_ += p.numel();
  const auto rig = SurroundRig(static_cast<int>(job.model.image_width), static_cast<int>(job.model.image_height));
  std::vector<double> inverses;
  for (const Camera& camera : rig) {
    const Mat4 m = Inverse(camera.Lidar2Img());
    inverses.insert(inverses.end(), m.m.begin(), m.m.end());
  }
  img2lidar_ = torch::tensor(inverses, torch::kFloat64).view({1, 6, 4, 4}).repeat({batch_size_, 1, 1, 1});
  weights_ = torch::tensor({1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.2, 0.2}, torch::kFloat32);
}

std::vector<double> TrainingStep::StartupInput(const Collective& step, CollectiveIssuer::Done* done) {
  if (step.name().starts_with("sync_random_seed")) return {static_cast<double>(job_.scenario.job().seed())};
  // DDP's module state broadcast: the parameters go in the first float32 one.
  if (!step.name().starts_with("DDP __init__: module state broadcast 0") || step.dtype() != Collective::float32) {
    return {};
  }
  std::vector<torch::Tensor> flat;
  for (const auto& p : params_) flat.push_back(p.detach().flatten());
  // Only the parameters' values travel back (the plan's broadcast may be larger: zeros follow).
  done->elements = static_cast<uint64_t>(parameter_elements_);
  done->take = [this](const std::vector<double>& values) {
    // Every rank takes rank 0's parameters (as far as the plan's size carries them).
    const auto all = AsTensor(values);
    torch::NoGradGuard no_grad;
    int64_t at = 0;
    for (auto& p : params_) {
      if (at + p.numel() > all.numel()) break;
      p.copy_(all.narrow(0, at, p.numel()).view_as(p).to(p.dtype()));
      at += p.numel();
    }
  };
  return Values(torch::cat(flat));
}

void TrainingStep::Forward(const LoadedBatch& batch, const Dataset& dataset) {
  const ModelConfig& config = job_.model;
  std::vector<torch::Tensor> images;
  labels_.clear();
  targets_.clear();
  std::vector<int64_t> prev_exists(batch_size_, 0);
  std::vector<double> motions;  // per slot a 4 x 4: the ego motion, or the identity where the stream broke
  for (uint32_t slot = 0; slot < batch_size_; ++slot) {
    const LoadedSlot& s = batch.slots[slot];
    const int64_t pixels = 6 * 3 * config.image_height * config.image_width;
    images.push_back(s.pixels.empty() ? torch::zeros({pixels})
                                      : torch::tensor(std::vector<float>(s.pixels.begin(), s.pixels.end())));
    images.back() = images.back().view({6, 3, config.image_height, config.image_width});
    labels_.push_back(torch::tensor(s.labels, torch::kInt64));
    targets_.push_back(s.boxes.empty() ? torch::zeros({0, kBoxTerms}) : BoxTargets(s.boxes, config.range));
    const bool frame_prev = s.final_index >= 0 && dataset.frame(s.final_index).prev_exists;
    prev_exists[slot] = frame_prev && s.final_index == s.draw.index;
    const Mat4 motion = prev_exists[slot] ? EgoMotion(last_pose_[slot], s.ego2global) : Mat4::Identity();
    last_pose_[slot] = s.ego2global;
    motions.insert(motions.end(), motion.m.begin(), motion.m.end());
  }
  // The memory enters the frame: carried by the ego motion, or cleared where the stream broke;
  // the model sees the motion as its top 3 rows and the time step.
  const auto dt = torch::full({batch_size_}, 0.5);
  const auto matrices = torch::tensor(motions, torch::kFloat64).view({batch_size_, 4, 4}).to(torch::kFloat32);
  memory_.PreUpdate(matrices, torch::tensor(prev_exists).to(torch::kBool), dt);
  const auto motion_vector = torch::cat({matrices.narrow(1, 0, 3).flatten(1), dt.unsqueeze(1)}, 1);
  prediction_ = model_(torch::stack(images), img2lidar_, memory_, motion_vector);
  positives_ = 0;
  for (const auto& l : labels_) positives_ += l.size(0);
  avg_factor_.reset();
  layer_terms_.clear();
  total_ = torch::Tensor();
  flat_grads_ = torch::Tensor();
  term_ = 0;
  logged_.reset();
}

void TrainingStep::Losses() {
  if (total_.defined()) return;
  const double factor = avg_factor_.value_or(std::max<double>(1.0, static_cast<double>(positives_)));
  total_ = torch::zeros({});
  for (size_t layer = 0; layer < prediction_->logits.size(); ++layer) {
    torch::Tensor cls = torch::zeros({}), reg = torch::zeros({});
    for (uint32_t slot = 0; slot < batch_size_; ++slot) {
      const LayerLoss l = DetectionLoss(prediction_->logits[layer][slot], prediction_->boxes[layer][slot],
                                        labels_[slot], targets_[slot], weights_, factor);
      cls = cls + l.classification;
      reg = reg + l.regression;
    }
    layer_terms_.push_back(cls);
    layer_terms_.push_back(reg);
    total_ = total_ + cls + reg;
  }
}

void TrainingStep::Backward() {
  if (flat_grads_.defined()) return;
  Losses();
  optimizer_->zero_grad();
  total_.backward();
  std::vector<torch::Tensor> grads;
  for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
    grads.push_back(it->grad().defined() ? it->grad().flatten() : torch::zeros({it->numel()}));
  }
  flat_grads_ = torch::cat(grads);
}

std::vector<double> TrainingStep::Input(const Collective& step, CollectiveIssuer::Done* done) {
  const std::string& name = step.name();
  if (name.starts_with("reduce_mean(num_total_pos)")) {
    if (!avg_factor_) {
      done->take = [this](const std::vector<double>& sum) { avg_factor_ = std::max(1.0, sum.at(0)); };
    }
    return {static_cast<double>(positives_) / options_.world_size};
  }
  if (name == "_parse_losses: len(log_vars)") return {static_cast<double>(loss_terms_)};
  if (name.starts_with("_parse_losses: loss term")) {
    Losses();
    const int64_t term = term_++;
    return term < static_cast<int64_t>(layer_terms_.size()) ? Values(layer_terms_[term]) : std::vector<double>{0.0};
  }
  if (name == "_parse_losses: total loss") {
    Losses();
    done->take = [this](const std::vector<double>& sum) { logged_ = sum.at(0) / options_.world_size; };
    return Values(total_);
  }
  if (const auto it = bucket_offset_.find(&step); it != bucket_offset_.end()) {
    Backward();
    // The model's gradients in this bucket (the rest of it is padding: zeros the comm makes).
    const int64_t offset = it->second;
    const int64_t real = std::clamp<int64_t>(parameter_elements_ - offset, 0, static_cast<int64_t>(step.numel()));
    if (real == 0) return {};
    done->elements = static_cast<uint64_t>(real);
    done->take = [this, offset, real](const std::vector<double>& reduced) {
      flat_grads_.narrow(0, offset, real).copy_(AsTensor(reduced));
    };
    return Values(flat_grads_.narrow(0, offset, real));
  }
  return {};
}

TrainingStep::Figures TrainingStep::Finish(uint64_t iteration) {
  Backward();
  if (!bucket_offset_.empty()) {
    // DDP: the summed gradients, averaged, back into each parameter's .grad.
    flat_grads_.div_(static_cast<double>(options_.world_size));
    int64_t at = 0;
    for (auto it = params_.rbegin(); it != params_.rend(); ++it) {
      if (it->grad().defined()) it->grad().copy_(flat_grads_.narrow(0, at, it->numel()).view_as(*it));
      at += it->numel();
    }
  }
  if (options_.grad_clip_norm > 0) torch::nn::utils::clip_grad_norm_(params_, options_.grad_clip_norm, 2.0);
  Figures figures;
  figures.learning_rate = LearningRateAt(options_, iteration, options_.iterations);
  for (auto& group : optimizer_->param_groups()) {
    static_cast<torch::optim::AdamWOptions&>(group.options()).lr(figures.learning_rate);
  }
  optimizer_->step();
  figures.loss = total_.item<double>();
  figures.logged_loss = logged_.value_or(figures.loss);
  return figures;
}

}  // namespace petrsim::real
