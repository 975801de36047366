// The static pre-flight; see preflight.h.
#include "check/preflight.h"

// GCC 12 reports a false -Wmaybe-uninitialized inside Boost.Graph's edge iterators once they
// are inlined here (boost/graph/detail/adj_list_edge_iterator.hpp); the code is Boost's.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>

#include <algorithm>
#include <cmath>
#include <map>

#include "base/assert.h"
#include "base/error.h"
#include "data/data_loader.h"
#include "data/resample_policy.h"
#include "data/sample_stream.h"
#include "data/sampler.h"

namespace petrsim {
namespace {

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

// The resample graph: vertex i < N is dataset frame i; vertices >= N are hubs, one per distinct
// candidate range, so a pool of n frames costs n edges instead of n^2.
struct ResampleGraph {
  Graph graph;
  int64_t frames = 0;
  std::vector<std::pair<int64_t, int64_t>> edges;
};

ResampleGraph BuildResampleGraph(const Dataset& dataset, const ResamplePolicy& policy) {
  ResampleGraph result;
  result.frames = dataset.size();
  std::vector<std::pair<int64_t, int64_t>> edges;
  std::map<std::pair<int64_t, int64_t>, int64_t> hubs;  // ordered: deterministic numbering
  int64_t next_vertex = dataset.size();
  for (int64_t i = 0; i < dataset.size(); ++i) {
    if (dataset.frame(i).accepted) continue;  // accepted frames end the loop: no way out
    const IndexRange candidates = policy.Candidates(i);
    if (candidates.size() == 1) {
      edges.emplace_back(i, candidates.begin);
      continue;
    }
    auto [it, inserted] = hubs.try_emplace({candidates.begin, candidates.end}, next_vertex);
    if (inserted) {
      ++next_vertex;
      for (int64_t j = candidates.begin; j < candidates.end; ++j) edges.emplace_back(it->second, j);
    }
    edges.emplace_back(i, it->second);
  }
  result.graph = Graph(edges.begin(), edges.end(), static_cast<Graph::vertices_size_type>(next_vertex));
  result.edges = std::move(edges);
  return result;
}

// Finds the earliest sampler draw of a frame in each pool. All ranks advance together, block
// by block, so they share one group stream (or one epoch list) and the scan stops as soon as
// every pool has a hit (later blocks cannot be earlier).
void FindFirstHits(const Scenario& scenario, const Dataset& dataset, const std::vector<int32_t>& pool_of_frame,
                   std::vector<TrapPool>& pools, uint64_t job_iterations) {
  const auto& job = scenario.job();
  const uint32_t batch = job.samples_per_gpu();
  const DataLoaderShape loader = MakeDataLoaderShape(scenario, dataset);
  const SamplerFactory factory(scenario, dataset);
  std::vector<std::unique_ptr<RankSampler>> samplers;
  for (uint32_t rank = 0; rank < job.world_size(); ++rank) samplers.push_back(factory.ForRank(rank));
  constexpr uint64_t kBlock = 64;
  std::vector<SlotDraw> draws(kBlock * batch);
  size_t pools_hit = 0;
  for (uint64_t start = 0; start < job_iterations && pools_hit < pools.size(); start += kBlock) {
    const uint64_t count = std::min(kBlock, job_iterations - start);
    for (uint32_t rank = 0; rank < job.world_size(); ++rank) {
      samplers[rank]->NextBatches(std::span<SlotDraw>(draws.data(), count * batch));
      for (uint64_t i = 0; i < count * batch; ++i) {
        if (draws[i].index < 0) continue;
        const int32_t pool = pool_of_frame[draws[i].index];
        if (pool < 0) continue;
        const uint64_t iteration = start + i / batch;
        const auto slot = static_cast<uint32_t>(i % batch);
        auto& hit = pools[pool].first_hit;
        if (hit && std::tie(hit->iteration, hit->rank, hit->slot) <= std::tie(iteration, rank, slot)) {
          continue;
        }
        if (!hit) ++pools_hit;
        hit = SamplerHit{iteration, rank, slot, loader.WorkerOf(iteration), draws[i].index, draws[i].group};
      }
    }
  }
}

// bounded: replays every rank's stream with the workers' real draws up to the job length (or
// the earliest error found) and returns the first getitem that gives up.
std::optional<SamplerHit> FindFirstBoundedError(const Scenario& scenario, const Dataset& dataset,
                                                uint64_t job_iterations) {
  std::optional<SamplerHit> first;
  for (uint32_t rank = 0; rank < scenario.job().world_size(); ++rank) {
    SampleStreamOptions options;
    options.ranks = {rank};
    options.iterations = first ? std::min(job_iterations, first->iteration + 1) : job_iterations;
    GenerateSampleStream(scenario, dataset, options, [&](const SampleRow& row) {
      if (row.status != SampleStatus::kError) return;
      if (first &&
          std::tie(first->iteration, first->rank, first->slot) <= std::tie(row.iteration, row.rank, row.slot)) {
        return;
      }
      first = SamplerHit{row.iteration, row.rank, row.slot, row.worker, row.index, row.group};
    });
  }
  return first;
}

PolicyStatistics ComputeStatistics(const Scenario& scenario, const Dataset& dataset, const ResamplePolicy& policy,
                                   const std::vector<int32_t>& pool_of_frame, uint64_t job_iterations) {
  PolicyStatistics stats;
  stats.frames = dataset.size();
  stats.accepted_frames = dataset.accepted_frames();
  stats.chunks = dataset.chunks().size();
  // Counted by GT, not by acceptance, so keep_empty still shows where the empty frames are.
  for (const auto& chunk : dataset.chunks()) {
    int64_t without_gt = 0;
    for (int64_t i = chunk.begin; i < chunk.end; ++i) without_gt += dataset.frame(i).gt_count == 0;
    if (without_gt == chunk.end - chunk.begin) ++stats.chunks_all_rejected;
    if (without_gt > 0 && without_gt < chunk.end - chunk.begin) ++stats.chunks_partly_rejected;
  }
  for (const auto& sub : dataset.subdatasets()) {
    stats.chunks_dropped += sub.chunks_dropped;
    stats.frames_dropped += sub.frames_dropped;
  }
  // Accepted frames, and accepted frames with prev_exists, in any index range, O(1).
  std::vector<int64_t> accepted_prefix(dataset.size() + 1, 0);
  std::vector<int64_t> continuing_prefix(dataset.size() + 1, 0);
  for (int64_t i = 0; i < dataset.size(); ++i) {
    const FrameInfo& frame = dataset.frame(i);
    accepted_prefix[i + 1] = accepted_prefix[i] + frame.accepted;
    continuing_prefix[i + 1] = continuing_prefix[i] + (frame.accepted && frame.prev_exists);
  }
  const uint64_t attempts_max = policy.attempts_max();
  for (int64_t i = 0; i < dataset.size(); ++i) {
    const FrameInfo& frame = dataset.frame(i);
    stats.frames_without_gt += frame.gt_count == 0;
    if (frame.accepted) continue;
    if (pool_of_frame[i] >= 0) {
      // A trap pool: unbounded policies never return (reported as livelock, not counted
      // here); bounded always gives up.
      if (attempts_max > 0) stats.bounded_errors_per_epoch += 1;
      continue;
    }
    stats.resample_visits_per_epoch += 1;
    // Every policy here draws the next attempt uniformly from one candidate range (a single
    // frame for the deterministic ones), so the loop ends on a uniformly chosen accepted
    // candidate after a geometric number of draws with success probability v / n.
    const IndexRange candidates = policy.Candidates(i);
    const auto n = static_cast<double>(candidates.size());
    const auto v = static_cast<double>(accepted_prefix[candidates.end] - accepted_prefix[candidates.begin]);
    const auto continuing =
        static_cast<double>(continuing_prefix[candidates.end] - continuing_prefix[candidates.begin]);
    double extra = n / v;
    double success = 1.0;
    if (attempts_max > 0) {
      // At most attempts_max - 1 draws after the first load: a truncated geometric.
      const double miss = 1.0 - v / n;
      const double draws = static_cast<double>(attempts_max - 1);
      success = 1.0 - std::pow(miss, draws);
      extra = miss == 0.0 ? std::min(1.0, draws) : (1.0 - std::pow(miss, draws)) / (1.0 - miss);
      stats.bounded_errors_per_epoch += 1.0 - success;
    }
    stats.extra_loads_per_epoch += extra;
    stats.stream_breaks_per_epoch += success * continuing / v;
  }
  const auto& job = scenario.job();
  stats.epochs_in_job = static_cast<double>(job_iterations) * job.world_size() * job.samples_per_gpu() /
                        static_cast<double>(dataset.size());
  return stats;
}

// Whether the sampler can be built, and the batches per epoch of each rank when it can.
void CheckSampler(const Scenario& scenario, const Dataset& dataset, CheckReport& report) {
  const bool infinite = scenario.sampler().kind() == Sampler::infinite_group_each_sample_in_batch;
  report.sampler_assertion_fails = infinite && !InfiniteSamplerAssertionHolds(scenario, dataset);
  try {
    CheckSamplerConstructible(scenario, dataset, "sampler");
  } catch (const ScenarioError& error) {
    report.sampler_failure = error.what();
  }
  if (report.sampler_failure.empty()) {
    report.batches_per_epoch_by_rank = BatchesPerEpochByRank(scenario, dataset);
    const auto [low, high] =
        std::minmax_element(report.batches_per_epoch_by_rank.begin(), report.batches_per_epoch_by_rank.end());
    report.batches_equal = *low == *high;
  }
}

// The strong components of the resample graph, and per component whether an edge leaves it and
// whether it holds an accepted frame (closed classes without one are the trap pools).
struct Components {
  std::vector<int> of_vertex;
  std::vector<bool> has_exit;
  std::vector<bool> has_accepted;
};

Components FindComponents(const Dataset& dataset, const ResamplePolicy& policy, CheckReport& report) {
  ResampleGraph resample = BuildResampleGraph(dataset, policy);
  const auto vertices = boost::num_vertices(resample.graph);
  Components out;
  out.of_vertex.resize(vertices);
  const int components = boost::strong_components(
      resample.graph,
      boost::make_iterator_property_map(out.of_vertex.begin(), boost::get(boost::vertex_index, resample.graph)));
  out.has_exit.assign(components, false);
  out.has_accepted.assign(components, false);
  for (const auto& [from, to] : resample.edges) {
    if (out.of_vertex[from] != out.of_vertex[to]) out.has_exit[out.of_vertex[from]] = true;
  }
  for (int64_t i = 0; i < dataset.size(); ++i) {
    if (dataset.frame(i).accepted) out.has_accepted[out.of_vertex[i]] = true;
  }
  report.graph_vertices = vertices;
  report.graph_edges = resample.edges.size();
  report.closed_classes = static_cast<uint64_t>(std::count(out.has_exit.begin(), out.has_exit.end(), false));
  return out;
}

// A pool that starts at frame i: where it is (sub-dataset, group, scene).
TrapPool StartPool(const Dataset& dataset, int64_t i, bool bounded) {
  TrapPool pool;
  pool.kind = bounded ? PoolKind::kError : PoolKind::kLivelock;
  const FrameInfo& frame = dataset.frame(i);
  const SceneInfo& scene = dataset.scenes()[frame.scene];
  pool.subdataset = frame.subdataset;
  pool.subdataset_name = dataset.subdatasets()[frame.subdataset].name;
  pool.group = dataset.group_of(i);
  pool.scene = frame.scene;
  pool.scene_name = scene.name;
  pool.scene_index_in_subdataset = scene.index_in_subdataset;
  pool.first_frame_in_scene = frame.frame_in_scene;
  pool.first_frame = i;
  pool.scenes_spanned = 1;
  return pool;
}

// Gathers each trapping component's frames into report.pools (ascending, so pools come out in
// dataset order); returns the pool of each frame (-1: none).
std::vector<int32_t> GatherPools(const Dataset& dataset, const Components& components, bool bounded,
                                 CheckReport& report) {
  std::vector<int32_t> pool_of_component(components.has_exit.size(), -1);
  std::vector<int32_t> pool_of_frame(dataset.size(), -1);
  std::vector<uint32_t> last_scene_of_pool;
  for (int64_t i = 0; i < dataset.size(); ++i) {
    const int c = components.of_vertex[i];
    if (components.has_exit[c] || components.has_accepted[c]) continue;
    if (pool_of_component[c] < 0) {
      pool_of_component[c] = static_cast<int32_t>(report.pools.size());
      report.pools.push_back(StartPool(dataset, i, bounded));
      last_scene_of_pool.push_back(dataset.frame(i).scene);
    }
    TrapPool& pool = report.pools[pool_of_component[c]];
    pool.last_frame = i;
    pool.frames += 1;
    const FrameInfo& frame = dataset.frame(i);
    if (frame.scene != last_scene_of_pool[pool_of_component[c]]) {
      ++pool.scenes_spanned;
      last_scene_of_pool[pool_of_component[c]] = frame.scene;
    }
    if (frame.scene == pool.scene) pool.last_frame_in_scene = frame.frame_in_scene;
    pool_of_frame[i] = pool_of_component[c];
  }
  return pool_of_frame;
}

// The earliest first hit over all pools (by iteration, rank, slot).
void FindEarliestHit(const Scenario& scenario, const Dataset& dataset, const std::vector<int32_t>& pool_of_frame,
                     CheckReport& report) {
  FindFirstHits(scenario, dataset, pool_of_frame, report.pools, report.job_iterations);
  for (const TrapPool& pool : report.pools) {
    const auto& hit = pool.first_hit;
    if (!hit) continue;
    const auto& best = report.first_hit;
    if (!best || std::tie(hit->iteration, hit->rank, hit->slot) < std::tie(best->iteration, best->rank, best->slot)) {
      report.first_hit = hit;
    }
  }
}

}  // namespace

CheckReport RunPreflight(const Scenario& scenario, const Dataset& dataset) {
  CheckReport report;
  const auto& job = scenario.job();
  report.groups_num = dataset.groups_num();
  report.global_batch = uint64_t{job.world_size()} * job.samples_per_gpu();
  report.iterations_per_epoch = IterationsPerEpoch(scenario, dataset);
  report.job_iterations = JobIterations(scenario, dataset);
  CheckSampler(scenario, dataset, report);
  // Closed classes of the resample graph without an accepted frame.
  const auto policy = MakeResamplePolicy(scenario, dataset);
  const Components components = FindComponents(dataset, *policy, report);
  const bool bounded = scenario.resample().policy() == Resample::bounded;
  const std::vector<int32_t> pool_of_frame = GatherPools(dataset, components, bounded, report);
  // bounded always ends: with a sample, or with its error.
  report.terminates = bounded || report.pools.empty();
  if (!report.pools.empty() && report.sampler_failure.empty())
    FindEarliestHit(scenario, dataset, pool_of_frame, report);
  if (bounded && report.sampler_failure.empty() && dataset.accepted_frames() < dataset.size()) {
    report.first_bounded_error = FindFirstBoundedError(scenario, dataset, report.job_iterations);
  }
  report.job_fails = !report.sampler_failure.empty() || !report.terminates || report.first_hit.has_value() ||
                     report.first_bounded_error.has_value() || !report.batches_equal;
  report.statistics = ComputeStatistics(scenario, dataset, *policy, pool_of_frame, report.job_iterations);
  return report;
}

}  // namespace petrsim
