// Sequence groups as StreamPETR's NuScenesDataset._set_sequence_group_flag cuts them
// (docs/reference/streampetr.md, section 3): each scene of n frames becomes seq_split_num contiguous chunks of
// ceil(n / s) frames (the last one shorter), and mmdet3d asserts every scene yields exactly s.
#pragma once

#include <cstdint>
#include <vector>

namespace petrsim {

// Chunk lengths for one scene of `frames` frames cut `split` ways, exactly as mmdet3d's
// range(0, n, ceil(n / s)) + [n]. The result may have fewer than `split` entries (e.g. a
// 1-frame scene with split 2), which mmdet3d rejects: callers report that as a scenario error.
std::vector<uint32_t> SceneChunkLengths(uint32_t frames, uint32_t split);

}  // namespace petrsim
