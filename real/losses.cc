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

}  // namespace petrsim::real
