// Memory estimates; see memory_estimate.h.
#include "check/memory_estimate.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>

#include "base/error.h"

namespace petrsim {
namespace {

// Measured peak RSS (petrsim built with -O3, glibc malloc), rounded up:
constexpr uint64_t kFixedBytes = 32ull << 20;    // the program, protobuf, the report
constexpr uint64_t kRunBytesPerFrame = 64;       // 3.9 M frames: 250 MB (the dataset, groups, samplers)
constexpr uint64_t kCheckBytesPerFrame = 240;    // 3.9 M frames: 920 MB (the pre-flight's pools and graph)
constexpr uint64_t kBytesPerRank = 2800;         // 1,024 ranks x 1 worker: 7.8 MB beyond the dataset
constexpr uint64_t kBytesPerWorker = 5300;       // its RNG streams (numpy's MT19937, the jitter's)
constexpr uint64_t kBytesPerBatchInFlight = 80;  // per prefetched batch (workers x prefetch) ...
constexpr uint64_t kBytesPerSlotInFlight = 32;   // ... and per sample slot in it

uint64_t Saturating(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
uint64_t Times(uint64_t a, uint64_t b) { return b != 0 && a > UINT64_MAX / b ? UINT64_MAX : a * b; }

}  // namespace

uint64_t DatasetFramesMax(const Scenario& scenario) {
  uint64_t frames = 0;
  for (const SubDataset& sub : scenario.dataset().subdatasets()) {
    if (sub.has_synthetic()) {
      frames = Saturating(frames, Times(sub.synthetic().scenes(), std::max(sub.synthetic().frames_per_scene_min(),
                                                                           sub.synthetic().frames_per_scene_max())));
    } else {
      for (const Scene& scene : sub.explicit_().scenes()) {
        frames = Saturating(frames, static_cast<uint64_t>(scene.frames_size()) + scene.gt_counts_size());
      }
    }
  }
  return frames;
}

MemoryEstimate EstimateRunMemory(const Scenario& scenario) {
  const uint64_t frames = DatasetFramesMax(scenario);
  const uint64_t ranks = scenario.job().world_size();
  const uint64_t workers = std::max<uint64_t>(1, scenario.job().workers_per_gpu());
  const uint64_t prefetch = scenario.job().prefetch_factor();
  const uint64_t batch = scenario.job().samples_per_gpu();
  const uint64_t per_batch = Saturating(kBytesPerBatchInFlight, Times(kBytesPerSlotInFlight, batch));
  const uint64_t per_rank = Saturating(Saturating(kBytesPerRank, Times(workers, kBytesPerWorker)),
                                       Times(Times(workers, prefetch), per_batch));
  MemoryEstimate estimate;
  estimate.bytes = Saturating(Saturating(kFixedBytes, Times(frames, kRunBytesPerFrame)), Times(ranks, per_rank));
  estimate.breakdown = fmt::format(
      "{} frames x {} B, {} ranks x {} (each: {} B, {} DataLoader workers x {} B, {} x {} prefetched batches x {} B)",
      frames, kRunBytesPerFrame, ranks, FormatBytes(per_rank), kBytesPerRank, workers, kBytesPerWorker, workers,
      prefetch, per_batch);
  return estimate;
}

MemoryEstimate EstimateCheckMemory(const Scenario& scenario) {
  const uint64_t frames = DatasetFramesMax(scenario);
  MemoryEstimate estimate;
  estimate.bytes = Saturating(kFixedBytes, Times(frames, kCheckBytesPerFrame));
  estimate.breakdown = fmt::format("{} frames x {} B", frames, kCheckBytesPerFrame);
  return estimate;
}

uint64_t ParseByteSize(const std::string& text, const std::string& option) {
  uint64_t value = 0;
  const char* begin = text.data();
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(begin, end, value);
  uint64_t unit = 1;
  const std::string suffix(at, end);
  if (suffix == "K" || suffix == "k")
    unit = 1ull << 10;
  else if (suffix == "M" || suffix == "m")
    unit = 1ull << 20;
  else if (suffix == "G" || suffix == "g")
    unit = 1ull << 30;
  else if (suffix == "T" || suffix == "t")
    unit = 1ull << 40;
  else if (!suffix.empty())
    unit = 0;
  if (error != std::errc() || at == begin || unit == 0 || value == 0 || value > UINT64_MAX / unit) {
    throw ScenarioError(
        fmt::format("{} {}: expected a positive size in bytes, optionally with K, M, G or T "
                    "(e.g. 8G)",
                    option, text));
  }
  return value * unit;
}

void CheckMemory(const MemoryEstimate& estimate, uint64_t max_bytes, const std::string& what,
                 const std::string& display_name) {
  if (estimate.bytes <= max_bytes) return;
  throw ScenarioError(fmt::format(
      "{}: {} needs about {} of memory ({}), more than --memory-max {} (default: half of this machine's memory); "
      "shrink the job or the dataset, or raise --memory-max on a machine that has it",
      display_name, what, FormatBytes(estimate.bytes), estimate.breakdown, FormatBytes(max_bytes)));
}

}  // namespace petrsim
