// The real backend's scaled-down StreamPETR (docs/reference/streampetr.md, section 11), assembled from the parts in
// real/: the backbone + neck per camera; image tokens with PETR's 3D position embedding (frustum
// coordinates -> inverse sigmoid -> MLP); learnable 3D reference-point queries with a sine + MLP
// query position; the streaming memory, conditioned on ego motion by the motion-aware layer
// norm and used as extra self-attention keys and values; L decoder layers, each followed by the
// shared classification and regression branches (x, y, z as sigmoid offsets of the reference
// point in the normalised position range; log w, l, h; sin, cos; vx, vy). After the frame the
// top-k queries go into the memory.
#pragma once

#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <vector>

#include "real/memory.h"
#include "real/position_embedding.h"
#include "real/streampetr_modules.h"

namespace petrsim::real {

struct ModelConfig {
  int64_t channels = 32;
  int64_t heads = 4;
  int64_t ffn_channels = 64;
  int64_t decoder_layers = 2;
  int64_t queries = 24;
  int64_t classes = 10;
  int64_t depth_bins = 6;
  int64_t memory_len = 12;
  int64_t topk = 6;
  int64_t image_height = 32, image_width = 48;  // stride 16: a 2 x 3 map per camera
  std::array<double, 6> range = {-51.2, -51.2, -5.0, 51.2, 51.2, 3.0};
};

inline constexpr int64_t kBoxTerms = 10;    // x, y, z, log w, log l, log h, sin, cos, vx, vy
inline constexpr int64_t kMotionDims = 13;  // the ego motion's top 3 rows and the time step

struct Prediction {
  std::vector<torch::Tensor> logits;  // per layer [B, Q, classes]
  std::vector<torch::Tensor> boxes;   // per layer [B, Q, kBoxTerms]
};

struct StreamPetrImpl : torch::nn::Module {
  explicit StreamPetrImpl(const ModelConfig& config);
  // images: [B, 6, 3, H, W]; img2lidar: [B, 6, 4, 4] (float64 is fine); motion: [B, kMotionDims].
  // Reads the memory (after its PreUpdate for this frame) and pushes this frame's top-k into it.
  Prediction forward(const torch::Tensor& images, const torch::Tensor& img2lidar, StreamingMemory& memory,
                     const torch::Tensor& motion);

  ModelConfig config;
  std::vector<double> depth_bins;
  Backbone backbone{nullptr};
  torch::nn::Linear position_in{nullptr}, position_out{nullptr};
  torch::nn::Embedding reference{nullptr};
  torch::nn::Linear query_pos_in{nullptr}, query_pos_out{nullptr};
  MotionLayerNorm memory_norm{nullptr};
  std::vector<DecoderLayer> layers;
  torch::nn::Linear classify{nullptr}, regress{nullptr};
};
TORCH_MODULE(StreamPetr);

// A GT box as the regression target: centre normalised to `range`, log sizes, sin/cos yaw, vx, vy.
torch::Tensor BoxTargets(const std::vector<std::array<double, 7>>& boxes, const std::array<double, 6>& range);

}  // namespace petrsim::real
