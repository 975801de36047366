// `petrsim diagnose`, reading: trace directories and files (petrsim traces, read in parallel,
// or Flight Recorder dumps) into Recordings, per rank its pending calls, progress per group,
// spins and death; see diagnose.h.
#include "replay/diagnose.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>

#include "base/assert.h"
#include "base/error.h"
#include "base/file_io.h"
#include "formats/flight_recorder/flight_recorder.h"
#include "proto/trace.pb.h"
#include "replay/diagnose_stall.h"
#include "scenario/outcome.h"
#include "scenario/scenario_validation.h"
#include "trace/reader.h"
#include "trace/trace_event.h"

namespace petrsim {
namespace {

// The most ranks a recording may name (as scenario validation allows for a job).
constexpr uint32_t kRanksMax = 1u << 20;

bool IsPetrsimTrace(const std::string& path) {
  return path.size() > 8 && path.compare(path.size() - 8, 8, ".pbtrace") == 0;
}

// The rank a file's name gives: rank_<r>.pbtrace, or a Flight Recorder dump's trailing number (_dump_<r>.json,
// nccl_trace_rank_<r>); -1 when it gives none.
int64_t RankOfFileName(const std::string& path) {
  std::string stem = std::filesystem::path(path).stem().string();
  size_t end = stem.size();
  while (end > 0 && std::isdigit(static_cast<unsigned char>(stem[end - 1])) == 0) --end;
  size_t begin = end;
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(stem[begin - 1])) != 0) --begin;
  if (begin == end || end - begin > 9) return -1;
  if (IsPetrsimTrace(path) && (end != stem.size() || stem.compare(0, begin, "rank_") != 0)) return -1;
  return std::stoll(stem.substr(begin, end - begin));
}

// A process_exit text that says the rank ended well: the probe's "the process exits", petrsim_train's
// "finished its iterations (exit 0)".
bool CleanExit(std::string_view text) { return text == "the process exits" || text.ends_with("(exit 0)"); }

// A file `diagnose` refuses among readable ones: noted, and its rank counted as without a file.
void Refuse(Recordings& rec, const std::string& path, const std::string& why) {
  rec.refused.push_back(RefusedFile{path, RankOfFileName(path), why});
  rec.notes.push_back(fmt::format("unreadable, its rank counted as without a file: {}", why));
}

void AddFlightRecorderDump(Recordings& rec, FrDump dump, std::map<std::string, std::map<uint32_t, int64_t>>& pg_ids) {
  if (dump.rank >= rec.ranks.size()) rec.ranks.resize(dump.rank + 1);
  RankRecording& rank = rec.ranks[dump.rank];
  if (rank.present) {
    throw ScenarioError(
        fmt::format("{}: a second dump of rank {} (the first is {})", dump.path, dump.rank, rank.source));
  }
  rank.rank = dump.rank;
  rank.present = true;
  rank.source = dump.path;
  rank.partial = dump.partial;
  // The release the dump's format names: one release is used by `diagnose --scenario`; a range is said as it is.
  if (rec.torch_version_from.empty()) {
    const auto releases = FrFormatTorchReleases(dump);
    if (releases && !releases->development && releases->first == releases->last) rec.torch_version = releases->first;
    rec.torch_version_from = fmt::format("{}: {}", dump.path, FrDumpReleaseText(dump));
  }
  for (const auto& [name, config] : dump.pg_config) {
    GroupInfo& group = rec.groups[name];
    if (group.desc.empty()) group.desc = config.desc;
    if (group.members.empty()) group.members = config.ranks;
  }
  std::sort(dump.entries.begin(), dump.entries.end(),
            [](const FrEntry& a, const FrEntry& b) { return a.record_id < b.record_id; });
  std::map<std::string, int64_t> own_ids;
  for (const FrEntry& e : dump.entries) {
    if (e.is_p2p) continue;         // point-to-point calls are not collectives of a group sequence
    if (e.collective_seq_id < 0) {  // c10d counts a group's collectives from 1 (0: none yet)
      if (rank.invalid_records++ == 0) {
        rank.first_invalid = fmt::format("entry with record_id {} ({} on group {}): collective_seq_id {}", e.record_id,
                                         e.profiling_name, e.pg_name, e.collective_seq_id);
      }
      continue;
    }
    own_ids[e.pg_name] = e.pg_id;
    pg_ids[e.pg_name][dump.rank] = e.pg_id;
    CallRecord call;
    call.group = e.pg_name;
    call.seq = e.collective_seq_id;
    call.op = e.profiling_name;
    call.input_sizes = e.input_sizes;
    call.output_sizes = e.output_sizes;
    call.dtype = e.input_dtypes.empty() ? "" : e.input_dtypes.front();
    call.time_ns = e.time_created_ns;
    call.completed = e.state == "completed";
    GroupInfo& group = rec.groups[e.pg_name];
    if (group.desc.empty()) group.desc = e.pg_desc;
    rank.calls.push_back(std::move(call));
  }
  // Progress per group from pg_status, through the local pg_id of the group on this rank (from
  // its own entries; groups it recorded nothing on are resolved once every dump is read).
  for (const auto& [name, pg_id] : own_ids) {
    const auto it = dump.pg_status.find(pg_id);
    if (it == dump.pg_status.end()) continue;
    rank.progress[name] = GroupProgress{it->second.last_enqueued, it->second.last_completed};
  }
  // What the entries themselves show: the rank enqueued every call it recorded (and completed
  // those in state completed), whatever pg_status says or lacks.
  for (const CallRecord& call : rank.calls) {
    GroupProgress& progress = rank.progress[call.group];
    progress.last_enqueued = std::max(progress.last_enqueued, call.seq);
    if (call.completed) progress.last_completed = std::max(progress.last_completed, call.seq);
  }
  // Kept for the second pass: the status by local id.
  for (const auto& [pg_id, status] : dump.pg_status) {
    rank.progress["\x01" + std::to_string(pg_id)] = GroupProgress{status.last_enqueued, status.last_completed};
  }
}

// One petrsim trace file, read by itself (files are read in parallel).
struct LoadedTrace {
  TraceHeader header;  // without its scenario, which is kept once
  std::optional<Scenario> scenario;
  RankRecording rank;
  int64_t end_ns = 0;
  int64_t start_ns = std::numeric_limits<int64_t>::max();  // the earliest event's start
};

// A getitem a trace recorded spinning (its livelock instant, or a load still open at the end):
// what the trace carries of it; the pool is found later from the scenario.
StuckGetitem SpinFromEvent(uint32_t rank, const TraceEventView& event) {
  StuckGetitem spin;
  spin.rank = rank;
  spin.worker = event.worker;
  spin.batch = event.iteration;
  spin.slot = event.slot;
  spin.index = event.index;
  spin.since_ns = event.start_ns;
  return spin;
}

// What one petrsim trace's events say of its rank, gathered event by event while the file is
// scanned (ReadPetrsimRank).
class RankScan {
 public:
  explicit RankScan(LoadedTrace& out) : out_(out), rank_(out.rank) {}

  void Event(const TraceEventView& event) {
    out_.end_ns = std::max(out_.end_ns, event.end_ns);
    out_.start_ns = std::min(out_.start_ns, event.start_ns);
    ++rank_.events_read;
    switch (event.kind) {
      case TraceEventKind::collective:
        OnCollective(event);
        break;
      case TraceEventKind::livelock: {
        StuckGetitem& spin = rank_.spins.emplace_back(SpinFromEvent(rank_.rank, event));
        spin.attempts = event.attempts;
        spin.report = std::string(event.text);
        break;
      }
      case TraceEventKind::load:
        OnLoad(event);
        break;
      case TraceEventKind::rank_died:
        if (!rank_.died) {
          rank_.died = std::string(event.text);
          rank_.died_ns = event.start_ns;
        }
        break;
      case TraceEventKind::process_exit:
        // The last event of the probe and petrsim_train: "killed by SIGTERM", "the process ends with an uncaught
        // exception: ...", "stopped by the collective watchdog (exit 1)", or a clean "the process exits",
        // "finished its iterations (exit 0)". Killed or failed, the rank died there.
        rank_.exit = std::string(event.text);
        if (!rank_.died && !CleanExit(event.text)) {
          rank_.died = std::string(event.text);
          rank_.died_ns = event.start_ns;
        }
        break;
      case TraceEventKind::watchdog:
        if (rank_.watchdog_events++ == 0) {
          rank_.first_watchdog = std::string(event.text);
          rank_.first_watchdog_ns = event.start_ns;
        }
        break;
      case TraceEventKind::stall:
        diagnose_internal::NoteStall(rank_, event);
        break;
      case TraceEventKind::truncated:
        rank_.records_dropped += event.records_dropped;
        break;
      default:
        break;
    }
  }

 private:
  void OnCollective(const TraceEventView& event) {
    ++rank_.calls_read;
    // The group of the previous collective, usually the same: no map lookup then.
    const std::string_view group_name =
        event.process_group.empty() ? std::string_view("default_pg") : event.process_group;
    if (last_progress_ == nullptr || group_name != last_group_) {
      last_group_.assign(group_name);
      last_progress_ = &rank_.progress[last_group_];
    }
    GroupProgress& progress = *last_progress_;
    const auto seq = static_cast<int64_t>(event.seq);
    progress.last_enqueued = std::max(progress.last_enqueued, seq);
    if (event.completed) {
      progress.last_completed = std::max(progress.last_completed, seq);
      return;
    }
    CallRecord call;
    call.group = last_group_;
    call.seq = seq;
    // c10d runs a barrier as an all_reduce; the plan's op tells them apart for desyncs.
    call.op = event.op == Collective::barrier ? std::string("BARRIER") : OpTypeName(event.op);
    call.input_sizes = {{static_cast<int64_t>(event.numel)}};
    call.dtype = Collective::Dtype_Name(event.dtype);
    call.time_ns = event.start_ns;
    call.completed = false;
    call.iteration = event.iteration;
    call.step = std::string(event.text);
    // Diagnose counts a pending call as joined by its rank through this progress as well.
    PETRSIM_ASSERT(progress.last_enqueued >= call.seq);
    rank_.calls.push_back(std::move(call));
  }

  void OnLoad(const TraceEventView& event) {
    diagnose_internal::NoteLoadAfterStall(rank_, event);
    if (event.completed) return;
    // A getitem the worker was still in at the end: its attempts so far.
    StuckGetitem* found = nullptr;
    for (StuckGetitem& spin : rank_.spins) {
      if (spin.batch == event.iteration && spin.slot == event.slot) found = &spin;
    }
    if (found == nullptr) {  // its livelock instant was not kept (a ring)
      rank_.spins.push_back(SpinFromEvent(rank_.rank, event));
      rank_.spins.back().report = "the resample loop never ends";
      found = &rank_.spins.back();
    }
    found->attempts = std::max(found->attempts, event.attempts);
  }

  LoadedTrace& out_;
  RankRecording& rank_;
  std::string last_group_;
  GroupProgress* last_progress_ = nullptr;  // std::map nodes stay put
};

LoadedTrace ReadPetrsimRank(const std::string& path, bool keep_scenario) {
  LoadedTrace out;
  RankRecording& rank = out.rank;
  std::string partial;
  RankScan scan(out);
  out.header = ScanTraceEvents(
      path, [&](const TraceEventView& event) { scan.Event(event); }, &partial);
  // Only the calls still pending are kept, of the collectives among the events read.
  PETRSIM_ASSERT(rank.calls.size() <= rank.calls_read);
  PETRSIM_ASSERT(rank.calls_read <= rank.events_read);
  if (!partial.empty()) rank.partial = partial;
  if (out.header.world_size() == 0 || out.header.world_size() > kRanksMax) {
    throw ScenarioError(fmt::format("{}: world_size {} is not in [1, {}]", path, out.header.world_size(), kRanksMax));
  }
  if (out.header.rank() >= out.header.world_size()) {
    throw ScenarioError(
        fmt::format("{}: rank {} is not below world_size {}", path, out.header.rank(), out.header.world_size()));
  }
  // A file copied or renamed over another rank's would hide that rank's own (missing) recording.
  if (const int64_t named = RankOfFileName(path); named >= 0 && named != out.header.rank()) {
    throw ScenarioError(fmt::format("{}: its header says rank {}, its name rank {}: another rank's trace", path,
                                    out.header.rank(), named));
  }
  rank.exit_expected = out.header.build_id().starts_with("petrsim_train");
  if (keep_scenario && out.header.has_scenario()) {
    // The cross-check expands its plan: a header is input like any scenario file.
    ValidateScenario(out.header.scenario(), path + " (the scenario in its header)");
    out.scenario = out.header.scenario();
  }
  out.header.clear_scenario();
  rank.rank = out.header.rank();
  diagnose_internal::SettleStalls(rank);
  rank.present = true;
  rank.source = path;
  // Recorded when slices end; program order is issue order.
  // (Calls issued at one instant keep the file's order; a strict weak order on time alone.)
  std::stable_sort(rank.calls.begin(), rank.calls.end(),
                   [](const CallRecord& a, const CallRecord& b) { return a.time_ns < b.time_ns; });
  return out;
}

// Reads every file with up to `threads` threads; `errors[i]` is set for a file that could not
// be read at all.
std::vector<LoadedTrace> ReadPetrsimRanks(const std::vector<std::string>& files,
                                          std::vector<std::exception_ptr>& errors) {
  std::vector<LoadedTrace> loaded(files.size());
  errors.assign(files.size(), nullptr);
  std::atomic<size_t> next{0};
  const auto work = [&] {
    for (size_t i = next++; i < files.size(); i = next++) {
      try {
        loaded[i] = ReadPetrsimRank(files[i], i == 0);
      } catch (...) {
        errors[i] = std::current_exception();
      }
    }
  };
  const size_t threads =
      std::min<size_t>(files.size(), std::max(1u, std::min(8u, std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& thread : pool) thread.join();
  return loaded;
}

void AddPetrsimTrace(Recordings& rec, LoadedTrace&& trace) {
  const TraceHeader& header = trace.header;
  const std::string& path = trace.rank.source;
  if (rec.world_size == 0) {
    rec.world_size = header.world_size();
    rec.backend = header.backend();
  } else if (header.world_size() != rec.world_size) {
    throw ScenarioError(
        fmt::format("{}: world_size {} differs from the other files' {}", path, header.world_size(), rec.world_size));
  }
  if (trace.scenario && !rec.scenario) rec.scenario = std::move(trace.scenario);
  // The probe names the torch it ran under in its build id: "petrsim_probe 0.1 (torch 1.13.1)".
  if (std::string release = ProbeTorchRelease(header); !release.empty() && rec.torch_version.empty()) {
    rec.torch_version = std::move(release);
    rec.torch_version_from = fmt::format("{}: header build_id \"{}\"", path, header.build_id());
  }
  rec.end_ns = std::max(rec.end_ns, trace.end_ns);
  if (header.clock() == "steady" && trace.start_ns != std::numeric_limits<int64_t>::max()) {
    rec.origin_ns = rec.origin_ns == 0 ? trace.start_ns : std::min(rec.origin_ns, trace.start_ns);
  }
  if (rec.ranks.size() < rec.world_size) rec.ranks.resize(rec.world_size);
  RankRecording& rank = rec.ranks[header.rank()];
  if (rank.present) {
    throw ScenarioError(
        fmt::format("{}: a second trace of rank {} (the first is {})", path, header.rank(), rank.source));
  }
  rank = std::move(trace.rank);
}

// The files of directory `path` that may be a rank's (every regular file but notes, logs and
// temporaries), sorted. A FIFO, a device, a dangling link or a link loop where a rank's file
// should be is said, never skipped (the job would then look healthy) nor waited on.
std::vector<std::string> DirectoryFiles(const std::string& path) {
  std::error_code error;
  std::vector<std::string> found;
  for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || name.ends_with(".tmp") || name.ends_with(".log") || name.ends_with(".txt") ||
        name.ends_with(".md")) {
      continue;
    }
    std::error_code kind_error;
    if (entry.is_directory(kind_error)) continue;  // a folder beside the files: not a rank's
    if (!entry.is_regular_file(kind_error)) {
      struct stat info {};
      if (::stat(entry.path().c_str(), &info) != 0) {
        throw ScenarioError(fmt::format("{}: cannot read it: {}", entry.path().string(), std::strerror(errno)));
      }
      throw ScenarioError(fmt::format("{}: expected a trace or dump file (a regular file), found {}",
                                      entry.path().string(), FileKindName(info.st_mode)));
    }
    found.push_back(entry.path().string());
  }
  if (error) throw ScenarioError(fmt::format("{}: cannot list: {}", path, error.message()));
  if (found.empty()) throw ScenarioError(fmt::format("{}: the directory holds no trace or dump files", path));
  std::sort(found.begin(), found.end());
  return found;
}

// The files PATHS name: each a directory (its files) or a file.
std::vector<std::string> ListFiles(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code error;
    if (std::filesystem::is_directory(path, error)) {
      const std::vector<std::string> found = DirectoryFiles(path);
      files.insert(files.end(), found.begin(), found.end());
    } else if (std::filesystem::is_regular_file(path, error)) {
      files.push_back(path);
    } else {
      struct stat info {};
      if (::stat(path.c_str(), &info) != 0) {
        throw ScenarioError(
            fmt::format("{}: {}", path, errno == ENOENT ? "no such file or directory" : std::strerror(errno)));
      }
      throw ScenarioError(fmt::format("{}: expected a directory of traces or dumps, or a trace or dump file; found {}",
                                      path, FileKindName(info.st_mode)));
    }
  }
  return files;
}

void LoadPetrsimTraces(Recordings& rec, const std::vector<std::string>& files) {
  rec.format = "petrsim";
  std::vector<std::exception_ptr> errors;
  std::vector<LoadedTrace> loaded = ReadPetrsimRanks(files, errors);
  size_t read = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (errors[i]) continue;
    AddPetrsimTrace(rec, std::move(loaded[i]));
    ++read;
  }
  // A file that cannot be read at all: its rank is without a file; nothing read: the error.
  for (size_t i = 0; i < files.size(); ++i) {
    if (!errors[i]) continue;
    if (read == 0) std::rethrow_exception(errors[i]);
    try {
      std::rethrow_exception(errors[i]);
    } catch (const ScenarioError& error) {
      Refuse(rec, files[i], error.what());
    }
  }
  for (const auto& rank : rec.ranks) {
    for (const auto& [group, progress] : rank.progress) rec.groups[group].desc = group;
  }
  for (auto& [name, group] : rec.groups) {
    group.members.clear();
    for (uint32_t r = 0; r < rec.world_size; ++r) group.members.push_back(r);
  }
}

// Groups no dump described (no pg_config): their members are the ranks that recorded them.
void InferUndescribedMembers(Recordings& rec) {
  // One pass over the calls, a hash lookup each: dumps of many groups cost time linear in their calls (it was
  // groups times calls).
  std::unordered_map<std::string_view, std::set<uint32_t>> recorded_by;
  for (const auto& rank : rec.ranks) {
    for (const CallRecord& call : rank.calls) recorded_by[call.group].insert(rank.rank);
  }
  for (auto& [name, group] : rec.groups) {
    if (!group.members.empty()) continue;
    const auto found = recorded_by.find(name);
    const std::set<uint32_t> members = found != recorded_by.end() ? found->second : std::set<uint32_t>{};
    group.members.assign(members.begin(), members.end());
    rec.notes.push_back(
        fmt::format("process group {}: no pg_config describes it; its members are taken to be "
                    "the ranks that recorded it ({} ranks)",
                    name, members.size()));
  }
}

// Groups a rank recorded nothing on: its progress through the group's local id, when every rank
// that recorded the group agrees on that id (ranks create groups in the same order). The status
// kept by local id is dropped then.
void ResolveProgressByLocalId(Recordings& rec, const std::map<std::string, std::map<uint32_t, int64_t>>& pg_ids) {
  for (auto& rank : rec.ranks) {
    rank.rank = static_cast<uint32_t>(&rank - rec.ranks.data());
    if (!rank.present) continue;
    for (const auto& [name, ids] : pg_ids) {
      if (rank.progress.count(name) > 0) continue;
      std::set<int64_t> distinct;
      for (const auto& [r, id] : ids) distinct.insert(id);
      if (distinct.size() != 1) continue;
      const auto it = rank.progress.find("\x01" + std::to_string(*distinct.begin()));
      if (it != rank.progress.end()) rank.progress[name] = it->second;
    }
    for (auto it = rank.progress.begin(); it != rank.progress.end();) {
      it = it->first.starts_with("\x01") ? rank.progress.erase(it) : std::next(it);
    }
  }
}

void LoadFlightRecorderDumps(Recordings& rec, const std::vector<std::string>& files) {
  rec.format = "flight_recorder";
  std::map<std::string, std::map<uint32_t, int64_t>> pg_ids;    // group name -> rank -> pg_id
  std::vector<std::pair<std::string, std::string>> unreadable;  // path, why
  std::vector<FrDump> dumps;
  size_t read = 0;
  for (const std::string& file : files) {
    try {
      if (!LooksLikeFlightRecorderDump(file)) {
        throw ScenarioError(
            fmt::format("{}: byte 0: neither a petrsim trace (*.pbtrace) nor a Flight "
                        "Recorder dump (a pickle or JSON)",
                        file));
      }
      dumps.push_back(ReadFlightRecorderDump(file));
    } catch (const ScenarioError& error) {
      if (files.size() == 1) throw;
      unreadable.emplace_back(file, error.what());
    }
  }
  // Bare lists name groups by each process's own index: matched across the dumps first.
  for (std::string& note : MatchBareListGroups(dumps)) rec.notes.push_back(std::move(note));
  for (FrDump& dump : dumps) {
    const std::string path = dump.path;
    try {
      AddFlightRecorderDump(rec, std::move(dump), pg_ids);
      ++read;
    } catch (const ScenarioError& error) {
      if (files.size() == 1) throw;
      unreadable.emplace_back(path, error.what());
    }
  }
  if (read == 0) throw ScenarioError(unreadable.front().second);
  for (const auto& [path, why] : unreadable) Refuse(rec, path, why);
  InferUndescribedMembers(rec);
  uint32_t world = static_cast<uint32_t>(rec.ranks.size());
  for (const auto& [name, group] : rec.groups) {
    for (const uint32_t r : group.members) world = std::max(world, r + 1);
  }
  rec.world_size = world;
  rec.ranks.resize(world);
  ResolveProgressByLocalId(rec, pg_ids);
}

}  // namespace

Recordings LoadRecordings(const std::vector<std::string>& paths) {
  const std::vector<std::string> files = ListFiles(paths);
  Recordings rec;
  size_t petrsim = 0;
  for (const std::string& file : files) petrsim += IsPetrsimTrace(file);
  if (petrsim != 0 && petrsim != files.size()) {
    throw ScenarioError(
        fmt::format("{}: petrsim traces (*.pbtrace) and Flight Recorder dumps mixed; "
                    "diagnose one job's files of one kind",
                    paths.front()));
  }
  if (petrsim > 0) {
    LoadPetrsimTraces(rec, files);
  } else {
    LoadFlightRecorderDumps(rec, files);
  }
  for (uint32_t r = 0; r < rec.ranks.size(); ++r) rec.ranks[r].rank = r;
  // What Diagnose indexes by: one recording per rank of the world, and every group's members in it.
  PETRSIM_ASSERT(rec.ranks.size() == rec.world_size);
  for (const auto& [name, group] : rec.groups) {
    for (const uint32_t r : group.members) PETRSIM_ASSERT(r < rec.world_size);
  }
  return rec;
}

}  // namespace petrsim
