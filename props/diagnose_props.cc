// The root-cause rule of `petrsim diagnose` (replay/diagnose_roots.cc) against its definition:
// on random happens-before graphs (cycles included) and random candidates, the linear
// RootCandidates decides exactly what the quadratic definition decides: a candidate is a
// consequence when each rank it is missing is missing from another candidate that happens before
// it (reachable one way; both ways, a cycle: the earlier). Ranks run past 64 so that the
// batches of 64 ranks are crossed.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <set>

#include "props/scenario_gen.h"
#include "replay/diagnose_internal.h"

namespace petrsim {
namespace {

const bool kCaseRateRegistered = props::RegisterCaseRate();

using diagnose_internal::RootCandidate;
using Edges = std::vector<std::pair<size_t, size_t>>;

// reach[a][b]: b is reachable from a (a reaches itself).
std::vector<std::vector<bool>> Reach(size_t vertices, const Edges& edges) {
  std::vector<std::vector<bool>> reach(vertices, std::vector<bool>(vertices, false));
  for (size_t a = 0; a < vertices; ++a) {
    std::vector<size_t> stack{a};
    reach[a][a] = true;
    while (!stack.empty()) {
      const size_t v = stack.back();
      stack.pop_back();
      for (const auto& [from, to] : edges) {
        if (from == v && !reach[a][to]) {
          reach[a][to] = true;
          stack.push_back(to);
        }
      }
    }
  }
  return reach;
}

// The definition, candidate pair by candidate pair.
std::vector<bool> Definition(size_t vertices, const Edges& edges, const std::vector<RootCandidate>& candidates) {
  const auto reach = Reach(vertices, edges);
  const auto precedes = [&](const RootCandidate& a, const RootCandidate& b) {
    if (!reach[a.vertex][b.vertex]) return false;
    if (reach[b.vertex][a.vertex]) return a.time_ns < b.time_ns;
    return true;
  };
  std::vector<bool> root;
  for (const RootCandidate& c : candidates) {
    bool all_explained = true;
    for (const uint32_t m : c.missing) {
      bool explained = false;
      for (const RootCandidate& other : candidates) {
        if (&other == &c || std::find(other.missing.begin(), other.missing.end(), m) == other.missing.end()) continue;
        explained = explained || precedes(other, c);
      }
      all_explained = all_explained && explained;
    }
    root.push_back(!all_explained);
  }
  return root;
}

RC_GTEST_PROP(DiagnoseRoots, LinearRuleDecidesWhatTheDefinitionDecides, ()) {
  const size_t vertices = *rc::gen::inRange<size_t>(1, 14);
  Edges edges;
  const size_t edge_count = *rc::gen::inRange<size_t>(0, 3 * vertices);
  for (size_t e = 0; e < edge_count; ++e) {
    const size_t from = *rc::gen::inRange<size_t>(0, vertices), to = *rc::gen::inRange<size_t>(0, vertices);
    if (from != to) edges.emplace_back(from, to);
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  // Candidates on distinct vertices (one per process group's instance), missing ranks from a world of up to 150.
  const uint32_t world = *rc::gen::element<uint32_t>(2, 8, 70, 150);
  std::vector<size_t> order(vertices);
  for (size_t v = 0; v < vertices; ++v) order[v] = v;
  const size_t count = *rc::gen::inRange<size_t>(0, vertices + 1);
  std::vector<RootCandidate> candidates;
  for (size_t i = 0; i < count; ++i) {
    const size_t pick = *rc::gen::inRange<size_t>(i, vertices);
    std::swap(order[i], order[pick]);
    RootCandidate c;
    c.vertex = order[i];
    const int share = *rc::gen::inRange(1, 101);  // percent of the world missing
    std::set<uint32_t> missing;
    for (uint32_t r = 0; r < world; ++r) {
      if (*rc::gen::inRange(0, 100) < share) missing.insert(r);
    }
    if (missing.empty()) missing.insert(*rc::gen::inRange<uint32_t>(0, world));
    c.missing.assign(missing.begin(), missing.end());
    c.time_ns = *rc::gen::inRange<int64_t>(0, 4);  // ties included
    candidates.push_back(std::move(c));
  }
  RC_ASSERT(diagnose_internal::RootCandidates(vertices, edges, candidates) == Definition(vertices, edges, candidates));
}

}  // namespace
}  // namespace petrsim
