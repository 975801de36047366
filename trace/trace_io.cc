// Per-rank trace files; see trace_io.h.
#include "trace/trace_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <system_error>
#include <vector>

#include "model/assert.h"
#include "model/error.h"

namespace petrsim {
namespace {

constexpr size_t kRankBufferBytes = size_t{64} << 10;
constexpr uint64_t kBufferedBytesMax = uint64_t{64} << 20;
// No message of a petrsim trace comes near this; a larger length prefix means corruption.
constexpr uint64_t kMessageBytesMax = uint64_t{256} << 20;

void AppendVarint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out += static_cast<char>((value & 0x7f) | 0x80);
    value >>= 7;
  }
  out += static_cast<char>(value);
}

// The record's fields that differ from TraceEvent's defaults (which equal TraceRecord's).
void FillTraceEvent(const TraceRecord& record, TraceEvent& event) {
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

}  // namespace

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
static_assert(static_cast<int>(TraceKind::kRankDied) == TraceEventKind::rank_died);
static_assert(static_cast<int>(TraceKind::kDesync) == TraceEventKind::desync);

std::string RankTracePath(const std::string& directory, uint32_t rank) {
  return (std::filesystem::path(directory) / fmt::format("rank_{}.pbtrace", rank)).string();
}

TraceEvent ToTraceEvent(const TraceRecord& record) {
  TraceEvent event;
  FillTraceEvent(record, event);
  return event;
}

TraceRecord ToTraceRecord(const TraceEvent& event, uint32_t rank) {
  PETRSIM_ASSERT(event.kind() != TraceEventKind::truncated);
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

// ---------------------------------------------------------------------------------------------
// TraceDirectoryWriter

TraceDirectoryWriter::TraceDirectoryWriter(std::string directory, const Scenario& scenario,
                                           const std::string& scenario_path, uint32_t world_size,
                                           const std::string& backend,
                                           const std::string& build_id, uint64_t records_max,
                                           uint64_t ring_events)
    : directory_(std::move(directory)),
      world_size_(world_size),
      records_max_(records_max),
      buffers_(world_size),
      created_(world_size, false),
      dropped_(world_size, 0),
      ring_events_(ring_events) {
  if (ring_events_ > 0) {
    rings_.resize(world_size);
    ring_next_.assign(world_size, 0);
  }
  PETRSIM_ASSERT(world_size >= 1);
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  if (error) {
    throw ScenarioError(
        fmt::format("{}: cannot create the trace directory: {}", directory_, error.message()));
  }
  if (!std::filesystem::is_directory(directory_, error)) {
    throw ScenarioError(fmt::format("{}: cannot write traces there: not a directory", directory_));
  }
  TraceHeader header;
  header.set_format_version(kTraceFormatVersion);
  *header.mutable_scenario() = scenario;
  header.set_scenario_path(scenario_path);
  header.set_seed(scenario.seed());
  header.set_world_size(world_size);
  header.set_backend(backend);
  header.set_build_id(build_id);
  header.set_clock(backend == "sim" ? "virtual" : "steady");
  header_common_ = header.SerializeAsString();
}

TraceDirectoryWriter::~TraceDirectoryWriter() {
  if (!finished_) RemoveTmpFiles();
}

std::string TraceDirectoryWriter::TmpPath(uint32_t rank) const {
  return RankTracePath(directory_, rank) + ".tmp";
}

void TraceDirectoryWriter::RemoveTmpFiles() {
  for (uint32_t r = 0; r < world_size_; ++r) {
    if (created_[r]) std::remove(TmpPath(r).c_str());
    created_[r] = false;
  }
}

void TraceDirectoryWriter::Encode(const TraceEvent& event, std::string& out) {
  const size_t before = out.size();
  const size_t size = event.ByteSizeLong();
  AppendVarint(out, size);
  const size_t at = out.size();
  out.resize(at + size);
  event.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data() + at));
  buffered_bytes_ += out.size() - before;
}

// Appends rank's buffer to its tmp file, creating the file (header first) if needed, and
// releases the buffer's memory. After a write error nothing is written any more.
void TraceDirectoryWriter::Append(uint32_t rank) {
  std::string& buffer = buffers_[rank];
  buffered_bytes_ -= std::min<uint64_t>(buffered_bytes_, buffer.size());
  if (!write_error_.empty()) {
    std::string().swap(buffer);
    return;
  }
  const std::string path = TmpPath(rank);
  std::string head;
  if (!created_[rank]) {
    TraceHeader rank_only;
    rank_only.set_rank(rank);
    const std::string rank_part = rank_only.SerializeAsString();
    AppendVarint(head, header_common_.size() + rank_part.size());
    head += header_common_;
    head += rank_part;
  }
  std::FILE* file = std::fopen(path.c_str(), created_[rank] ? "ab" : "wb");
  if (file == nullptr) {
    write_error_ = fmt::format("{}: cannot open for writing: {}", path, std::strerror(errno));
    std::string().swap(buffer);
    return;
  }
  created_[rank] = true;
  bool ok = std::fwrite(head.data(), 1, head.size(), file) == head.size() &&
            std::fwrite(buffer.data(), 1, buffer.size(), file) == buffer.size();
  int error = ok ? 0 : errno;
  if (std::fclose(file) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    write_error_ = fmt::format("{}: cannot write: {}", path, std::strerror(error != 0 ? error : EIO));
  }
  std::string().swap(buffer);
}

void TraceDirectoryWriter::AppendAll() {
  for (uint32_t r = 0; r < world_size_; ++r) {
    if (!buffers_[r].empty()) Append(r);
  }
  buffered_bytes_ = 0;
}

void TraceDirectoryWriter::Record(const TraceRecord& record) {
  PETRSIM_ASSERT(!finished_);
  PETRSIM_ASSERT(record.rank < world_size_);
  if (records_written_ >= records_max_) {
    ++records_truncated_;
    ++dropped_[record.rank];
    return;
  }
  ++records_written_;
  if (!write_error_.empty()) return;
  FillTraceEvent(record, event_);
  if (ring_events_ > 0) {
    auto& ring = rings_[record.rank];
    uint64_t& next = ring_next_[record.rank];
    if (ring.size() < ring_events_) ring.emplace_back();
    std::string& slot = ring[next % ring_events_];
    buffered_bytes_ -= std::min<uint64_t>(buffered_bytes_, slot.size());
    slot.clear();
    Encode(event_, slot);
    ++next;
    return;
  }
  std::string& buffer = buffers_[record.rank];
  Encode(event_, buffer);
  if (buffer.size() >= kRankBufferBytes) {
    Append(record.rank);
  } else if (buffered_bytes_ >= kBufferedBytesMax) {
    AppendAll();
  }
}

void TraceDirectoryWriter::Finish() {
  PETRSIM_ASSERT(!finished_);
  for (uint32_t r = 0; r < world_size_ && ring_events_ > 0; ++r) {
    const uint64_t next = ring_next_[r];
    if (next > ring_events_) {
      TraceEvent marker;
      marker.set_kind(TraceEventKind::truncated);
      marker.set_start_ns(0);
      marker.set_end_ns(0);
      marker.set_records_dropped(next - ring_events_);
      marker.set_text(fmt::format("ring buffer: the last {} records of this rank are kept, {} older ones "
                                  "were dropped", ring_events_, next - ring_events_));
      Encode(marker, buffers_[r]);
    }
    const uint64_t count = std::min<uint64_t>(next, ring_events_);
    for (uint64_t i = next - count; i < next; ++i) buffers_[r] += rings_[r][i % ring_events_];
    std::vector<std::string>().swap(rings_[r]);
  }
  for (uint32_t r = 0; r < world_size_; ++r) {
    if (dropped_[r] != 0) {
      TraceEvent marker;
      marker.set_kind(TraceEventKind::truncated);
      marker.set_start_ns(0);
      marker.set_end_ns(0);
      marker.set_records_dropped(dropped_[r]);
      marker.set_text(fmt::format("{} records of this rank past the writer's limit of {} "
                                     "records were not written",
                                     dropped_[r], records_max_));
      Encode(marker, buffers_[r]);
    }
    // Every rank gets a file, if only its header.
    if (!buffers_[r].empty() || !created_[r]) Append(r);
  }
  if (!write_error_.empty()) {
    RemoveTmpFiles();
    throw ScenarioError(write_error_);
  }
  for (uint32_t r = 0; r < world_size_; ++r) {
    const std::string final_path = RankTracePath(directory_, r);
    if (std::rename(TmpPath(r).c_str(), final_path.c_str()) != 0) {
      const int error = errno;
      const std::string message = fmt::format("{}: cannot rename {} onto it: {}", final_path,
                                              TmpPath(r), std::strerror(error));
      for (uint32_t done = 0; done < r; ++done) {
        std::remove(RankTracePath(directory_, done).c_str());
        created_[done] = false;
      }
      RemoveTmpFiles();
      throw ScenarioError(message);
    }
  }
  finished_ = true;
}

// ---------------------------------------------------------------------------------------------
// Reading

RankTraceWriter::RankTraceWriter(std::string path, const Scenario& scenario,
                                 const std::string& scenario_path, uint32_t rank, uint32_t world_size,
                                 const std::string& backend, const std::string& build_id, Mode mode,
                                 uint64_t ring_events)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp"), mode_(mode) {
  PETRSIM_ASSERT(rank < world_size);
  PETRSIM_ASSERT(mode != Mode::kRing || ring_events >= 1);
  TraceHeader header;
  header.set_format_version(kTraceFormatVersion);
  *header.mutable_scenario() = scenario;
  header.set_scenario_path(scenario_path);
  header.set_seed(scenario.seed());
  header.set_rank(rank);
  header.set_world_size(world_size);
  header.set_backend(backend);
  header.set_build_id(build_id);
  header.set_clock(backend == "sim" ? "virtual" : "steady");
  const std::string body = header.SerializeAsString();
  AppendVarint(header_, body.size());
  header_ += body;
  if (mode_ == Mode::kStream) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) throw ScenarioError(fmt::format("{}: cannot open for writing: {}", path_, std::strerror(errno)));
    if (!WriteAll(fd_, header_.data(), header_.size())) {
      const int saved = errno;
      ::close(fd_);
      fd_ = -1;
      throw ScenarioError(fmt::format("{}: write error: {}", path_, std::strerror(saved)));
    }
  } else {
    ring_size_ = ring_events;
    ring_ = std::make_unique<Slot[]>(ring_size_);
    // Check now that the file can be made, so a bad path fails at the start, not at the dump.
    const int fd = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) throw ScenarioError(fmt::format("{}: cannot open for writing: {}", tmp_path_, std::strerror(errno)));
    ::close(fd);
    ::unlink(tmp_path_.c_str());
  }
}

namespace {
std::atomic<RankTraceWriter*> g_signal_writer{nullptr};
}  // namespace

RankTraceWriter::~RankTraceWriter() {
  if (g_signal_writer.load() == this) InstallSignalDump(nullptr);
  if (finished_) return;
  try {
    Finish();
  } catch (const ScenarioError&) {
  }
}

bool RankTraceWriter::WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

void RankTraceWriter::EncodeTo(const TraceRecord& record, std::string& out) {
  event_.Clear();
  FillTraceEvent(record, event_);
  const size_t size = event_.ByteSizeLong();
  AppendVarint(out, size);
  const size_t at = out.size();
  out.resize(at + size);
  event_.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(out.data() + at));
}

void RankTraceWriter::Record(const TraceRecord& record) {
  PETRSIM_ASSERT(!finished_);
  if (mode_ == Mode::kRing) {
    scratch_.clear();
    EncodeTo(record, scratch_);
    if (scratch_.size() > kRingSlotBytes) {
      // Shorten the text (the only field that can be long) until the event fits its slot.
      TraceRecord shorter = record;
      const size_t over = scratch_.size() - kRingSlotBytes + 8;
      shorter.text = record.text.substr(0, record.text.size() > over ? record.text.size() - over : 0);
      scratch_.clear();
      EncodeTo(shorter, scratch_);
      if (scratch_.size() > kRingSlotBytes) {  // a long process group name: keep the kind and times
        TraceRecord bare;
        bare.kind = record.kind;
        bare.rank = record.rank;
        bare.start_ns = record.start_ns;
        bare.end_ns = record.end_ns;
        bare.iteration = record.iteration;
        scratch_.clear();
        EncodeTo(bare, scratch_);
      }
    }
    const uint64_t i = next_.load(std::memory_order_relaxed);
    Slot& slot = ring_[i % ring_size_];
    slot.seq.fetch_add(1, std::memory_order_acq_rel);  // odd: being written
    std::atomic_signal_fence(std::memory_order_seq_cst);
    std::memcpy(slot.bytes, scratch_.data(), scratch_.size());
    slot.size = static_cast<uint32_t>(scratch_.size());
    std::atomic_signal_fence(std::memory_order_seq_cst);
    slot.seq.fetch_add(1, std::memory_order_acq_rel);  // even: complete
    next_.store(i + 1, std::memory_order_release);
    return;
  }
  if (write_errno_ != 0) return;
  EncodeTo(record, buffer_);
  next_.fetch_add(1, std::memory_order_relaxed);
  const bool matters = record.kind == TraceKind::kCollective || record.kind == TraceKind::kLivelock ||
                       record.kind == TraceKind::kWatchdog || record.kind == TraceKind::kRankDied ||
                       record.kind == TraceKind::kDesync || record.kind == TraceKind::kProcessExit;
  if (matters || buffer_.size() >= 4096) Flush();
}

void RankTraceWriter::Flush() {
  if (mode_ == Mode::kRing) {
    Dump();
    return;
  }
  if (fd_ < 0 || buffer_.empty() || write_errno_ != 0) return;
  if (!WriteAll(fd_, buffer_.data(), buffer_.size())) write_errno_ = errno != 0 ? errno : EIO;
  buffer_.clear();
}

// Appends a base-128 varint to out[at..], returning the new end.
static size_t PutVarint(char* out, size_t at, uint64_t value) {
  while (value >= 0x80) {
    out[at++] = static_cast<char>(value | 0x80);
    value >>= 7;
  }
  out[at++] = static_cast<char>(value);
  return at;
}

bool RankTraceWriter::Dump() {
  if (mode_ != Mode::kRing) return true;
  // Only async-signal-safe calls from here on (a signal handler runs this).
  const int fd = ::open(tmp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  bool ok = WriteAll(fd, header_.data(), header_.size());
  const uint64_t next = next_.load(std::memory_order_acquire);
  const uint64_t count = next < ring_size_ ? next : ring_size_;
  if (ok && next > count) {
    // A `truncated` event: kind 10, start 0, end 0, records_dropped, encoded by hand.
    char marker[32];
    size_t body = 0;
    body = PutVarint(marker + 1, body, (1 << 3) | 0);
    body = PutVarint(marker + 1, body, TraceEventKind::truncated);
    body = PutVarint(marker + 1, body, (3 << 3) | 0);
    body = PutVarint(marker + 1, body, 0);
    body = PutVarint(marker + 1, body, (4 << 3) | 0);
    body = PutVarint(marker + 1, body, 0);
    body = PutVarint(marker + 1, body, (16 << 3) | 0);
    body = PutVarint(marker + 1, body, next - count);
    marker[0] = static_cast<char>(body);  // < 128
    ok = WriteAll(fd, marker, body + 1);
  }
  for (uint64_t i = next - count; ok && i < next; ++i) {
    Slot& slot = ring_[i % ring_size_];
    const uint64_t before = slot.seq.load(std::memory_order_acquire);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    const uint32_t size = slot.size <= kRingSlotBytes ? slot.size : 0;
    std::memcpy(staging_, slot.bytes, size);
    std::atomic_signal_fence(std::memory_order_seq_cst);
    const uint64_t after = slot.seq.load(std::memory_order_acquire);
    if ((before & 1) != 0 || before != after) continue;  // being rewritten: skip it
    ok = WriteAll(fd, staging_, size);
  }
  ok = ::close(fd) == 0 && ok;
  if (ok) ok = ::rename(tmp_path_.c_str(), path_.c_str()) == 0;
  if (!ok) ::unlink(tmp_path_.c_str());
  return ok;
}

void RankTraceWriter::Finish() {
  if (finished_) return;
  finished_ = true;
  if (mode_ == Mode::kRing) {
    if (!Dump()) throw ScenarioError(fmt::format("{}: cannot write the trace: {}", path_, std::strerror(errno)));
    return;
  }
  Flush();
  const int close_errno = ::close(fd_) == 0 ? 0 : errno;
  fd_ = -1;
  if (write_errno_ != 0 || close_errno != 0) {
    throw ScenarioError(fmt::format("{}: write error: {}", path_,
                                    std::strerror(write_errno_ != 0 ? write_errno_ : close_errno)));
  }
}

namespace {

struct sigaction g_previous_term {}, g_previous_abrt {};

extern "C" void DumpOnSignal(int signal) {
  if (RankTraceWriter* writer = g_signal_writer.load()) writer->Dump();
  // Hand the signal on: to the handler that was there before, or die of it.
  const struct sigaction& previous = signal == SIGTERM ? g_previous_term : g_previous_abrt;
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN &&
      (previous.sa_flags & SA_SIGINFO) == 0 && previous.sa_handler != DumpOnSignal) {
    previous.sa_handler(signal);
    return;
  }
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  ::sigaction(signal, &action, nullptr);
  ::raise(signal);
}

}  // namespace

void RankTraceWriter::InstallSignalDump(RankTraceWriter* writer) {
  PETRSIM_ASSERT(writer == nullptr || writer->mode_ == Mode::kRing);
  RankTraceWriter* const before = g_signal_writer.exchange(writer);
  struct sigaction action {};
  sigemptyset(&action.sa_mask);
  sigaddset(&action.sa_mask, SIGTERM);  // no dump inside a dump
  sigaddset(&action.sa_mask, SIGABRT);
  if (writer != nullptr && before == nullptr) {
    action.sa_handler = DumpOnSignal;
    ::sigaction(SIGTERM, &action, &g_previous_term);
    ::sigaction(SIGABRT, &action, &g_previous_abrt);
  } else if (writer == nullptr && before != nullptr) {
    ::sigaction(SIGTERM, &g_previous_term, nullptr);
    ::sigaction(SIGABRT, &g_previous_abrt, nullptr);
  }
}

RankTrace ReadRankTrace(const std::string& path) { return ReadRankTrace(path, nullptr); }

namespace {

// Protobuf wire decoding over [p, end): false on a malformed or cut value.
bool ReadVarint(const uint8_t*& p, const uint8_t* end, uint64_t& value) {
  value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (p >= end) return false;
    const uint8_t byte = *p++;
    value |= uint64_t{byte & 0x7fu} << shift;
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// A tag as protobuf's parser reads it: at most 5 bytes, summed in 32-bit arithmetic (so a
// 5-byte tag wider than 32 bits wraps, and a longer one is an error).
bool ReadTag(const uint8_t*& p, const uint8_t* end, uint32_t& tag) {
  tag = 0;
  for (int i = 0; i < 5; ++i) {
    if (p >= end) return false;
    const uint8_t byte = *p++;
    tag += static_cast<uint32_t>(byte & 0x7fu) << (7 * i);
    if ((byte & 0x80) == 0) return true;
  }
  return false;
}

// Skips the rest of group `field` (its start tag already read); false if it does not end.
bool SkipGroup(const uint8_t*& p, const uint8_t* end, uint64_t field, int depth) {
  if (depth > 100) return false;
  while (p < end) {
    uint32_t tag = 0;
    if (!ReadTag(p, end, tag)) return false;
    const uint64_t inner = tag >> 3;
    const unsigned wire = static_cast<unsigned>(tag & 7);
    if (inner == 0) return false;
    if (wire == 4) return inner == field;
    if (wire == 0) {
      uint64_t v = 0;
      if (!ReadVarint(p, end, v)) return false;
    } else if (wire == 1) {
      if (end - p < 8) return false;
      p += 8;
    } else if (wire == 5) {
      if (end - p < 4) return false;
      p += 4;
    } else if (wire == 2) {
      uint64_t n = 0;
      const uint8_t* const before = p;
      if (!ReadVarint(p, end, n) || p - before > 5 || n >= (uint64_t{1} << 31) ||
          n > static_cast<uint64_t>(end - p)) {
        return false;
      }
      p += n;
    } else if (wire == 3) {
      if (!SkipGroup(p, end, inner, depth + 1)) return false;
    } else {
      return false;
    }
  }
  return false;
}

// Decodes one TraceEvent's bytes; false if they do not parse.
bool DecodeEvent(const uint8_t* p, const uint8_t* end, TraceEventView& e) {
  e = TraceEventView{};
  while (p < end) {
    uint32_t tag = 0;
    if (!ReadTag(p, end, tag)) return false;
    const uint64_t field = tag >> 3;
    const unsigned wire = static_cast<unsigned>(tag & 7);
    if (field == 0) return false;
    if (wire == 0) {
      uint64_t v = 0;
      if (!ReadVarint(p, end, v)) return false;
      switch (field) {
        // protobuf reads an enum as int32 (the low 32 bits) and keeps values it does not know
        // aside, leaving the default: so does this.
        case 1: if (TraceEventKind_IsValid(static_cast<int32_t>(v))) e.kind = static_cast<TraceEventKind>(static_cast<int32_t>(v)); break;
        case 2: e.worker = static_cast<int32_t>(v); break;
        case 3: e.start_ns = static_cast<int64_t>(v); break;
        case 4: e.end_ns = static_cast<int64_t>(v); break;
        case 5: e.iteration = v; break;
        case 6: e.slot = static_cast<uint32_t>(v); break;
        case 7: e.index = static_cast<int64_t>(v); break;
        case 8: e.final_index = static_cast<int64_t>(v); break;
        case 9: e.attempts = v; break;
        case 11: e.seq = v; break;
        case 12: if (Collective::Op_IsValid(static_cast<int32_t>(v))) e.op = static_cast<Collective::Op>(static_cast<int32_t>(v)); break;
        case 13: e.numel = v; break;
        case 14: e.completed = v != 0; break;
        case 16: e.records_dropped = v; break;
        case 17: if (Collective::Dtype_IsValid(static_cast<int32_t>(v))) e.dtype = static_cast<Collective::Dtype>(static_cast<int32_t>(v)); break;
        case 18: e.started_ns = static_cast<int64_t>(v); break;
        case 19: e.group = static_cast<int64_t>(v); break;
        case 20: e.gt_count = static_cast<uint32_t>(v); break;
        case 21: e.accepted = v != 0; break;
        default: break;  // a field of a later format: skipped
      }
    } else if (wire == 2) {
      // A length is a varint32 (at most 5 bytes) below 2^31, as protobuf's ReadSize reads it.
      uint64_t n = 0;
      const uint8_t* const before = p;
      if (!ReadVarint(p, end, n) || p - before > 5 || n >= (uint64_t{1} << 31) ||
          n > static_cast<uint64_t>(end - p)) {
        return false;
      }
      const std::string_view bytes(reinterpret_cast<const char*>(p), n);
      if (field == 10) e.process_group = bytes;
      if (field == 15) e.text = bytes;
      p += n;
    } else if (wire == 1) {
      if (end - p < 8) return false;
      p += 8;
    } else if (wire == 5) {
      if (end - p < 4) return false;
      p += 4;
    } else if (wire == 3) {
      // A group (no TraceEvent field is one): skipped to its matching end, as protobuf skips an
      // unknown group, nesting at most 100 deep like protobuf's recursion limit.
      if (!SkipGroup(p, end, field, 1)) return false;
    } else {
      return false;  // an end-group without its start, or wire types 6 and 7
    }
  }
  return true;
}

}  // namespace

namespace {

// The framing both readers share: the file in chunks of 1 MiB, a header checked for its version,
// then length-delimited events, each handed to `decode(body, size)` (false: it does not parse)
// and then, outside the error handling, to `deliver()`. A cut or corrupt event after a good
// header ends the reading with *partial_error set (or throws without it).
template <class Decode, class Deliver>
TraceHeader ReadFramed(const std::string& path, Decode&& decode, Deliver&& deliver, std::string* partial_error) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ScenarioError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) throw ScenarioError(fmt::format("{}: cannot stat: {}", path, std::strerror(errno)));
  const uint64_t file_bytes = static_cast<uint64_t>(info.st_size);
  // Read in chunks of 1 MiB (plus the tail of a message cut by the chunk's end).
  std::vector<uint8_t> buffer;
  size_t begin = 0;       // the next message in buffer
  uint64_t consumed = 0;  // file bytes before buffer[0]
  bool eof = false;
  const auto fill = [&](size_t need) {  // makes at least `need` bytes available from begin
    while (!eof && buffer.size() - begin < need) {
      if (begin > 0) {
        buffer.erase(buffer.begin(), buffer.begin() + static_cast<std::ptrdiff_t>(begin));
        consumed += begin;
        begin = 0;
      }
      const size_t at = buffer.size();
      const size_t chunk = std::max<size_t>(need, size_t{1} << 20);
      buffer.resize(at + chunk);
      ssize_t n;
      do {
        n = ::read(fd, buffer.data() + at, chunk);
      } while (n < 0 && errno == EINTR);
      if (n < 0) throw ScenarioError(fmt::format("{}: read error at byte {}: {}", path, consumed + at, std::strerror(errno)));
      buffer.resize(at + static_cast<size_t>(n));
      if (n == 0) eof = true;
    }
  };
  TraceHeader header;
  uint64_t index = 0;
  for (;; ++index) {
    try {
      fill(10);
      const uint64_t offset = consumed + begin;
      const auto where = [&] {
        return fmt::format("{}: message {} ({}) at byte {}", path, index,
                           index == 0 ? "the TraceHeader" : "a TraceEvent", offset);
      };
      if (begin == buffer.size()) break;  // the end, between messages
      const uint8_t* p = buffer.data() + begin;
      const uint8_t* const available_end = buffer.data() + buffer.size();
      uint64_t size = 0;
      if (!ReadVarint(p, available_end, size)) {
        throw ScenarioError(fmt::format("{}: truncated or corrupt length prefix (file has {} bytes)", where(),
                                        file_bytes));
      }
      const size_t prefix = static_cast<size_t>(p - (buffer.data() + begin));
      if (size > kMessageBytesMax) {
        throw ScenarioError(fmt::format("{}: corrupt: length prefix says {} bytes (at most {})", where(), size,
                                        kMessageBytesMax));
      }
      if (size > file_bytes - std::min(file_bytes, offset + prefix)) {
        throw ScenarioError(fmt::format(
            "{}: truncated: the message needs {} bytes, only {} remain (the writer did not finish?)", where(), size,
            file_bytes - std::min(file_bytes, offset + prefix)));
      }
      fill(prefix + size);
      if (buffer.size() - begin < prefix + size) {
        throw ScenarioError(fmt::format(
            "{}: truncated: the message needs {} bytes, only {} remain (the writer did not finish?)", where(), size,
            buffer.size() - begin - prefix));
      }
      const uint8_t* body = buffer.data() + begin + prefix;
      if (index == 0) {
        if (!header.ParseFromArray(body, static_cast<int>(size))) {
          throw ScenarioError(fmt::format("{}: corrupt: its {} bytes do not parse", where(), size));
        }
        const uint32_t version = header.format_version();
        if (version == 0) {
          throw ScenarioError(fmt::format("{}: not a petrsim trace: its first message has no format_version", path));
        }
        if (version > kTraceFormatVersion) {
          throw ScenarioError(fmt::format("{}: format_version {} is newer than this build reads ({}); use a newer "
                                          "petrsim", path, version, kTraceFormatVersion));
        }
      } else {
        if (!decode(body, static_cast<size_t>(size))) {
          throw ScenarioError(fmt::format("{}: corrupt: its {} bytes do not parse", where(), size));
        }
      }
      begin += prefix + size;
    } catch (const ScenarioError& error) {
      if (partial_error == nullptr || index == 0) throw;
      *partial_error = error.what();
      break;
    }
    // Outside the try: an error of the caller's own is not a cut file.
    if (index > 0) deliver();
  }
  if (index == 0) throw ScenarioError(fmt::format("{}: empty: expected a TraceHeader first", path));
  return header;
}

}  // namespace

TraceHeader ForEachTraceEvent(const std::string& path, const std::function<void(const TraceEvent&)>& on_event,
                              std::string* partial_error) {
  TraceEvent event;
  return ReadFramed(
      path, [&](const uint8_t* body, size_t size) { return event.ParseFromArray(body, static_cast<int>(size)); },
      [&] { on_event(event); }, partial_error);
}

TraceHeader ScanTraceEvents(const std::string& path, const std::function<void(const TraceEventView&)>& on_event,
                            std::string* partial_error) {
  TraceEventView view;
  return ReadFramed(
      path, [&](const uint8_t* body, size_t size) { return DecodeEvent(body, body + size, view); },
      [&] { on_event(view); }, partial_error);
}

RankTrace ReadRankTrace(const std::string& path, std::string* partial_error) {
  RankTrace trace;
  trace.header = ForEachTraceEvent(path, [&](const TraceEvent& event) { trace.events.push_back(event); },
                                   partial_error);
  return trace;
}

}  // namespace petrsim
