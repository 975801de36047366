// One getitem that never returns: a DataLoader worker (or the main process) spinning in the
// resample loop because every frame of the pool it may draw from has no GT after the filters
// (or, under petrsim's attempts bound, because it drew too long to be chance). The one record
// of it every backend and report shares: the simulator's stuck worker, the real backend's
// sampler watchdog, diagnose's reading of a trace.
#pragma once

#include <cstdint>
#include <string>

namespace petrsim {

struct StuckGetitem {
  uint32_t rank = 0;
  int32_t worker = 0;  // -1: the main process loads (workers_per_gpu 0)
  uint64_t batch = 0;  // the iteration whose batch it never returns
  uint32_t slot = 0;
  int64_t index = 0;       // the sampler's index for that slot
  int64_t last_index = 0;  // the last index the loop tried
  int64_t group = 0;       // the sampler group of `index`
  uint32_t subdataset = 0;
  std::string subdataset_name;
  uint32_t scene = 0;
  std::string scene_name;
  int64_t pool_first = 0;  // the pool it cannot leave (dataset indices, inclusive)
  int64_t pool_last = 0;
  uint32_t pool_first_in_scene = 0;
  uint32_t pool_last_in_scene = 0;
  int64_t since_ns = 0;   // when the endless loop began (the batch's start)
  uint64_t attempts = 0;  // loads of that getitem so far (when the run ended, or the watchdog fired)
  bool proven = true;     // false: petrsim's attempts bound, not a proof
  // Read back from a trace (diagnose): what the recorder said of it; the fields the trace does
  // not carry (sub-dataset, scene, pool) are left at their defaults and found from the scenario.
  std::string report;

  // One line in the user's terms: rank, worker, batch, slot, index, sampler group, sub-dataset,
  // scene and pool (the real backend's sampler watchdog prints it).
  std::string Describe() const;
};

}  // namespace petrsim
