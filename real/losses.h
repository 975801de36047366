// StreamPETR's detection losses and matching cost (docs/reference/streampetr.md, section 11), in LibTorch: the
// sigmoid focal loss (alpha 0.25, gamma 2) and the code-weighted L1 box loss, each divided by
// the average factor (the trainer passes clamp(reduce_mean(num_total_pos), min=1), the
// all_reduce the waiting ranks block in), and HungarianAssigner3D's cost: 2 x the focal
// classification cost + 0.25 x the L1 distance of the code-weighted boxes, solved by
// LinearSumAssignment (real/hungarian.h). Only real/ includes LibTorch headers.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <utility>
#include <vector>

namespace petrsim::real {

inline constexpr double kFocalAlpha = 0.25;
inline constexpr double kFocalGamma = 2.0;

// mmdet's sigmoid focal loss, summed and divided by `avg_factor`. logits: [N, C]; labels: [N]
// int64 in [0, C], where C is the background (all classes negative).
torch::Tensor SigmoidFocalLoss(const torch::Tensor& logits, const torch::Tensor& labels, double avg_factor);

// Sum of |pred - target| * code_weights over [N, K], divided by `avg_factor`.
torch::Tensor WeightedL1Loss(const torch::Tensor& pred, const torch::Tensor& target, const torch::Tensor& code_weights,
                             double avg_factor);

// The [Q, G] cost of assigning query q to box g: 2 * FocalLossCost + 0.25 * BBox3DL1Cost on
// code-weighted boxes (mmdet3d's HungarianAssigner3D for StreamPETR).
torch::Tensor MatchCost(const torch::Tensor& logits, const torch::Tensor& pred_boxes, const torch::Tensor& gt_labels,
                        const torch::Tensor& gt_boxes, const torch::Tensor& code_weights);

// (query, box) pairs of the least-cost assignment: one query per box (Q >= G).
std::vector<std::pair<int64_t, int64_t>> HungarianMatch(const torch::Tensor& cost);

// One decoder layer's loss for one sample, as mmdet3d's loss_single: match the queries to the GT
// boxes, give unmatched queries the background label, then the focal loss over every query and
// the L1 loss over the matched ones, both divided by `avg_factor` (the trainer's
// clamp(reduce_mean(num_total_pos), min=1)). logits [Q, C], boxes [Q, K], gt_labels [G],
// gt_boxes [G, K], code_weights [K].
struct LayerLoss {
  torch::Tensor classification, regression;
  int64_t positives = 0;  // matched queries: this sample's share of num_total_pos
};
LayerLoss DetectionLoss(const torch::Tensor& logits, const torch::Tensor& boxes, const torch::Tensor& gt_labels,
                        const torch::Tensor& gt_boxes, const torch::Tensor& code_weights, double avg_factor);

// PETR's sine embedding of 3D points in [0, 1]: for each coordinate, sin and cos at
// `half_channels` frequencies 10000^(2i / (2 half_channels)) of 2 pi x; [N, 3] -> [N, 6 half_channels]
// (pos2posemb3d, the input of the query position MLP).
torch::Tensor SineEmbedding3d(const torch::Tensor& points, int64_t half_channels);

}  // namespace petrsim::real
