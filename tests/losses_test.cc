// The real backend's losses and matching cost (real/losses.h) against values computed by hand
// in double precision from the formulas (mmdet's sigmoid focal loss, FocalLossCost,
// BBox3DL1Cost), and the matcher on a case whose answer is plain.
#include "real/losses.h"

#include <gtest/gtest.h>

#include <cmath>

namespace petrsim::real {
namespace {

double Sigmoid(double x) { return 1 / (1 + std::exp(-x)); }

// Focal loss of one logit against a 0/1 target, by the textbook formula.
double Focal(double logit, int target) {
  const double p = Sigmoid(logit);
  if (target == 1) return -kFocalAlpha * std::pow(1 - p, kFocalGamma) * std::log(p);
  return -(1 - kFocalAlpha) * std::pow(p, kFocalGamma) * std::log(1 - p);
}

TEST(Losses, SigmoidFocalLossByHand) {
  const std::vector<double> logits = {2.0, -1.0, 0.5, -3.0, 1.5, 0.0};  // 2 samples x 3 classes
  const auto t = torch::tensor(logits, torch::kFloat64).view({2, 3});
  const auto labels = torch::tensor({1, 3}, torch::kInt64);  // class 1; background (3)
  double expected = 0;
  for (int i = 0; i < 3; ++i) expected += Focal(logits[static_cast<size_t>(i)], i == 1 ? 1 : 0);
  for (int i = 0; i < 3; ++i) expected += Focal(logits[static_cast<size_t>(3 + i)], 0);
  EXPECT_NEAR(SigmoidFocalLoss(t, labels, 1.0).item<double>(), expected, 1e-12);
  EXPECT_NEAR(SigmoidFocalLoss(t, labels, 4.0).item<double>(), expected / 4, 1e-12);
}

TEST(Losses, WeightedL1ByHand) {
  const auto pred = torch::tensor({1.0, 2.0, 3.0, 4.0}, torch::kFloat64).view({2, 2});
  const auto target = torch::tensor({0.5, 2.5, 3.0, 1.0}, torch::kFloat64).view({2, 2});
  const auto weights = torch::tensor({1.0, 0.2}, torch::kFloat64);
  // |0.5|*1 + |-0.5|*0.2 + 0 + |3|*0.2 = 0.5 + 0.1 + 0.6 = 1.2
  EXPECT_NEAR(WeightedL1Loss(pred, target, weights, 2.0).item<double>(), 0.6, 1e-12);
}

TEST(Losses, MatchCostByHandAndTheObviousMatch) {
  // 3 queries, 2 classes, boxes of 2 terms; 2 GT boxes.
  const std::vector<double> logits = {3.0, -3.0, -3.0, 3.0, 0.0, 0.0};
  const std::vector<double> boxes = {0.0, 0.0, 10.0, 10.0, 5.0, 5.0};
  const auto l = torch::tensor(logits, torch::kFloat64).view({3, 2});
  const auto b = torch::tensor(boxes, torch::kFloat64).view({3, 2});
  const auto gt_labels = torch::tensor({1, 0}, torch::kInt64);
  const auto gt_boxes = torch::tensor({10.0, 9.0, 0.5, 0.0}, torch::kFloat64).view({2, 2});
  const auto weights = torch::tensor({1.0, 1.0}, torch::kFloat64);
  const auto cost = MatchCost(l, b, gt_labels, gt_boxes, weights);
  ASSERT_EQ(cost.size(0), 3);
  ASSERT_EQ(cost.size(1), 2);
  for (int q = 0; q < 3; ++q) {
    for (int g = 0; g < 2; ++g) {
      const int cls = g == 0 ? 1 : 0;
      const double p = Sigmoid(logits[static_cast<size_t>(q * 2 + cls)]);
      const double pos = -std::log(p + 1e-12) * kFocalAlpha * std::pow(1 - p, kFocalGamma);
      const double neg = -std::log(1 - p + 1e-12) * (1 - kFocalAlpha) * std::pow(p, kFocalGamma);
      const double l1 = std::abs(boxes[static_cast<size_t>(q * 2)] - (g == 0 ? 10.0 : 0.5)) +
                        std::abs(boxes[static_cast<size_t>(q * 2 + 1)] - (g == 0 ? 9.0 : 0.0));
      EXPECT_NEAR(cost[q][g].item<double>(), 2 * (pos - neg) + 0.25 * l1, 1e-9) << q << "," << g;
    }
  }
  // Query 1 says class 1 at (10, 10): box 0. Query 0 says class 0 at (0, 0): box 1.
  const auto pairs = HungarianMatch(cost);
  EXPECT_EQ(pairs, (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 0}}));
}

TEST(Losses, DetectionLossMatchesAndNormalises) {
  // 4 queries, 3 classes, 2 box terms; 2 GT boxes. Queries 2 and 0 predict the GT well.
  const auto logits =
      torch::tensor({5.0, -5.0, -5.0, -5.0, -5.0, -5.0, -5.0, -5.0, 5.0, -5.0, -5.0, -5.0}, torch::kFloat64)
          .view({4, 3})
          .set_requires_grad(true);
  const auto boxes =
      torch::tensor({1.0, 1.0, 9.0, 9.0, 3.0, 3.0, 0.0, 0.0}, torch::kFloat64).view({4, 2}).set_requires_grad(true);
  const auto gt_labels = torch::tensor({2, 0}, torch::kInt64);
  const auto gt_boxes = torch::tensor({3.1, 2.9, 1.0, 1.2}, torch::kFloat64).view({2, 2});
  const auto weights = torch::ones({2}, torch::kFloat64);
  const LayerLoss loss = DetectionLoss(logits, boxes, gt_labels, gt_boxes, weights, 2.0);
  EXPECT_EQ(loss.positives, 2);
  // L1 of the matched pairs (query 2 <-> box 0, query 0 <-> box 1): 0.1 + 0.1 + 0 + 0.2 = 0.4, / 2.
  EXPECT_NEAR(loss.regression.item<double>(), 0.2, 1e-9);
  // The focal loss by hand: query 0 label 0, query 2 label 2, queries 1 and 3 background.
  const std::vector<std::vector<int>> targets = {{1, 0, 0}, {0, 0, 0}, {0, 0, 1}, {0, 0, 0}};
  double focal = 0;
  for (int q = 0; q < 4; ++q) {
    for (int c = 0; c < 3; ++c)
      focal += Focal(logits[q][c].item<double>(), targets[static_cast<size_t>(q)][static_cast<size_t>(c)]);
  }
  EXPECT_NEAR(loss.classification.item<double>(), focal / 2, 1e-9);
  (loss.classification + loss.regression).backward();
  EXPECT_TRUE(logits.grad().defined());
  EXPECT_TRUE(boxes.grad().defined());
  // No GT: every query is background, no regression, no positives.
  const LayerLoss empty = DetectionLoss(logits, boxes, torch::zeros({0}, torch::kInt64),
                                        torch::zeros({0, 2}, torch::kFloat64), weights, 1.0);
  EXPECT_EQ(empty.positives, 0);
  EXPECT_EQ(empty.regression.item<double>(), 0.0);
}

TEST(Losses, SineEmbeddingByHand) {
  const auto points = torch::tensor({0.25, 0.5, 0.75}, torch::kFloat64).view({1, 3});
  const int64_t h = 4;
  const auto e = SineEmbedding3d(points, h);
  ASSERT_EQ(e.sizes(), torch::IntArrayRef({1, 6 * h}));
  const double pi2 = 2 * 3.14159265358979323846;
  // Order y, x, z; within an axis, pairs (sin(f_0 p), cos(f_1 p)), (sin(f_2 p), cos(f_3 p)), ...
  const std::vector<double> coordinate = {0.5, 0.25, 0.75};
  for (int axis = 0; axis < 3; ++axis) {
    for (int i = 0; i < 2 * h; ++i) {
      const double dim = std::pow(10000.0, 2.0 * (i / 2) / (2.0 * h));
      const double v = coordinate[static_cast<size_t>(axis)] * pi2 / dim;
      const double expected = i % 2 == 0 ? std::sin(v) : std::cos(v);
      EXPECT_NEAR(e[0][axis * 2 * h + i].item<double>(), expected, 1e-12) << axis << " " << i;
    }
  }
}

}  // namespace
}  // namespace petrsim::real
