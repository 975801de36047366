// A real rank's trace (the trainer's part "tracing"): the rank's RankTraceWriter when the options
// ask for one (streamed, or a ring dumped on SIGTERM and SIGABRT), steady-clock nanoseconds since
// the rank started, records from the main thread and the loader's worker threads, the collectives
// still open (recorded as pending when the rank stops), and the rank's last words. Without a
// trace path every call but Now() does nothing. Internal to real/.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

#include "proto/scenario.pb.h"
#include "real/trainer.h"
#include "trace/rank_writer.h"
#include "trace/trace_sink.h"

namespace petrsim::real {

class RankRecorder {
 public:
  // Throws ScenarioError naming the path if the trace file cannot be created.
  RankRecorder(const Scenario& scenario, const TrainOptions& options);

  // Nanoseconds since the rank started (the trace's clock).
  int64_t Now() const;
  // Records `record` as the rank's (from any thread), until Finish().
  void Record(TraceRecord record);
  // A collective issued at `start_ns` of `iteration`, open until CloseCollective records it
  // completed; at Finish() the ones still open are recorded pending.
  void OpenCollective(const Collective& step, uint64_t seq, uint64_t iteration, int64_t start_ns);
  void CloseCollective(const Collective& step, uint64_t seq);
  // The rank's last words: its pending collectives, an instant of `kind` with `text` (when not
  // empty) and its exit; then the trace is closed. Only the first call counts.
  void Finish(TraceKind kind, uint64_t iteration, const std::string& text, const std::string& exit);

 private:
  struct Open {
    const Collective* step = nullptr;
    uint64_t iteration = 0;
    int64_t start_ns = 0;
  };
  TraceRecord CollectiveRecord(const Collective& step, uint64_t seq, const Open& open, bool completed) const;

  const uint32_t rank_;
  const std::chrono::steady_clock::time_point t0_;
  std::unique_ptr<RankTraceWriter> trace_;
  std::mutex mutex_;  // guards what follows and the writer
  bool finished_ = false;
  std::map<std::pair<std::string, uint64_t>, Open> open_;  // by (process group, seq)
};

}  // namespace petrsim::real
