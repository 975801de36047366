// The assignment solver; see hungarian.h. Shortest augmenting paths with row and column
// potentials (the Hungarian method in the Jonker-Volgenant form): rows are added one at a time,
// each by a Dijkstra-like search over columns with reduced costs, so every step keeps the
// assignment optimal for the rows added so far.
#include "real/hungarian.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace petrsim::real {

std::vector<std::pair<int64_t, int64_t>> LinearSumAssignment(const std::vector<double>& cost, int64_t rows,
                                                             int64_t cols) {
  if (rows < 0 || cols < 0 || static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) != cost.size()) {
    throw std::invalid_argument("LinearSumAssignment: the cost matrix is not rows x cols");
  }
  for (size_t i = 0; i < cost.size(); ++i) {
    if (!std::isfinite(cost[i])) {
      throw std::invalid_argument("LinearSumAssignment: cost entry " + std::to_string(i) + " is not finite");
    }
  }
  if (rows == 0 || cols == 0) return {};
  // Work on n <= m: rows of the working matrix are the smaller side.
  const bool transposed = rows > cols;
  const int64_t n = transposed ? cols : rows;
  const int64_t m = transposed ? rows : cols;
  const auto at = [&](int64_t i, int64_t j) {  // 1-based working indices
    return transposed ? cost[static_cast<size_t>((j - 1) * cols + (i - 1))]
                      : cost[static_cast<size_t>((i - 1) * cols + (j - 1))];
  };
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> u(static_cast<size_t>(n + 1), 0), v(static_cast<size_t>(m + 1), 0);
  std::vector<int64_t> p(static_cast<size_t>(m + 1), 0), way(static_cast<size_t>(m + 1), 0);  // p[j]: row on column j
  for (int64_t i = 1; i <= n; ++i) {
    p[0] = i;
    int64_t j0 = 0;
    std::vector<double> minv(static_cast<size_t>(m + 1), inf);
    std::vector<char> used(static_cast<size_t>(m + 1), 0);
    do {
      used[static_cast<size_t>(j0)] = 1;
      const int64_t i0 = p[static_cast<size_t>(j0)];
      double delta = inf;
      int64_t j1 = 0;
      for (int64_t j = 1; j <= m; ++j) {
        if (used[static_cast<size_t>(j)]) continue;
        const double reduced = at(i0, j) - u[static_cast<size_t>(i0)] - v[static_cast<size_t>(j)];
        if (reduced < minv[static_cast<size_t>(j)]) {
          minv[static_cast<size_t>(j)] = reduced;
          way[static_cast<size_t>(j)] = j0;
        }
        if (minv[static_cast<size_t>(j)] < delta) {
          delta = minv[static_cast<size_t>(j)];
          j1 = j;
        }
      }
      for (int64_t j = 0; j <= m; ++j) {
        if (used[static_cast<size_t>(j)]) {
          u[static_cast<size_t>(p[static_cast<size_t>(j)])] += delta;
          v[static_cast<size_t>(j)] -= delta;
        } else {
          minv[static_cast<size_t>(j)] -= delta;
        }
      }
      j0 = j1;
    } while (p[static_cast<size_t>(j0)] != 0);
    do {  // augment along the path
      const int64_t j1 = way[static_cast<size_t>(j0)];
      p[static_cast<size_t>(j0)] = p[static_cast<size_t>(j1)];
      j0 = j1;
    } while (j0 != 0);
  }
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (int64_t j = 1; j <= m; ++j) {
    const int64_t i = p[static_cast<size_t>(j)];
    if (i == 0) continue;
    pairs.emplace_back(transposed ? j - 1 : i - 1, transposed ? i - 1 : j - 1);
  }
  std::sort(pairs.begin(), pairs.end());
  return pairs;
}

}  // namespace petrsim::real
