// StreamPETR building blocks; see streampetr_modules.h.
#include "real/streampetr_modules.h"

namespace petrsim::real {

BackboneImpl::BackboneImpl(int64_t channels) {
  torch::nn::Sequential sequence;
  int64_t in = 3;
  for (const int64_t out : {16, 32, 64, 128}) {
    sequence->push_back(torch::nn::Conv2d(torch::nn::Conv2dOptions(in, out, 3).stride(2).padding(1).bias(false)));
    sequence->push_back(torch::nn::BatchNorm2d(out));
    sequence->push_back(torch::nn::ReLU());
    in = out;
  }
  stages = register_module("stages", sequence);
  neck = register_module("neck", torch::nn::Conv2d(torch::nn::Conv2dOptions(in, channels, 1)));
}

torch::Tensor BackboneImpl::forward(const torch::Tensor& images) { return neck(stages->forward(images)); }

DecoderLayerImpl::DecoderLayerImpl(int64_t channels, int64_t heads, int64_t ffn_channels) {
  self_attention = register_module(
      "self_attention", torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(channels, heads)));
  cross_attention = register_module(
      "cross_attention", torch::nn::MultiheadAttention(torch::nn::MultiheadAttentionOptions(channels, heads)));
  ffn_in = register_module("ffn_in", torch::nn::Linear(channels, ffn_channels));
  ffn_out = register_module("ffn_out", torch::nn::Linear(ffn_channels, channels));
  norm1 = register_module("norm1", torch::nn::LayerNorm(torch::nn::LayerNormOptions({channels})));
  norm2 = register_module("norm2", torch::nn::LayerNorm(torch::nn::LayerNormOptions({channels})));
  norm3 = register_module("norm3", torch::nn::LayerNorm(torch::nn::LayerNormOptions({channels})));
}

torch::Tensor DecoderLayerImpl::forward(const torch::Tensor& query, const torch::Tensor& query_pos,
                                        const torch::Tensor& memory, const torch::Tensor& memory_pos,
                                        const torch::Tensor& memory_valid, const torch::Tensor& tokens,
                                        const torch::Tensor& tokens_pos) {
  const int64_t batch = query.size(0), queries = query.size(1);
  // LibTorch's attention takes [L, B, C].
  const auto t = [](const torch::Tensor& x) { return x.transpose(0, 1); };
  // Self-attention: the queries attend to themselves and to the valid memory entries.
  const auto keys = torch::cat({query + query_pos, memory + memory_pos}, 1);
  const auto values = torch::cat({query, memory}, 1);
  const auto padding = torch::cat({torch::zeros({batch, queries}, torch::kBool), memory_valid.logical_not()}, 1);
  auto x = query;
  const auto self = std::get<0>(self_attention->forward(t(query + query_pos), t(keys), t(values), padding));
  x = norm1(x + t(self));
  const auto cross = std::get<0>(cross_attention->forward(t(x + query_pos), t(tokens + tokens_pos), t(tokens)));
  x = norm2(x + t(cross));
  x = norm3(x + ffn_out(torch::relu(ffn_in(x))));
  return x;
}

}  // namespace petrsim::real
