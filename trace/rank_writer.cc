// One rank's own trace file; see rank_writer.h.
#include "trace/rank_writer.h"

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

#include "base/assert.h"
#include "base/error.h"
#include "trace/reader.h"

namespace petrsim {

RankTraceWriter::RankTraceWriter(std::string path, const Scenario& scenario, const std::string& scenario_path,
                                 uint32_t rank, uint32_t world_size, const std::string& backend,
                                 const std::string& build_id, Mode mode, uint64_t ring_events)
    : path_(std::move(path)), tmp_path_(path_ + ".tmp"), mode_(mode) {
  PETRSIM_ASSERT(rank < world_size);
  PETRSIM_ASSERT(mode != Mode::kRing || ring_events >= 1);
  TraceHeader header = MakeTraceHeader(scenario, scenario_path, world_size, backend, build_id);
  header.set_rank(rank);
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
    constexpr uint64_t kVarint = 0;  // the wire type of every field written here
    body = PutVarint(marker + 1, body, (TraceEvent::kKindFieldNumber << 3) | kVarint);
    body = PutVarint(marker + 1, body, TraceEventKind::truncated);
    body = PutVarint(marker + 1, body, (TraceEvent::kStartNsFieldNumber << 3) | kVarint);
    body = PutVarint(marker + 1, body, 0);
    body = PutVarint(marker + 1, body, (TraceEvent::kEndNsFieldNumber << 3) | kVarint);
    body = PutVarint(marker + 1, body, 0);
    body = PutVarint(marker + 1, body, (TraceEvent::kRecordsDroppedFieldNumber << 3) | kVarint);
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
    throw ScenarioError(
        fmt::format("{}: write error: {}", path_, std::strerror(write_errno_ != 0 ? write_errno_ : close_errno)));
  }
}

namespace {

struct sigaction g_previous_term {
}, g_previous_abrt{};

extern "C" void DumpOnSignal(int signal) {
  if (RankTraceWriter* writer = g_signal_writer.load()) writer->Dump();
  // Hand the signal on: to the handler that was there before, or die of it.
  const struct sigaction& previous = signal == SIGTERM ? g_previous_term : g_previous_abrt;
  if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN && (previous.sa_flags & SA_SIGINFO) == 0 &&
      previous.sa_handler != DumpOnSignal) {
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

void AppendToRankTrace(const std::string& path, const Scenario& scenario, uint32_t rank, uint32_t world_size,
                       const std::string& backend, const std::vector<TraceRecord>& records) {
  std::vector<TraceEvent> kept;
  std::error_code error;
  if (std::filesystem::exists(path, error)) {
    std::string cut;
    RankTrace trace = ReadRankTrace(path, &cut);
    kept = std::move(trace.events);
  }
  const std::string tmp = path + ".launcher.tmp";
  {
    RankTraceWriter writer(tmp, scenario, "", rank, world_size, backend, "petrsim_train launcher",
                           RankTraceWriter::Mode::kStream);
    for (const TraceEvent& event : kept) writer.Record(ToTraceRecord(event, rank));
    for (const TraceRecord& record : records) writer.Record(record);
    writer.Finish();
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int rename_errno = errno;
    ::unlink(tmp.c_str());
    throw ScenarioError(fmt::format("{}: cannot replace the trace: {}", path, std::strerror(rename_errno)));
  }
}

}  // namespace petrsim
