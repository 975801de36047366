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

}  // namespace
}  // namespace petrsim::real
