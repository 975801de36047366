// `petrsim diagnose`; see diagnose.h.
#include "replay/diagnose.h"

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <set>
#include <thread>
#include <unordered_map>

#include <fmt/format.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/strong_components.hpp>

#include "model/dataset.h"
#include "model/error.h"
#include "model/file_io.h"
#include "model/iteration_plan.h"
#include "model/preflight.h"
#include "model/sampler.h"
#include "model/trace.pb.h"
#include "replay/flight_recorder.h"
#include "sim/simulator.h"
#include "trace/reader.h"

namespace petrsim {
namespace {

// The most ranks a recording may name (as scenario validation allows for a job).
constexpr uint32_t kRanksMax = 1u << 20;

bool IsPetrsimTrace(const std::string& path) {
  return path.size() > 8 && path.compare(path.size() - 8, 8, ".pbtrace") == 0;
}

std::string Shape(const std::vector<std::vector<int64_t>>& sizes) {
  if (sizes.empty()) return "-";
  std::string out;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i > 0) out += ", ";
    for (size_t d = 0; d < sizes[i].size(); ++d) {
      if (d > 0) out += 'x';  // (not ("x" + to_string): GCC 12 warns falsely, -Wrestrict)
      out += std::to_string(sizes[i][d]);
    }
    if (sizes[i].empty()) out += "scalar";
  }
  return out;
}

// "9, 14" or "0-3, 7".
std::string RankList(const std::vector<uint32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ", ";
    out += j > i + 1    ? fmt::format("{}-{}", ranks[i], ranks[j])
           : j == i + 1 ? fmt::format("{}, {}", ranks[i], ranks[j])
                        : std::to_string(ranks[i]);
    i = j + 1;
  }
  return out.empty() ? "-" : out;
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
  for (const auto& [name, config] : dump.pg_config) {
    GroupInfo& group = rec.groups[name];
    if (group.desc.empty()) group.desc = config.desc;
    if (group.members.empty()) group.members = config.ranks;
  }
  std::sort(dump.entries.begin(), dump.entries.end(),
            [](const FrEntry& a, const FrEntry& b) { return a.record_id < b.record_id; });
  std::map<std::string, int64_t> own_ids;
  for (const FrEntry& e : dump.entries) {
    if (e.is_p2p) continue;  // point-to-point calls are not collectives of a group sequence
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

LoadedTrace ReadPetrsimRank(const std::string& path, bool keep_scenario) {
  LoadedTrace out;
  RankRecording& rank = out.rank;
  std::string partial;
  std::string last_group;
  GroupProgress* last_progress = nullptr;  // std::map nodes stay put
  out.header = ScanTraceEvents(
      path,
      [&](const TraceEventView& event) {
        out.end_ns = std::max(out.end_ns, event.end_ns);
        ++rank.events_read;
        switch (event.kind) {
          case TraceEventKind::collective: {
            ++rank.calls_read;
            // The group of the previous collective, usually the same: no map lookup then.
            const std::string_view group_name =
                event.process_group.empty() ? std::string_view("default_pg") : event.process_group;
            if (last_progress == nullptr || group_name != last_group) {
              last_group.assign(group_name);
              last_progress = &rank.progress[last_group];
            }
            const std::string& group = last_group;
            GroupProgress& progress = *last_progress;
            const auto seq = static_cast<int64_t>(event.seq);
            progress.last_enqueued = std::max(progress.last_enqueued, seq);
            if (event.completed) {
              progress.last_completed = std::max(progress.last_completed, seq);
              break;
            }
            CallRecord call;
            call.group = group;
            call.seq = seq;
            // c10d runs a barrier as an all_reduce; the plan's op tells them apart for desyncs.
            call.op = event.op == Collective::barrier ? std::string("BARRIER") : OpTypeName(event.op);
            call.input_sizes = {{static_cast<int64_t>(event.numel)}};
            call.dtype = Collective::Dtype_Name(event.dtype);
            call.time_ns = event.start_ns;
            call.completed = false;
            call.iteration = event.iteration;
            call.step = std::string(event.text);
            rank.calls.push_back(std::move(call));
            break;
          }
          case TraceEventKind::livelock: {
            StuckGetitem& spin = rank.spins.emplace_back(SpinFromEvent(rank.rank, event));
            spin.attempts = event.attempts;
            spin.report = std::string(event.text);
            break;
          }
          case TraceEventKind::load:
            if (!event.completed) {
              // A getitem the worker was still in at the end: its attempts so far.
              StuckGetitem* found = nullptr;
              for (StuckGetitem& spin : rank.spins) {
                if (spin.batch == event.iteration && spin.slot == event.slot) found = &spin;
              }
              if (found == nullptr) {  // its livelock instant was not kept (a ring)
                rank.spins.push_back(SpinFromEvent(rank.rank, event));
                rank.spins.back().report = "the resample loop never ends";
                found = &rank.spins.back();
              }
              found->attempts = std::max(found->attempts, event.attempts);
            }
            break;
          case TraceEventKind::rank_died:
            if (!rank.died) rank.died = std::string(event.text);
            break;
          case TraceEventKind::truncated:
            rank.records_dropped += event.records_dropped;
            break;
          default:
            break;
        }
      },
      &partial);
  if (!partial.empty()) rank.partial = partial;
  if (out.header.world_size() == 0 || out.header.world_size() > kRanksMax) {
    throw ScenarioError(fmt::format("{}: world_size {} is not in [1, {}]", path, out.header.world_size(), kRanksMax));
  }
  if (out.header.rank() >= out.header.world_size()) {
    throw ScenarioError(
        fmt::format("{}: rank {} is not below world_size {}", path, out.header.rank(), out.header.world_size()));
  }
  if (keep_scenario && out.header.has_scenario()) out.scenario = out.header.scenario();
  out.header.clear_scenario();
  rank.rank = out.header.rank();
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
  rec.end_ns = std::max(rec.end_ns, trace.end_ns);
  if (rec.ranks.size() < rec.world_size) rec.ranks.resize(rec.world_size);
  RankRecording& rank = rec.ranks[header.rank()];
  if (rank.present) {
    throw ScenarioError(
        fmt::format("{}: a second trace of rank {} (the first is {})", path, header.rank(), rank.source));
  }
  rank = std::move(trace.rank);
}

std::string ToLower(std::string text) {
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

// Ops whose ranks must all pass the same input shape.
bool SizesMustMatch(const std::string& op, bool petrsim) {
  if (petrsim) return true;  // petrsim's signature includes the element count of every op
  const std::string name = ToLower(op);
  if (name.find("reduce_scatter") != std::string::npos || name.find("all_to_all") != std::string::npos ||
      name.find("alltoall") != std::string::npos || name.find("gather") != std::string::npos ||
      name.find("scatter") != std::string::npos) {
    return false;
  }
  return name.find("all_reduce") != std::string::npos || name.find("allreduce") != std::string::npos ||
         name.find("broadcast") != std::string::npos || name.find("reduce") != std::string::npos;
}

std::string DtypeName(const std::string& dtype) { return dtype.empty() ? "-" : dtype; }

// The pool a spinning getitem cannot leave, from the scenario the trace carries (empty when the
// dataset cannot be rebuilt or the index is in no trap pool).
std::string DescribePool(const Scenario& scenario, const StuckGetitem& spin, int64_t end_ns) {
  try {
    const Dataset dataset = BuildDataset(scenario, "the trace's scenario");
    if (spin.index < 0 || spin.index >= dataset.size()) return {};
    const CheckReport check = RunPreflight(scenario, dataset);
    for (const TrapPool& pool : check.pools) {
      if (spin.index < pool.first_frame || spin.index > pool.last_frame) continue;
      const double load_s = static_cast<double>(scenario.cost().sample_load_ns()) / 1e9;
      const double attempts = load_s > 0 ? static_cast<double>(end_ns - spin.since_ns) / 1e9 / load_s : 0;
      return fmt::format(
          ".\n  The loop resamples within sampler group {} of sub-dataset '{}', scene '{}': its pool is "
          "frames {}..{} of the scene (dataset indices {}..{}, {} frames), none with GT after the "
          "filters, so no attempt can succeed{}",
          dataset.group_of(spin.index), pool.subdataset_name, pool.scene_name, pool.first_frame_in_scene,
          pool.last_frame_in_scene, pool.first_frame, pool.last_frame, pool.frames,
          spin.attempts > 0 ? std::string()
                            : fmt::format("; about {:.0f} loads by the end at {:.0f} ms each", attempts, load_s * 1e3));
    }
  } catch (const ScenarioError&) {
  }
  return {};
}

}  // namespace

Recordings LoadRecordings(const std::vector<std::string>& paths) {
  std::vector<std::string> files;
  for (const std::string& path : paths) {
    std::error_code error;
    if (std::filesystem::is_directory(path, error)) {
      std::vector<std::string> found;
      for (const auto& entry : std::filesystem::directory_iterator(path, error)) {
        const std::string name = entry.path().filename().string();
        if (name.empty() || name[0] == '.' || name.ends_with(".tmp") || name.ends_with(".log") ||
            name.ends_with(".txt") || name.ends_with(".md")) {
          continue;
        }
        std::error_code kind_error;
        if (entry.is_directory(kind_error)) continue;  // a folder beside the files: not a rank's
        if (!entry.is_regular_file(kind_error)) {
          // A FIFO, a device, a dangling link or a link loop where a rank's file should be: said,
          // never skipped (the job would then look healthy) nor waited on.
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
        rec.notes.push_back(fmt::format("unreadable, its rank counted as without a file: {}", error.what()));
      }
    }
    for (const auto& rank : rec.ranks) {
      for (const auto& [group, progress] : rank.progress) rec.groups[group].desc = group;
    }
    for (auto& [name, group] : rec.groups) {
      group.members.clear();
      for (uint32_t r = 0; r < rec.world_size; ++r) group.members.push_back(r);
    }
  } else {
    rec.format = "flight_recorder";
    std::map<std::string, std::map<uint32_t, int64_t>> pg_ids;  // group name -> rank -> pg_id
    std::vector<std::string> unreadable;
    size_t read = 0;
    for (const std::string& file : files) {
      try {
        if (!LooksLikeFlightRecorderDump(file)) {
          throw ScenarioError(
              fmt::format("{}: byte 0: neither a petrsim trace (*.pbtrace) nor a Flight "
                          "Recorder dump (a pickle or JSON)",
                          file));
        }
        AddFlightRecorderDump(rec, ReadFlightRecorderDump(file), pg_ids);
        ++read;
      } catch (const ScenarioError& error) {
        if (files.size() == 1) throw;
        unreadable.push_back(error.what());
      }
    }
    if (read == 0) throw ScenarioError(unreadable.front());
    for (const std::string& error : unreadable) {
      rec.notes.push_back(fmt::format("unreadable, its rank counted as without a file: {}", error));
    }
    // Groups no dump described (no pg_config): their members are the ranks that recorded them.
    for (auto& [name, group] : rec.groups) {
      if (!group.members.empty()) continue;
      std::set<uint32_t> members;
      for (const auto& rank : rec.ranks) {
        for (const CallRecord& call : rank.calls) {
          if (call.group == name) members.insert(rank.rank);
        }
      }
      group.members.assign(members.begin(), members.end());
      rec.notes.push_back(
          fmt::format("process group {}: no pg_config describes it; its members are taken to be "
                      "the ranks that recorded it ({} ranks)",
                      name, members.size()));
    }
    uint32_t world = static_cast<uint32_t>(rec.ranks.size());
    for (const auto& [name, group] : rec.groups) {
      for (const uint32_t r : group.members) world = std::max(world, r + 1);
    }
    rec.world_size = world;
    rec.ranks.resize(world);
    // Groups a rank recorded nothing on: its progress through the group's local id, when every
    // rank that recorded the group agrees on that id (ranks create groups in the same order).
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
  for (uint32_t r = 0; r < rec.ranks.size(); ++r) rec.ranks[r].rank = r;
  return rec;
}

Diagnosis Diagnose(const Recordings& rec) {
  Diagnosis out;
  out.format = rec.format;
  out.world_size = rec.world_size;
  const bool petrsim = rec.format == "petrsim";
  for (const std::string& note : rec.notes) out.partial.push_back(note);
  for (const RankRecording& rank : rec.ranks) {
    if (!rank.present) out.ranks_without_file.push_back(rank.rank);
    if (rank.partial) out.partial.push_back(*rank.partial);
    out.calls += rec.format == "petrsim" ? rank.calls_read : rank.calls.size();
    out.events += rec.format == "petrsim" ? rank.events_read : rank.calls.size();
  }

  // The collective instances not complete everywhere: (group, seq) -> the calls pending in it.
  struct Instance {
    std::string group;
    int64_t seq = 0;
    std::vector<std::pair<uint32_t, const CallRecord*>> calls;  // by rank, ascending
    int64_t time_ns = INT64_MAX;
  };
  std::map<std::pair<std::string, int64_t>, size_t> index_of;
  std::vector<Instance> instances;
  for (const RankRecording& rank : rec.ranks) {
    for (const CallRecord& call : rank.calls) {
      if (call.completed) continue;
      auto [it, added] = index_of.try_emplace({call.group, call.seq}, instances.size());
      if (added) instances.push_back(Instance{call.group, call.seq, {}, INT64_MAX});
      Instance& instance = instances[it->second];
      if (!instance.calls.empty() && instance.calls.back().first == rank.rank) continue;  // one call per rank
      instance.calls.emplace_back(rank.rank, &call);
      instance.time_ns = std::min(instance.time_ns, call.time_ns);
    }
  }

  // Whether member `r` joined (group, seq): it enqueued that far, or recorded the call.
  const auto joined = [&](uint32_t r, const std::string& group, int64_t seq, const Instance& instance) {
    if (r >= rec.ranks.size() || !rec.ranks[r].present) return false;
    const auto& progress = rec.ranks[r].progress;
    const auto it = progress.find(group);
    if (it != progress.end() && it->second.last_enqueued >= seq) return true;
    for (const auto& [rank, call] : instance.calls) {
      if (rank == r) return true;
    }
    return false;
  };

  // Per group: the first instance some member with a file never joined. Members without a file
  // are unknown, not missing: they are named (as suspects) beside the first instance that every
  // member with a file joined but that is not complete, or, where no member with a file is
  // missing anywhere, beside the first instance that all of them wait in.
  const auto present = [&](uint32_t r) { return r < rec.ranks.size() && rec.ranks[r].present; };
  std::vector<size_t> candidates;
  std::vector<std::vector<uint32_t>> missing_of;  // per candidate
  std::vector<bool> only_without_file;            // per candidate: every missing rank has no file
  std::map<std::string, std::vector<size_t>> by_group;
  for (size_t i = 0; i < instances.size(); ++i) by_group[instances[i].group].push_back(i);
  for (auto& [group, list] : by_group) {
    std::sort(list.begin(), list.end(), [&](size_t a, size_t b) { return instances[a].seq < instances[b].seq; });
    const auto info = rec.groups.find(group);
    if (info == rec.groups.end()) continue;
    std::vector<uint32_t> absent;
    size_t present_members = 0;
    for (const uint32_t r : info->second.members) {
      if (present(r)) {
        ++present_members;
      } else {
        absent.push_back(r);
      }
    }
    std::optional<size_t> found;
    std::vector<uint32_t> missing;
    for (const size_t i : list) {
      for (const uint32_t r : info->second.members) {
        if (present(r) && !joined(r, group, instances[i].seq, instances[i])) missing.push_back(r);
      }
      if (!missing.empty()) {
        found = i;
        break;
      }
    }
    bool suspects_only = false;
    if (!found && !absent.empty()) {
      for (const size_t i : list) {
        if (instances[i].calls.size() == present_members) {  // every member with a file waits here
          found = i;
          suspects_only = true;
          break;
        }
      }
    }
    if (!found) continue;
    missing.insert(missing.end(), absent.begin(), absent.end());
    std::sort(missing.begin(), missing.end());
    candidates.push_back(*found);
    missing_of.push_back(std::move(missing));
    only_without_file.push_back(suspects_only);
  }

  // Happens-before graph over the instances: program order of each rank's pending calls.
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
  Graph hb(instances.size());
  std::set<std::pair<size_t, size_t>> edges;
  for (const RankRecording& rank : rec.ranks) {
    size_t previous = SIZE_MAX;
    for (const CallRecord& call : rank.calls) {
      if (call.completed) continue;
      const size_t current = index_of.at({call.group, call.seq});
      if (previous != SIZE_MAX && previous != current && edges.emplace(previous, current).second) {
        boost::add_edge(previous, current, hb);
      }
      previous = current;
    }
  }
  out.graph_vertices = instances.size();
  out.graph_edges = edges.size();
  // reach[c][v]: instance v is reachable from candidate c.
  std::vector<std::vector<bool>> reach(candidates.size());
  for (size_t c = 0; c < candidates.size(); ++c) {
    std::vector<boost::default_color_type> colors(instances.size(), boost::white_color);
    boost::breadth_first_visit(
        hb, candidates[c],
        boost::color_map(boost::make_iterator_property_map(colors.begin(), boost::get(boost::vertex_index, hb))));
    reach[c].resize(instances.size());
    for (size_t v = 0; v < instances.size(); ++v) reach[c][v] = colors[v] != boost::white_color;
  }
  // A candidate is a consequence when, for each of its missing ranks, another candidate the
  // same rank is missing from happens before it.
  const auto precedes = [&](size_t a, size_t b) {  // candidate a before candidate b
    const size_t va = candidates[a], vb = candidates[b];
    if (!reach[a][vb]) return false;
    if (reach[b][va]) return instances[va].time_ns < instances[vb].time_ns;  // a cycle: by time
    return true;
  };
  for (size_t c = 0; c < candidates.size(); ++c) {
    const Instance& instance = instances[candidates[c]];
    StuckCollective stuck;
    stuck.group = instance.group;
    const auto info = rec.groups.find(instance.group);
    stuck.desc = info != rec.groups.end() ? info->second.desc : "";
    stuck.seq = instance.seq;
    const CallRecord& first = *instance.calls.front().second;
    stuck.op = first.op;
    stuck.sizes = first.input_sizes;
    stuck.dtype = first.dtype;
    stuck.missing_ranks = missing_of[c];
    stuck.only_without_file = only_without_file[c];
    for (const uint32_t r : missing_of[c]) {
      if (!present(r)) stuck.without_file.push_back(r);
    }
    for (const auto& [rank, call] : instance.calls) stuck.waiting_ranks.push_back(rank);
    stuck.time_ns = instance.time_ns;
    stuck.iteration = first.iteration;
    stuck.step = first.step;
    bool all_explained = true;
    for (const uint32_t m : missing_of[c]) {
      bool explained = false;
      for (size_t other = 0; other < candidates.size() && !explained; ++other) {
        if (other == c) continue;
        const auto& other_missing = missing_of[other];
        if (std::find(other_missing.begin(), other_missing.end(), m) == other_missing.end()) continue;
        explained = precedes(other, c);
      }
      all_explained &= explained;
    }
    stuck.root = !all_explained;
    out.stuck.push_back(std::move(stuck));
  }
  std::stable_sort(out.stuck.begin(), out.stuck.end(), [](const StuckCollective& a, const StuckCollective& b) {
    if (a.root != b.root) return a.root;
    if (a.only_without_file != b.only_without_file) return !a.only_without_file;
    return a.time_ns < b.time_ns;
  });

  // Desync: calls at one (group, seq) that differ in op, dtype or (where they must agree) size.
  for (const Instance& instance : instances) {
    if (instance.calls.size() < 2) continue;
    const auto check = [&](const std::string& field, auto value_of) {
      std::map<std::string, std::vector<uint32_t>> by_value;
      for (const auto& [rank, call] : instance.calls) by_value[value_of(*call)].push_back(rank);
      if (by_value.size() < 2) return false;
      auto majority = by_value.begin();
      for (auto it = by_value.begin(); it != by_value.end(); ++it) {
        if (it->second.size() > majority->second.size() ||
            (it->second.size() == majority->second.size() && it->second.front() < majority->second.front())) {
          majority = it;
        }
      }
      const auto step_of = [&](uint32_t rank) {
        for (const auto& [r, call] : instance.calls) {
          if (r == rank) return call->step;
        }
        return std::string();
      };
      for (const auto& [value, ranks] : by_value) {
        if (value == majority->first) continue;
        out.desyncs.push_back(DesyncFinding{instance.group, instance.seq, field, majority->first, value, ranks,
                                            step_of(majority->second.front()), step_of(ranks.front())});
      }
      return true;
    };
    if (check("op", [](const CallRecord& c) { return c.op; })) continue;
    if (check("dtype", [](const CallRecord& c) { return c.dtype; })) continue;
    if (SizesMustMatch(instance.calls.front().second->op, petrsim)) {
      check("sizes", [](const CallRecord& c) { return Shape(c.input_sizes); });
    }
  }

  // Wait-for cycles: r -> m when r pends in an instance m never joined.
  const uint32_t world = static_cast<uint32_t>(rec.ranks.size());
  Graph waits(world);
  std::set<std::pair<uint32_t, uint32_t>> wait_edges;
  for (const Instance& instance : instances) {
    const auto info = rec.groups.find(instance.group);
    if (info == rec.groups.end()) continue;
    for (const uint32_t m : info->second.members) {
      if (m >= world || joined(m, instance.group, instance.seq, instance)) continue;
      for (const auto& [r, call] : instance.calls) {
        if (wait_edges.emplace(r, m).second) boost::add_edge(r, m, waits);
      }
    }
  }
  if (world > 0) {
    std::vector<int> component(world);
    const int components = boost::strong_components(
        waits, boost::make_iterator_property_map(component.begin(), boost::get(boost::vertex_index, waits)));
    std::vector<std::vector<uint32_t>> members(static_cast<size_t>(components));
    for (uint32_t r = 0; r < world; ++r) members[static_cast<size_t>(component[r])].push_back(r);
    for (auto& ranks : members) {
      if (ranks.size() > 1) out.cycles.push_back(std::move(ranks));
    }
  }

  // A desync is the cause: the culprit's call differs from the others' at one sequence number.
  if (!out.desyncs.empty()) {
    const DesyncFinding& f = out.desyncs.front();
    out.cause = fmt::format("desync at {} seq {}: rank(s) {} called with {} {} where the others used {}", f.group,
                            f.seq, RankList(f.culprit_ranks), f.field, f.found, f.expected);
    if (!f.found_step.empty()) {
      *out.cause += fmt::format(
          " (its step \"{}\", theirs \"{}\"): a collective issued by some ranks only, e.g. "
          "a conditional one, shifted its sequence numbers",
          f.found_step, f.expected_step);
    }
  }
  // The user-level cause on the first missing rank of the first root that recorded one.
  for (const StuckCollective& stuck : out.stuck) {
    if (!stuck.root || out.cause) continue;
    for (const uint32_t m : stuck.missing_ranks) {
      if (m >= rec.ranks.size()) continue;
      const RankRecording& rank = rec.ranks[m];
      if (!rank.present) continue;
      if (!rank.spins.empty()) {
        // The spin on the batch the rank waits for (the stuck collective's iteration), else the
        // earliest one recorded.
        const StuckGetitem* chosen = nullptr;
        for (const StuckGetitem& spin : rank.spins) {
          if (stuck.iteration && spin.batch == *stuck.iteration) chosen = &spin;
        }
        if (chosen == nullptr) {
          chosen = &*std::min_element(rank.spins.begin(), rank.spins.end(),
                                      [](const StuckGetitem& a, const StuckGetitem& b) { return a.batch < b.batch; });
        }
        const StuckGetitem& spin = *chosen;
        out.cause = fmt::format(
            "rank {} never reached it: DataLoader {} of rank {} never returned batch {} (slot {}, "
            "index {}): {}, spinning from {:.3f} s to the end of the recording at {:.3f} s{}",
            m, spin.worker < 0 ? std::string("main process") : fmt::format("worker {}", spin.worker), m, spin.batch,
            spin.slot, spin.index, spin.report.empty() ? "the resample loop never ends" : spin.report,
            static_cast<double>(spin.since_ns) / 1e9, static_cast<double>(rec.end_ns) / 1e9,
            spin.attempts > 0 ? fmt::format(", {} loads so far", spin.attempts) : std::string());
        if (rec.scenario) *out.cause += DescribePool(*rec.scenario, spin, rec.end_ns);
        if (stuck.iteration && spin.batch != *stuck.iteration && rank.records_dropped > 0) {
          *out.cause += fmt::format(
              " (the recording of rank {} left out {} older records, so the spin on batch {}, "
              "the one it waits for, may be among them)",
              m, rank.records_dropped, *stuck.iteration);
        }
        break;
      }
      if (rank.died) {
        out.cause = fmt::format("rank {} never reached it: it died: {}", m, *rank.died);
        break;
      }
    }
  }
  return out;
}

std::string FormatDiagnosis(const Diagnosis& d) {
  std::string out = fmt::format(
      "petrsim diagnose: {} ranks, {} ({} events, {} collective calls; happens-before "
      "graph of {} pending collectives, {} edges)\n",
      d.world_size, d.format == "petrsim" ? "petrsim traces" : "Flight Recorder dumps", d.events, d.calls,
      d.graph_vertices, d.graph_edges);
  if (!d.ranks_without_file.empty()) {
    out += fmt::format(
        "  no file for rank(s) {}: unknown what they joined; named (marked *) beside the first "
        "collective their groups' other members all reached\n",
        RankList(d.ranks_without_file));
  }
  for (const std::string& note : d.partial) out += fmt::format("  partial: {}\n", note);
  const auto table = [&](bool root) {
    std::string rows;
    for (const StuckCollective& s : d.stuck) {
      if (s.root != root) continue;
      std::string where;
      if (s.iteration) where = fmt::format("  (iteration {}, {})", *s.iteration, s.step);
      std::string missing = RankList(s.missing_ranks);
      if (!s.without_file.empty()) missing += "*";
      rows += fmt::format("  {:<10} {:<40} {:<7} {:<26} {:<14} {:<9} {:<14} {}{}\n", s.group, s.desc, s.seq, s.op,
                          Shape(s.sizes), DtypeName(s.dtype), missing, RankList(s.waiting_ranks), where);
    }
    return rows;
  };
  const std::string header =
      fmt::format("  {:<10} {:<40} {:<7} {:<26} {:<14} {:<9} {:<14} {}\n", "PGID", "Process Group Desc", "Seq",
                  "Op Type", "Size", "Dtype", "Missing Ranks", "Waiting Ranks");
  const std::string roots = table(true);
  if (roots.empty()) {
    out += "\nno stuck collective: every collective recorded was joined by every member of its group\n";
  } else {
    out += "\nstuck: the first collective of each process group that not every member joined\n" + header + roots;
  }
  const std::string consequences = table(false);
  if (!consequences.empty()) {
    out += "\nconsequences: stuck because their missing ranks are missing from a collective above first\n" + header +
           consequences;
  }
  if (!d.desyncs.empty()) {
    out += "\ndesync: calls at one sequence number that differ\n";
    for (const DesyncFinding& f : d.desyncs) {
      out += fmt::format("  {} seq {}: rank(s) {} called with {} {}, the others with {}\n", f.group, f.seq,
                         RankList(f.culprit_ranks), f.field, f.found, f.expected);
    }
  }
  if (!d.cycles.empty()) {
    out += "\nwait-for cycles (each rank waits in a collective the next never joined):\n";
    for (const auto& cycle : d.cycles) out += fmt::format("  ranks {}\n", RankList(cycle));
  }
  std::string unknown = "none found";
  if (!d.stuck.empty()) {
    unknown = d.format == "petrsim"
                  ? "the missing ranks recorded neither a spinning worker nor a death"
                  : "not in the recordings (Flight Recorder dumps hold no sampler or worker events); run with "
                    "--scenario to check the data";
  }
  out += fmt::format("\ncause: {}\n", d.cause ? *d.cause : unknown);
  return out;
}

nlohmann::json DiagnosisJson(const Diagnosis& d) {
  const auto stuck_json = [](const StuckCollective& s) {
    nlohmann::json j = {{"pg_id", s.group},
                        {"desc", s.desc},
                        {"op", s.op},
                        {"seq", s.seq},
                        {"sizes", s.sizes},
                        {"dtype", s.dtype},
                        {"missing_ranks", s.missing_ranks},
                        {"waiting_ranks", s.waiting_ranks},
                        {"missing_without_file", s.without_file},
                        {"root", s.root}};
    if (s.iteration) {
      j["iteration"] = *s.iteration;
      j["step"] = s.step;
    }
    return j;
  };
  nlohmann::json groups = nlohmann::json::array(), consequences = nlohmann::json::array();
  for (const StuckCollective& s : d.stuck) (s.root ? groups : consequences).push_back(stuck_json(s));
  nlohmann::json desyncs = nlohmann::json::array();
  for (const DesyncFinding& f : d.desyncs) {
    desyncs.push_back({{"pg_id", f.group},
                       {"seq", f.seq},
                       {"field", f.field},
                       {"expected", f.expected},
                       {"found", f.found},
                       {"culprit_ranks", f.culprit_ranks},
                       {"expected_step", f.expected_step},
                       {"found_step", f.found_step}});
  }
  return {{"format", d.format},
          {"world_size", d.world_size},
          {"groups", groups},
          {"consequences", consequences},
          {"desyncs", desyncs},
          {"cycles", d.cycles},
          {"ranks_without_file", d.ranks_without_file},
          {"partial", d.partial},
          {"calls", d.calls},
          {"events", d.events},
          {"cause", d.cause ? nlohmann::json(*d.cause) : nlohmann::json(nullptr)}};
}

ScenarioCrossCheck CrossCheck(const Diagnosis& diagnosis, const Scenario& scenario, const std::string& scenario_name) {
  ScenarioCrossCheck cross;
  cross.scenario_name = scenario_name;
  const Dataset dataset = BuildDataset(scenario, scenario_name);
  CheckSamplerConstructible(scenario, dataset, scenario_name);
  const ExpandedPlan plan = ExpandPlan(scenario.plan());
  const uint64_t job_iterations = JobIterations(scenario, dataset);
  std::set<std::string> plan_groups;
  for (const auto& c : plan.startup) plan_groups.insert(c.process_group());
  for (const auto& c : plan.per_iteration) plan_groups.insert(c.process_group());
  for (const auto& p : plan.periodic) plan_groups.insert(p.collective().process_group());
  for (const StuckCollective& stuck : diagnosis.stuck) {
    if (!stuck.root) continue;
    ScenarioCrossCheck::Placed placed;
    placed.group = stuck.group;
    placed.seq = stuck.seq;
    // Flight Recorder names groups by number; the world group is "0", described "default_pg".
    if (plan_groups.count(stuck.group) > 0) {
      placed.plan_group = stuck.group;
    } else if (plan_groups.count(stuck.desc) > 0) {
      placed.plan_group = stuck.desc;
    } else if (stuck.group == "0") {
      placed.plan_group = "default_pg";
    }
    if (!placed.plan_group.empty() && stuck.seq > 0) {
      if (const auto position =
              LocateCollective(plan, placed.plan_group, static_cast<uint64_t>(stuck.seq), job_iterations)) {
        placed.found = true;
        placed.startup = position->startup;
        placed.iteration = position->iteration;
        placed.step = position->step;
      }
    }
    cross.placed.push_back(placed);
  }
  const CheckReport check = RunPreflight(scenario, dataset);
  if (check.first_hit) {
    cross.check_hit = true;
    cross.hit_rank = check.first_hit->rank;
    cross.hit_worker = check.first_hit->worker;
    cross.hit_slot = check.first_hit->slot;
    cross.hit_iteration = check.first_hit->iteration;
    for (const TrapPool& pool : check.pools) {
      if (check.first_hit->index < pool.first_frame || check.first_hit->index > pool.last_frame) continue;
      cross.pool = fmt::format(
          "sub-dataset '{}', scene '{}', frames {}..{} (dataset indices {}..{}, {} frames), "
          "none with GT after the filters",
          pool.subdataset_name, pool.scene_name, pool.first_frame_in_scene, pool.last_frame_in_scene, pool.first_frame,
          pool.last_frame, pool.frames);
    }
  }
  const sim::SimResult result = sim::Simulate(scenario, dataset, sim::SimOptions{});
  cross.sim_outcome = OutcomeName(result.outcome);
  cross.sim_cause = CauseName(result.cause);
  cross.sim_stuck_ranks = result.stuck_ranks;
  if (result.collective) {
    cross.sim_group = result.collective->process_group;
    cross.sim_seq = result.collective->seq;
    cross.sim_iteration = result.collective->iteration;
  }

  // Consistent: a root stuck collective lacks the rank check names, at the iteration it names
  // (or at the simulator's sequence number).
  std::vector<uint32_t> missing;
  for (size_t i = 0, p = 0; i < diagnosis.stuck.size(); ++i) {
    const StuckCollective& stuck = diagnosis.stuck[i];
    if (!stuck.root) continue;
    const auto& placed = cross.placed[p++];
    missing.insert(missing.end(), stuck.missing_ranks.begin(), stuck.missing_ranks.end());
    if (!cross.check_hit) continue;
    const bool rank_missing =
        std::find(stuck.missing_ranks.begin(), stuck.missing_ranks.end(), cross.hit_rank) != stuck.missing_ranks.end();
    const bool same_place = (placed.found && !placed.startup && placed.iteration == cross.hit_iteration) ||
                            (!placed.plan_group.empty() && placed.plan_group == cross.sim_group &&
                             static_cast<uint64_t>(stuck.seq) == cross.sim_seq);
    if (rank_missing && same_place) cross.consistent = true;
  }
  if (cross.consistent) {
    cross.verdict = fmt::format(
        "consistent with a sampler livelock on rank {}: its DataLoader worker {} spins forever on batch {} "
        "(slot {}), in the pool {}",
        cross.hit_rank, cross.hit_worker, cross.hit_iteration, cross.hit_slot, cross.pool);
  } else if (!cross.check_hit) {
    cross.verdict =
        "not a sampler livelock: the scenario's resample loop terminates (or its livelock pools are "
        "never drawn within the job), so the missing ranks stopped for another reason";
  } else if (missing.empty()) {
    cross.verdict = fmt::format(
        "nothing is stuck in the recordings, but the scenario predicts a livelock of rank {} "
        "at iteration {}: the recordings end earlier, or come from another job",
        cross.hit_rank, cross.hit_iteration);
  } else {
    cross.verdict = fmt::format(
        "not what the scenario predicts: it predicts rank {} stuck at iteration {} (simulated: {} seq {} on {}), "
        "the recordings miss rank(s) {}",
        cross.hit_rank, cross.hit_iteration, cross.sim_outcome, cross.sim_seq,
        cross.sim_group.empty() ? "-" : cross.sim_group, RankList(missing));
  }
  return cross;
}

std::string FormatCrossCheck(const ScenarioCrossCheck& cross) {
  std::string out = fmt::format("\nscenario {}:\n", cross.scenario_name);
  for (const auto& placed : cross.placed) {
    if (!placed.found) {
      out += fmt::format("  {} seq {}: not a collective of the scenario's plan within the job{}\n", placed.group,
                         placed.seq, placed.plan_group.empty() ? " (no process group of that name)" : "");
    } else if (placed.startup) {
      out += fmt::format("  {} seq {} is the startup step \"{}\"\n", placed.group, placed.seq, placed.step);
    } else {
      out += fmt::format("  {} seq {} is iteration {}, step \"{}\"\n", placed.group, placed.seq, placed.iteration,
                         placed.step);
    }
  }
  if (cross.check_hit) {
    out += fmt::format(
        "  check: rank {}'s DataLoader worker {} first draws a livelock pool at iteration {} (slot "
        "{}): {}\n",
        cross.hit_rank, cross.hit_worker, cross.hit_iteration, cross.hit_slot, cross.pool);
  } else {
    out += "  check: no livelock pool is drawn within the job\n";
  }
  out += fmt::format("  simulator: {} ({})", cross.sim_outcome, cross.sim_cause);
  if (!cross.sim_group.empty()) {
    out += fmt::format("; rank(s) {} never reach seq {} on {} (iteration {})", RankList(cross.sim_stuck_ranks),
                       cross.sim_seq, cross.sim_group, cross.sim_iteration);
  }
  out += fmt::format("\n  verdict: {}\n", cross.verdict);
  return out;
}

nlohmann::json CrossCheckJson(const ScenarioCrossCheck& cross) {
  nlohmann::json placed = nlohmann::json::array();
  for (const auto& p : cross.placed) {
    nlohmann::json j = {{"pg_id", p.group}, {"plan_group", p.plan_group}, {"seq", p.seq}, {"found", p.found}};
    if (p.found) {
      j["startup"] = p.startup;
      j["iteration"] = p.iteration;
      j["step"] = p.step;
    }
    placed.push_back(j);
  }
  nlohmann::json check = nullptr;
  if (cross.check_hit) {
    check = {{"rank", cross.hit_rank},
             {"worker", cross.hit_worker},
             {"slot", cross.hit_slot},
             {"iteration", cross.hit_iteration},
             {"pool", cross.pool}};
  }
  return {{"scenario", cross.scenario_name},
          {"placed", placed},
          {"check_first_hit", check},
          {"sim",
           {{"outcome", cross.sim_outcome},
            {"cause", cross.sim_cause},
            {"stuck_ranks", cross.sim_stuck_ranks},
            {"pg", cross.sim_group},
            {"seq", cross.sim_seq},
            {"iteration", cross.sim_iteration}}},
          {"consistent_with_livelock", cross.consistent},
          {"verdict", cross.verdict}};
}

}  // namespace petrsim
