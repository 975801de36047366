// A recorded job as a replay needs it, read from a directory of petrsim traces (a simulated run's,
// a real rank's, the probe's): the scenario the headers carry, and per (rank, batch, slot) the
// sampler's index and what the worker did with it (final index, attempts, duration, livelock or
// error). Both backends replay through MakeRecordedSource (the ReplaySource seam of
// trace/replay_source.h); replay/ adds the recorded outcome (its diagnosis) for `petrsim replay`,
// petrsim_train --replay needs only this.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "proto/scenario.pb.h"
#include "trace/replay_source.h"

namespace petrsim {

struct Recording {
  std::string directory;
  Scenario scenario;  // rank 0's header's, validated
  std::string scenario_path;
  std::string backend;  // who recorded it
  uint32_t world_size = 0;
  using Key = std::tuple<uint32_t, uint64_t, uint32_t>;  // rank, batch, slot
  std::map<Key, int64_t> sample_index;
  std::map<Key, RecordedLoad> loads;
  std::vector<std::string> partial;       // files cut short, or missing
  std::vector<std::string> files;         // the rank files read, by rank
  std::vector<uint64_t> iterations_done;  // per rank: iterations it recorded as done
  bool rank_died = false;                 // some rank recorded its death
};

// Throws ScenarioError naming the file on bad input (no directory, no rank_0.pbtrace, a header
// without its scenario or with an invalid one, ranks that disagree on the world).
Recording ReadRecording(const std::string& directory);

// The recording as a backend sees it: the sample order (when `use_samples`) and the worker
// results (when `use_loads`) by (rank, batch, slot). `recording` must outlive it.
std::unique_ptr<ReplaySource> MakeRecordedSource(const Recording& recording, bool use_samples, bool use_loads);

}  // namespace petrsim
