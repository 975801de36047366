// TraceDirectoryWriter: a TraceSink that writes one file per rank into a directory (the
// simulator's; the format is trace/trace_event.h's).
//
// Buffering (jobs have up to 65536 ranks, more than a process may hold open files): no file
// stays open between calls. Each rank's encoded events collect in a memory buffer; a buffer
// that reaches 64 KiB is appended to its file (open, write, close), and when all buffers
// together pass 64 MiB every non-empty buffer is appended the same way. Memory stays bounded
// by about 64 MiB plus one buffer, and a file open costs at most one per 64 KiB written, or one
// per rank per 64 MiB written. A rank's file is created, header first, on its first append;
// Finish() appends what is left, creates the files of ranks that recorded nothing (header
// only), and renames every "<dir>/rank_<r>.pbtrace.tmp" onto its final name. A writer destroyed
// without Finish() removes the tmp files it created, and so does Ctrl-C (they are registered with
// base/temp_files.h; the renames hold the signals until the last one), so no half-written trace
// is left. Record() never throws: the first write error stops all writing and Finish() reports it.
// Not thread-safe: callers serialize Record().
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/temp_files.h"
#include "proto/scenario.pb.h"
#include "proto/trace.pb.h"
#include "trace/trace_event.h"
#include "trace/trace_sink.h"

namespace petrsim {

class TraceDirectoryWriter : public TraceSink {
 public:
  static constexpr uint64_t kRecordsMaxDefault = 100'000'000;

  // Creates `directory` (and its parents) if needed. `backend` is "sim", "gloo" or "nccl";
  // the header's clock is "virtual" for "sim" and "steady" otherwise. Records past the first
  // `records_max` (all ranks together) are counted, not written. With `ring_events` > 0 only
  // the last ring_events events of each rank are kept (like PyTorch's Flight Recorder) and
  // written at Finish(), after a `truncated` event that counts the older ones. Throws
  // ScenarioError naming the directory if it cannot be created.
  TraceDirectoryWriter(std::string directory, const Scenario& scenario, const std::string& scenario_path,
                       uint32_t world_size, const std::string& backend, const std::string& build_id,
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
  std::vector<std::string> buffers_;  // per rank: encoded events not yet appended
  std::vector<bool> created_;         // per rank: its tmp file exists
  std::vector<uint64_t> dropped_;     // per rank: records past the limit
  uint64_t buffered_bytes_ = 0;
  uint64_t records_written_ = 0;
  uint64_t records_truncated_ = 0;
  bool finished_ = false;
  std::string write_error_;  // the first write error, for Finish(); empty: none
  TraceEvent event_;         // reused for every record
  const uint64_t ring_events_;
  std::vector<std::vector<std::string>> rings_;  // per rank, when ring_events_ > 0
  std::vector<uint64_t> ring_next_;              // per rank: events recorded
  TempFileRegistration tmp_registration_;        // every rank's tmp file, for Ctrl-C
};

}  // namespace petrsim
