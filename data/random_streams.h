// petrsim's own random streams (synthetic data, cost jitter): one stream per purpose, derived
// from the scenario seed by name and index, so adding a stream never shifts another. The
// generator (xoshiro256**) and every distribution are written here, not taken from <random>,
// so results are the same with every standard library.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string_view>
#include <vector>

namespace petrsim {

inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The seed of stream `purpose`[index_a][index_b] under `root`.
inline uint64_t DeriveStreamSeed(uint64_t root, std::string_view purpose, uint64_t index_a = 0, uint64_t index_b = 0) {
  uint64_t hash = 0xCBF29CE484222325ULL;  // FNV-1a of the purpose name.
  for (const char c : purpose) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001B3ULL;
  }
  uint64_t state = root ^ hash;
  uint64_t mixed = SplitMix64(state);
  state = mixed ^ index_a;
  mixed = SplitMix64(state);
  state = mixed ^ index_b;
  return SplitMix64(state);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& word : state_) word = SplitMix64(seed);
  }

  uint64_t Next() {
    const uint64_t result = Rotl(state_[1] * 5, 7) * 9;
    const uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = Rotl(state_[3], 45);
    return result;
  }

  // Uniform in [0, 1) with 53 random bits.
  double Uniform01() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

  double Uniform(double low, double high) { return low + (high - low) * Uniform01(); }

  // Uniform integer in [0, n), n >= 1 (Lemire's multiply-shift with rejection: unbiased).
  uint64_t Below(uint64_t n) {
    unsigned __int128 product = static_cast<unsigned __int128>(Next()) * n;
    auto low = static_cast<uint64_t>(product);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        product = static_cast<unsigned __int128>(Next()) * n;
        low = static_cast<uint64_t>(product);
      }
    }
    return static_cast<uint64_t>(product >> 64);
  }

  bool Bernoulli(double probability) { return Uniform01() < probability; }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t state_[4];
};

// Poisson(mean) for 0 <= mean <= 1000 by inversion: one uniform draw and a binary search in a
// CDF table built once (from log-space terms, so large means do not underflow). The table ends
// where the remaining tail is below 1e-15; a draw beyond it returns the last value.
class PoissonSampler {
 public:
  explicit PoissonSampler(double mean) {
    if (mean <= 0.0) {
      cdf_.push_back(1.0);
      return;
    }
    const uint32_t limit = static_cast<uint32_t>(mean + 40.0 * std::sqrt(mean) + 40.0);
    double cumulative = 0.0;
    for (uint32_t k = 0; k <= limit; ++k) {
      // lgamma_r, not std::lgamma: the latter writes glibc's global `signgam`, a data race
      // when sweeps build datasets on several threads.
      int sign = 0;
      cumulative += std::exp(-mean + k * std::log(mean) - lgamma_r(k + 1.0, &sign));
      cdf_.push_back(cumulative);
      if (k > mean && 1.0 - cumulative < 1e-15) break;
    }
  }

  uint32_t Sample(Rng& rng) const {
    const double u = rng.Uniform01();
    const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
    return static_cast<uint32_t>(std::min<size_t>(it - cdf_.begin(), cdf_.size() - 1));
  }

 private:
  std::vector<double> cdf_;
};

}  // namespace petrsim
