// Internals of `petrsim diagnose` (diagnose.h) shared by its files: the text of sizes and rank
// lists (defined in diagnose_report.cc).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace petrsim::diagnose_internal {

std::string Shape(const std::vector<std::vector<int64_t>>& sizes);

// "9, 14" or "0-3, 7".
std::string RankList(const std::vector<uint32_t>& ranks);

}  // namespace petrsim::diagnose_internal
