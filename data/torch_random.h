// Bit-exact reimplementation of the torch CPU generator and torch.randperm (docs/reference/streampetr.md, section 5):
// torch.Generator().manual_seed(s) is MT19937 with the standard 32-bit seeding, and randperm(n)
// for n < 2^32 / 20 swaps r[i] with r[i + random32() % (n - i)] for i = 0 .. n-2 starting from
// the identity. Proven against real torch by data/torch_random_test.cc (golden vectors).
// std::mt19937's output sequence is fixed by the C++ standard, unlike the std distributions.
#pragma once

#include <cstdint>
#include <random>
#include <span>

#include "base/assert.h"

namespace petrsim {

// torch randperm switches to a 64-bit algorithm at this size; petrsim rejects larger inputs.
inline constexpr int64_t kTorchRandpermSmallMax = 0xFFFFFFFFLL / 20;

class TorchGenerator {
 public:
  // torch.Generator().manual_seed(seed): only the low 32 bits seed the engine.
  explicit TorchGenerator(uint64_t seed) : engine_(static_cast<uint32_t>(seed)) {}

  // CPUGeneratorImpl::random(): one 32-bit MT19937 output.
  uint32_t Random32() { return engine_(); }

 private:
  std::mt19937 engine_;
};

// Writes torch.randperm(out.size(), generator) into `out`.
template <typename Int>
void TorchRandperm(TorchGenerator& generator, std::span<Int> out) {
  const int64_t n = static_cast<int64_t>(out.size());
  PETRSIM_ASSERT(n < kTorchRandpermSmallMax);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<Int>(i);
  for (int64_t i = 0; i + 1 < n; ++i) {
    // torch computes this modulo in 64 bits; both operands fit in 32 here (n < 2^32 / 20), and
    // the 32-bit division gives the same value faster.
    const int64_t z = static_cast<int64_t>(generator.Random32() % static_cast<uint32_t>(n - i));
    std::swap(out[i], out[z + i]);
  }
}

}  // namespace petrsim
