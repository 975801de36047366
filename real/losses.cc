// Losses and matching cost; see losses.h.
#include "real/losses.h"

#include <stdexcept>

#include "real/hungarian.h"

namespace petrsim::real {

torch::Tensor SigmoidFocalLoss(const torch::Tensor& logits, const torch::Tensor& labels, double avg_factor) {
  TORCH_CHECK(logits.dim() == 2 && labels.dim() == 1 && labels.size(0) == logits.size(0),
              "SigmoidFocalLoss: logits [N, C] and labels [N] expected");
  const int64_t classes = logits.size(1);
  // One-hot over C + 1 columns, the background column dropped.
  const auto targets = torch::one_hot(labels, classes + 1).narrow(1, 0, classes).to(logits.dtype());
  const auto p = torch::sigmoid(logits);
  const auto pt = (1 - p) * targets + p * (1 - targets);  // the probability of the wrong answer
  const auto weight = (kFocalAlpha * targets + (1 - kFocalAlpha) * (1 - targets)) * pt.pow(kFocalGamma);
  const auto loss = torch::binary_cross_entropy_with_logits(logits, targets, {}, {}, at::Reduction::None) * weight;
  return loss.sum() / avg_factor;
}

torch::Tensor WeightedL1Loss(const torch::Tensor& pred, const torch::Tensor& target, const torch::Tensor& code_weights,
                             double avg_factor) {
  TORCH_CHECK(pred.sizes() == target.sizes() && pred.dim() == 2 && code_weights.size(0) == pred.size(1),
              "WeightedL1Loss: pred and target [N, K], code_weights [K] expected");
  return ((pred - target).abs() * code_weights).sum() / avg_factor;
}

torch::Tensor MatchCost(const torch::Tensor& logits, const torch::Tensor& pred_boxes, const torch::Tensor& gt_labels,
                        const torch::Tensor& gt_boxes, const torch::Tensor& code_weights) {
  const double eps = 1e-12;
  const auto p = torch::sigmoid(logits);
  const auto neg = -(1 - p + eps).log() * (1 - kFocalAlpha) * p.pow(kFocalGamma);
  const auto pos = -(p + eps).log() * kFocalAlpha * (1 - p).pow(kFocalGamma);
  const auto cls_cost = pos.index_select(1, gt_labels) - neg.index_select(1, gt_labels);
  const auto reg_cost = torch::cdist(pred_boxes * code_weights, gt_boxes * code_weights, 1.0);
  return 2.0 * cls_cost + 0.25 * reg_cost;
}

std::vector<std::pair<int64_t, int64_t>> HungarianMatch(const torch::Tensor& cost) {
  TORCH_CHECK(cost.dim() == 2, "HungarianMatch: a [Q, G] cost expected");
  const auto c = cost.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  const std::vector<double> values(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
  return LinearSumAssignment(values, c.size(0), c.size(1));
}

LayerLoss DetectionLoss(const torch::Tensor& logits, const torch::Tensor& boxes, const torch::Tensor& gt_labels,
                        const torch::Tensor& gt_boxes, const torch::Tensor& code_weights, double avg_factor) {
  const int64_t queries = logits.size(0), classes = logits.size(1);
  auto labels = torch::full({queries}, classes, torch::TensorOptions().dtype(torch::kInt64));  // background
  LayerLoss out;
  if (gt_labels.size(0) == 0) {
    out.classification = SigmoidFocalLoss(logits, labels, avg_factor);
    out.regression = (boxes * 0).sum();
    return out;
  }
  torch::Tensor cost;
  {
    torch::NoGradGuard no_grad;
    cost = MatchCost(logits, boxes, gt_labels, gt_boxes, code_weights);
  }
  const auto pairs = HungarianMatch(cost);
  std::vector<int64_t> matched_queries, matched_boxes;
  for (const auto& [q, g] : pairs) {
    matched_queries.push_back(q);
    matched_boxes.push_back(g);
  }
  const auto q_index = torch::tensor(matched_queries, torch::kInt64);
  const auto g_index = torch::tensor(matched_boxes, torch::kInt64);
  labels.index_put_({q_index}, gt_labels.index_select(0, g_index));
  out.positives = static_cast<int64_t>(pairs.size());
  out.classification = SigmoidFocalLoss(logits, labels, avg_factor);
  out.regression =
      WeightedL1Loss(boxes.index_select(0, q_index), gt_boxes.index_select(0, g_index), code_weights, avg_factor);
  return out;
}

torch::Tensor SineEmbedding3d(const torch::Tensor& points, int64_t half_channels) {
  TORCH_CHECK(points.dim() == 2 && points.size(1) == 3, "SineEmbedding3d: points [N, 3] expected");
  const double scale = 2 * 3.14159265358979323846;
  const auto options = points.options();
  auto dim_t = torch::arange(2 * half_channels, options);
  dim_t = torch::pow(10000.0, 2 * torch::floor(dim_t / 2) / (2 * half_channels));
  std::vector<torch::Tensor> parts;
  for (int64_t axis = 0; axis < 3; ++axis) {
    const auto p = points.select(1, axis).unsqueeze(1) * scale / dim_t;  // [N, 2h]
    // Interleaved as PETR does: sin of the even columns, cos of the odd ones.
    const auto even = p.index({torch::indexing::Slice(), torch::indexing::Slice(0, torch::indexing::None, 2)}).sin();
    const auto odd = p.index({torch::indexing::Slice(), torch::indexing::Slice(1, torch::indexing::None, 2)}).cos();
    parts.push_back(torch::stack({even, odd}, 2).flatten(1));
  }
  // PETR orders them y, x, z.
  return torch::cat({parts[1], parts[0], parts[2]}, 1);
}

}  // namespace petrsim::real
