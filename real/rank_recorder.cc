// A real rank's trace; see rank_recorder.h.
#include "real/rank_recorder.h"

#include <algorithm>

#include "base/assert.h"

namespace petrsim::real {

RankRecorder::RankRecorder(const Scenario& scenario, const TrainOptions& options)
    : rank_(options.rank), t0_(std::chrono::steady_clock::now()) {
  if (options.trace_path.empty()) return;
  trace_ = std::make_unique<RankTraceWriter>(
      options.trace_path, scenario, "", options.rank, options.world_size, "gloo", "petrsim_train",
      options.trace_ring > 0 ? RankTraceWriter::Mode::kRing : RankTraceWriter::Mode::kStream, options.trace_ring);
  if (options.trace_ring > 0) RankTraceWriter::InstallSignalDump(trace_.get());
}

int64_t RankRecorder::Now() const {
  return static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_).count());
}

void RankRecorder::Record(TraceRecord record) {
  // A record ends after it starts.
  PETRSIM_ASSERT(record.end_ns >= record.start_ns);
  if (!trace_) return;
  record.rank = rank_;
  std::lock_guard<std::mutex> lock(mutex_);
  if (!finished_) trace_->Record(record);
}

void RankRecorder::OpenCollective(const Collective& step, uint64_t seq, uint64_t iteration, int64_t start_ns) {
  if (!trace_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  // Each (group, seq) opens once.
  PETRSIM_ASSERT(open_.find({step.process_group(), seq}) == open_.end());
  open_[{step.process_group(), seq}] = Open{&step, iteration, start_ns};
}

void RankRecorder::CloseCollective(const Collective& step, uint64_t seq) {
  if (!trace_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto key = std::make_pair(step.process_group(), seq);
  // Only an open collective closes, and it ends after it started.
  PETRSIM_ASSERT(open_.find(key) != open_.end());
  const Open open = open_[key];
  PETRSIM_ASSERT(Now() >= open.start_ns);
  open_.erase(key);
  if (!finished_) trace_->Record(CollectiveRecord(step, seq, open, true));
}

TraceRecord RankRecorder::CollectiveRecord(const Collective& step, uint64_t seq, const Open& open,
                                           bool completed) const {
  TraceRecord r;
  r.rank = rank_;
  r.kind = TraceKind::kCollective;
  r.worker = step.blocking() ? kMainProcess : kAsyncCollectives;
  r.start_ns = open.start_ns;
  r.end_ns = std::max(Now(), open.start_ns);
  r.iteration = open.iteration;
  r.process_group = step.process_group();
  r.seq = seq;
  r.op = step.op();
  r.numel = step.numel();
  r.dtype = step.dtype();
  r.completed = completed;
  r.started_ns = completed ? open.start_ns : -1;
  r.text = step.name();
  return r;
}

void RankRecorder::Finish(TraceKind kind, uint64_t iteration, const std::string& text, const std::string& exit) {
  if (!trace_) return;
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  for (const auto& [key, open] : open_) trace_->Record(CollectiveRecord(*open.step, key.second, open, false));
  TraceRecord r;
  r.rank = rank_;
  r.start_ns = r.end_ns = Now();
  r.iteration = iteration;
  if (!text.empty()) {
    r.kind = kind;
    r.text = text;
    trace_->Record(r);
  }
  r.kind = TraceKind::kProcessExit;
  r.text = exit;
  trace_->Record(r);
  trace_->Finish();
}

}  // namespace petrsim::real
