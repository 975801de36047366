// The Chrome/Perfetto trace-event JSON timeline; see perfetto_writer.h.
#include "trace/perfetto_writer.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <iterator>

#include "base/assert.h"
#include "base/error.h"
#include "base/json_text.h"
#include "proto/trace.pb.h"
#include "scenario/outcome.h"
#include "trace/trace_event.h"

namespace petrsim {
namespace {

constexpr size_t kBufferFlushBytes = size_t{1} << 16;

// Nanoseconds as microseconds with exactly three decimals: 1234567 -> "1234.567".
void AppendMicros(std::string& out, int64_t ns) {
  const bool negative = ns < 0;
  // Through uint64_t so that the magnitude of INT64_MIN does not overflow.
  const uint64_t magnitude = negative ? uint64_t{0} - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  fmt::format_to(std::back_inserter(out), "{}{}.{:03}", negative ? "-" : "", magnitude / 1000, magnitude % 1000);
}

// A JSON string literal. Plain ASCII (the usual case) is copied as is; anything else goes
// through nlohmann::json, which escapes it and replaces invalid UTF-8 rather than failing.
void AppendJsonString(std::string& out, std::string_view text) {
  bool plain = true;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte < 0x20 || byte >= 0x7f || c == '"' || c == '\\') {
      plain = false;
      break;
    }
  }
  if (plain) {
    out += '"';
    out += text;
    out += '"';
    return;
  }
  out += JsonText(nlohmann::json(std::string(text)));
}

const std::string& KindName(TraceKind kind) { return TraceEventKind_Name(static_cast<TraceEventKind>(kind)); }

// Kinds drawn as instants ("ph":"i"); the others are slices with a duration.
bool IsInstant(TraceKind kind) {
  return kind == TraceKind::kLivelock || kind == TraceKind::kWatchdog || kind == TraceKind::kRankDied ||
         kind == TraceKind::kDesync || kind == TraceKind::kBatchReady || kind == TraceKind::kProcessExit;
}

// The track of a record within its rank: main (0), a worker (worker + 1), the iterations, or a lane of the
// non-blocking collectives. Those overlap one another (a bucket is still reducing when the next is issued): spread
// over lanes by sequence number, slices on one track never overlap while fewer than kAsyncLanes are in flight.
int64_t TrackOf(const TraceRecord& record) {
  int64_t tid = record.worker < 0 ? 0 : int64_t{record.worker} + 1;
  if (record.worker == kAsyncCollectives) {
    tid = PerfettoWriter::kAsyncCollectivesTid + record.seq % PerfettoWriter::kAsyncLanes;
  }
  if (record.kind == TraceKind::kIteration) tid = PerfettoWriter::kIterationsTid;
  return tid;
}

// A load's name ("load idx I -> F") and args; a load that failed (the bounded policy gave up) carries its reason.
void AppendLoad(std::string& out, const TraceRecord& record) {
  std::string name = fmt::format("load idx {}", record.index);
  if (record.final_index >= 0 && record.final_index != record.index) {
    fmt::format_to(std::back_inserter(name), " -> {}", record.final_index);
  }
  AppendJsonString(out, name);
  if (!record.text.empty()) out += ",\"cname\":\"bad\"";
  fmt::format_to(std::back_inserter(out),
                 ",\"args\":{{\"batch\":{},\"slot\":{},\"index\":{},\"final_index\":{},"
                 "\"attempts\":{}",
                 record.iteration, record.slot, record.index, record.final_index, record.attempts);
  if (!record.text.empty()) {
    out += ",\"text\":";
    AppendJsonString(out, record.text);
  }
  out += "}";
}

// A collective's name (its plan step, "HUNG: " when it never completed) and args.
void AppendCollective(std::string& out, const TraceRecord& record) {
  const std::string& plan_op = Collective::Op_Name(record.op);
  std::string name = record.completed ? "" : "HUNG: ";
  name += record.text.empty() ? std::string_view(plan_op) : record.text;
  AppendJsonString(out, name);
  if (!record.completed) out += ",\"cname\":\"terrible\"";
  out += ",\"args\":{\"group\":";
  AppendJsonString(out, record.process_group);
  fmt::format_to(std::back_inserter(out),
                 ",\"seq\":{},\"op\":\"{}\",\"plan_op\":\"{}\",\"numel\":{},"
                 "\"dtype\":\"{}\",\"iteration\":{},\"completed\":{},\"started_ns\":{}}}",
                 record.seq, OpTypeName(record.op), plan_op, record.numel, Collective::Dtype_Name(record.dtype),
                 record.iteration, record.completed, record.started_ns);
}

// An instant's args: its text alone.
void AppendTextArgs(std::string& out, const TraceRecord& record) {
  out += ",\"args\":{\"text\":";
  AppendJsonString(out, record.text);
  out += "}";
}

// The event's name and its args, by kind (after "name":).
void AppendNameAndArgs(std::string& out, const TraceRecord& record) {
  auto to = std::back_inserter(out);
  switch (record.kind) {
    case TraceKind::kLoad:
      AppendLoad(out, record);
      break;
    case TraceKind::kDataWait:
      fmt::format_to(to, "\"wait for batch {0}\",\"args\":{{\"batch\":{0}}}", record.iteration);
      break;
    case TraceKind::kCompute:
      fmt::format_to(to, "\"compute\",\"args\":{{\"iteration\":{}}}", record.iteration);
      break;
    case TraceKind::kCollective:
      AppendCollective(out, record);
      break;
    case TraceKind::kCheckpoint:
      fmt::format_to(to, "\"checkpoint\",\"args\":{{\"iteration\":{}}}", record.iteration);
      break;
    case TraceKind::kIteration:
      fmt::format_to(to, "\"iteration {0}\",\"args\":{{\"iteration\":{0}}}", record.iteration);
      break;
    case TraceKind::kLivelock:
      fmt::format_to(to,
                     "\"livelock\",\"args\":{{\"worker\":{},\"batch\":{},\"slot\":{},"
                     "\"index\":{},\"final_index\":{},\"text\":",
                     record.worker, record.iteration, record.slot, record.index, record.final_index);
      AppendJsonString(out, record.text);
      out += "}";
      break;
    case TraceKind::kBatchReady:
      fmt::format_to(to, "\"batch {0} ready\",\"args\":{{\"batch\":{0}}}", record.iteration);
      break;
    case TraceKind::kStall:
      // The probe's sample of a getitem that has not returned (from its start to the sample): its Python stack.
      fmt::format_to(to,
                     "\"stalled getitem idx {}\",\"cname\":\"terrible\",\"args\":{{\"worker\":{},\"batch\":{},"
                     "\"slot\":{},\"index\":{},\"stack\":",
                     record.index, record.worker, record.iteration, record.slot, record.index);
      AppendJsonString(out, record.text);
      out += "}";
      break;
    case TraceKind::kSamplerDraw:
    case TraceKind::kGetItemAttempt:
      break;  // not drawn (Record)
    case TraceKind::kProcessExit:
      out += "\"exit\"";
      AppendTextArgs(out, record);
      break;
    case TraceKind::kWatchdog:
    case TraceKind::kRankDied:
    case TraceKind::kDesync:
      out += record.kind == TraceKind::kWatchdog   ? "\"watchdog\""
             : record.kind == TraceKind::kRankDied ? "\"rank died\""
                                                   : "\"desync\"";
      AppendTextArgs(out, record);
      break;
  }
}

}  // namespace

nlohmann::json PerfettoWindow::Json() const {
  if (all()) return nullptr;
  nlohmann::json out = nlohmann::json::object();
  if (first_iteration || last_iteration) {
    out["iterations"] = {first_iteration.value_or(0), last_iteration.value_or(UINT64_MAX)};
  }
  if (from_ns) out["from_ns"] = *from_ns;
  return out;
}

PerfettoWriter::PerfettoWriter(std::string path, uint64_t records_max, PerfettoWindow window)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp"), records_max_(records_max), window_(window) {
  // Registered before it exists: a Ctrl-C between the open and the registration would leave it.
  tmp_registration_ = TempFileRegistration(tmp_path_);
  file_ = std::fopen(tmp_path_.c_str(), "wb");
  if (file_ == nullptr) {
    tmp_registration_.Reset();
    throw ScenarioError(fmt::format("{}: cannot open for writing: {}", tmp_path_, std::strerror(errno)));
  }
  buffer_.reserve(kBufferFlushBytes + 4096);
  buffer_ += "{\"traceEvents\":[";
}

PerfettoWriter::~PerfettoWriter() {
  if (!finished_) Abandon();
}

void PerfettoWriter::Abandon() {
  if (file_ != nullptr) {
    std::fclose(file_);
    file_ = nullptr;
  }
  std::remove(tmp_path_.c_str());
  tmp_registration_.Reset();
}

void PerfettoWriter::BeginEvent() {
  buffer_ += first_event_ ? "\n" : ",\n";
  first_event_ = false;
}

void PerfettoWriter::FlushBuffer(bool force) {
  if (buffer_.size() < kBufferFlushBytes && !force) return;
  if (write_errno_ == 0 && !buffer_.empty() &&
      std::fwrite(buffer_.data(), 1, buffer_.size(), file_) != buffer_.size()) {
    write_errno_ = errno != 0 ? errno : EIO;
  }
  buffer_.clear();
}

void PerfettoWriter::EnsureProcess(uint32_t rank) {
  if (!ranks_seen_.insert(rank).second) return;
  BeginEvent();
  fmt::format_to(std::back_inserter(buffer_),
                 "{{\"ph\":\"M\",\"pid\":{0},\"tid\":0,\"name\":\"process_name\","
                 "\"args\":{{\"name\":\"rank {0}\"}}}},\n"
                 "{{\"ph\":\"M\",\"pid\":{0},\"tid\":0,\"name\":\"process_sort_index\","
                 "\"args\":{{\"sort_index\":{0}}}}}",
                 rank);
}

void PerfettoWriter::EnsureThread(uint32_t rank, int64_t tid, int32_t worker) {
  if (!threads_seen_.insert((uint64_t{rank} << 32) | static_cast<uint64_t>(tid)).second) return;
  // Main first, then the iterations right under it, then the workers in order.
  std::string name;
  int64_t sort_index = 0;
  if (tid == kIterationsTid) {
    name = "iterations";
    sort_index = 1;
  } else if (tid >= kAsyncCollectivesTid && tid < kAsyncCollectivesTid + kAsyncLanes) {
    name = fmt::format("collectives (async) {}", tid - kAsyncCollectivesTid);
    sort_index = 2 + (tid - kAsyncCollectivesTid);
  } else if (tid == 0) {
    name = "main";
    sort_index = 0;
  } else {
    name = fmt::format("worker {}", worker);
    sort_index = tid + 2 + kAsyncLanes;
  }
  BeginEvent();
  fmt::format_to(std::back_inserter(buffer_),
                 "{{\"ph\":\"M\",\"pid\":{0},\"tid\":{1},\"name\":\"thread_name\","
                 "\"args\":{{\"name\":\"{2}\"}}}},\n"
                 "{{\"ph\":\"M\",\"pid\":{0},\"tid\":{1},\"name\":\"thread_sort_index\","
                 "\"args\":{{\"sort_index\":{3}}}}}",
                 rank, tid, name, sort_index);
}

void PerfettoWriter::Record(const TraceRecord& record) {
  PETRSIM_ASSERT(!finished_);
  // Sampler draws and single getitem attempts are in the trace files; on the timeline the load
  // slices already show them (index -> final index, attempts).
  if (record.kind == TraceKind::kSamplerDraw || record.kind == TraceKind::kGetItemAttempt) return;
  if (!window_.Contains(record)) {
    ++records_outside_window_;
    return;
  }
  if (records_written_ >= records_max_) {
    if (records_truncated_++ == 0) truncated_at_ = Cut{record.iteration, record.start_ns};
    return;
  }
  ++records_written_;
  // What the backends hand over (and `export` reads back): a TraceKind, of a slice that does not
  // end before it starts.
  PETRSIM_ASSERT(TraceEventKind_IsValid(static_cast<int>(record.kind)));
  PETRSIM_ASSERT(HasTraceKind(static_cast<TraceEventKind>(record.kind)));
  PETRSIM_ASSERT(record.end_ns >= record.start_ns);

  const bool instant = IsInstant(record.kind);
  const int64_t tid = TrackOf(record);
  EnsureProcess(record.rank);
  EnsureThread(record.rank, tid, record.worker);

  std::string& out = buffer_;
  BeginEvent();
  fmt::format_to(std::back_inserter(out), "{{\"ph\":\"{}\",\"pid\":{},\"tid\":{},\"ts\":", instant ? "i" : "X",
                 record.rank, tid);
  AppendMicros(out, record.start_ns);
  if (instant) {
    out += ",\"s\":\"p\"";
  } else {
    out += ",\"dur\":";
    AppendMicros(out, record.end_ns - record.start_ns);
  }
  out += ",\"cat\":\"";
  out += KindName(record.kind);
  out += "\",\"name\":";
  AppendNameAndArgs(out, record);
  out += "}";
  FlushBuffer(false);
}

void PerfettoWriter::Finish(const nlohmann::json& other_data) {
  PETRSIM_ASSERT(!finished_);
  PETRSIM_ASSERT(other_data.is_object() || other_data.is_null());
  finished_ = true;
  nlohmann::json other = other_data.is_null() ? nlohmann::json::object() : other_data;
  other["records"] = records_written_;
  other["truncated_records"] = records_truncated_;
  other["records_max"] = records_max_;
  if (!window_.all()) {
    other["window"] = window_.Json();
    other["records_outside_window"] = records_outside_window_;
  }
  buffer_ += "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":";
  buffer_ += JsonText(other);
  buffer_ += "}\n";
  FlushBuffer(true);
  if (std::fflush(file_) != 0 && write_errno_ == 0) write_errno_ = errno;
  const int close_result = std::fclose(file_);
  file_ = nullptr;
  if (close_result != 0 && write_errno_ == 0) write_errno_ = errno;
  if (write_errno_ != 0) {
    Abandon();
    throw ScenarioError(fmt::format("{}: cannot write: {}", tmp_path_, std::strerror(write_errno_)));
  }
  if (std::rename(tmp_path_.c_str(), path_.c_str()) != 0) {
    const int error = errno;
    Abandon();
    throw ScenarioError(fmt::format("{}: cannot rename {} onto it: {}", path_, tmp_path_, std::strerror(error)));
  }
  tmp_registration_.Reset();
}

}  // namespace petrsim
