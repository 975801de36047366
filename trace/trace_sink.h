// The TraceSink seam (docs/design.md, "Seams"): both backends report what each rank's main process and
// data loader workers did through this one interface, so one timeline writer, one trace file
// writer and one analyzer serve the simulator and the real trainer alike. Records carry
// integer nanoseconds of the backend's clock (virtual in sim/, steady_clock in real/).
#pragma once

#include <cstdint>
#include <string_view>

#include "proto/scenario.pb.h"

namespace petrsim {

enum class TraceKind : uint8_t {
  kLoad,        // a worker's __getitem__ of one batch slot (all its attempts); slice
  kDataWait,    // the main process waits for its next batch; slice
  kCompute,     // forward/backward compute between collectives; slice
  kCollective,  // a collective from issue to completion (or to the end, if it never completes)
  kCheckpoint,  // rank 0 writes a checkpoint; slice
  kIteration,   // one whole training iteration of the main process; slice
  kLivelock,    // a worker starts spinning forever in the resample loop; instant
  kWatchdog,    // a watchdog fires (text: the line the backend prints); instant
  kRankDied,    // the rank's process exits (text: why); instant
  kDesync,      // collectives mismatched at one sequence number (text: how); instant
  // (10 is TraceEventKind::truncated, the trace writer's own.)
  kSamplerDraw = 11,     // the main process draws a batch slot's index (index, group); instant
  kGetItemAttempt = 12,  // one load of a getitem that resampled (index, gt_count; accepted, or
                         // final_index: the index it resamples to); instant
  kBatchReady = 13,      // a worker hands a whole batch to the main process; instant
  kProcessExit = 14,     // the rank's process ends (text: how); instant
  kStall = 15,           // a worker's getitem has not returned for the probe's bound, from its
                         // start to the sample (text: its Python stack, innermost last); slice
};

// TraceRecord::worker values that are not DataLoader workers.
inline constexpr int32_t kMainProcess = -1;
// Non-blocking collectives (DDP gradient buckets) run beside the main process's compute.
inline constexpr int32_t kAsyncCollectives = -2;

struct TraceRecord {
  TraceKind kind = TraceKind::kLoad;
  uint32_t rank = 0;
  int32_t worker = -1;  // DataLoader worker; kMainProcess or kAsyncCollectives otherwise
  int64_t start_ns = 0;
  int64_t end_ns = 0;  // == start_ns for instants
  uint64_t iteration = 0;
  // kLoad
  uint32_t slot = 0;
  int64_t index = -1;
  int64_t final_index = -1;
  uint64_t attempts = 0;
  // kCollective
  std::string_view process_group;
  uint64_t seq = 0;
  Collective::Op op = Collective::allreduce;
  uint64_t numel = 0;
  Collective::Dtype dtype = Collective::float32;
  bool completed = true;  // false: still pending when the run ended (kCollective, kLoad)
  // kCollective: when every member had joined and the transfer began (-1: it never did).
  int64_t started_ns = -1;
  // kSamplerDraw: the index's sampler group. kGetItemAttempt: the frame's GT count after the
  // filters, and whether it was accepted.
  int64_t group = -1;
  uint32_t gt_count = 0;
  bool accepted = false;
  // Plan step name (kCollective), or the message of an instant.
  std::string_view text;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void Record(const TraceRecord& record) = 0;
};

}  // namespace petrsim
