// Which stuck collectives are root causes (diagnose.cc's AddStuck), in time linear in the
// happens-before graph per 64 missing ranks: the graph's strongly connected components, their
// condensation in topological order, and per batch of 64 missing ranks one pass that carries a
// bit mask of "after a candidate this rank is missing from" along the condensation's edges.
// props/diagnose_props.cc compares it with the definition, pair by pair.
#include <algorithm>
#include <tuple>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>

#include "base/assert.h"
#include "replay/diagnose_internal.h"

namespace petrsim::diagnose_internal {

namespace {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

// The condensation of `graph`: the component of each vertex, and the components in topological
// order with their successors (edges between components, each once).
struct Condensation {
  std::vector<int> component;                // per vertex
  std::vector<std::vector<int>> successors;  // per component, ascending, no repeats
  std::vector<int> order;                    // every component, each before its successors
};

Condensation Condense(size_t vertices, const std::vector<std::pair<size_t, size_t>>& edges) {
  Graph graph(vertices);
  for (const auto& [from, to] : edges) boost::add_edge(from, to, graph);
  Condensation out;
  out.component.resize(vertices);
  const int components = vertices == 0 ? 0
                                       : boost::strong_components(
                                             graph, boost::make_iterator_property_map(
                                                        out.component.begin(), boost::get(boost::vertex_index, graph)));
  out.successors.resize(static_cast<size_t>(components));
  for (const auto& [from, to] : edges) {
    const int a = out.component[from], b = out.component[to];
    if (a != b) out.successors[static_cast<size_t>(a)].push_back(b);
  }
  std::vector<int> indegree(static_cast<size_t>(components), 0);
  for (auto& next : out.successors) {
    std::sort(next.begin(), next.end());
    next.erase(std::unique(next.begin(), next.end()), next.end());
    for (const int b : next) ++indegree[static_cast<size_t>(b)];
  }
  for (int c = 0; c < components; ++c) {
    if (indegree[static_cast<size_t>(c)] == 0) out.order.push_back(c);
  }
  for (size_t i = 0; i < out.order.size(); ++i) {  // Kahn: the order grows as it is read
    for (const int b : out.successors[static_cast<size_t>(out.order[i])]) {
      if (--indegree[static_cast<size_t>(b)] == 0) out.order.push_back(b);
    }
  }
  PETRSIM_ASSERT(out.order.size() == static_cast<size_t>(components));  // a condensation has no cycle
  return out;
}

// Marks explained[c][k] where candidate c's k-th missing rank, one of ranks[batch..batch+64), is missing from a
// candidate in a component before c's: one pass over the condensation in topological order with a mask per component.
void ExplainAcrossComponents(const Condensation& dag, const std::vector<RootCandidate>& candidates,
                             const std::vector<uint32_t>& ranks, size_t batch,
                             std::vector<std::vector<bool>>& explained) {
  const size_t components = dag.successors.size();
  std::vector<uint64_t> source(components), after(components);
  const size_t end = std::min(ranks.size(), batch + 64);
  const auto bit_of = [&](uint32_t m) -> uint64_t {  // 0 when m is outside this batch
    const auto it =
        std::lower_bound(ranks.begin() + static_cast<ptrdiff_t>(batch), ranks.begin() + static_cast<ptrdiff_t>(end), m);
    if (it == ranks.begin() + static_cast<ptrdiff_t>(end) || *it != m) return 0;
    return uint64_t{1} << (it - ranks.begin() - static_cast<ptrdiff_t>(batch));
  };
  // The positions of candidate c's missing ranks that fall in this batch's range (missing is ascending).
  const uint32_t low = ranks[batch], high = ranks[end - 1];
  const auto in_batch = [&](const RootCandidate& c) {
    const auto first = std::lower_bound(c.missing.begin(), c.missing.end(), low);
    return std::make_pair(first, std::upper_bound(first, c.missing.end(), high));
  };
  for (const RootCandidate& c : candidates) {
    const auto [first, last] = in_batch(c);
    for (auto m = first; m != last; ++m) source[static_cast<size_t>(dag.component[c.vertex])] |= bit_of(*m);
  }
  // after[x]: the ranks some candidate in a component strictly before x is missing from.
  for (const int x : dag.order) {
    const uint64_t reached = after[static_cast<size_t>(x)] | source[static_cast<size_t>(x)];
    for (const int y : dag.successors[static_cast<size_t>(x)]) after[static_cast<size_t>(y)] |= reached;
  }
  for (size_t c = 0; c < candidates.size(); ++c) {
    const uint64_t before = after[static_cast<size_t>(dag.component[candidates[c].vertex])];
    if (before == 0) continue;
    const auto [first, last] = in_batch(candidates[c]);
    for (auto m = first; m != last; ++m) {
      if ((before & bit_of(*m)) != 0) explained[c][static_cast<size_t>(m - candidates[c].missing.begin())] = true;
    }
  }
}

}  // namespace

std::vector<bool> RootCandidates(size_t vertices, const std::vector<std::pair<size_t, size_t>>& edges,
                                 const std::vector<RootCandidate>& candidates) {
  const Condensation dag = Condense(vertices, edges);
  // The ranks some two candidates are missing from (only those can explain anything), numbered
  // densely; and per (rank, component) the earliest time of a candidate there missing that rank.
  std::vector<std::tuple<uint32_t, int, int64_t>> by_rank;  // (rank, component, time)
  for (const RootCandidate& c : candidates) {
    PETRSIM_ASSERT(c.vertex < vertices);
    PETRSIM_ASSERT(std::is_sorted(c.missing.begin(), c.missing.end()));
    for (const uint32_t m : c.missing) by_rank.emplace_back(m, dag.component[c.vertex], c.time_ns);
  }
  std::sort(by_rank.begin(), by_rank.end());
  std::vector<uint32_t> ranks;  // distinct ranks missing from two candidates or more, ascending
  for (size_t i = 0; i + 1 < by_rank.size(); ++i) {
    const uint32_t m = std::get<0>(by_rank[i]);
    if (std::get<0>(by_rank[i + 1]) == m && (ranks.empty() || ranks.back() != m)) ranks.push_back(m);
  }
  const auto earliest_in = [&](uint32_t m, int component) {  // by_rank is sorted: the first is the earliest
    const auto it = std::lower_bound(by_rank.begin(), by_rank.end(), std::make_tuple(m, component, INT64_MIN));
    PETRSIM_ASSERT(it != by_rank.end() && std::get<0>(*it) == m && std::get<1>(*it) == component);
    return std::get<2>(*it);
  };
  // explained[c][k]: candidate c's k-th missing rank is missing from another candidate before it.
  std::vector<std::vector<bool>> explained(candidates.size());
  for (size_t c = 0; c < candidates.size(); ++c) {
    explained[c].resize(candidates[c].missing.size());
    const int component = dag.component[candidates[c].vertex];
    for (size_t k = 0; k < candidates[c].missing.size(); ++k) {
      // In one component every vertex reaches every other: the earlier one comes first.
      explained[c][k] = earliest_in(candidates[c].missing[k], component) < candidates[c].time_ns;
    }
  }
  for (size_t batch = 0; batch < ranks.size(); batch += 64)
    ExplainAcrossComponents(dag, candidates, ranks, batch, explained);
  std::vector<bool> root(candidates.size());
  for (size_t c = 0; c < candidates.size(); ++c) {
    root[c] = !std::all_of(explained[c].begin(), explained[c].end(), [](bool e) { return e; });
  }
  return root;
}

}  // namespace petrsim::diagnose_internal
