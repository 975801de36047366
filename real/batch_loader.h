// A real rank's DataLoader side (the trainer's part "batch loading"): the main process's sampler
// drawn in batch order (replayed where a recording gives the index), each worker's numpy RNG
// seeded as PyTorch's worker_init_fn seeds it, every getitem under the sampler watchdog (or
// replayed as recorded), and the frame rendered from the scenario's scene; it records the
// draws, the loads, a livelock and each batch ready. Load() runs on the loader's worker threads.
// Internal to real/.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "data/data_loader.h"
#include "data/dataset.h"
#include "data/numpy_random.h"
#include "data/resample_policy.h"
#include "data/sampler.h"
#include "data/sampler_watchdog.h"
#include "proto/scenario.pb.h"
#include "real/geometry.h"
#include "real/rank_recorder.h"
#include "real/trainer.h"

namespace petrsim::real {

// A 64-bit mix of two values (splitmix64's finaliser): a scene's render seed from the job seed.
inline uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9e3779b97f4a7c15ULL + b + 0x632be59bd9b4e019ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// One slot of a loaded batch: what the worker drew, loaded and rendered.
struct LoadedSlot {
  SlotDraw draw;
  int64_t final_index = -1;  // -1: padding (no sample)
  std::vector<float> pixels;
  std::vector<int64_t> labels;
  std::vector<std::array<double, 7>> boxes;
  Mat4 ego2global = Mat4::Identity();
};
struct LoadedBatch {
  std::vector<LoadedSlot> slots;
};

// The main process's sampler, drawn in batch order whichever worker asks first (PyTorch draws
// a batch's indices when it dispatches the batch).
class DrawSource {
 public:
  DrawSource(std::unique_ptr<RankSampler> sampler, uint32_t batch_size,
             std::function<void(uint64_t, std::vector<SlotDraw>&)> on_draw)
      : sampler_(std::move(sampler)), batch_size_(batch_size), on_draw_(std::move(on_draw)) {}
  std::vector<SlotDraw> Get(uint64_t batch) {
    std::lock_guard<std::mutex> lock(mutex_);
    while (drawn_ <= batch) {
      std::vector<SlotDraw> draws(batch_size_);
      sampler_->NextBatches(draws);
      on_draw_(drawn_, draws);
      drawn_batches_.emplace(drawn_++, std::move(draws));
    }
    auto node = drawn_batches_.extract(batch);
    return std::move(node.mapped());
  }

 private:
  std::mutex mutex_;
  std::unique_ptr<RankSampler> sampler_;
  const uint32_t batch_size_;
  std::function<void(uint64_t, std::vector<SlotDraw>&)> on_draw_;  // may replace the draws
  uint64_t drawn_ = 0;
  std::map<uint64_t, std::vector<SlotDraw>> drawn_batches_;
};

class BatchLoader {
 public:
  // The references must outlive the loader.
  BatchLoader(const Scenario& scenario, const Dataset& dataset, const TrainOptions& options,
              const DataLoaderShape& shape, const std::vector<Camera>& rig, RankRecorder& recorder);
  // A new epoch (a new set of DataLoader workers) whose first batch is `first_batch`: each
  // worker's numpy RNG reseeded.
  void StartEpoch(uint64_t first_batch);
  // Batch first_batch + in_epoch, loaded by `worker` (-1: the main process). Throws
  // SampleLivelockError when the sampler watchdog fires (after recording the livelock).
  LoadedBatch Load(int32_t worker, uint64_t in_epoch);

 private:
  [[noreturn]] void ReportLivelock(int32_t worker, uint64_t batch, uint32_t slot, const SlotDraw& draw,
                                   const WatchedItem& item);
  void RenderSlot(LoadedSlot& out) const;

  const Scenario& scenario_;
  const Dataset& dataset_;
  const TrainOptions& options_;
  const DataLoaderShape& shape_;
  const std::vector<Camera>& rig_;
  RankRecorder& recorder_;
  const std::unique_ptr<ResamplePolicy> policy_;
  DrawSource draws_;
  // Per worker (or the main process) the numpy RNG PyTorch's worker_init_fn seeds.
  std::vector<NumpyRandomState> rngs_;
  const PipelineDraws pipeline_;
  uint64_t epoch_start_ = 0;
};

}  // namespace petrsim::real
