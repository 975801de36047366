// The three training samplers of reference section 4, per rank, bit-exact with the Python
// code for the same seed: StreamPETR's InfiniteGroupEachSampleInBatchSampler, mmdet's
// DistributedGroupSampler and torch's DistributedSampler (the last two epoch based, re-seeded
// with seed + epoch at every epoch as mmcv's IterLoader does).
//
// Not thread-safe: one RankSampler per rank; a GroupStream may be shared by the ranks of one
// simulated job in one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/dataset.h"
#include "model/scenario.pb.h"
#include "model/torch_random.h"

namespace petrsim {

// One batch slot's draw at one iteration. A short last batch of an epoch (torch
// DistributedSampler when the rank's share is not a multiple of the batch size) leaves its
// missing slots at index -1.
struct SlotDraw {
  int64_t index = -1;
  int64_t group = -1;
};

class RankSampler {
 public:
  virtual ~RankSampler() = default;
  // Fills the next out.size() / samples_per_gpu iterations: out[i * B + b] is slot b's draw at
  // the i-th of them. out.size() must be a multiple of B.
  virtual void NextBatches(std::span<SlotDraw> out) = 0;
};

// The infinite group id stream every rank builds: randperm(G) concatenated forever from one
// torch generator seeded with the sampler seed. Extended lazily; positions only grow.
class GroupStream {
 public:
  GroupStream(int64_t groups_num, uint32_t seed);
  int32_t at(uint64_t position) {
    while (position >= stream_.size()) Extend();
    return stream_[position];
  }

 private:
  void Extend();
  int64_t groups_num_;
  TorchGenerator generator_;
  std::vector<int32_t> stream_;
};

// StreamPETR's sampler for one rank: global slot s = rank * B + b consumes stream elements
// s, s + W*B, s + 2*W*B, ...; each slot plays its group's indices in ascending order.
class InfiniteGroupSampler final : public RankSampler {
 public:
  // `stream` may be shared with the other ranks' samplers of the same job.
  InfiniteGroupSampler(const Dataset& dataset, std::shared_ptr<GroupStream> stream,
                       uint32_t world_size, uint32_t samples_per_gpu, uint32_t rank);
  void NextBatches(std::span<SlotDraw> out) override;

 private:
  struct Slot {
    uint64_t next_position;  // next stream position this slot takes a group from
    int64_t group = -1;
    int64_t cursor = 0;  // into the dataset's group member table
    int64_t end = 0;
  };
  const Dataset& dataset_;
  std::shared_ptr<GroupStream> stream_;
  uint64_t global_batch_;
  std::vector<Slot> slots_;
};

// Epoch samplers: each epoch the rank's index list is recomputed from seed + epoch; batch i of
// the epoch is list[i*B, (i+1)*B). Iterations run on into the next epoch (IterLoader).
class EpochRankSampler final : public RankSampler {
 public:
  EpochRankSampler(const Scenario& scenario, const Dataset& dataset, uint32_t rank);
  void NextBatches(std::span<SlotDraw> out) override;

 private:
  void StartEpoch();
  const Scenario& scenario_;
  const Dataset& dataset_;
  uint32_t rank_;
  uint32_t samples_per_gpu_;
  uint64_t epoch_ = 0;
  bool started_ = false;
  std::vector<int64_t> indices_;  // this rank's list for the current epoch
  uint64_t cursor_ = 0;
};

// mmdet DistributedGroupSampler's index list of `rank` for `epoch` (reference section 4).
std::vector<int64_t> DistributedGroupSamplerIndices(const Dataset& dataset, uint32_t world_size,
                                                    uint32_t samples_per_gpu, uint32_t rank,
                                                    uint32_t seed, uint64_t epoch);
// torch DistributedSampler's index list of `rank` for `epoch`.
std::vector<int64_t> TorchDistributedSamplerIndices(int64_t dataset_size, uint32_t world_size,
                                                    uint32_t rank, bool shuffle, bool drop_last,
                                                    uint32_t seed, uint64_t epoch);
// Samples per rank per epoch of the epoch samplers (equal on every rank for both).
uint64_t EpochSamplesPerRank(const Scenario& scenario, const Dataset& dataset);

// The sampler assertion of InfiniteGroupEachSampleInBatchSampler: groups_num >= W * B.
bool InfiniteSamplerAssertionHolds(const Scenario& scenario, const Dataset& dataset);

// Throws ScenarioError, prefixed by `display_name`, where the Python sampler would fail at
// construction: InfiniteGroupEachSampleInBatchSampler's groups_num >= W * B assertion, or an
// empty DataLoader (torch DistributedSampler with drop_last and fewer frames than ranks).
void CheckSamplerConstructible(const Scenario& scenario, const Dataset& dataset,
                               const std::string& display_name);

// Makes rank `rank`'s sampler. Throws ScenarioError like CheckSamplerConstructible. `shared_stream` (infinite sampler only) is
// used when given, so ranks of one job share one stream.
std::unique_ptr<RankSampler> MakeRankSampler(const Scenario& scenario, const Dataset& dataset,
                                             uint32_t rank,
                                             std::shared_ptr<GroupStream> shared_stream = {});

// Iterations per epoch: job.iterations_per_epoch, or len(dataset) // (W * B) for the infinite
// sampler (at least 1), or ceil(samples per rank / B) batches for the epoch samplers.
uint64_t IterationsPerEpoch(const Scenario& scenario, const Dataset& dataset);
// The job length: job.iterations, or epochs (default 1) x IterationsPerEpoch.
uint64_t JobIterations(const Scenario& scenario, const Dataset& dataset);

}  // namespace petrsim
