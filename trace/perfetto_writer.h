// The timeline of a run as a Chrome/Perfetto trace-event JSON file (DESIGN "Formats"), which
// ui.perfetto.dev and chrome://tracing open: a TraceSink that turns each record into one event.
//
// Layout: one process per rank (pid = rank, named "rank N"); in it tid 0 is the main process
// ("main": data waits, compute, collectives, checkpoints), tid 1 + w is DataLoader worker w
// ("worker w": loads), and tid kIterationsTid ("iterations") holds the iteration slices. The
// iterations get a track of their own because an iteration spans its children from the end of
// the previous one, and slices on one thread must nest exactly; a separate track cannot misnest.
// Slices are complete events (ph "X") with ts and dur in microseconds printed with three
// decimals, so integer nanoseconds survive exactly. A collective still pending when the run
// ended is named "HUNG: <step>" and drawn in the "terrible" colour. Instants (livelock,
// watchdog, rank died, desync) are process-scoped (ph "i", s "p") with the message in args.
// Metadata events (names and sort order) are written the first time a rank or thread appears.
//
// The file is written while the run goes, to "<path>.tmp" through a buffered FILE*; nothing but
// the set of seen threads is kept in memory. Finish() completes the JSON and renames it onto
// `path`; a writer destroyed without Finish() (an error unwound the run) removes its tmp file,
// so a timeline on disk is always complete. Not thread-safe: callers serialize Record().
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_set>

#include "model/trace_sink.h"

namespace petrsim {

class PerfettoWriter : public TraceSink {
 public:
  static constexpr uint64_t kRecordsMaxDefault = 5'000'000;
  // Above every worker's tid (job.workers_per_gpu is at most 256).
  static constexpr int64_t kIterationsTid = 1'000'000;
  // Non-blocking collectives (worker kAsyncCollectives) get tracks of their own, since they
  // overlap the main process's backward compute and one another: kAsyncLanes tracks from
  // kAsyncCollectivesTid, by sequence number.
  static constexpr int64_t kAsyncCollectivesTid = 1'000'001;
  static constexpr int64_t kAsyncLanes = 8;

  // Opens "<path>.tmp" for writing. Records past the first `records_max` are counted but not
  // written (a limit on the file's size). Throws ScenarioError naming the path if it cannot be
  // opened.
  explicit PerfettoWriter(std::string path, uint64_t records_max = kRecordsMaxDefault);
  ~PerfettoWriter() override;
  PerfettoWriter(const PerfettoWriter&) = delete;
  PerfettoWriter& operator=(const PerfettoWriter&) = delete;

  void Record(const TraceRecord& record) override;

  // Closes the event list, writes "otherData": the members of `other_data` (an object, or null
  // for none; e.g. outcome and seed) plus "records" (written) and "truncated_records" (counted
  // past the limit), and renames the tmp file onto the path. Throws ScenarioError naming the
  // path if writing or renaming failed (a full disk); the tmp file is removed then. Call once;
  // no Record() after it.
  void Finish(const nlohmann::json& other_data);

  uint64_t records_written() const { return records_written_; }
  uint64_t records_truncated() const { return records_truncated_; }

 private:
  void EnsureProcess(uint32_t rank);
  void EnsureThread(uint32_t rank, int64_t tid, int32_t worker);
  void BeginEvent();
  void FlushBuffer(bool force);
  void Abandon();

  const std::string path_;
  const std::string tmp_path_;
  const uint64_t records_max_;
  std::FILE* file_ = nullptr;
  std::string buffer_;  // bytes not yet handed to file_
  bool first_event_ = true;
  bool finished_ = false;
  int write_errno_ = 0;  // the first write error; reported by Finish()
  uint64_t records_written_ = 0;
  uint64_t records_truncated_ = 0;
  std::unordered_set<uint32_t> ranks_seen_;
  std::unordered_set<uint64_t> threads_seen_;  // (rank << 32) | tid
};

}  // namespace petrsim
