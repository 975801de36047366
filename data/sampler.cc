// Samplers; see sampler.h.
#include "data/sampler.h"

#include <algorithm>

#include <fmt/format.h>

#include "base/assert.h"
#include "base/error.h"
#include "scenario/scenario_defaults.h"
#include "scenario/scenario_validation.h"

namespace petrsim {

GroupStream::GroupStream(int64_t groups_num, uint32_t seed) : groups_num_(groups_num), generator_(seed) {
  PETRSIM_ASSERT(groups_num >= 1);
  PETRSIM_ASSERT(groups_num < kTorchRandpermSmallMax);
}

void GroupStream::Extend() {
  // Free the permutations every consumer has left behind before growing; erasing only when at
  // least half the buffer goes keeps the cost amortised.
  if (!low_water_.empty()) {
    const uint64_t low = *std::min_element(low_water_.begin(), low_water_.end());
    const uint64_t releasable = low > first_position_ ? (low - first_position_) / groups_num_ * groups_num_ : 0;
    if (releasable > 0 && releasable * 2 >= stream_.size()) {
      stream_.erase(stream_.begin(), stream_.begin() + static_cast<int64_t>(releasable));
      first_position_ += releasable;
    }
  }
  const size_t old_size = stream_.size();
  stream_.resize(old_size + groups_num_);
  TorchRandperm(generator_, std::span<int32_t>(stream_.data() + old_size, groups_num_));
}

int GroupStream::RegisterConsumer() {
  low_water_.push_back(first_position_);
  return static_cast<int>(low_water_.size()) - 1;
}

void GroupStream::SetLowWater(int consumer, uint64_t position) {
  PETRSIM_ASSERT(position >= low_water_[consumer]);
  low_water_[consumer] = position;
}

InfiniteGroupSampler::InfiniteGroupSampler(const Dataset& dataset, std::shared_ptr<GroupStream> stream,
                                           uint32_t world_size, uint32_t samples_per_gpu, uint32_t rank)
    : dataset_(dataset),
      stream_(std::move(stream)),
      consumer_(stream_->RegisterConsumer()),
      global_batch_(uint64_t{world_size} * samples_per_gpu),
      slots_(samples_per_gpu) {
  PETRSIM_ASSERT(rank < world_size);
  for (uint32_t b = 0; b < samples_per_gpu; ++b) {
    slots_[b].next_position = uint64_t{rank} * samples_per_gpu + b;
  }
}

void InfiniteGroupSampler::NextBatches(std::span<SlotDraw> out) {
  const size_t batch = slots_.size();
  PETRSIM_ASSERT(out.size() % batch == 0);
  const auto offsets_base = dataset_.group_indices(0).data();
  for (size_t i = 0; i < out.size(); i += batch) {
    for (size_t b = 0; b < batch; ++b) {
      Slot& slot = slots_[b];
      if (slot.cursor == slot.end) {
        // The slot's buffer is empty: take its next group and load its indices in order.
        slot.group = stream_->at(slot.next_position);
        slot.next_position += global_batch_;
        const auto members = dataset_.group_indices(slot.group);
        slot.cursor = members.data() - offsets_base;
        slot.end = slot.cursor + static_cast<int64_t>(members.size());
        PETRSIM_ASSERT(slot.end > slot.cursor);
      }
      out[i + b] = SlotDraw{offsets_base[slot.cursor++], slot.group};
    }
  }
  uint64_t low = slots_[0].next_position;
  for (const Slot& slot : slots_) low = std::min(low, slot.next_position);
  stream_->SetLowWater(consumer_, low);
}

namespace {

// mmdet DistributedGroupSampler.__iter__ up to (not including) the per-rank slice.
std::vector<int64_t> DistributedGroupSamplerGlobal(const Dataset& dataset, uint32_t world_size,
                                                   uint32_t samples_per_gpu, uint32_t seed, uint64_t epoch) {
  const uint64_t per_round = uint64_t{samples_per_gpu} * world_size;
  TorchGenerator generator(epoch + seed);
  std::vector<int64_t> indices;
  uint64_t padded_total = 0;
  for (int64_t g = 0; g < dataset.groups_num(); ++g) {
    padded_total += (dataset.group_indices(g).size() + per_round - 1) / per_round * per_round;
  }
  indices.reserve(padded_total);
  std::vector<int64_t> permutation;
  for (int64_t g = 0; g < dataset.groups_num(); ++g) {
    const auto members = dataset.group_indices(g);
    const auto size = static_cast<int64_t>(members.size());
    if (size == 0) continue;
    permutation.resize(size);
    TorchRandperm(generator, std::span<int64_t>(permutation));
    // The shuffled group, then padding to a multiple of B * W: the shuffled group repeated,
    // then a prefix of it; i.e. element k of the padded group is shuffled[k mod size].
    const int64_t padded = static_cast<int64_t>((size + per_round - 1) / per_round * per_round);
    const size_t start = indices.size();
    indices.resize(start + padded);
    int64_t* out = indices.data() + start;
    for (int64_t k = 0; k < size; ++k) out[k] = members[permutation[k]];
    for (int64_t k = size; k < padded; ++k) out[k] = out[k - size];
  }
  // Shuffle chunks of B.
  const int64_t chunks = static_cast<int64_t>(indices.size() / samples_per_gpu);
  permutation.resize(chunks);
  TorchRandperm(generator, std::span<int64_t>(permutation));
  std::vector<int64_t> result(indices.size());
  for (int64_t c = 0; c < chunks; ++c) {
    std::copy_n(indices.begin() + permutation[c] * samples_per_gpu, samples_per_gpu,
                result.begin() + c * samples_per_gpu);
  }
  return result;
}

// torch DistributedSampler.__iter__ up to (not including) the per-rank stride.
std::vector<int64_t> TorchDistributedSamplerGlobal(int64_t dataset_size, uint32_t world_size, bool shuffle,
                                                   bool drop_last, uint32_t seed, uint64_t epoch) {
  PETRSIM_ASSERT(dataset_size >= 1);
  const int64_t w = world_size;
  int64_t num_samples;
  if (drop_last && dataset_size % w != 0) {
    // ceil((N - W) / W), which is 0 when N < W.
    num_samples = dataset_size < w ? 0 : (dataset_size - w + w - 1) / w;
  } else {
    num_samples = (dataset_size + w - 1) / w;
  }
  const int64_t total = num_samples * w;
  std::vector<int64_t> indices(dataset_size);
  if (shuffle) {
    TorchGenerator generator(seed + epoch);
    TorchRandperm(generator, std::span<int64_t>(indices));
  } else {
    for (int64_t i = 0; i < dataset_size; ++i) indices[i] = i;
  }
  // Pad by wrapping around (repeating the whole list when the padding exceeds it), or cut.
  for (int64_t k = 0; total > dataset_size && k < total - dataset_size; ++k) {
    indices.push_back(indices[k % dataset_size]);
  }
  indices.resize(total);
  return indices;
}

}  // namespace

std::vector<int64_t> DistributedGroupSamplerIndices(const Dataset& dataset, uint32_t world_size,
                                                    uint32_t samples_per_gpu, uint32_t rank, uint32_t seed,
                                                    uint64_t epoch) {
  const auto global = DistributedGroupSamplerGlobal(dataset, world_size, samples_per_gpu, seed, epoch);
  const uint64_t per_rank = global.size() / world_size;
  return {global.begin() + per_rank * rank, global.begin() + per_rank * (rank + 1)};
}

std::vector<int64_t> TorchDistributedSamplerIndices(int64_t dataset_size, uint32_t world_size, uint32_t rank,
                                                    bool shuffle, bool drop_last, uint32_t seed, uint64_t epoch) {
  const auto global = TorchDistributedSamplerGlobal(dataset_size, world_size, shuffle, drop_last, seed, epoch);
  std::vector<int64_t> result;
  for (size_t position = rank; position < global.size(); position += world_size) {
    result.push_back(global[position]);
  }
  return result;
}

std::vector<int64_t> EpochGlobalIndices(const Scenario& scenario, const Dataset& dataset, uint64_t epoch) {
  const auto& job = scenario.job();
  if (scenario.sampler().kind() == Sampler::distributed_group) {
    return DistributedGroupSamplerGlobal(dataset, job.world_size(), job.samples_per_gpu(), job.seed(), epoch);
  }
  return TorchDistributedSamplerGlobal(dataset.size(), job.world_size(), scenario.sampler().shuffle(),
                                       scenario.sampler().drop_last(), job.seed(), epoch);
}

EpochLists::EpochLists(const Scenario& scenario, const Dataset& dataset) : scenario_(scenario), dataset_(dataset) {}

const std::vector<int64_t>& EpochLists::Get(uint64_t epoch) {
  for (const Slot& slot : slots_) {
    if (slot.valid && slot.epoch == epoch) return slot.indices;
  }
  Slot& slot = slots_[next_slot_];
  next_slot_ = 1 - next_slot_;
  slot.indices = EpochGlobalIndices(scenario_, dataset_, epoch);
  slot.epoch = epoch;
  slot.valid = true;
  return slot.indices;
}

uint64_t EpochSamplesPerRank(const Scenario& scenario, const Dataset& dataset) {
  const uint64_t w = scenario.job().world_size();
  const uint64_t b = scenario.job().samples_per_gpu();
  const auto& sampler = scenario.sampler();
  if (sampler.kind() == Sampler::distributed_group) {
    uint64_t samples = 0;
    for (int64_t g = 0; g < dataset.groups_num(); ++g) {
      const uint64_t size = dataset.group_indices(g).size();
      samples += (size + b * w - 1) / (b * w) * b;
    }
    return samples;
  }
  const uint64_t n = static_cast<uint64_t>(dataset.size());
  if (sampler.drop_last() && n % w != 0) return n < w ? 0 : (n - w + w - 1) / w;
  return (n + w - 1) / w;
}

EpochRankSampler::EpochRankSampler(const Scenario& scenario, const Dataset& dataset, std::shared_ptr<EpochLists> lists,
                                   uint32_t rank)
    : dataset_(dataset),
      lists_(std::move(lists)),
      rank_(rank),
      world_size_(scenario.job().world_size()),
      samples_per_gpu_(scenario.job().samples_per_gpu()),
      contiguous_(scenario.sampler().kind() == Sampler::distributed_group),
      per_rank_(EpochSamplesPerRank(scenario, dataset)) {
  PETRSIM_ASSERT(per_rank_ > 0);
  PETRSIM_ASSERT(rank < world_size_);
}

void EpochRankSampler::NextBatches(std::span<SlotDraw> out) {
  PETRSIM_ASSERT(out.size() % samples_per_gpu_ == 0);
  const std::vector<int64_t>* list = &lists_->Get(epoch_);
  for (size_t i = 0; i < out.size(); i += samples_per_gpu_) {
    if (cursor_ >= per_rank_) {
      ++epoch_;
      cursor_ = 0;
      list = &lists_->Get(epoch_);
    }
    for (uint32_t b = 0; b < samples_per_gpu_; ++b) {
      if (cursor_ < per_rank_) {
        const uint64_t position = contiguous_ ? per_rank_ * rank_ + cursor_ : rank_ + cursor_ * world_size_;
        const int64_t index = (*list)[position];
        ++cursor_;
        out[i + b] = SlotDraw{index, dataset_.group_of(index)};
      } else {
        out[i + b] = SlotDraw{};  // short last batch of the epoch
      }
    }
  }
}

bool InfiniteSamplerAssertionHolds(const Scenario& scenario, const Dataset& dataset) {
  return dataset.groups_num() >= int64_t{scenario.job().world_size()} * scenario.job().samples_per_gpu();
}

void CheckSamplerConstructible(const Scenario& scenario, const Dataset& dataset, const std::string& display_name) {
  const auto& job = scenario.job();
  CheckJobLength(scenario, dataset, display_name);
  if (scenario.sampler().kind() == Sampler::infinite_group_each_sample_in_batch &&
      !InfiniteSamplerAssertionHolds(scenario, dataset)) {
    throw ScenarioError(display_name +
                        ": job.world_size * job.samples_per_gpu: "
                        "InfiniteGroupEachSampleInBatchSampler asserts groups_num >= world_size * "
                        "samples_per_gpu, got " +
                        std::to_string(dataset.groups_num()) + " < " + std::to_string(job.world_size()) + " * " +
                        std::to_string(job.samples_per_gpu()) +
                        " (the real job fails with an AssertionError when it builds the sampler)");
  }
  if (scenario.sampler().kind() == Sampler::infinite_group_each_sample_in_batch) return;
  const uint64_t per_rank = EpochSamplesPerRank(scenario, dataset);
  if (per_rank * job.world_size() > kEpochListMax) {
    throw ScenarioError(display_name + ": sampler.kind: one epoch's index list would hold " +
                        std::to_string(per_rank * job.world_size()) +
                        " indices (groups padded to multiples of world_size * samples_per_gpu); "
                        "petrsim's limit is " +
                        std::to_string(kEpochListMax));
  }
  if (per_rank == 0) {
    throw ScenarioError(display_name +
                        ": sampler.drop_last: torch DistributedSampler gives "
                        "every rank 0 samples (dataset of " +
                        std::to_string(dataset.size()) + " frames < job.world_size " +
                        std::to_string(job.world_size()) + "): the DataLoader would be empty");
  }
}

SamplerFactory::SamplerFactory(const Scenario& scenario, const Dataset& dataset)
    : scenario_(scenario), dataset_(dataset) {
  CheckSamplerConstructible(scenario, dataset, "scenario");
  if (scenario.sampler().kind() == Sampler::infinite_group_each_sample_in_batch) {
    stream_ = std::make_shared<GroupStream>(dataset.groups_num(), scenario.job().seed());
  } else {
    epoch_lists_ = std::make_shared<EpochLists>(scenario, dataset);
  }
}

std::unique_ptr<RankSampler> SamplerFactory::ForRank(uint32_t rank) const {
  const auto& job = scenario_.job();
  if (stream_) {
    return std::make_unique<InfiniteGroupSampler>(dataset_, stream_, job.world_size(), job.samples_per_gpu(), rank);
  }
  return std::make_unique<EpochRankSampler>(scenario_, dataset_, epoch_lists_, rank);
}

std::unique_ptr<RankSampler> MakeRankSampler(const Scenario& scenario, const Dataset& dataset, uint32_t rank) {
  return SamplerFactory(scenario, dataset).ForRank(rank);
}

uint64_t IterationsPerEpoch(const Scenario& scenario, const Dataset& dataset) {
  const auto& job = scenario.job();
  if (job.has_iterations_per_epoch()) return job.iterations_per_epoch();
  if (scenario.sampler().kind() == Sampler::infinite_group_each_sample_in_batch) {
    // StreamPETR's configs: num_iters_per_epoch = 28130 // (num_gpus * batch_size), nuScenes
    // train's keyframes, whatever the dataset actually holds (train+val too).
    const uint64_t global_batch = uint64_t{job.world_size()} * job.samples_per_gpu();
    return std::max<uint64_t>(1, kStreamPetrEpochSamples / global_batch);
  }
  const uint64_t samples = EpochSamplesPerRank(scenario, dataset);
  return std::max<uint64_t>(1, (samples + job.samples_per_gpu() - 1) / job.samples_per_gpu());
}

std::string IterationsPerEpochSource(const Scenario& scenario) {
  const auto& job = scenario.job();
  if (job.has_iterations_per_epoch()) return "job.iterations_per_epoch";
  if (scenario.sampler().kind() == Sampler::infinite_group_each_sample_in_batch) {
    return fmt::format("StreamPETR's configs: {} // ({} GPUs x {} samples)", kStreamPetrEpochSamples, job.world_size(),
                       job.samples_per_gpu());
  }
  return "the sampler's batches per rank";
}

uint64_t JobIterations(const Scenario& scenario, const Dataset& dataset) {
  const auto& job = scenario.job();
  if (job.has_iterations()) return job.iterations();
  const uint64_t epochs = job.has_epochs() ? job.epochs() : 1;
  return epochs * CheckJobLength(scenario, dataset, "scenario");
}

uint64_t CheckJobLength(const Scenario& scenario, const Dataset& dataset, const std::string& display_name) {
  const auto& job = scenario.job();
  if (job.has_iterations()) return 0;
  const uint64_t epochs = job.has_epochs() && job.epochs() > 0 ? job.epochs() : 1;
  const uint64_t per_epoch = IterationsPerEpoch(scenario, dataset);
  // Dividing cannot wrap; a product beyond kIterationsMax is refused, never truncated (issue 33).
  if (per_epoch > kIterationsMax / epochs) {
    throw ScenarioError(fmt::format(
        "{}: job.epochs x iterations per epoch: must be at most {} iterations, got {} x {} (iterations per epoch "
        "from {}); set job.iterations, or fewer epochs",
        display_name, kIterationsMax, epochs, per_epoch, IterationsPerEpochSource(scenario)));
  }
  return per_epoch;
}

}  // namespace petrsim
