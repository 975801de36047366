// Effective values of scenario fields whose default is not a constant (class list, names) or
// that depend on another field (filter_empty_gt under the keep_empty policy).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "proto/scenario.pb.h"

namespace petrsim {

// petrsim's bound on the loads of one getitem (a pool with 1 valid frame in 2^24 would need
// about that many on average).
inline constexpr uint64_t kGetItemAttemptsLimit = 1ULL << 26;

// The ten nuScenes detection classes StreamPETR trains on, in mmdet3d's order.
const std::vector<std::string>& NuScenesClasses();

// filters.classes, or the nuScenes classes when the list is empty.
std::vector<std::string> EffectiveClasses(const Filters& filters);

// Whether a frame with zero GT is rejected (returns None): filter_empty_gt, unless the resample
// policy is keep_empty.
bool RejectsEmptyFrames(const Scenario& scenario);

// subdatasets[index].name, or "subdataset<index>".
std::string SubDatasetName(const Scenario& scenario, int index);

// Names used in reports for enum values.
std::string PolicyName(Resample::Policy policy);
std::string SamplerKindName(Sampler::Kind kind);

}  // namespace petrsim
