// The assignment problem of StreamPETR's HungarianAssigner3D (docs/reference/streampetr.md, section 11): given a
// cost matrix of queries x ground-truth boxes, match each box to a distinct query so that the
// total cost is least, as scipy.optimize.linear_sum_assignment does. Pure C++ (no LibTorch), so
// it is tested on its own against brute force.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace petrsim::real {

// `cost` is rows x cols, row-major, every entry finite (std::invalid_argument otherwise).
// Returns min(rows, cols) pairs (row, col), each row and each column used at most once,
// ascending by row, whose cost sum is least. O(n^2 m) for n = min(rows, cols), m = max.
std::vector<std::pair<int64_t, int64_t>> LinearSumAssignment(const std::vector<double>& cost, int64_t rows,
                                                             int64_t cols);

}  // namespace petrsim::real
