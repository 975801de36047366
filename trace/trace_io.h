// petrsim's own trace files (DESIGN "Formats", model/trace.proto): a TraceSink that writes one
// file per rank into a directory, and the reader that `diagnose` and `replay` build on.
//
// Format: "<dir>/rank_<r>.pbtrace" for every rank r in [0, world_size), each a stream of
// length-delimited protobuf messages (varint byte count, then the message; what
// google::protobuf::util::SerializeDelimitedToOstream writes): one TraceHeader, then one
// TraceEvent per record of that rank in the order Record() received them. An event always has
// kind, start_ns and end_ns; its other fields only where they differ from their declared
// default. If the writer reached its record limit, each rank that lost records ends with one
// TraceEvent of kind `truncated` saying how many.
//
// Buffering (jobs have up to 65536 ranks, more than a process may hold open files): no file
// stays open between calls. Each rank's encoded events collect in a memory buffer; a buffer
// that reaches 64 KiB is appended to its file (open, write, close), and when all buffers
// together pass 64 MiB every non-empty buffer is appended the same way. Memory stays bounded
// by about 64 MiB plus one buffer, and a file open costs at most one per 64 KiB written, or one
// per rank per 64 MiB written. A rank's file is created, header first, on its first append;
// Finish() appends what is left, creates the files of ranks that recorded nothing (header
// only), and renames every "<dir>/rank_<r>.pbtrace.tmp" onto its final name. A writer destroyed
// without Finish() removes the tmp files it created, so no half-written trace is left. Record()
// never throws: the first write error stops all writing and Finish() reports it.
// Not thread-safe: callers serialize Record().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "model/scenario.pb.h"
#include "model/trace.pb.h"
#include "model/trace_sink.h"

namespace petrsim {

inline constexpr uint32_t kTraceFormatVersion = 1;

// "<directory>/rank_<rank>.pbtrace".
std::string RankTracePath(const std::string& directory, uint32_t rank);

// A record as a trace event (defaults left out) and back. The record's string_views point
// into `event`, which must outlive it. A `truncated` event has no TraceKind and must not be
// converted.
TraceEvent ToTraceEvent(const TraceRecord& record);
TraceRecord ToTraceRecord(const TraceEvent& event, uint32_t rank);

class TraceDirectoryWriter : public TraceSink {
 public:
  static constexpr uint64_t kRecordsMaxDefault = 100'000'000;

  // Creates `directory` (and its parents) if needed. `backend` is "sim", "gloo" or "nccl";
  // the header's clock is "virtual" for "sim" and "steady" otherwise. Records past the first
  // `records_max` (all ranks together) are counted, not written. With `ring_events` > 0 only
  // the last ring_events events of each rank are kept (like PyTorch's Flight Recorder) and
  // written at Finish(), after a `truncated` event that counts the older ones. Throws
  // ScenarioError naming the directory if it cannot be created.
  TraceDirectoryWriter(std::string directory, const Scenario& scenario,
                       const std::string& scenario_path, uint32_t world_size,
                       const std::string& backend, const std::string& build_id,
                       uint64_t records_max = kRecordsMaxDefault, uint64_t ring_events = 0);
  ~TraceDirectoryWriter() override;
  TraceDirectoryWriter(const TraceDirectoryWriter&) = delete;
  TraceDirectoryWriter& operator=(const TraceDirectoryWriter&) = delete;

  // record.rank must be < world_size.
  void Record(const TraceRecord& record) override;

  // Writes what is buffered and renames every file onto its final name. Throws ScenarioError
  // naming the file on a write or rename error, after removing every file it wrote (tmp or
  // renamed). Call once; no Record() after it.
  void Finish();

  uint64_t records_written() const { return records_written_; }
  uint64_t records_truncated() const { return records_truncated_; }

 private:
  void Encode(const TraceEvent& event, std::string& out);
  void Append(uint32_t rank);
  void AppendAll();
  std::string TmpPath(uint32_t rank) const;
  void RemoveTmpFiles();

  const std::string directory_;
  const uint32_t world_size_;
  const uint64_t records_max_;
  // The header without its rank, serialized once: a rank's header is these bytes followed by
  // the encoding of its rank field (protobuf merges concatenated messages).
  std::string header_common_;
  std::vector<std::string> buffers_;    // per rank: encoded events not yet appended
  std::vector<bool> created_;           // per rank: its tmp file exists
  std::vector<uint64_t> dropped_;       // per rank: records past the limit
  uint64_t buffered_bytes_ = 0;
  uint64_t records_written_ = 0;
  uint64_t records_truncated_ = 0;
  bool finished_ = false;
  std::string write_error_;  // the first write error, for Finish(); empty: none
  TraceEvent event_;         // reused for every record
  const uint64_t ring_events_;
  std::vector<std::vector<std::string>> rings_;  // per rank, when ring_events_ > 0
  std::vector<uint64_t> ring_next_;              // per rank: events recorded
};

// One rank's trace file written by that rank's own process (the real backend: one process per
// rank), in one of two modes:
// - kStream: the header is written at once, events are encoded into a buffer that goes to the
//   file (write(2), so the kernel has it) whenever it passes 4 KiB and after every event that
//   matters for a post-mortem (a collective, a livelock, a watchdog, a death, an exit). A process
//   killed at any moment (even by SIGKILL) leaves a readable file: every event up to the last
//   such flush (at most 4 KiB of loads and draws after it are lost), then at most one cut
//   message that ReadRankTrace(path, &partial) reports.
// - kRing: like PyTorch's Flight Recorder, only the last `ring_events` events are kept, in
//   memory, in fixed slots of kRingSlotBytes (an event's text is shortened to fit); Dump()
//   writes the header, a `truncated` event counting the older events, and the ring, to
//   "<path>.tmp", and renames it onto `path`. Call it when the watchdog fires; Finish() and the
//   destructor call it at exit, and InstallSignalDump() makes SIGTERM and SIGABRT call it.
//   The dump is async-signal-safe (open, write, close, rename; no allocation), and it is safe
//   against a Record() it interrupts, on the same thread or another: every slot carries a
//   sequence number, odd while it is written, and the dump copies a slot into a staging buffer
//   and writes it only if the number was even and did not change meanwhile.
// Record() must be called from one thread at a time.
class RankTraceWriter : public TraceSink {
 public:
  enum class Mode { kStream, kRing };
  static constexpr size_t kRingSlotBytes = 512;
  // Throws ScenarioError naming the path if the file cannot be created.
  RankTraceWriter(std::string path, const Scenario& scenario, const std::string& scenario_path,
                  uint32_t rank, uint32_t world_size, const std::string& backend,
                  const std::string& build_id, Mode mode, uint64_t ring_events = 0);
  ~RankTraceWriter() override;
  RankTraceWriter(const RankTraceWriter&) = delete;
  RankTraceWriter& operator=(const RankTraceWriter&) = delete;

  void Record(const TraceRecord& record) override;
  // kStream: writes the buffer. kRing: Dump().
  void Flush();
  // kRing: writes the ring to the file now. Returns false on a write error.
  bool Dump();
  // Flushes (dumps) and closes. Throws ScenarioError naming the path on a write error.
  void Finish();

  // kRing writers only: makes SIGTERM and SIGABRT dump `writer` (one per process; null
  // uninstalls), then hand the signal to the handler that was there before (or die of it). The
  // writer uninstalls itself when it is destroyed.
  static void InstallSignalDump(RankTraceWriter* writer);

  const std::string& path() const { return path_; }

 private:
  struct Slot {
    std::atomic<uint64_t> seq{0};  // odd while the slot is being written
    uint32_t size = 0;
    char bytes[kRingSlotBytes];
  };
  bool WriteAll(int fd, const char* data, size_t size);
  void EncodeTo(const TraceRecord& record, std::string& out);

  const std::string path_;
  const std::string tmp_path_;
  const Mode mode_;
  std::string header_;  // length-prefixed
  int fd_ = -1;         // kStream
  std::string buffer_;  // kStream: encoded events not yet written
  int write_errno_ = 0; // kStream: the first write error (nothing is written after it)
  // kRing: event i is in slot i % size; the last min(next_, size) events are kept.
  std::unique_ptr<Slot[]> ring_;
  uint64_t ring_size_ = 0;
  std::atomic<uint64_t> next_{0};  // events recorded so far
  char staging_[kRingSlotBytes];   // the dump's copy of one slot
  std::string scratch_;            // Record()'s encoding buffer
  bool finished_ = false;
  TraceEvent event_;
};

// A TraceEvent decoded without protobuf's message objects: the fields by value, the strings as
// views into the reader's buffer (valid during the callback only). The fast path of readers
// that stream long traces (diagnose reads 100 million events in seconds).
struct TraceEventView {
  TraceEventKind kind = TraceEventKind::load;
  int32_t worker = -1;
  int64_t start_ns = 0, end_ns = 0;
  uint64_t iteration = 0;
  uint32_t slot = 0;
  int64_t index = -1, final_index = -1;
  uint64_t attempts = 0;
  std::string_view process_group;
  uint64_t seq = 0;
  Collective::Op op = Collective::allreduce;
  uint64_t numel = 0;
  bool completed = true;
  std::string_view text;
  uint64_t records_dropped = 0;
  Collective::Dtype dtype = Collective::float32;
  int64_t started_ns = -1;
  int64_t group = -1;
  uint32_t gt_count = 0;
  bool accepted = false;
};

// Streams the file like ForEachTraceEvent, decoding each event into a TraceEventView (unknown
// fields are skipped, as protobuf would). Same errors, partial reading and header checks.
TraceHeader ScanTraceEvents(const std::string& path, const std::function<void(const TraceEventView&)>& on_event,
                            std::string* partial_error);

// One rank's trace file, read whole.
struct RankTrace {
  TraceHeader header;
  std::vector<TraceEvent> events;
};

// Reads a file written by TraceDirectoryWriter. Throws ScenarioError naming the file and, for
// a truncated or corrupt file, the byte offset and index of the bad message (0: the header);
// also for a missing header or a format_version this build does not know.
RankTrace ReadRankTrace(const std::string& path);
// The same, but a file cut short or corrupt after its header is read up to the bad message:
// `*partial_error` gets the error (file, byte offset) and the events before it are returned.
RankTrace ReadRankTrace(const std::string& path, std::string* partial_error);
// Streams the file: calls `on_event` for every event in order (the event is reused: copy what
// you keep) and returns the header; errors as ReadRankTrace (the header's version is checked
// before any event is delivered).
TraceHeader ForEachTraceEvent(const std::string& path, const std::function<void(const TraceEvent&)>& on_event,
                              std::string* partial_error);

}  // namespace petrsim
