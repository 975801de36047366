// The collectives torch.nn.parallel.DistributedDataParallel issues on its process group, release
// by release (docs/research/ddp_collectives.md; 1.13 verified by tests/real_ddp/ddp_vs_plan.py
// against real DDP): at construction, at the start of each forward (the bucket rebuild, the
// buffer broadcast) and in each backward (the gradient buckets, the used-parameter map).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "proto/scenario.pb.h"
#include "scenario/message_validation.h"  // ValidateDdpModel
#include "scenario/torch_version.h"

namespace petrsim {

// Iterations 0 and 1 differ from the later ones (iteration 0 has no bucket order recorded yet,
// iteration 1 rebuilds the buckets); index 2 stands for every later iteration.
inline constexpr size_t kDdpPhases = 3;
inline size_t DdpPhase(uint64_t iteration) { return iteration < kDdpPhases - 1 ? iteration : kDdpPhases - 1; }

struct DdpCollectives {
  std::vector<Collective> construction;                      // DDP's __init__, in order (blocking)
  std::array<std::vector<Collective>, kDdpPhases> forward;   // before the module's forward (blocking)
  std::array<std::vector<Collective>, kDdpPhases> backward;  // gradient buckets in launch order, then the
                                                             // used-parameter map (asynchronous)
};

// `model` must be valid (ValidateDdpModel). `python_frame` of each collective names the frame a
// rank blocked in it shows.
DdpCollectives DdpPlan(const DdpModel& model, TorchVersion version);

// Bytes per element of `dtype`.
uint64_t DtypeBytes(Collective::Dtype dtype);

}  // namespace petrsim
