// The static pre-flight; see preflight.h.
#include "model/preflight.h"

// GCC 12 reports a false -Wmaybe-uninitialized inside Boost.Graph's edge iterators once they
// are inlined here (boost/graph/detail/adj_list_edge_iterator.hpp); the code is Boost's.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>

#include <algorithm>
#include <map>

#include "model/assert.h"
#include "model/resample_policy.h"
#include "model/sampler.h"

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
  result.graph =
      Graph(edges.begin(), edges.end(), static_cast<Graph::vertices_size_type>(next_vertex));
  result.edges = std::move(edges);
  return result;
}

// Finds the earliest sampler draw of a frame in each pool, scanning each rank's stream up to
// the job length (or the best hit found so far).
void FindFirstHits(const Scenario& scenario, const Dataset& dataset,
                   const std::vector<int32_t>& pool_of_frame, std::vector<TrapPool>& pools,
                   uint64_t job_iterations) {
  const auto& job = scenario.job();
  const uint32_t batch = job.samples_per_gpu();
  const uint32_t workers = std::max<uint32_t>(1, job.workers_per_gpu());
  const SamplerFactory samplers(scenario, dataset);
  constexpr uint64_t kBlock = 256;
  std::vector<SlotDraw> draws(kBlock * batch);
  // Draws at or after this iteration cannot improve any pool's first hit.
  auto scan_limit = [&]() {
    uint64_t limit = 0;
    for (const auto& pool : pools) {
      if (!pool.first_hit) return job_iterations;
      limit = std::max(limit, pool.first_hit->iteration + 1);
    }
    return std::min(limit, job_iterations);
  };
  for (uint32_t rank = 0; rank < job.world_size(); ++rank) {
    const auto sampler = samplers.ForRank(rank);
    for (uint64_t start = 0; start < scan_limit(); start += kBlock) {
      const uint64_t count = std::min(kBlock, job_iterations - start);
      sampler->NextBatches(std::span<SlotDraw>(draws.data(), count * batch));
      for (uint64_t i = 0; i < count * batch; ++i) {
        if (draws[i].index < 0) continue;
        const int32_t pool = pool_of_frame[draws[i].index];
        if (pool < 0) continue;
        const uint64_t iteration = start + i / batch;
        auto& hit = pools[pool].first_hit;
        // Ranks are scanned in order and each rank's draws in time order, so a later hit (or a
        // tie with a lower rank or slot) never replaces an earlier one.
        if (hit && hit->iteration <= iteration) continue;
        hit = SamplerHit{iteration, rank, static_cast<uint32_t>(i % batch),
                         static_cast<uint32_t>(iteration % workers), draws[i].index,
                         draws[i].group};
      }
    }
  }
}

PolicyStatistics ComputeStatistics(const Scenario& scenario, const Dataset& dataset,
                                   const std::vector<int32_t>& pool_of_frame,
                                   uint64_t job_iterations) {
  PolicyStatistics stats;
  stats.frames = dataset.size();
  stats.accepted_frames = dataset.accepted_frames();
  stats.rejected_frames = stats.frames - stats.accepted_frames;
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
  const auto policy = scenario.resample().policy();
  for (int64_t i = 0; i < dataset.size(); ++i) {
    const FrameInfo& frame = dataset.frame(i);
    stats.frames_without_gt += frame.gt_count == 0;
    if (frame.accepted || pool_of_frame[i] >= 0) continue;
    stats.resample_visits_per_epoch += 1;
    stats.stream_breaks_per_epoch += 1;  // the frame returned is never the one asked for
    // Expected loads after the first: uniform draws over n candidates of which v are accepted
    // take n / v draws on average (geometric); deterministic policies take one.
    double extra = 1;
    if (policy == Resample::in_group || policy == Resample::drop_empty_groups ||
        policy == Resample::bounded) {
      const ChunkInfo& chunk = dataset.chunks()[frame.chunk];
      extra = static_cast<double>(chunk.end - chunk.begin) / chunk.accepted_frames;
    } else if (policy == Resample::global) {
      extra = static_cast<double>(dataset.size()) / static_cast<double>(dataset.accepted_frames());
    }
    stats.extra_loads_per_epoch += extra;
  }
  const auto& job = scenario.job();
  stats.epochs_in_job = static_cast<double>(job_iterations) * job.world_size() *
                        job.samples_per_gpu() / static_cast<double>(dataset.size());
  return stats;
}

}  // namespace

CheckReport RunPreflight(const Scenario& scenario, const Dataset& dataset) {
  CheckReport report;
  const auto& job = scenario.job();
  report.groups_num = dataset.groups_num();
  report.global_batch = uint64_t{job.world_size()} * job.samples_per_gpu();
  report.iterations_per_epoch = IterationsPerEpoch(scenario, dataset);
  report.job_iterations = JobIterations(scenario, dataset);
  const bool infinite = scenario.sampler().kind() == Sampler::infinite_group_each_sample_in_batch;
  report.sampler_assertion_fails = infinite && !InfiniteSamplerAssertionHolds(scenario, dataset);
  if (!infinite) {
    // Both epoch samplers give every rank the same share; computed per rank, not assumed.
    const uint64_t samples = EpochSamplesPerRank(scenario, dataset);
    const uint64_t batches = (samples + job.samples_per_gpu() - 1) / job.samples_per_gpu();
    report.batches_per_epoch_by_rank.assign(job.world_size(), batches);
    report.batches_equal = std::all_of(report.batches_per_epoch_by_rank.begin(),
                                       report.batches_per_epoch_by_rank.end(),
                                       [&](uint64_t b) { return b == batches; });
  }

  // Closed classes of the resample graph without an accepted frame.
  const auto policy = MakeResamplePolicy(scenario, dataset);
  ResampleGraph resample = BuildResampleGraph(dataset, *policy);
  const auto vertices = boost::num_vertices(resample.graph);
  std::vector<int> component(vertices);
  const int components = boost::strong_components(
      resample.graph,
      boost::make_iterator_property_map(component.begin(),
                                        boost::get(boost::vertex_index, resample.graph)));
  std::vector<bool> has_exit(components, false);
  std::vector<bool> has_accepted(components, false);
  for (const auto& [from, to] : resample.edges) {
    if (component[from] != component[to]) has_exit[component[from]] = true;
  }
  for (int64_t i = 0; i < dataset.size(); ++i) {
    if (dataset.frame(i).accepted) has_accepted[component[i]] = true;
  }
  report.graph_vertices = vertices;
  report.graph_edges = resample.edges.size();
  report.closed_classes =
      static_cast<uint64_t>(std::count(has_exit.begin(), has_exit.end(), false));

  // Gather each trapping component's frames (ascending, so pools come out in dataset order).
  std::vector<int32_t> pool_of_component(components, -1);
  std::vector<int32_t> pool_of_frame(dataset.size(), -1);
  const bool bounded = scenario.resample().policy() == Resample::bounded;
  std::vector<uint32_t> last_scene_of_pool;
  for (int64_t i = 0; i < dataset.size(); ++i) {
    const int c = component[i];
    if (has_exit[c] || has_accepted[c]) continue;
    if (pool_of_component[c] < 0) {
      pool_of_component[c] = static_cast<int32_t>(report.pools.size());
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
      report.pools.push_back(pool);
      last_scene_of_pool.push_back(frame.scene);
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
  report.terminates = !bounded ? report.pools.empty() : true;

  if (!report.pools.empty() && !report.sampler_assertion_fails) {
    FindFirstHits(scenario, dataset, pool_of_frame, report.pools, report.job_iterations);
    for (size_t p = 0; p < report.pools.size(); ++p) {
      const auto& hit = report.pools[p].first_hit;
      if (!hit) continue;
      const auto& best = report.first_hit;
      if (!best || std::tie(hit->iteration, hit->rank, hit->slot) <
                       std::tie(best->iteration, best->rank, best->slot)) {
        report.first_hit = hit;
        report.first_hit_pool = static_cast<int>(p);
      }
    }
  }
  report.job_fails = report.sampler_assertion_fails || report.first_hit.has_value() ||
                     !report.terminates || !report.batches_equal;
  report.statistics = ComputeStatistics(scenario, dataset, pool_of_frame, report.job_iterations);
  return report;
}

}  // namespace petrsim
