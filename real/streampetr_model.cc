// The scaled-down StreamPETR; see streampetr_model.h.
#include "real/streampetr_model.h"

#include <cmath>
#include <string>

#include "real/geometry.h"
#include "real/losses.h"

namespace petrsim::real {

StreamPetrImpl::StreamPetrImpl(const ModelConfig& c) : config(c) {
  const int64_t ch = c.channels;
  depth_bins = LidDepthBins(static_cast<int>(c.depth_bins), 1.0, c.range[3]);
  backbone = register_module("backbone", Backbone(ch));
  position_in = register_module("position_in", torch::nn::Linear(3 * c.depth_bins, 2 * ch));
  position_out = register_module("position_out", torch::nn::Linear(2 * ch, ch));
  reference = register_module("reference", torch::nn::Embedding(c.queries, 3));
  torch::nn::init::uniform_(reference->weight, 0, 1);
  query_pos_in = register_module("query_pos_in", torch::nn::Linear(3 * ch, ch));
  query_pos_out = register_module("query_pos_out", torch::nn::Linear(ch, ch));
  memory_norm = register_module("memory_norm", MotionLayerNorm(ch, kMotionDims));
  for (int64_t i = 0; i < c.decoder_layers; ++i) {
    layers.push_back(register_module("layer" + std::to_string(i), DecoderLayer(ch, c.heads, c.ffn_channels)));
  }
  classify = register_module("classify", torch::nn::Linear(ch, c.classes));
  regress = register_module("regress", torch::nn::Linear(ch, kBoxTerms));
  torch::NoGradGuard no_grad;
  classify->bias.fill_(-std::log((1 - 0.01) / 0.01));  // the focal-loss prior: p = 0.01
}

Prediction StreamPetrImpl::forward(const torch::Tensor& images, const torch::Tensor& img2lidar, StreamingMemory& memory,
                                   const torch::Tensor& motion) {
  const int64_t batch = images.size(0), cameras = images.size(1), ch = config.channels;
  // Image tokens: [B, 6 h w, C].
  const auto features = backbone(images.flatten(0, 1));  // [B*6, C, h, w]
  const int64_t h = features.size(2), w = features.size(3);
  const auto tokens = features.view({batch, cameras, ch, h, w}).permute({0, 1, 3, 4, 2}).reshape({batch, -1, ch});
  // Their 3D position embedding, per sample (the cameras may differ between samples).
  std::vector<torch::Tensor> positions;
  for (int64_t b = 0; b < batch; ++b) {
    const auto coords = FrustumCoords(img2lidar[b].to(torch::kFloat64), h, w, 16.0, depth_bins, config.range)
                            .to(tokens.dtype());  // [6, h, w, D, 3]
    positions.push_back(InverseSigmoid(coords).reshape({cameras * h * w, config.depth_bins * 3}));
  }
  const auto tokens_pos = position_out(torch::relu(position_in(torch::stack(positions))));
  // Queries: learnable reference points in [0, 1]^3.
  const auto ref = reference->weight.clamp(0, 1).unsqueeze(0).expand({batch, config.queries, 3});
  const auto query_pos = query_pos_out(torch::relu(query_pos_in(SineEmbedding3d(ref.reshape({-1, 3}), ch / 2))))
                             .view({batch, config.queries, ch});
  auto query = torch::zeros({batch, config.queries, ch}, tokens.options());
  // Memory: embeddings conditioned on the ego motion, positions from its reference points.
  const auto low = torch::tensor({config.range[0], config.range[1], config.range[2]}, tokens.options());
  const auto high = torch::tensor({config.range[3], config.range[4], config.range[5]}, tokens.options());
  const auto memory_points = ((memory.reference_points().to(tokens.dtype()) - low) / (high - low)).clamp(0, 1);
  const int64_t length = memory_points.size(1);
  const auto memory_pos =
      query_pos_out(torch::relu(query_pos_in(SineEmbedding3d(memory_points.reshape({-1, 3}), ch / 2))))
          .view({batch, length, ch});
  const auto memory_embeddings =
      memory_norm(memory.embeddings().to(tokens.dtype()),
                  motion.to(tokens.dtype()).unsqueeze(1).expand({batch, length, kMotionDims}));
  Prediction out;
  const auto ref_logit = InverseSigmoid(ref);
  for (auto& layer : layers) {
    query = layer(query, query_pos, memory_embeddings, memory_pos, memory.valid(), tokens, tokens_pos);
    const auto raw = regress(query);
    const auto centre = torch::sigmoid(raw.narrow(2, 0, 3) + ref_logit);
    out.boxes.push_back(torch::cat({centre, raw.narrow(2, 3, kBoxTerms - 3)}, 2));
    out.logits.push_back(classify(query));
  }
  // The top-k queries of this frame go into the memory (centres back in metres).
  torch::NoGradGuard no_grad;
  const auto centres = out.boxes.back().narrow(2, 0, 3) * (high - low) + low;
  const auto scores = std::get<0>(out.logits.back().sigmoid().max(2));
  memory.PostUpdate(query.detach().to(memory.embeddings().dtype()), centres.to(memory.reference_points().dtype()),
                    scores, config.topk);
  return out;
}

torch::Tensor BoxTargets(const std::vector<std::array<double, 7>>& boxes, const std::array<double, 6>& range) {
  std::vector<double> values;
  for (const auto& b : boxes) {  // x, y, z, w, l, h, yaw
    values.push_back((b[0] - range[0]) / (range[3] - range[0]));
    values.push_back((b[1] - range[1]) / (range[4] - range[1]));
    values.push_back((b[2] - range[2]) / (range[5] - range[2]));
    values.push_back(std::log(b[3]));
    values.push_back(std::log(b[4]));
    values.push_back(std::log(b[5]));
    values.push_back(std::sin(b[6]));
    values.push_back(std::cos(b[6]));
    values.push_back(0);
    values.push_back(0);
  }
  return torch::tensor(values, torch::kFloat32).view({static_cast<int64_t>(boxes.size()), kBoxTerms});
}

}  // namespace petrsim::real
