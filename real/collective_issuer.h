// How the real trainer issues one of the plan's collectives (TrainRank's collective issue): on
// the Comm seam, with the rank's progress published through JobControl (the sequence number it
// reached per process group, what it is doing) and the call recorded in the rank's trace from
// issue to completion. A failure (a peer gone, the timeout) is the collective watchdog's: the
// rank says which ranks never arrived at that sequence number and what they were doing, stops
// the job and throws CollectiveError; or, when another rank stopped the job first, says so and
// throws JobStoppedError.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "model/comm.h"
#include "model/scenario.pb.h"
#include "real/job_control.h"
#include "real/rank_recorder.h"
#include "real/trainer.h"

namespace petrsim::real {

class CollectiveIssuer {
 public:
  // Called with this rank's output once the collective completed.
  using Done = std::function<void(const std::vector<double>&)>;

  struct Issued {
    const Collective* step = nullptr;
    uint64_t seq = 0;  // c10d's sequence number on its process group, from 1
    uint64_t iteration = 0;
    int64_t start_ns = 0;
    std::unique_ptr<comm::Work> work;
    Done done;
  };

  CollectiveIssuer(comm::Comm& comm, JobControl& control, RankRecorder& recorder, const TrainOptions& options,
                   std::chrono::milliseconds timeout);

  // Issues `step` of `iteration` with `input`; does not wait.
  Issued Launch(const Collective& step, uint64_t iteration, const std::vector<double>& input, Done done = nullptr);
  // Waits for it, records its completion and calls its Done.
  void Complete(Issued& issued);

  uint64_t issued() const { return issued_; }

 private:
  [[noreturn]] void Fail(const Issued& issued, const std::string& error);

  comm::Comm& comm_;
  JobControl& control_;
  RankRecorder& recorder_;
  const TrainOptions& options_;
  int64_t timeout_ms_;
  std::map<std::string, uint64_t> seqs_;  // per process group: the last sequence number issued
  uint64_t issued_ = 0;
};

}  // namespace petrsim::real
