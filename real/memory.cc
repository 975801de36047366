// The streaming memory; see memory.h.
#include "real/memory.h"

namespace petrsim::real {

StreamingMemory::StreamingMemory(int64_t batch, int64_t memory_len, int64_t channels, torch::Dtype dtype) {
  const auto options = torch::TensorOptions().dtype(dtype);
  embeddings_ = torch::zeros({batch, memory_len, channels}, options);
  points_ = torch::zeros({batch, memory_len, 3}, options);
  age_ = torch::zeros({batch, memory_len}, options);
  valid_ = torch::zeros({batch, memory_len}, torch::kBool);
}

void StreamingMemory::PreUpdate(const torch::Tensor& ego_motion, const torch::Tensor& prev_exists,
                                const torch::Tensor& dt) {
  const int64_t batch = embeddings_.size(0), length = embeddings_.size(1);
  TORCH_CHECK(ego_motion.sizes() == torch::IntArrayRef({batch, 4, 4}), "PreUpdate: ego_motion [B, 4, 4] expected");
  TORCH_CHECK(prev_exists.sizes() == torch::IntArrayRef({batch}) && dt.sizes() == torch::IntArrayRef({batch}),
              "PreUpdate: prev_exists and dt [B] expected");
  // Points (homogeneous) through the motion: p' = R p + t.
  const auto motion = ego_motion.to(points_.dtype());
  const auto rotation = motion.narrow(1, 0, 3).narrow(2, 0, 3);  // [B, 3, 3]
  const auto translation = motion.narrow(1, 0, 3).select(2, 3);  // [B, 3]
  points_ = torch::matmul(points_, rotation.transpose(1, 2)) + translation.unsqueeze(1);
  age_ = age_ + dt.to(age_.dtype()).unsqueeze(1);
  // Slots whose stream broke (prev_exists false) start empty.
  const auto keep = prev_exists.to(torch::kBool).view({batch, 1});
  embeddings_ = embeddings_ * keep.unsqueeze(2).to(embeddings_.dtype());
  points_ = points_ * keep.unsqueeze(2).to(points_.dtype());
  age_ = age_ * keep.to(age_.dtype());
  valid_ = valid_.logical_and(keep.expand({batch, length}));
}

void StreamingMemory::PostUpdate(const torch::Tensor& embeddings, const torch::Tensor& reference_points,
                                 const torch::Tensor& scores, int64_t topk) {
  const int64_t batch = embeddings_.size(0), length = embeddings_.size(1);
  TORCH_CHECK(embeddings.dim() == 3 && embeddings.size(0) == batch && embeddings.size(2) == embeddings_.size(2),
              "PostUpdate: embeddings [B, Q, C] expected");
  TORCH_CHECK(topk >= 1 && topk <= embeddings.size(1) && topk <= length, "PostUpdate: 1 <= topk <= min(Q, memory_len)");
  const auto index = std::get<1>(scores.topk(topk, 1));  // [B, k], best first
  const auto new_embeddings = embeddings.gather(1, index.unsqueeze(2).expand({batch, topk, embeddings.size(2)}));
  const auto new_points = reference_points.gather(1, index.unsqueeze(2).expand({batch, topk, 3}));
  embeddings_ = torch::cat({new_embeddings.to(embeddings_.dtype()), embeddings_}, 1).narrow(1, 0, length);
  points_ = torch::cat({new_points.to(points_.dtype()), points_}, 1).narrow(1, 0, length);
  age_ = torch::cat({torch::zeros({batch, topk}, age_.options()), age_}, 1).narrow(1, 0, length);
  valid_ = torch::cat({torch::ones({batch, topk}, valid_.options()), valid_}, 1).narrow(1, 0, length);
}

}  // namespace petrsim::real
