// Scene chunking; see sequence_groups.h.
#include "data/sequence_groups.h"

#include "base/assert.h"

namespace petrsim {

std::vector<uint32_t> SceneChunkLengths(uint32_t frames, uint32_t split) {
  PETRSIM_ASSERT(frames >= 1);
  PETRSIM_ASSERT(split >= 1);
  // ceil(frames / split) without the overflow of frames + split - 1.
  const uint32_t chunk = frames / split + (frames % split != 0);
  PETRSIM_ASSERT(chunk >= 1);
  std::vector<uint32_t> lengths;
  for (uint32_t begin = 0; begin < frames; begin += chunk) {
    lengths.push_back(begin + chunk <= frames ? chunk : frames - begin);
  }
  return lengths;
}

}  // namespace petrsim
