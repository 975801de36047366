// `petrsim diagnose`, the analysis: Diagnose finds, from the Recordings, the stuck collectives
// and which of them are root causes (a happens-before graph), desyncs, wait-for cycles and the
// user-level cause on a missing rank; see diagnose.h.
#include "replay/diagnose.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/strong_components.hpp>

#include "base/assert.h"
#include "base/error.h"
#include "check/preflight.h"
#include "data/dataset.h"
#include "replay/diagnose_internal.h"

namespace petrsim {

using diagnose_internal::RankList;
using diagnose_internal::Shape;

namespace {

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

// The pool a spinning getitem cannot leave, from the scenario the trace carries (empty when the
// dataset cannot be rebuilt or the index is in no trap pool).
// Also fills `spin`'s pool fields (sampler group, sub-dataset, scene, pool frames) from the scenario.
std::string DescribePool(const Scenario& scenario, StuckGetitem& spin, int64_t end_ns) {
  try {
    const Dataset dataset = BuildDataset(scenario, "the trace's scenario");
    if (spin.index < 0 || spin.index >= dataset.size()) return {};
    const CheckReport check = RunPreflight(scenario, dataset);
    for (const TrapPool& pool : check.pools) {
      if (spin.index < pool.first_frame || spin.index > pool.last_frame) continue;
      spin.group = dataset.group_of(spin.index);
      spin.subdataset = pool.subdataset;
      spin.subdataset_name = pool.subdataset_name;
      spin.scene = pool.scene;
      spin.scene_name = pool.scene_name;
      spin.pool_first = pool.first_frame;
      spin.pool_last = pool.last_frame;
      spin.pool_first_in_scene = pool.first_frame_in_scene;
      spin.pool_last_in_scene = pool.last_frame_in_scene;
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

// A collective instance not complete everywhere: (group, seq) and the calls pending in it.
struct Instance {
  std::string group;
  int64_t seq = 0;
  std::vector<std::pair<uint32_t, const CallRecord*>> calls;  // by rank, ascending
  int64_t time_ns = INT64_MAX;
};

struct Instances {
  std::map<std::pair<std::string, int64_t>, size_t> index_of;
  std::vector<Instance> list;
};

// Per group, the first instance some member never joined: the candidates for a root cause. The
// two vectors run in parallel, one entry per candidate.
struct Candidates {
  // The instance (its index into Instances::list as the vertex), the missing ranks (ascending), its time.
  std::vector<diagnose_internal::RootCandidate> at;
  std::vector<bool> only_without_file;  // every missing rank has no file
};

using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

bool Present(const Recordings& rec, uint32_t r) { return r < rec.ranks.size() && rec.ranks[r].present; }

// Whether member `r` joined the instance: it enqueued that far on the group, or recorded the call.
bool Joined(const Recordings& rec, uint32_t r, const Instance& instance) {
  if (!Present(rec, r)) return false;
  const auto& progress = rec.ranks[r].progress;
  const auto it = progress.find(instance.group);
  if (it != progress.end() && it->second.last_enqueued >= instance.seq) return true;
  for (const auto& [rank, call] : instance.calls) {
    if (rank == r) return true;
  }
  return false;
}

// The counts and notes of the files read, before any analysis.
Diagnosis StartDiagnosis(const Recordings& rec) {
  // LoadRecordings ends with one RankRecording per rank of the world, each at its own index; the
  // analysis below indexes ranks by number on that promise.
  PETRSIM_ASSERT(rec.ranks.size() == rec.world_size);
  Diagnosis out;
  out.format = rec.format;
  out.world_size = rec.world_size;
  out.recorded_scenario = rec.scenario;
  out.torch_version = rec.torch_version;
  out.torch_version_from = rec.torch_version_from;
  for (const std::string& note : rec.notes) out.partial.push_back(note);
  for (const RankRecording& rank : rec.ranks) {
    PETRSIM_ASSERT(rank.rank == static_cast<uint32_t>(&rank - rec.ranks.data()));
    if (!rank.present) out.ranks_without_file.push_back(rank.rank);
    if (rank.partial) out.partial.push_back(*rank.partial);
    out.calls += rec.format == "petrsim" ? rank.calls_read : rank.calls.size();
    out.events += rec.format == "petrsim" ? rank.events_read : rank.calls.size();
  }
  return out;
}

Instances CollectInstances(const Recordings& rec) {
  Instances instances;
  for (const RankRecording& rank : rec.ranks) {
    for (const CallRecord& call : rank.calls) {
      if (call.completed) continue;
      auto [it, added] = instances.index_of.try_emplace({call.group, call.seq}, instances.list.size());
      if (added) instances.list.push_back(Instance{call.group, call.seq, {}, INT64_MAX});
      Instance& instance = instances.list[it->second];
      if (!instance.calls.empty() && instance.calls.back().first == rank.rank) continue;  // one call per rank
      // Ranks are visited in ascending order, so each instance's calls stay sorted by rank.
      PETRSIM_ASSERT(instance.calls.empty() || instance.calls.back().first < rank.rank);
      instance.calls.emplace_back(rank.rank, &call);
      instance.time_ns = std::min(instance.time_ns, call.time_ns);
    }
  }
  return instances;
}

// The candidate of one group (its instances `list`, by sequence number), if any: the first
// instance some member with a file never joined. Members without a file are unknown, not
// missing: they are named (as suspects) beside the first instance that every member with a file
// joined but that is not complete, or, where no member with a file is missing anywhere, beside
// the first instance that all of them wait in.
void AddCandidate(const Recordings& rec, const Instances& instances, const std::vector<size_t>& list,
                  const GroupInfo& info, Candidates& candidates) {
  std::vector<uint32_t> absent;
  size_t present_members = 0;
  for (const uint32_t r : info.members) {
    if (Present(rec, r)) {
      ++present_members;
    } else {
      absent.push_back(r);
    }
  }
  std::optional<size_t> found;
  std::vector<uint32_t> missing;
  for (const size_t i : list) {
    for (const uint32_t r : info.members) {
      if (Present(rec, r) && !Joined(rec, r, instances.list[i])) missing.push_back(r);
    }
    if (!missing.empty()) {
      found = i;
      break;
    }
  }
  bool suspects_only = false;
  if (!found && !absent.empty()) {
    for (const size_t i : list) {
      if (instances.list[i].calls.size() == present_members) {  // every member with a file waits here
        found = i;
        suspects_only = true;
        break;
      }
    }
  }
  if (!found) return;
  missing.insert(missing.end(), absent.begin(), absent.end());
  std::sort(missing.begin(), missing.end());
  PETRSIM_ASSERT(!missing.empty());
  candidates.at.push_back({*found, std::move(missing), instances.list[*found].time_ns});
  candidates.only_without_file.push_back(suspects_only);
}

Candidates FindCandidates(const Recordings& rec, const Instances& instances) {
  Candidates candidates;
  std::map<std::string, std::vector<size_t>> by_group;
  for (size_t i = 0; i < instances.list.size(); ++i) by_group[instances.list[i].group].push_back(i);
  for (auto& [group, list] : by_group) {
    std::sort(list.begin(), list.end(),
              [&](size_t a, size_t b) { return instances.list[a].seq < instances.list[b].seq; });
    const auto info = rec.groups.find(group);
    if (info == rec.groups.end()) continue;
    AddCandidate(rec, instances, list, info->second, candidates);
  }
  return candidates;
}

// The happens-before graph over the instances: per rank, an edge from each pending call's instance to its next one's
// (program order), each edge once. Counts the graph in `out`.
std::vector<std::pair<size_t, size_t>> HappensBefore(const Recordings& rec, const Instances& instances,
                                                     Diagnosis& out) {
  std::vector<std::pair<size_t, size_t>> edges;
  for (const RankRecording& rank : rec.ranks) {
    size_t previous = SIZE_MAX;
    for (const CallRecord& call : rank.calls) {
      if (call.completed) continue;
      const size_t current = instances.index_of.at({call.group, call.seq});
      if (previous != SIZE_MAX && previous != current) edges.emplace_back(previous, current);
      previous = current;
    }
  }
  std::sort(edges.begin(), edges.end());
  edges.erase(std::unique(edges.begin(), edges.end()), edges.end());
  out.graph_vertices = instances.list.size();
  out.graph_edges = edges.size();
  return edges;
}

// Candidate c as a stuck collective, without its `root` (decided from the other candidates).
StuckCollective StuckOf(const Recordings& rec, const Instance& instance, const Candidates& candidates, size_t c) {
  StuckCollective stuck;
  stuck.group = instance.group;
  const auto info = rec.groups.find(instance.group);
  stuck.desc = info != rec.groups.end() ? info->second.desc : "";
  stuck.seq = instance.seq;
  const CallRecord& first = *instance.calls.front().second;
  stuck.op = first.op;
  stuck.sizes = first.input_sizes;
  stuck.dtype = first.dtype;
  stuck.missing_ranks = candidates.at[c].missing;
  stuck.only_without_file = candidates.only_without_file[c];
  for (const uint32_t r : candidates.at[c].missing) {
    if (!Present(rec, r)) stuck.without_file.push_back(r);
  }
  for (const auto& [rank, call] : instance.calls) stuck.waiting_ranks.push_back(rank);
  stuck.time_ns = instance.time_ns;
  stuck.iteration = first.iteration;
  stuck.step = first.step;
  // A rank that recorded the call joined it: the missing ranks and the waiting ones never meet.
  for (const uint32_t r : stuck.waiting_ranks) {
    PETRSIM_ASSERT(!std::binary_search(stuck.missing_ranks.begin(), stuck.missing_ranks.end(), r));
  }
  for (const uint32_t r : stuck.missing_ranks) PETRSIM_ASSERT(r < rec.world_size);
  return stuck;
}

// The stuck collectives, root ones first. A candidate is a consequence when, for each of its
// missing ranks, another candidate the same rank is missing from happens before it.
void AddStuck(const Recordings& rec, const Instances& instances, const Candidates& candidates,
              const std::vector<std::pair<size_t, size_t>>& edges, Diagnosis& out) {
  const std::vector<bool> root = diagnose_internal::RootCandidates(instances.list.size(), edges, candidates.at);
  for (size_t c = 0; c < candidates.at.size(); ++c) {
    StuckCollective stuck = StuckOf(rec, instances.list[candidates.at[c].vertex], candidates, c);
    stuck.root = root[c];
    out.stuck.push_back(std::move(stuck));
  }
  std::stable_sort(out.stuck.begin(), out.stuck.end(), [](const StuckCollective& a, const StuckCollective& b) {
    if (a.root != b.root) return a.root;
    if (a.only_without_file != b.only_without_file) return !a.only_without_file;
    return a.time_ns < b.time_ns;
  });
  PETRSIM_ASSERT(
      std::is_partitioned(out.stuck.begin(), out.stuck.end(), [](const StuckCollective& s) { return s.root; }));
}

// Whether the calls of `instance` differ in `field` (the value of each call: `value_of`); if so,
// adds a desync per value other than the majority's (the most ranks; ties: the lowest rank).
template <class ValueOf>
bool AddDesync(const Instance& instance, const std::string& field, ValueOf value_of, Diagnosis& out) {
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
    PETRSIM_ASSERT(!ranks.empty());  // a value is in the map because some rank called with it
    out.desyncs.push_back(DesyncFinding{instance.group, instance.seq, field, majority->first, value, ranks,
                                        step_of(majority->second.front()), step_of(ranks.front())});
  }
  return true;
}

// Desync: calls at one (group, seq) that differ in op, dtype or (where they must agree) size.
void FindDesyncs(const Instances& instances, bool petrsim, Diagnosis& out) {
  for (const Instance& instance : instances.list) {
    if (instance.calls.size() < 2) continue;
    if (AddDesync(
            instance, "op", [](const CallRecord& c) { return c.op; }, out))
      continue;
    if (AddDesync(
            instance, "dtype", [](const CallRecord& c) { return c.dtype; }, out))
      continue;
    if (SizesMustMatch(instance.calls.front().second->op, petrsim)) {
      AddDesync(
          instance, "sizes", [](const CallRecord& c) { return Shape(c.input_sizes); }, out);
    }
  }
}

// Wait-for cycles: r -> m when r pends in an instance m never joined.
void FindCycles(const Recordings& rec, const Instances& instances, Diagnosis& out) {
  const uint32_t world = static_cast<uint32_t>(rec.ranks.size());
  Graph waits(world);
  std::set<std::pair<uint32_t, uint32_t>> wait_edges;
  for (const Instance& instance : instances.list) {
    const auto info = rec.groups.find(instance.group);
    if (info == rec.groups.end()) continue;
    for (const uint32_t m : info->second.members) {
      if (m >= world || Joined(rec, m, instance)) continue;
      for (const auto& [r, call] : instance.calls) {
        if (wait_edges.emplace(r, m).second) boost::add_edge(r, m, waits);
      }
    }
  }
  if (world == 0) return;
  std::vector<int> component(world);
  const int components = boost::strong_components(
      waits, boost::make_iterator_property_map(component.begin(), boost::get(boost::vertex_index, waits)));
  std::vector<std::vector<uint32_t>> members(static_cast<size_t>(components));
  for (uint32_t r = 0; r < world; ++r) members[static_cast<size_t>(component[r])].push_back(r);
  for (auto& ranks : members) {
    if (ranks.size() < 2) continue;
    PETRSIM_ASSERT(std::is_sorted(ranks.begin(), ranks.end()));  // filled by ascending rank
    out.cycles.push_back(std::move(ranks));
  }
}

// A desync is the cause: the culprit's call differs from the others' at one sequence number.
void DesyncCause(Diagnosis& out) {
  if (out.desyncs.empty()) return;
  const DesyncFinding& f = out.desyncs.front();
  out.cause_detail =
      CauseDetail{"desync", f.culprit_ranks.empty() ? 0 : f.culprit_ranks.front(), std::nullopt, std::nullopt};
  out.cause = fmt::format("desync at {} seq {}: rank(s) {} called with {} {} where the others used {}", f.group, f.seq,
                          RankList(f.culprit_ranks), f.field, f.found, f.expected);
  if (!f.found_step.empty()) {
    *out.cause += fmt::format(
        " (its step \"{}\", theirs \"{}\"): a collective issued by some ranks only, e.g. "
        "a conditional one, shifted its sequence numbers",
        f.found_step, f.expected_step);
  }
}

// Missing rank `m` of `stuck` (null: no collective is stuck, a rank's file may lack) spins in a getitem: the spin on
// the batch the rank waits for (the stuck collective's iteration), else the earliest one recorded, as the cause.
void LivelockCause(const Recordings& rec, const StuckCollective* stuck_or_null, uint32_t m, Diagnosis& out) {
  const RankRecording& rank = rec.ranks[m];
  PETRSIM_ASSERT(!rank.spins.empty());
  const StuckCollective stuck = stuck_or_null != nullptr ? *stuck_or_null : StuckCollective{};
  const StuckGetitem* chosen = nullptr;
  for (const StuckGetitem& spin : rank.spins) {
    if (stuck.iteration && spin.batch == *stuck.iteration) chosen = &spin;
  }
  if (chosen == nullptr) {
    chosen = &*std::min_element(rank.spins.begin(), rank.spins.end(),
                                [](const StuckGetitem& a, const StuckGetitem& b) { return a.batch < b.batch; });
  }
  StuckGetitem spin = *chosen;
  out.cause_detail = CauseDetail{"livelock", m, spin, std::nullopt};
  out.cause = fmt::format(
      "rank {}{}: DataLoader {} of rank {} never returned batch {} (slot {}, "
      "index {}): {}, spinning from {:.3f} s to the end of the recording at {:.3f} s{}{}",
      m, stuck_or_null != nullptr ? " never reached it" : "",
      spin.worker < 0 ? std::string("main process") : fmt::format("worker {}", spin.worker), m, spin.batch, spin.slot,
      spin.index, spin.report.empty() ? "the resample loop never ends" : spin.report,
      static_cast<double>(spin.since_ns - rec.origin_ns) / 1e9, static_cast<double>(rec.end_ns - rec.origin_ns) / 1e9,
      rec.origin_ns != 0 ? " (times from the job's first recorded event)" : "",
      spin.attempts > 0 ? fmt::format(", {} loads so far", spin.attempts) : std::string());
  if (rec.scenario) {
    *out.cause += DescribePool(*rec.scenario, spin, rec.end_ns);
    out.cause_detail->getitem = spin;
    out.cause_detail->pool_known = true;
  }
  if (stuck.iteration && spin.batch != *stuck.iteration && rank.records_dropped > 0) {
    *out.cause += fmt::format(
        " (the recording of rank {} left out {} older records, so the spin on batch {}, "
        "the one it waits for, may be among them)",
        m, rank.records_dropped, *stuck.iteration);
  }
}

// The user-level cause on the first missing rank of the first root that recorded one: a spinning
// getitem, or its death.
void MissingRankCause(const Recordings& rec, Diagnosis& out) {
  for (const StuckCollective& stuck : out.stuck) {
    if (!stuck.root || out.cause) continue;
    for (const uint32_t m : stuck.missing_ranks) {
      if (m >= rec.ranks.size()) continue;
      const RankRecording& rank = rec.ranks[m];
      if (!rank.present) continue;
      if (!rank.spins.empty()) {
        LivelockCause(rec, &stuck, m, out);
        break;
      }
      if (rank.died) {
        const bool killed = rank.died->starts_with("killed by") || rank.died->starts_with("stopped (");
        out.cause =
            fmt::format("rank {} never reached it: {}{} at {:.3f} s{}", m, killed ? "it was " : "it died: ", *rank.died,
                        static_cast<double>(rank.died_ns - rec.origin_ns) / 1e9,
                        rec.origin_ns != 0 ? " (times from the job's first recorded event)" : "");
        out.cause_detail = CauseDetail{"died", m, std::nullopt, *rank.died};
        break;
      }
    }
  }
}

// No collective stuck nor desync, yet the job failed: the cause is the first spinning rank's getitem, else the
// earliest death or failed exit, else the earliest watchdog.
void FailureCause(const Recordings& rec, Diagnosis& out) {
  if (out.cause || !out.stuck.empty()) return;
  if (!out.spinning_ranks.empty()) {
    LivelockCause(rec, nullptr, out.spinning_ranks.front(), out);
    return;
  }
  const auto earliest = [](const std::vector<RankEvent>& events) {
    return std::min_element(events.begin(), events.end(),
                            [](const RankEvent& a, const RankEvent& b) { return a.time_ns < b.time_ns; });
  };
  const std::string times = rec.origin_ns != 0 ? " (times from the job's first recorded event)" : "";
  if (!out.deaths.empty()) {
    const RankEvent& death = *earliest(out.deaths);
    out.cause = fmt::format("rank {} died first: {}, at {:.3f} s{}", death.rank, death.what,
                            static_cast<double>(death.time_ns) / 1e9, times);
    out.cause_detail = CauseDetail{"died", death.rank, std::nullopt, death.what};
  } else if (!out.watchdogs.empty()) {
    const RankEvent& watchdog = *earliest(out.watchdogs);
    out.cause = fmt::format("the watchdog of rank {} fired first, at {:.3f} s{}: {}", watchdog.rank,
                            static_cast<double>(watchdog.time_ns) / 1e9, times, watchdog.what);
    out.cause_detail = CauseDetail{"watchdog", watchdog.rank, std::nullopt, std::nullopt};
  }
}

}  // namespace

Diagnosis Diagnose(const Recordings& rec) {
  Diagnosis out = StartDiagnosis(rec);
  const Instances instances = CollectInstances(rec);
  const Candidates candidates = FindCandidates(rec, instances);
  const std::vector<std::pair<size_t, size_t>> edges = HappensBefore(rec, instances, out);
  AddStuck(rec, instances, candidates, edges, out);
  FindDesyncs(instances, rec.format == "petrsim", out);
  FindCycles(rec, instances, out);
  DesyncCause(out);
  MissingRankCause(rec, out);
  diagnose_internal::NoteHealth(rec, out);
  FailureCause(rec, out);
  diagnose_internal::ApplyStalls(rec, out);
  return out;
}

}  // namespace petrsim
