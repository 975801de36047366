// The trace format's shared pieces; see trace_event.h.
#include "trace/trace_event.h"

#include <fmt/format.h>

#include <filesystem>

#include "base/assert.h"

namespace petrsim {

void AppendVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

void FillTraceEvent(const TraceRecord& record, TraceEvent& event) {
  // A record is one of the TraceKinds, none of the kinds only the writers and the probe write
  // (the readers' ToTraceRecord asserts the same of what it converts back).
  PETRSIM_ASSERT(TraceEventKind_IsValid(static_cast<int>(record.kind)));
  PETRSIM_ASSERT(HasTraceKind(static_cast<TraceEventKind>(record.kind)));
  event.Clear();
  event.set_kind(static_cast<TraceEventKind>(record.kind));
  event.set_start_ns(record.start_ns);
  event.set_end_ns(record.end_ns);
  if (record.worker != -1) event.set_worker(record.worker);
  if (record.iteration != 0) event.set_iteration(record.iteration);
  if (record.slot != 0) event.set_slot(record.slot);
  if (record.index != -1) event.set_index(record.index);
  if (record.final_index != -1) event.set_final_index(record.final_index);
  if (record.attempts != 0) event.set_attempts(record.attempts);
  if (!record.process_group.empty()) {
    event.set_process_group(record.process_group.data(), record.process_group.size());
  }
  if (record.seq != 0) event.set_seq(record.seq);
  if (record.op != Collective::allreduce) event.set_op(record.op);
  if (record.numel != 0) event.set_numel(record.numel);
  if (record.dtype != Collective::float32) event.set_dtype(record.dtype);
  if (record.started_ns != -1) event.set_started_ns(record.started_ns);
  if (record.group != -1) event.set_group(record.group);
  if (record.gt_count != 0) event.set_gt_count(record.gt_count);
  if (record.accepted) event.set_accepted(true);
  if (!record.completed) event.set_completed(false);
  if (!record.text.empty()) event.set_text(record.text.data(), record.text.size());
}

TraceHeader MakeTraceHeader(const Scenario& scenario, const std::string& scenario_path, uint32_t world_size,
                            const std::string& backend, const std::string& build_id) {
  TraceHeader header;
  header.set_format_version(kTraceFormatVersion);
  *header.mutable_scenario() = scenario;
  header.set_scenario_path(scenario_path);
  header.set_seed(scenario.seed());
  header.set_world_size(world_size);
  header.set_backend(backend);
  header.set_build_id(build_id);
  header.set_clock(backend == "sim" ? "virtual" : "steady");
  return header;
}

// TraceKind and TraceEventKind must agree value for value.
static_assert(static_cast<int>(TraceKind::kLoad) == TraceEventKind::load);
static_assert(static_cast<int>(TraceKind::kDataWait) == TraceEventKind::data_wait);
static_assert(static_cast<int>(TraceKind::kCompute) == TraceEventKind::compute);
static_assert(static_cast<int>(TraceKind::kCollective) == TraceEventKind::collective);
static_assert(static_cast<int>(TraceKind::kCheckpoint) == TraceEventKind::checkpoint);
static_assert(static_cast<int>(TraceKind::kIteration) == TraceEventKind::iteration);
static_assert(static_cast<int>(TraceKind::kLivelock) == TraceEventKind::livelock);
static_assert(static_cast<int>(TraceKind::kWatchdog) == TraceEventKind::watchdog);
static_assert(static_cast<int>(TraceKind::kSamplerDraw) == TraceEventKind::sampler_draw);
static_assert(static_cast<int>(TraceKind::kGetItemAttempt) == TraceEventKind::getitem_attempt);
static_assert(static_cast<int>(TraceKind::kBatchReady) == TraceEventKind::batch_ready);
static_assert(static_cast<int>(TraceKind::kProcessExit) == TraceEventKind::process_exit);
static_assert(static_cast<int>(TraceKind::kStall) == TraceEventKind::stall);
static_assert(static_cast<int>(TraceKind::kRankDied) == TraceEventKind::rank_died);
static_assert(static_cast<int>(TraceKind::kDesync) == TraceEventKind::desync);

std::string ProbeTorchRelease(const TraceHeader& header) {
  const std::string& id = header.build_id();
  const size_t at = id.find("(torch ");
  if (at == std::string::npos) return "";
  const size_t begin = at + 7;
  const size_t end = id.find(')', begin);
  return id.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
}

std::string RankTracePath(const std::string& directory, uint32_t rank) {
  return (std::filesystem::path(directory) / fmt::format("rank_{}.pbtrace", rank)).string();
}

TraceEvent ToTraceEvent(const TraceRecord& record) {
  TraceEvent event;
  FillTraceEvent(record, event);
  return event;
}

TraceRecord ToTraceRecord(const TraceEvent& event, uint32_t rank) {
  PETRSIM_ASSERT(HasTraceKind(event.kind()));
  TraceRecord record;
  record.kind = static_cast<TraceKind>(event.kind());
  record.rank = rank;
  record.worker = event.worker();
  record.start_ns = event.start_ns();
  record.end_ns = event.end_ns();
  record.iteration = event.iteration();
  record.slot = event.slot();
  record.index = event.index();
  record.final_index = event.final_index();
  record.attempts = event.attempts();
  record.process_group = event.process_group();
  record.seq = event.seq();
  record.op = event.op();
  record.numel = event.numel();
  record.dtype = event.dtype();
  record.started_ns = event.started_ns();
  record.group = event.group();
  record.gt_count = event.gt_count();
  record.accepted = event.accepted();
  record.completed = event.completed();
  record.text = event.text();
  return record;
}

}  // namespace petrsim
