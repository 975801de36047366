// Building blocks of the real backend's scaled-down StreamPETR (docs/reference/streampetr.md, section 11), in
// LibTorch: the convolutional backbone + neck that gives one stride-16 feature map per camera,
// and the decoder layer (self-attention over the queries and the streaming memory, cross-
// attention to the image tokens with their 3D position embedding, FFN, each followed by a
// residual and a layer norm: post-norm).
#pragma once

#include <torch/torch.h>

#include <cstdint>

namespace petrsim::real {

// [N, 3, H, W] -> [N, channels, H/16, W/16]: four stride-2 3x3 convolutions with batch norm and
// ReLU (widths 16, 32, 64, 128), then a 1x1 neck to `channels`.
struct BackboneImpl : torch::nn::Module {
  explicit BackboneImpl(int64_t channels);
  torch::Tensor forward(const torch::Tensor& images);
  torch::nn::Sequential stages{nullptr};
  torch::nn::Conv2d neck{nullptr};
};
TORCH_MODULE(Backbone);

struct DecoderLayerImpl : torch::nn::Module {
  DecoderLayerImpl(int64_t channels, int64_t heads, int64_t ffn_channels);
  // query, query_pos: [B, Q, C]; memory, memory_pos: [B, M, C] with memory_valid [B, M] bool
  // (invalid entries are masked out of the self-attention); tokens, tokens_pos: [B, T, C].
  torch::Tensor forward(const torch::Tensor& query, const torch::Tensor& query_pos, const torch::Tensor& memory,
                        const torch::Tensor& memory_pos, const torch::Tensor& memory_valid, const torch::Tensor& tokens,
                        const torch::Tensor& tokens_pos);
  torch::nn::MultiheadAttention self_attention{nullptr}, cross_attention{nullptr};
  torch::nn::Linear ffn_in{nullptr}, ffn_out{nullptr};
  torch::nn::LayerNorm norm1{nullptr}, norm2{nullptr}, norm3{nullptr};
};
TORCH_MODULE(DecoderLayer);

}  // namespace petrsim::real
