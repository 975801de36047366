// StreamPETR's streaming memory (docs/reference/streampetr.md, section 11), in LibTorch: per batch slot a queue of
// the last `memory_len` propagated queries (embedding, reference point in the ego frame,
// timestamp, and a validity mask). Before each frame it is carried into the new ego frame by the
// ego motion (and aged by the frame's time step), or cleared where prev_exists is false; after
// each frame the top-k queries (by classification score) are pushed to its front.
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace petrsim::real {

class StreamingMemory {
 public:
  StreamingMemory(int64_t batch, int64_t memory_len, int64_t channels, torch::Dtype dtype = torch::kFloat32);

  // ego_motion: [B, 4, 4], previous ego frame -> current (real/geometry.h EgoMotion);
  // prev_exists: [B] bool; dt: [B] seconds since the previous frame.
  void PreUpdate(const torch::Tensor& ego_motion, const torch::Tensor& prev_exists, const torch::Tensor& dt);
  // embeddings: [B, Q, C]; reference_points: [B, Q, 3] (ego frame, metres); scores: [B, Q].
  // The `topk` best queries of each slot go to the front, the oldest fall off the end.
  void PostUpdate(const torch::Tensor& embeddings, const torch::Tensor& reference_points, const torch::Tensor& scores,
                  int64_t topk);

  const torch::Tensor& embeddings() const { return embeddings_; }    // [B, L, C]
  const torch::Tensor& reference_points() const { return points_; }  // [B, L, 3]
  const torch::Tensor& age() const { return age_; }                  // [B, L] seconds
  const torch::Tensor& valid() const { return valid_; }              // [B, L] bool

 private:
  torch::Tensor embeddings_, points_, age_, valid_;
};

}  // namespace petrsim::real
