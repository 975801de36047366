// How the real trainer issues one of the plan's collectives (TrainRank's collective issue): on
// the Backend seam, with the rank's progress published through JobControl (the sequence number it
// reached per process group, what it is doing) and the call recorded in the rank's trace from
// issue to completion. A failure (a peer gone, the timeout) is the collective watchdog's: the
// rank says which ranks never arrived at that sequence number and what they were doing, stops
// the job and throws CollectiveError (on a timeout carrying the lines the scenario's PyTorch
// release would print for it, filled as the simulator fills them); or, when another rank stopped
// the job first, says so and throws JobStoppedError.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plan/backend.h"
#include "proto/scenario.pb.h"
#include "real/job_control.h"
#include "real/rank_recorder.h"
#include "real/trainer.h"

namespace petrsim::real {

// What to do with a rank's output once its collective completed: `take` gets its first
// `elements` values (all of them by default; a scenario-sized gradient bucket or broadcast asks
// for the head the real model fills, and only that is converted).
struct CollectiveDone {
  std::function<void(const std::vector<double>&)> take;
  uint64_t elements = std::numeric_limits<uint64_t>::max();
};

class CollectiveIssuer {
 public:
  using Done = CollectiveDone;

  struct Issued {
    const Collective* step = nullptr;
    uint64_t seq = 0;  // c10d's sequence number on its process group, from 1
    uint64_t iteration = 0;
    int64_t start_ns = 0;
    std::unique_ptr<comm::Work> work;
    Done done;
  };

  // `scenario` is the job's (its PyTorch release and backend name the timeout's lines);
  // `process_groups` its groups in creation order (ProcessGroupNames).
  CollectiveIssuer(comm::Backend& comm, JobControl& control, RankRecorder& recorder, const TrainOptions& options,
                   std::chrono::milliseconds timeout, const Scenario& scenario,
                   std::vector<std::string> process_groups);

  // Issues `step` of `iteration` with `input` (the head of its values: zeros follow); does not
  // wait.
  // `options` as the rank program says (async_op false: waited for at once).
  Issued Launch(const Collective& step, uint64_t iteration, const std::vector<double>& input, Done done = {},
                comm::IssueOptions options = {});
  // Waits for it, records its completion and calls its Done.
  void Complete(Issued& issued);

  uint64_t issued() const { return issued_; }

 private:
  [[noreturn]] void Fail(const Issued& issued, const std::string& error, bool timed_out);
  // What the scenario's release would print for `issued` timing out now.
  void FillJobLog(const Issued& issued, CollectiveError& error) const;

  comm::Backend& comm_;
  JobControl& control_;
  RankRecorder& recorder_;
  const TrainOptions& options_;
  int64_t timeout_ms_;
  const Scenario& scenario_;
  std::vector<std::string> process_groups_;
  std::map<std::string, uint64_t> seqs_;       // per process group: the last sequence number issued
  std::map<std::string, uint64_t> completed_;  // and the last one completed
  uint64_t issued_ = 0;
};

}  // namespace petrsim::real
