// The three training samplers of docs/reference/streampetr.md, section 4,, per rank, bit-exact with the Python
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

#include "data/dataset.h"
#include "data/torch_random.h"
#include "proto/scenario.pb.h"

namespace petrsim {

// One batch slot's draw at one iteration. A short last batch of an epoch (torch
// DistributedSampler when the rank's share is not a multiple of the batch size) leaves its
// missing slots at index -1.
struct SlotDraw {
  int64_t index = -1;
  int64_t group = -1;
  bool operator==(const SlotDraw&) const = default;
};

class RankSampler {
 public:
  virtual ~RankSampler() = default;
  // Fills the next out.size() / samples_per_gpu iterations: out[i * B + b] is slot b's draw at
  // the i-th of them. out.size() must be a multiple of B.
  virtual void NextBatches(std::span<SlotDraw> out) = 0;
};

// The infinite group id stream every rank builds: randperm(G) concatenated forever from one
// torch generator seeded with the sampler seed. Extended lazily. Consumers (the rank samplers
// reading it) report the lowest position they may still read; permutations below every
// consumer's mark are freed, so memory stays bounded however long the job runs.
class GroupStream {
 public:
  GroupStream(int64_t groups_num, uint32_t seed);
  int32_t at(uint64_t position) {
    PETRSIM_ASSERT(position >= first_position_);
    while (position >= first_position_ + stream_.size()) Extend();
    return stream_[position - first_position_];
  }
  int RegisterConsumer();
  void SetLowWater(int consumer, uint64_t position);
  uint64_t positions_held() const { return stream_.size(); }

 private:
  void Extend();
  int64_t groups_num_;
  TorchGenerator generator_;
  uint64_t first_position_ = 0;  // stream position of stream_[0], a multiple of groups_num_
  std::vector<int32_t> stream_;
  std::vector<uint64_t> low_water_;  // per consumer
};

// StreamPETR's sampler for one rank: global slot s = rank * B + b consumes stream elements
// s, s + W*B, s + 2*W*B, ...; each slot plays its group's indices in ascending order.
class InfiniteGroupSampler final : public RankSampler {
 public:
  // `stream` may be shared with the other ranks' samplers of the same job.
  InfiniteGroupSampler(const Dataset& dataset, std::shared_ptr<GroupStream> stream, uint32_t world_size,
                       uint32_t samples_per_gpu, uint32_t rank);
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
  int consumer_;
  uint64_t global_batch_;
  std::vector<Slot> slots_;
};

// The whole index list of one epoch of an epoch sampler, before it is split among ranks:
// mmdet DistributedGroupSampler's padded, chunk-shuffled list (rank r takes the contiguous
// slice [r * n, (r + 1) * n)), or torch DistributedSampler's padded or cut list (rank r takes
// positions r, r + W, r + 2W, ...), n = EpochSamplesPerRank.
std::vector<int64_t> EpochGlobalIndices(const Scenario& scenario, const Dataset& dataset, uint64_t epoch);

// Epoch lists shared by the ranks of one job: the two most recent epochs are kept, so ranks
// that advance together (check's scan, the simulator) compute each epoch's list once instead of
// once per rank; a rank that falls further behind has its epoch recomputed. Not thread-safe.
class EpochLists {
 public:
  EpochLists(const Scenario& scenario, const Dataset& dataset);
  const std::vector<int64_t>& Get(uint64_t epoch);

 private:
  const Scenario& scenario_;
  const Dataset& dataset_;
  struct Slot {
    uint64_t epoch = 0;
    bool valid = false;
    std::vector<int64_t> indices;
  };
  Slot slots_[2];
  int next_slot_ = 0;
};

// Epoch samplers for one rank: batch i of an epoch is the rank's share [i*B, (i+1)*B).
// Iterations run on into the next epoch, re-seeded with seed + epoch (mmcv's IterLoader).
class EpochRankSampler final : public RankSampler {
 public:
  EpochRankSampler(const Scenario& scenario, const Dataset& dataset, std::shared_ptr<EpochLists> lists, uint32_t rank);
  void NextBatches(std::span<SlotDraw> out) override;

 private:
  const Dataset& dataset_;
  std::shared_ptr<EpochLists> lists_;
  uint32_t rank_;
  uint32_t world_size_;
  uint32_t samples_per_gpu_;
  bool contiguous_;  // mmdet: contiguous slice; torch: strided
  uint64_t per_rank_;
  uint64_t epoch_ = 0;
  uint64_t cursor_ = 0;  // position in the rank's share of the current epoch
};

// mmdet DistributedGroupSampler's index list of `rank` for `epoch` (docs/reference/streampetr.md, section 4).
std::vector<int64_t> DistributedGroupSamplerIndices(const Dataset& dataset, uint32_t world_size,
                                                    uint32_t samples_per_gpu, uint32_t rank, uint32_t seed,
                                                    uint64_t epoch);
// torch DistributedSampler's index list of `rank` for `epoch`.
std::vector<int64_t> TorchDistributedSamplerIndices(int64_t dataset_size, uint32_t world_size, uint32_t rank,
                                                    bool shuffle, bool drop_last, uint32_t seed, uint64_t epoch);
// The most indices one epoch's list may hold (mmdet pads every group to a multiple of W * B).
inline constexpr uint64_t kEpochListMax = 200'000'000;

// Samples per rank per epoch of the epoch samplers (equal on every rank for both).
uint64_t EpochSamplesPerRank(const Scenario& scenario, const Dataset& dataset);

// The sampler assertion of InfiniteGroupEachSampleInBatchSampler: groups_num >= W * B.
bool InfiniteSamplerAssertionHolds(const Scenario& scenario, const Dataset& dataset);

// Throws ScenarioError, prefixed by `display_name`, where the Python sampler would fail at
// construction: InfiniteGroupEachSampleInBatchSampler's groups_num >= W * B assertion, or an
// empty DataLoader (torch DistributedSampler with drop_last and fewer frames than ranks); and
// where petrsim's limits refuse the job (an epoch list beyond kEpochListMax indices).
void CheckSamplerConstructible(const Scenario& scenario, const Dataset& dataset, const std::string& display_name);

// Makes the samplers of the ranks of one job; they share the job-wide state (the infinite
// group stream, or the epoch lists), so N ranks advancing together cost about one. Samplers
// hold the shared state themselves and may outlive the factory. Throws like
// CheckSamplerConstructible (with "scenario" as the name).
class SamplerFactory {
 public:
  SamplerFactory(const Scenario& scenario, const Dataset& dataset);
  std::unique_ptr<RankSampler> ForRank(uint32_t rank) const;

 private:
  const Scenario& scenario_;
  const Dataset& dataset_;
  std::shared_ptr<GroupStream> stream_;
  std::shared_ptr<EpochLists> epoch_lists_;
};

// One rank's sampler on its own (its own stream or lists).
std::unique_ptr<RankSampler> MakeRankSampler(const Scenario& scenario, const Dataset& dataset, uint32_t rank);

// Iterations per epoch: job.iterations_per_epoch, or 28130 // (W * B) for the infinite sampler
// (StreamPETR's configs, at least 1), or ceil(samples per rank / B) batches for the epoch samplers.
uint64_t IterationsPerEpoch(const Scenario& scenario, const Dataset& dataset);
// nuScenes train's keyframes, which StreamPETR's configs divide by the global batch whatever the
// dataset (num_iters_per_epoch = 28130 // (num_gpus * batch_size)).
inline constexpr uint64_t kStreamPetrEpochSamples = 28130;
// Where IterationsPerEpoch's figure comes from, for reports: "job.iterations_per_epoch",
// "StreamPETR's configs: 28130 // (8 GPUs x 2 samples)" or "the sampler's batches per rank".
std::string IterationsPerEpochSource(const Scenario& scenario);
// The job length: job.iterations, or epochs (default 1) x IterationsPerEpoch. Throws like
// CheckJobLength.
uint64_t JobIterations(const Scenario& scenario, const Dataset& dataset);
// Throws ScenarioError naming `display_name` when epochs x IterationsPerEpoch exceeds
// kIterationsMax (scenario_validation.h): refused, never wrapped. CheckSamplerConstructible
// calls it first. Returns the IterationsPerEpoch it checked (0 for a job sized by job.iterations).
uint64_t CheckJobLength(const Scenario& scenario, const Dataset& dataset, const std::string& display_name);

}  // namespace petrsim
