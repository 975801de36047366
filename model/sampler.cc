// Samplers; see sampler.h.
#include "model/sampler.h"

#include <algorithm>

#include "model/assert.h"
#include "model/error.h"
#include "model/scenario_defaults.h"

namespace petrsim {

GroupStream::GroupStream(int64_t groups_num, uint32_t seed)
    : groups_num_(groups_num), generator_(seed) {
  PETRSIM_ASSERT(groups_num >= 1);
  PETRSIM_ASSERT(groups_num < kTorchRandpermSmallMax);
}

void GroupStream::Extend() {
  const size_t old_size = stream_.size();
  stream_.resize(old_size + groups_num_);
  TorchRandperm(generator_, std::span<int32_t>(stream_.data() + old_size, groups_num_));
}

InfiniteGroupSampler::InfiniteGroupSampler(const Dataset& dataset,
                                           std::shared_ptr<GroupStream> stream,
                                           uint32_t world_size, uint32_t samples_per_gpu,
                                           uint32_t rank)
    : dataset_(dataset),
      stream_(std::move(stream)),
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
}

std::vector<int64_t> DistributedGroupSamplerIndices(const Dataset& dataset, uint32_t world_size,
                                                    uint32_t samples_per_gpu, uint32_t rank,
                                                    uint32_t seed, uint64_t epoch) {
  const uint64_t per_round = uint64_t{samples_per_gpu} * world_size;
  TorchGenerator generator(epoch + seed);
  std::vector<int64_t> indices;
  std::vector<int64_t> permutation;
  for (int64_t g = 0; g < dataset.groups_num(); ++g) {
    const auto members = dataset.group_indices(g);
    const auto size = static_cast<int64_t>(members.size());
    if (size == 0) continue;
    permutation.resize(size);
    TorchRandperm(generator, std::span<int64_t>(permutation));
    std::vector<int64_t> shuffled(size);
    for (int64_t k = 0; k < size; ++k) shuffled[k] = members[permutation[k]];
    // Pad to a multiple of B * W by repeating the shuffled group, then a prefix of it.
    const int64_t padded = static_cast<int64_t>((size + per_round - 1) / per_round * per_round);
    const int64_t extra = padded - size;
    indices.insert(indices.end(), shuffled.begin(), shuffled.end());
    for (int64_t r = 0; r < extra / size; ++r) {
      indices.insert(indices.end(), shuffled.begin(), shuffled.end());
    }
    indices.insert(indices.end(), shuffled.begin(), shuffled.begin() + extra % size);
  }
  // Shuffle chunks of B, then take this rank's contiguous slice.
  const int64_t chunks = static_cast<int64_t>(indices.size() / samples_per_gpu);
  permutation.resize(chunks);
  TorchRandperm(generator, std::span<int64_t>(permutation));
  const uint64_t per_rank = indices.size() / world_size;
  std::vector<int64_t> result;
  result.reserve(per_rank);
  const uint64_t first = per_rank * rank;
  for (uint64_t position = first; position < first + per_rank; ++position) {
    const int64_t chunk = permutation[position / samples_per_gpu];
    result.push_back(indices[chunk * samples_per_gpu + position % samples_per_gpu]);
  }
  return result;
}

std::vector<int64_t> TorchDistributedSamplerIndices(int64_t dataset_size, uint32_t world_size,
                                                    uint32_t rank, bool shuffle, bool drop_last,
                                                    uint32_t seed, uint64_t epoch) {
  PETRSIM_ASSERT(dataset_size >= 1);
  const int64_t w = world_size;
  int64_t num_samples;
  if (drop_last && dataset_size % w != 0) {
    num_samples = (dataset_size - w + w - 1) / w;  // ceil((N - W) / W)
    if (dataset_size < w) num_samples = 0;
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
  if (!drop_last) {
    // Pad by wrapping around (repeating the whole list when the padding exceeds it).
    const int64_t padding = total - dataset_size;
    for (int64_t k = 0; k < padding; ++k) indices.push_back(indices[k % dataset_size]);
  } else {
    indices.resize(total);
  }
  std::vector<int64_t> result;
  result.reserve(num_samples);
  for (int64_t position = rank; position < total; position += w) result.push_back(indices[position]);
  return result;
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

EpochRankSampler::EpochRankSampler(const Scenario& scenario, const Dataset& dataset,
                                   uint32_t rank)
    : scenario_(scenario),
      dataset_(dataset),
      rank_(rank),
      samples_per_gpu_(scenario.job().samples_per_gpu()) {
  CheckSamplerConstructible(scenario, dataset, "scenario");
}

void EpochRankSampler::StartEpoch() {
  const auto& job = scenario_.job();
  if (scenario_.sampler().kind() == Sampler::distributed_group) {
    indices_ = DistributedGroupSamplerIndices(dataset_, job.world_size(), job.samples_per_gpu(),
                                              rank_, job.seed(), epoch_);
  } else {
    indices_ = TorchDistributedSamplerIndices(dataset_.size(), job.world_size(), rank_,
                                              scenario_.sampler().shuffle(),
                                              scenario_.sampler().drop_last(), job.seed(), epoch_);
  }
  cursor_ = 0;
}

void EpochRankSampler::NextBatches(std::span<SlotDraw> out) {
  PETRSIM_ASSERT(out.size() % samples_per_gpu_ == 0);
  if (!started_) {
    StartEpoch();
    started_ = true;
  }
  for (size_t i = 0; i < out.size(); i += samples_per_gpu_) {
    if (cursor_ >= indices_.size()) {
      ++epoch_;
      StartEpoch();
    }
    for (uint32_t b = 0; b < samples_per_gpu_; ++b) {
      if (cursor_ < indices_.size()) {
        const int64_t index = indices_[cursor_++];
        out[i + b] = SlotDraw{index, dataset_.group_of(index)};
      } else {
        out[i + b] = SlotDraw{};  // short last batch of the epoch
      }
    }
  }
}

bool InfiniteSamplerAssertionHolds(const Scenario& scenario, const Dataset& dataset) {
  return dataset.groups_num() >=
         int64_t{scenario.job().world_size()} * scenario.job().samples_per_gpu();
}

void CheckSamplerConstructible(const Scenario& scenario, const Dataset& dataset,
                               const std::string& display_name) {
  const auto& job = scenario.job();
  if (scenario.sampler().kind() == Sampler::infinite_group_each_sample_in_batch &&
      !InfiniteSamplerAssertionHolds(scenario, dataset)) {
    throw ScenarioError(
        display_name + ": job.world_size * job.samples_per_gpu: "
        "InfiniteGroupEachSampleInBatchSampler asserts groups_num >= world_size * "
        "samples_per_gpu, got " + std::to_string(dataset.groups_num()) + " < " +
        std::to_string(job.world_size()) + " * " + std::to_string(job.samples_per_gpu()) +
        " (the real job fails with an AssertionError when it builds the sampler)");
  }
  if (scenario.sampler().kind() != Sampler::infinite_group_each_sample_in_batch &&
      EpochSamplesPerRank(scenario, dataset) == 0) {
    throw ScenarioError(display_name + ": sampler.drop_last: torch DistributedSampler gives "
                        "every rank 0 samples (dataset of " + std::to_string(dataset.size()) +
                        " frames < job.world_size " + std::to_string(job.world_size()) +
                        "): the DataLoader would be empty");
  }
}

std::unique_ptr<RankSampler> MakeRankSampler(const Scenario& scenario, const Dataset& dataset,
                                             uint32_t rank,
                                             std::shared_ptr<GroupStream> shared_stream) {
  const auto& job = scenario.job();
  if (scenario.sampler().kind() != Sampler::infinite_group_each_sample_in_batch) {
    return std::make_unique<EpochRankSampler>(scenario, dataset, rank);
  }
  CheckSamplerConstructible(scenario, dataset, "scenario");
  if (!shared_stream) shared_stream = std::make_shared<GroupStream>(dataset.groups_num(), job.seed());
  return std::make_unique<InfiniteGroupSampler>(dataset, std::move(shared_stream),
                                                job.world_size(), job.samples_per_gpu(), rank);
}

uint64_t IterationsPerEpoch(const Scenario& scenario, const Dataset& dataset) {
  const auto& job = scenario.job();
  if (job.has_iterations_per_epoch()) return job.iterations_per_epoch();
  if (scenario.sampler().kind() == Sampler::infinite_group_each_sample_in_batch) {
    const uint64_t global_batch = uint64_t{job.world_size()} * job.samples_per_gpu();
    return std::max<uint64_t>(1, static_cast<uint64_t>(dataset.size()) / global_batch);
  }
  const uint64_t samples = EpochSamplesPerRank(scenario, dataset);
  return std::max<uint64_t>(1, (samples + job.samples_per_gpu() - 1) / job.samples_per_gpu());
}

uint64_t JobIterations(const Scenario& scenario, const Dataset& dataset) {
  const auto& job = scenario.job();
  if (job.has_iterations()) return job.iterations();
  const uint64_t epochs = job.has_epochs() ? job.epochs() : 1;
  return epochs * IterationsPerEpoch(scenario, dataset);
}

}  // namespace petrsim
