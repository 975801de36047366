// `petrsim diagnose` and the probe's `stall` events (proto/trace.proto): a DataLoader worker's __getitem__ that had
// not returned within the probe's bound, with the Python stack the probe sampled in the worker. Read with the rest of
// a trace (diagnose_load.cc), settled against the loads that followed, carried into the Diagnosis (diagnose.cc) and
// reported beside the stuck collectives (diagnose_report.cc). Defined in diagnose_stall.cc.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace petrsim {

struct TraceEventView;
struct RankRecording;
struct Recordings;
struct Diagnosis;

// One `stall` event of a rank's trace.
struct WorkerStall {
  uint32_t rank = 0;
  int32_t worker = 0;
  uint32_t loader = 0;  // the probe's DataLoader number (0: the first, the training loader)
  uint64_t batch = 0;   // that loader's batch (loader 0: the training iteration)
  uint32_t slot = 0;
  int64_t index = -1;          // the sampler's index for the slot
  int64_t loading_index = -1;  // where a resample loop had gone when sampled (-1: at `index`)
  uint64_t attempts = 0;       // loads so far (datasets that resample)
  int64_t since_ns = 0;        // when the getitem began
  int64_t sampled_ns = 0;      // when the stack was sampled
  // Outermost frame first, innermost last, each "file:line in func".
  std::vector<std::string> stack;
  bool returned = false;  // a completed load of that getitem follows: it was slow, not stuck
  bool livelock = false;  // the livelock watchdog recorded it too (a resample loop)
  // Set by Diagnose: the times in seconds from the job's first recorded event (steady clocks) or from 0.
  double since_s = 0, sampled_s = 0;
  bool from_first_event = false;
};

namespace diagnose_internal {

// While a trace is read: a `stall` event; any `load` event (a completed one after a stall says it returned).
void NoteStall(RankRecording& rank, const TraceEventView& event);
void NoteLoadAfterStall(RankRecording& rank, const TraceEventView& event);
// Once the rank's trace is read: each stall that never returned is a getitem spinning (a StuckGetitem of
// `rank.spins`, said as a stall unless the livelock watchdog named it), added if the trace holds no open load of it.
void SettleStalls(RankRecording& rank);
// At the end of Diagnose: the recordings' stalls into the diagnosis; a cause that is a getitem spinning becomes
// kind "stall" where that getitem stalled without a resample loop the watchdog stopped.
void ApplyStalls(const Recordings& recordings, Diagnosis& diagnosis);
// The report's section and the JSON's "stalls" (and the cause's "stack", "innermost"), both left out without stalls.
std::string FormatStalls(const Diagnosis& diagnosis);
void AddStallsJson(const Diagnosis& diagnosis, nlohmann::json& out);

}  // namespace diagnose_internal
}  // namespace petrsim
