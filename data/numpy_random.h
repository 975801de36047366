// Bit-exact reimplementation of numpy's legacy global RandomState as the data pipeline and the
// resample loop use it (docs/reference/streampetr.md, section 5): np.random.seed(s) is MT19937 with the standard
// 32-bit seeding; np.random.choice(pool) on a 1-D pool of n, and randint(low, high), draw 32-bit
// outputs masked to the smallest 2^k - 1 >= range until the value fits (a range of one value
// consumes no draw); rand() and uniform() take two outputs for one 53-bit double; normal() is
// the polar Box-Muller method with the legacy cache of the second value (kept between calls).
// Proven against real numpy by data/numpy_random_test.cc (golden vectors).
#pragma once

#include <cmath>
#include <cstdint>
#include <random>

#include "base/assert.h"

namespace petrsim {

class NumpyRandomState {
 public:
  // np.random.seed(seed) with an integer seed in [0, 2^32).
  explicit NumpyRandomState(uint32_t seed) : engine_(seed) {}

  uint32_t Next32() { return Output(); }

  // Consumes `draws` 32-bit outputs (e.g. pipeline augmentations: np.random.uniform takes 2).
  void Discard(uint64_t draws) {
    engine_.discard(draws);
    outputs_ += draws;
  }

  // 32-bit outputs consumed since seeding.
  uint64_t outputs() const { return outputs_; }

  // The position np.random.choice(pool) returns for a pool of `pool_size` (>= 1) elements.
  uint32_t Choice(uint32_t pool_size) {
    PETRSIM_ASSERT(pool_size >= 1);
    return Bounded(pool_size - 1);
  }

  // np.random.randint(low, high) for high - low in [1, 2^32].
  int64_t RandInt(int64_t low, int64_t high) {
    PETRSIM_ASSERT(high > low && high - low <= (int64_t{1} << 32));
    return low + Bounded(static_cast<uint32_t>(high - low - 1));
  }

  // np.random.rand() / random_sample(): a double in [0, 1) from two outputs.
  double Rand() {
    const uint32_t a = Output() >> 5;
    const uint32_t b = Output() >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
  }

  // np.random.uniform(low, high).
  double Uniform(double low, double high) { return low + (high - low) * Rand(); }

  // One standard normal of np.random.normal / standard_normal (legacy_gauss).
  double Gauss() {
    if (has_gauss_) {
      has_gauss_ = false;
      return gauss_;
    }
    double x1, x2, r2;
    do {
      x1 = 2.0 * Rand() - 1.0;
      x2 = 2.0 * Rand() - 1.0;
      r2 = x1 * x1 + x2 * x2;
    } while (r2 >= 1.0 || r2 == 0.0);
    const double f = std::sqrt(-2.0 * std::log(r2) / r2);
    gauss_ = f * x1;
    has_gauss_ = true;
    return f * x2;
  }

  // The legacy Gaussian cache (what get_state()[3:5] shows).
  bool has_gauss() const { return has_gauss_; }
  double cached_gauss() const { return gauss_; }

 private:
  // A value in [0, max] by masked rejection of 32-bit outputs (max 0: no draw).
  uint32_t Bounded(uint32_t max) {
    if (max == 0) return 0;
    uint32_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    uint32_t value;
    do {
      value = Output() & mask;
    } while (value > max);
    return value;
  }

  uint32_t Output() {
    ++outputs_;
    return engine_();
  }

  std::mt19937 engine_;
  uint64_t outputs_ = 0;
  bool has_gauss_ = false;
  double gauss_ = 0.0;
};

// DataLoader worker_init_fn in mmdet/StreamPETR: num_workers * rank + worker_id + seed.
// With no workers the main process loads; its numpy RNG was seeded with `seed` alone.
inline uint32_t WorkerNumpySeed(uint32_t workers_per_gpu, uint32_t rank, uint32_t worker, uint32_t seed) {
  return workers_per_gpu * rank + worker + seed;
}

}  // namespace petrsim
