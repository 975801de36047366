// `petrsim replay TRACE_DIR --against sim|real`: re-run a recorded job, driven by what its
// traces recorded, and say whether the replay reproduces the recorded outcome; with --set,
// what-if on the recorded job.
//
// Data flow: LoadRecordedJob (trace directory → RecordedJob: trace/recording.h's Recording, the
// scenario from the headers and per (rank, batch, slot) the sampler's index and what the worker
// did with it (final index, loads, duration, livelock or error), and the recorded outcome from
// Diagnose) → a
// ReplayBackend runs it (SimReplayBackend: the simulator through its ReplaySource seam; the
// real LibTorch backend, RealReplayBackend, runs petrsim_train driven by the same source) →
// CompareOutcomes.
//
// What drives the replay:
// - exact replay (no --set): the recorded sample order, getitem results and load durations;
//   where nothing was recorded (batches prefetched but never loaded), the scenario's own
//   sampler and policy.
// - what-if (--set): the recorded sample order when the changed scenario builds a dataset of
//   the same frames and groups (so the indices mean the same frames); the resampling and
//   timings are then the changed scenario's own, since they are what --set asks about.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "proto/scenario.pb.h"
#include "sim/simulator.h"
#include "trace/recording.h"

namespace petrsim {

struct ReplayOutcome {
  std::string outcome;  // completed, hang, desync, rank_died, limit_reached
  std::string cause;    // the backend's cause, where it has one ("" for a recording)
  std::vector<uint32_t> stuck_ranks;
  bool has_collective = false;  // the collective the others wait in
  std::string group;
  uint64_t seq = 0;
  uint64_t iteration = 0;
  uint64_t iterations_completed = 0;  // by every rank
};

// The recording (trace/recording.h) and the outcome its diagnosis gives.
struct RecordedJob : Recording {
  ReplayOutcome recorded;
};

// ReadRecording, then the recorded outcome from Diagnose of the same files. Throws ScenarioError
// naming the file on bad input (no trace, a trace without its scenario).
RecordedJob LoadRecordedJob(const std::string& directory);

// The seam: a backend that can re-run a recorded job.
class ReplayBackend {
 public:
  virtual ~ReplayBackend() = default;
  virtual std::string name() const = 0;
  // Runs `scenario` (the recorded one, or it with what-if changes) driven by `job`: its sample
  // order when `use_samples`, its getitem results and timings when `use_loads`.
  virtual ReplayOutcome Run(const RecordedJob& job, const Scenario& scenario, bool use_samples, bool use_loads) = 0;
};

// The real LibTorch backend, run as its own program (`petrsim_train`: this executable links no
// LibTorch): the scenario is written to `work_dir`, the job runs on `world_size` local ranks
// over Gloo driven by the recording, its ranks record traces into `work_dir`/trace, and the
// outcome is the diagnosis of those traces. The trainer's output goes to stderr.
class RealReplayBackend final : public ReplayBackend {
 public:
  RealReplayBackend(std::string train_program, std::string work_dir)
      : train_program_(std::move(train_program)), work_dir_(std::move(work_dir)) {}
  std::string name() const override { return "real"; }
  ReplayOutcome Run(const RecordedJob& job, const Scenario& scenario, bool use_samples, bool use_loads) override;

 private:
  std::string train_program_, work_dir_;
};

class SimReplayBackend final : public ReplayBackend {
 public:
  std::string name() const override { return "sim"; }
  ReplayOutcome Run(const RecordedJob& job, const Scenario& scenario, bool use_samples, bool use_loads) override;
};

struct ReplayReport {
  std::string backend;
  std::vector<std::string> sets;
  bool used_samples = false, used_loads = false;
  std::string samples_note;  // why the recorded sample order was not used, if it was not
  ReplayOutcome recorded, replayed;
  bool reproduced = false;  // same outcome, stuck ranks, collective and iteration
  std::vector<std::string> differences;
};

// Replays `job` on `backend`, with `sets` (field=value overrides) applied to its scenario.
ReplayReport Replay(const RecordedJob& job, ReplayBackend& backend, const std::vector<std::string>& sets);

std::string FormatReplay(const RecordedJob& job, const ReplayReport& report);
nlohmann::json ReplayJson(const ReplayReport& report);

}  // namespace petrsim
