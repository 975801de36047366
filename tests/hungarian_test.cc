// The assignment solver of the real backend's matcher (real/hungarian.h) against brute force
// over every injection, on random square and rectangular matrices, with ties and negatives.
#include "real/hungarian.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <set>
#include <stdexcept>

namespace petrsim::real {
namespace {

// The least total cost of matching min(rows, cols) rows to distinct columns, by enumeration.
double BruteForce(const std::vector<double>& cost, int64_t rows, int64_t cols) {
  const int64_t k = std::min(rows, cols);
  double best = std::numeric_limits<double>::infinity();
  std::vector<int64_t> chosen;
  std::vector<bool> used_row(static_cast<size_t>(rows)), used_col(static_cast<size_t>(cols));
  // Match the smaller side's items in order to distinct items of the larger side.
  const bool by_row = rows <= cols;
  std::function<void(int64_t, double)> go = [&](int64_t item, double sum) {
    if (item == k) {
      best = std::min(best, sum);
      return;
    }
    const int64_t other_count = by_row ? cols : rows;
    for (int64_t o = 0; o < other_count; ++o) {
      auto& used = by_row ? used_col : used_row;
      if (used[static_cast<size_t>(o)]) continue;
      used[static_cast<size_t>(o)] = true;
      const double c = by_row ? cost[static_cast<size_t>(item * cols + o)] : cost[static_cast<size_t>(o * cols + item)];
      go(item + 1, sum + c);
      used[static_cast<size_t>(o)] = false;
    }
  };
  go(0, 0.0);
  return best;
}

TEST(LinearSumAssignment, EqualsBruteForceOnRandomMatrices) {
  std::mt19937_64 rng(20261202);
  for (int trial = 0; trial < 3000; ++trial) {
    const int64_t rows = 1 + static_cast<int64_t>(rng() % 6);
    const int64_t cols = 1 + static_cast<int64_t>(rng() % 6);
    std::vector<double> cost(static_cast<size_t>(rows * cols));
    const bool ties = trial % 3 == 0;
    for (double& c : cost) {
      c = ties ? static_cast<double>(rng() % 4) : std::uniform_real_distribution<double>(-5, 10)(rng);
    }
    const auto pairs = LinearSumAssignment(cost, rows, cols);
    ASSERT_EQ(static_cast<int64_t>(pairs.size()), std::min(rows, cols));
    std::set<int64_t> rows_used, cols_used;
    double sum = 0;
    for (const auto& [r, c] : pairs) {
      ASSERT_GE(r, 0);
      ASSERT_LT(r, rows);
      ASSERT_GE(c, 0);
      ASSERT_LT(c, cols);
      EXPECT_TRUE(rows_used.insert(r).second);
      EXPECT_TRUE(cols_used.insert(c).second);
      sum += cost[static_cast<size_t>(r * cols + c)];
    }
    EXPECT_NEAR(sum, BruteForce(cost, rows, cols), 1e-9) << rows << "x" << cols << " trial " << trial;
    EXPECT_TRUE(std::is_sorted(pairs.begin(), pairs.end()));
  }
}

TEST(LinearSumAssignment, AKnownMatrixAndEdgeCases) {
  // scipy.optimize.linear_sum_assignment([[4, 1, 3], [2, 0, 5], [3, 2, 2]]) -> rows [0 1 2], cols [1 0 2].
  const auto pairs = LinearSumAssignment({4, 1, 3, 2, 0, 5, 3, 2, 2}, 3, 3);
  EXPECT_EQ(pairs, (std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {1, 0}, {2, 2}}));
  EXPECT_TRUE(LinearSumAssignment({}, 0, 5).empty());
  EXPECT_TRUE(LinearSumAssignment({}, 4, 0).empty());
  EXPECT_THROW(LinearSumAssignment({1, 2, 3}, 2, 2), std::invalid_argument);
  EXPECT_THROW(LinearSumAssignment({1, std::numeric_limits<double>::quiet_NaN()}, 1, 2), std::invalid_argument);
  // 900 queries x 30 boxes (StreamPETR's sizes): every box matched once.
  std::mt19937_64 rng(7);
  std::vector<double> big(900 * 30);
  for (double& c : big) c = std::uniform_real_distribution<double>(0, 1)(rng);
  const auto matched = LinearSumAssignment(big, 900, 30);
  ASSERT_EQ(matched.size(), 30u);
  std::set<int64_t> boxes;
  for (const auto& [q, b] : matched) boxes.insert(b);
  EXPECT_EQ(boxes.size(), 30u);
}

}  // namespace
}  // namespace petrsim::real
