// The vocabulary every backend and every report shares (docs/design.md, "Vocabulary of outcomes"): how a
// job ended, why, and the collective it ended in, in c10d's terms. The simulator decides these for
// a simulated run, diagnose reads them off traces and dumps, the real backend prints them.
#pragma once

#include <cstdint>
#include <string>

#include "proto/scenario.pb.h"

namespace petrsim {

// kLimitReached is petrsim's own: the run hit a limit on events or virtual time (STYLE 7); it
// says nothing about the job.
enum class Outcome { kCompleted, kHang, kDesync, kRankDied, kLimitReached };

// Why the job did not complete, in the user's terms (docs/design.md, "Vocabulary of outcomes").
enum class Cause {
  kNone,
  kSamplerLivelock,        // a worker spins forever in the resample loop
  kWorkerDied,             // a DataLoader worker died; its rank raised
  kRankDied,               // a rank's process died
  kDatasetError,           // the bounded resample policy gave up; the rank raised
  kStragglerTimeout,       // a rank was slower than the collective timeout
  kUnevenBatches,          // a rank ran out of batches and finished early
  kConditionalCollective,  // a rank skipped collectives the others issued
};

std::string OutcomeName(Outcome outcome);
std::string CauseName(Cause cause);
// c10d's OpType name (ALLREDUCE, BROADCAST, ...) of a planned collective.
std::string OpTypeName(Collective::Op op);

struct CollectiveRef {
  std::string process_group;
  uint64_t seq = 0;  // c10d sequence number on that group, from 1
  Collective::Op op = Collective::allreduce;
  Collective::Dtype dtype = Collective::float32;
  uint64_t numel_in = 0;
  uint64_t numel_out = 0;
  std::string step;          // plan step name
  std::string python_frame;  // the frame a rank blocked in it shows (the plan's; empty: unknown)
  uint64_t iteration = 0;    // training iteration it belongs to (startup: 0)
  bool startup = false;
};

}  // namespace petrsim
