// One rank's trace file, written by that rank's own process (the real backend), streamed or as
// a ring dumped on a watchdog, an exit or a signal; the format is trace/trace_event.h's.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "proto/scenario.pb.h"
#include "proto/trace.pb.h"
#include "trace/trace_event.h"
#include "trace/trace_sink.h"

namespace petrsim {

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
  RankTraceWriter(std::string path, const Scenario& scenario, const std::string& scenario_path, uint32_t rank,
                  uint32_t world_size, const std::string& backend, const std::string& build_id, Mode mode,
                  uint64_t ring_events = 0);
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
  std::string header_;   // length-prefixed
  int fd_ = -1;          // kStream
  std::string buffer_;   // kStream: encoded events not yet written
  int write_errno_ = 0;  // kStream: the first write error (nothing is written after it)
  // kRing: event i is in slot i % size; the last min(next_, size) events are kept.
  std::unique_ptr<Slot[]> ring_;
  uint64_t ring_size_ = 0;
  std::atomic<uint64_t> next_{0};  // events recorded so far
  char staging_[kRingSlotBytes];   // the dump's copy of one slot
  std::string scratch_;            // Record()'s encoding buffer
  bool finished_ = false;
  TraceEvent event_;
};

// What a launcher saw of a rank's end that the rank could not record itself (SIGKILL, a crash):
// `records` are appended to the rank's trace at `path`, after every complete event the rank
// wrote (a file cut by the kill is kept up to the cut); a rank that left no file (a ring never
// dumped) gets one with the header and `records`. The file is replaced whole (written beside
// it, then renamed). Throws ScenarioError naming the path when it cannot be written; a file
// that is there but not a trace of this format is left alone and reported the same way.
void AppendToRankTrace(const std::string& path, const Scenario& scenario, uint32_t rank, uint32_t world_size,
                       const std::string& backend, const std::vector<TraceRecord>& records);

}  // namespace petrsim
