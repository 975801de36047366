// The timeline of a run as a Chrome/Perfetto trace-event JSON file (docs/design.md, "Formats"), which
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
// and so does Ctrl-C (the tmp file is registered with base/temp_files.h), so a timeline on disk
// is always complete. Not thread-safe: callers serialize Record().
//
// A window (PerfettoWindow) keeps only the records of some iterations, or those that end at or
// after a time; the limit on records counts the records in the window. Records past the limit
// are counted, and where the timeline stopped (truncated_at()) is for the caller to say.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_set>

#include "base/temp_files.h"
#include "trace/trace_sink.h"

namespace petrsim {

// Which records a timeline keeps (every record when nothing is set).
struct PerfettoWindow {
  // Only records of iterations first_iteration..last_iteration (inclusive; a load's iteration is
  // its batch's).
  std::optional<uint64_t> first_iteration, last_iteration;
  // Only records that end at or after from_ns (a slice that began earlier is kept whole).
  std::optional<int64_t> from_ns;

  bool Contains(const TraceRecord& record) const {
    if (first_iteration && record.iteration < *first_iteration) return false;
    if (last_iteration && record.iteration > *last_iteration) return false;
    return !from_ns || record.end_ns >= *from_ns;
  }
  bool all() const { return !first_iteration && !last_iteration && !from_ns; }
  // {"iterations": [a, b], "from_ns": t} with the members set; null for none.
  nlohmann::json Json() const;
};

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

  // Opens "<path>.tmp" for writing. Records outside `window` are skipped (counted in
  // records_outside_window()); records in it past the first `records_max` are counted but not
  // written (a limit on the file's size). Throws ScenarioError naming the path if it cannot be
  // opened.
  explicit PerfettoWriter(std::string path, uint64_t records_max = kRecordsMaxDefault, PerfettoWindow window = {});
  ~PerfettoWriter() override;
  PerfettoWriter(const PerfettoWriter&) = delete;
  PerfettoWriter& operator=(const PerfettoWriter&) = delete;

  void Record(const TraceRecord& record) override;

  // Closes the event list, writes "otherData": the members of `other_data` (an object, or null
  // for none; e.g. outcome and seed) plus "records" (written), "truncated_records" (counted
  // past the limit), "records_max", and with a window "window" and "records_outside_window", and
  // renames the tmp file onto the path. Throws ScenarioError naming the path if writing or
  // renaming failed (a full disk); the tmp file is removed then. Call once; no Record() after it.
  void Finish(const nlohmann::json& other_data);

  uint64_t records_written() const { return records_written_; }
  uint64_t records_truncated() const { return records_truncated_; }
  uint64_t records_outside_window() const { return records_outside_window_; }
  uint64_t records_max() const { return records_max_; }
  // The first record past the limit: its iteration and start time (nothing: none was dropped).
  struct Cut {
    uint64_t iteration = 0;
    int64_t at_ns = 0;
  };
  const std::optional<Cut>& truncated_at() const { return truncated_at_; }

 private:
  void EnsureProcess(uint32_t rank);
  void EnsureThread(uint32_t rank, int64_t tid, int32_t worker);
  void BeginEvent();
  void FlushBuffer(bool force);
  void Abandon();

  const std::string path_;
  const std::string tmp_path_;
  const uint64_t records_max_;
  const PerfettoWindow window_;
  std::FILE* file_ = nullptr;
  TempFileRegistration tmp_registration_;  // removes tmp_path_ on Ctrl-C
  std::string buffer_;                     // bytes not yet handed to file_
  bool first_event_ = true;
  bool finished_ = false;
  int write_errno_ = 0;  // the first write error; reported by Finish()
  uint64_t records_written_ = 0;
  uint64_t records_truncated_ = 0;
  uint64_t records_outside_window_ = 0;
  std::optional<Cut> truncated_at_;
  std::unordered_set<uint32_t> ranks_seen_;
  std::unordered_set<uint64_t> threads_seen_;  // (rank << 32) | tid
};

}  // namespace petrsim
