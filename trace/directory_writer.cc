// The simulator's trace directory; see directory_writer.h.
#include "trace/directory_writer.h"

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

namespace petrsim {
namespace {

constexpr size_t kRankBufferBytes = size_t{64} << 10;
constexpr uint64_t kBufferedBytesMax = uint64_t{64} << 20;

}  // namespace

// TraceDirectoryWriter

TraceDirectoryWriter::TraceDirectoryWriter(std::string directory, const Scenario& scenario,
                                           const std::string& scenario_path, uint32_t world_size,
                                           const std::string& backend, const std::string& build_id,
                                           uint64_t records_max, uint64_t ring_events)
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
    throw ScenarioError(fmt::format("{}: cannot create the trace directory: {}", directory_, error.message()));
  }
  if (!std::filesystem::is_directory(directory_, error)) {
    throw ScenarioError(fmt::format("{}: cannot write traces there: not a directory", directory_));
  }
  header_common_ = MakeTraceHeader(scenario, scenario_path, world_size, backend, build_id).SerializeAsString();
  // RankTracePath(directory_, r) + ".tmp" for every rank r.
  tmp_registration_ =
      TempFileRegistration((std::filesystem::path(directory_) / "rank_").string(), ".pbtrace.tmp", world_size_);
}

TraceDirectoryWriter::~TraceDirectoryWriter() {
  if (!finished_) RemoveTmpFiles();
}

std::string TraceDirectoryWriter::TmpPath(uint32_t rank) const { return RankTracePath(directory_, rank) + ".tmp"; }

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
      marker.set_text(
          fmt::format("ring buffer: the last {} records of this rank are kept, {} older ones "
                      "were dropped",
                      ring_events_, next - ring_events_));
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
      marker.set_text(
          fmt::format("{} records of this rank past the writer's limit of {} "
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
  // Every rank's file or none: a Ctrl-C waits until the last rename.
  const TerminationSignalsHeld held;
  for (uint32_t r = 0; r < world_size_; ++r) {
    const std::string final_path = RankTracePath(directory_, r);
    if (std::rename(TmpPath(r).c_str(), final_path.c_str()) != 0) {
      const int error = errno;
      const std::string message =
          fmt::format("{}: cannot rename {} onto it: {}", final_path, TmpPath(r), std::strerror(error));
      for (uint32_t done = 0; done < r; ++done) {
        std::remove(RankTracePath(directory_, done).c_str());
        created_[done] = false;
      }
      RemoveTmpFiles();
      throw ScenarioError(message);
    }
  }
  tmp_registration_.Reset();
  finished_ = true;
}

}  // namespace petrsim
