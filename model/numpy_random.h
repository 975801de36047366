// Bit-exact reimplementation of numpy's legacy global RandomState as the resample loop uses it
// (reference section 5): np.random.seed(s) is MT19937 with the standard 32-bit seeding, and
// np.random.choice(pool) on a 1-D pool of n draws 32-bit outputs masked to the smallest
// 2^k - 1 >= n - 1 until the value is <= n - 1 (a pool of one consumes no draw).
// Proven against real numpy by tests/numpy_random_test.cc (golden vectors).
#pragma once

#include <cstdint>
#include <random>

#include "model/assert.h"

namespace petrsim {

class NumpyRandomState {
 public:
  // np.random.seed(seed) with an integer seed in [0, 2^32).
  explicit NumpyRandomState(uint32_t seed) : engine_(seed) {}

  uint32_t Next32() { return engine_(); }

  // Consumes `draws` 32-bit outputs (e.g. pipeline augmentations: np.random.uniform takes 2).
  void Discard(uint64_t draws) { engine_.discard(draws); }

  // The position np.random.choice(pool) returns for a pool of `pool_size` (>= 1) elements.
  uint32_t Choice(uint32_t pool_size) {
    PETRSIM_ASSERT(pool_size >= 1);
    const uint32_t max = pool_size - 1;
    if (max == 0) return 0;
    uint32_t mask = max;
    mask |= mask >> 1;
    mask |= mask >> 2;
    mask |= mask >> 4;
    mask |= mask >> 8;
    mask |= mask >> 16;
    uint32_t value;
    do {
      value = engine_() & mask;
    } while (value > max);
    return value;
  }

 private:
  std::mt19937 engine_;
};

// DataLoader worker_init_fn in mmdet/StreamPETR: num_workers * rank + worker_id + seed.
// With no workers the main process loads; its numpy RNG was seeded with `seed` alone.
inline uint32_t WorkerNumpySeed(uint32_t workers_per_gpu, uint32_t rank, uint32_t worker, uint32_t seed) {
  return workers_per_gpu * rank + worker + seed;
}

}  // namespace petrsim
