// `petrsim check`: the static pre-flight. It builds the resample graph (frames as vertices,
// possible resample moves as edges, through one hub vertex per candidate range) with Boost.Graph,
// finds every closed class (a strongly connected component with no way out) that holds no
// accepted frame - a pool the resample loop can never leave - and asks the sampler when it will
// first draw a frame of each pool. No simulation, no clock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "proto/scenario.pb.h"

namespace petrsim {

// The first draw of a pool's frame by the sampler.
struct SamplerHit {
  uint64_t iteration = 0;
  uint32_t rank = 0;
  uint32_t slot = 0;
  uint32_t worker = 0;  // iteration mod workers: the worker that gets this batch
  int64_t index = 0;    // the dataset index drawn
  int64_t group = 0;    // its sampler group
};

enum class PoolKind {
  kLivelock,  // the loop never ends (unbounded policies)
  kError,     // the bounded policy's error after attempts_max loads
};

// A closed class of the resample graph with no accepted frame, in user terms.
struct TrapPool {
  PoolKind kind = PoolKind::kLivelock;
  uint32_t subdataset = 0;
  std::string subdataset_name;
  int64_t group = 0;   // sampler group of its first frame
  uint32_t scene = 0;  // dataset-wide scene index of its first frame
  std::string scene_name;
  uint32_t scene_index_in_subdataset = 0;
  uint32_t first_frame_in_scene = 0;
  uint32_t last_frame_in_scene = 0;
  int64_t first_frame = 0;  // dataset indices, inclusive
  int64_t last_frame = 0;
  uint64_t frames = 0;
  uint64_t scenes_spanned = 1;
  std::optional<SamplerHit> first_hit;  // within the job's iterations, or none
};

// Per-epoch statistics of the resample policy (one pass over the dataset, each frame drawn
// once), from the pool compositions; frames of trap pools are excluded.
struct PolicyStatistics {
  uint64_t frames = 0;
  uint64_t accepted_frames = 0;
  uint64_t frames_without_gt = 0;
  uint64_t chunks = 0;
  uint64_t chunks_all_rejected = 0;     // every frame has zero GT
  uint64_t chunks_partly_rejected = 0;  // some frames have zero GT
  uint64_t chunks_dropped = 0;          // drop_empty_groups
  uint64_t frames_dropped = 0;
  double resample_visits_per_epoch = 0;  // draws of a frame without GT
  double extra_loads_per_epoch = 0;      // loads after the first, expected
  // Expected frames fed out of order with prev_exists true (memory carried over from another
  // place of the stream): a resample that lands on a frame that does not start its chunk.
  double stream_breaks_per_epoch = 0;
  // bounded only: expected getitem calls per epoch that give up (the job fails).
  double bounded_errors_per_epoch = 0;
  double epochs_in_job = 0;  // job samples / dataset size
};

struct CheckReport {
  bool terminates = true;                // no livelock pool exists
  bool job_fails = false;                // livelock hit, error hit, or sampler assertion
  std::vector<TrapPool> pools;           // livelock and error pools, in dataset order
  std::optional<SamplerHit> first_hit;   // earliest over the livelock/error pools
  bool sampler_assertion_fails = false;  // groups_num < W * B (infinite sampler)
  std::string sampler_failure;           // why the sampler cannot be built; empty if it can
  int64_t groups_num = 0;
  uint64_t global_batch = 0;
  // Batches per epoch of each rank: the DataLoader's length (epoch samplers) or the
  // iterations per epoch (infinite sampler), less the uneven_batches faults.
  std::vector<uint64_t> batches_per_epoch_by_rank;
  bool batches_equal = true;
  // bounded only: the first getitem that gives up, replayed exactly with the workers' numpy
  // draws (the pools above are the frames that always give up; a partly empty chunk can too).
  std::optional<SamplerHit> first_bounded_error;
  uint64_t iterations_per_epoch = 0;
  uint64_t job_iterations = 0;
  uint64_t graph_vertices = 0;
  uint64_t graph_edges = 0;
  uint64_t closed_classes = 0;
  PolicyStatistics statistics;
};

CheckReport RunPreflight(const Scenario& scenario, const Dataset& dataset);

}  // namespace petrsim
