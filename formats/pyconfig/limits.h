// The limits every read of a Python config stays under (STYLE.md 7: a limit on everything): an
// adversarial or broken file ends in a ScenarioError that names the limit, never in a hang or in
// exhausted memory. Real configs have a few thousand values and a few hundred lines.
#pragma once

#include <cstddef>
#include <cstdint>

namespace petrsim::pyconfig {

constexpr uint64_t kMaxConfigBytes = uint64_t{16} << 20;  // one config file
constexpr int kMaxNesting = 200;                          // brackets, and the parser's recursion
constexpr int kMaxValueDepth = 256;                       // a value's depth (names can stack literals)
constexpr int kMaxBaseDepth = 32;                         // a `_base_` chain
constexpr size_t kMaxFiles = 256;                         // files read for one config
// Values built during one read; iterations of comprehensions and loops, items of range() and of
// every other built sequence draw from the same budget.
constexpr size_t kMaxNodes = 1'000'000;
constexpr size_t kMaxTokens = 2'000'000;               // tokens of one file
constexpr size_t kMaxStringBytes = size_t{64} << 20;   // bytes of strings built during one read
constexpr int64_t kMaxRangeLength = int64_t{1} << 20;  // items of one range()
constexpr int kMaxStatementsNesting = 100;             // nested blocks (if/for/def ...), as CPython's
// An expression tree's depth: recursion of the parser is limited by kMaxNesting, chains of
// operators and trailers (a + b + ..., x[0][1]...) by this.
constexpr int kMaxExpressionDepth = 1000;

}  // namespace petrsim::pyconfig
