// What Flight Recorder dumps say about their job beyond their calls: the PyTorch releases that write a dump's
// format, the world, and the process groups of PyTorch 2.2's bare lists matched across ranks; see flight_recorder.h.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "base/assert.h"
#include "formats/flight_recorder/flight_recorder.h"

namespace petrsim {

namespace {

// "0-3", "8,9,11": ranks ascending, runs of three or more as a range, the others joined by `sep`.
std::string CompactRanks(const std::vector<uint32_t>& ranks, const char* sep) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += sep;
    if (j - i >= 2) {
      out += fmt::format("{}-{}", ranks[i], ranks[j]);
      i = j + 1;
    } else {
      out += std::to_string(ranks[i]);
      ++i;
    }
  }
  return out;
}

}  // namespace

// Which PyTorch releases write which dump format. Evidence, per format (S: source read in a
// stored copy; PR: a pytorch/pytorch pull request, its date and diff). The release dates are as
// PyTorch announced them, not read in a stored copy: 2.2.0 on 30 Jan 2024, 2.4.0 on 24 Jul 2024,
// 2.6.0 on 29 Jan 2025, 2.7.0 on 23 Apr 2025, each from a branch cut some five weeks before.
// docs/research/flight_recorder_formats.md has the rest.
//   bare list: PR #110960 (Oct 2023) writes the list of entries; PR #118044/#118046 (23 Jan 2024,
//     after the 2.2 branch cut) make it a dict with a version. So 2.2.
//   "2.2": a dict with a version exists from #118046 (so 2.3 at the earliest); S: NCCLUtils.hpp
//     with version_val "2.2" and no pg_status; pg_status came with "2.3" in PR #131268 (Jul 2024),
//     after the 2.4 branch cut. So 2.3-2.4 (which of the two, or both, is not read).
//   "2.3": from #131268 (after the 2.4 cut) until "2.4", which main had by PR #141648
//     (27 Nov 2024: FlightRecorder.hpp split out of NCCLUtils.hpp with version_val "2.4"), before
//     the 2.6 cut. So 2.5.
//   "2.4": S: pytorch/pytorch FlightRecorder.hpp at 911ce84b and 00f0e2f6, version_val "2.4";
//     on main by 27 Nov 2024 (#141648) and until "2.5", which PR #151048's diff (10 Apr 2025,
//     after the 2.7 cut) shows on main. So 2.5-2.7 (whether 2.5 shipped "2.3" or "2.4" is not
//     read).
//   "2.5": after 27 Nov 2024 ("2.4", before the 2.6 cut) and before #151048 made it "2.6"
//     (10 Apr 2025, after the 2.7 cut). So 2.6-2.7.
//   "2.6" to "2.8": #151048 (10 Apr 2025) bumps "2.5" to "2.6" and adds nccl_version; the 2.8
//     tree already says "2.9" (below). So only the development builds between 2.7 and 2.8.
//   "2.9": S: ROCm/pytorch commit 10b22ea5, a merge whose conflict shows one side with
//     version.txt "2.8.0" and FlightRecorder.hpp version_val "2.9", nccl_version_key. So 2.8
//     (the nvrx dumps are "2.9" with NCCL 2.27.3).
//   "2.10": S: the other side of that conflict, version.txt "2.9.0" with version_val "2.10" and
//     comm_lib_version_key; pytorch/pytorch FlightRecorderDetail.hpp (cb41e3a4) writes
//     comm_lib_version. So 2.9 or later (no later format is read).
std::optional<FrTorchReleases> FrFormatTorchReleases(const FrDump& dump) {
  if (dump.bare_list) return FrTorchReleases{"2.2", "2.2", false};
  static const std::map<std::string, FrTorchReleases> kReleases = {
      {"2.2", {"2.3", "2.4", false}}, {"2.3", {"2.5", "2.5", false}}, {"2.4", {"2.5", "2.7", false}},
      {"2.5", {"2.6", "2.7", false}}, {"2.6", {"2.8", "2.8", true}},  {"2.7", {"2.8", "2.8", true}},
      {"2.8", {"2.8", "2.8", true}},  {"2.9", {"2.8", "2.8", false}}, {"2.10", {"2.9", "", false}},
  };
  const auto it = kReleases.find(dump.version);
  if (it == kReleases.end()) return std::nullopt;
  return it->second;
}

std::string FrDumpReleaseText(const FrDump& dump) {
  std::string text = dump.bare_list ? "Flight Recorder bare list" : "Flight Recorder format " + dump.version;
  const auto releases = FrFormatTorchReleases(dump);
  if (!releases) {
    text += " (a PyTorch release petrsim does not know)";
  } else if (releases->development) {
    text += fmt::format(" (PyTorch {} development builds)", releases->first);
  } else if (releases->last.empty()) {
    text += fmt::format(" (PyTorch {} or later)", releases->first);
  } else if (releases->first == releases->last) {
    text += fmt::format(" (PyTorch {})", releases->first);
  } else {
    text += fmt::format(" (PyTorch {}-{})", releases->first, releases->last);
  }
  if (!dump.comm_lib_version.empty()) {
    text += dump.lib_version_key == "nccl_version" ? ", NCCL " : ", comm_lib_version ";
    text += dump.comm_lib_version;
  }
  return text;
}

std::optional<uint32_t> FrDumpWorldSize(const FrDump& dump) {
  if (dump.world_ranks.empty()) return std::nullopt;
  return static_cast<uint32_t>(dump.world_ranks.size());
}

namespace {

// The ranks that wait in no call: nothing pending in their dump, or no dump below the highest
// rank (then `without_dump` is set).
std::vector<uint32_t> IdleRanks(const std::vector<FrDump>& dumps, bool& without_dump) {
  uint32_t end = 0;
  std::set<uint32_t> waiting, dumped;
  for (const FrDump& dump : dumps) {
    end = std::max(end, dump.rank + 1);
    dumped.insert(dump.rank);
    for (const FrEntry& e : dump.entries) {
      if (e.state != "completed") {
        waiting.insert(dump.rank);
        break;
      }
    }
  }
  std::vector<uint32_t> idle;
  without_dump = false;
  for (uint32_t r = 0; r < end; ++r) {
    if (waiting.count(r) > 0) continue;
    idle.push_back(r);
    without_dump = without_dump || dumped.count(r) == 0;
  }
  return idle;
}

// The process groups the bare-list dumps' (rank, local id) streams of collectives form.
struct BareListGroups {
  struct Group {
    int64_t local_id = 0;
    std::map<int64_t, std::string> ops;  // sequence number -> op, of every stream matched
    std::vector<uint32_t> ranks;
    std::string name;
  };
  std::vector<Group> groups;
  std::map<std::pair<size_t, int64_t>, size_t> group_of;  // (dump index, local id) -> group
};

// The first group of `candidates` whose calls overlap `ops` and agree with them where they do;
// `groups.size()` when none.
size_t AgreeingGroup(const std::vector<BareListGroups::Group>& groups, const std::vector<size_t>& candidates,
                     const std::map<int64_t, std::string>& ops) {
  for (const size_t g : candidates) {
    bool overlap = false, agree = true;
    for (const auto& [seq, op] : ops) {
      const auto it = groups[g].ops.find(seq);
      if (it == groups[g].ops.end()) continue;
      overlap = true;
      if (it->second != op) {
        agree = false;
        break;
      }
    }
    if (overlap && agree) return g;
  }
  return groups.size();
}

// Each (rank, local id) stream joins the first group of that local id it overlaps and agrees
// with; the groups are named <local id>@<ranks>.
BareListGroups MatchStreams(const std::vector<FrDump>& dumps, const std::vector<size_t>& bare) {
  BareListGroups out;
  std::vector<BareListGroups::Group>& groups = out.groups;
  std::map<int64_t, std::vector<size_t>> groups_of_id;
  for (const size_t i : bare) {
    std::map<int64_t, std::map<int64_t, std::string>> streams;  // local id -> seq -> op
    for (const FrEntry& e : dumps[i].entries) {
      if (!e.is_p2p) streams[e.pg_id].emplace(e.collective_seq_id, e.profiling_name);
    }
    for (const auto& [id, ops] : streams) {
      const size_t chosen = AgreeingGroup(groups, groups_of_id[id], ops);
      if (chosen == groups.size()) {
        groups.emplace_back().local_id = id;
        groups_of_id[id].push_back(chosen);
      }
      groups[chosen].ops.insert(ops.begin(), ops.end());
      groups[chosen].ranks.push_back(dumps[i].rank);
      out.group_of[{i, id}] = chosen;
    }
  }
  for (BareListGroups::Group& group : groups) {
    PETRSIM_ASSERT(!group.ranks.empty());  // a group is made for the stream that joins it
    std::sort(group.ranks.begin(), group.ranks.end());
    group.name = fmt::format("{}@{}", group.local_id, CompactRanks(group.ranks, ","));
  }
  return out;
}

}  // namespace

std::vector<std::string> MatchBareListGroups(std::vector<FrDump>& dumps) {
  std::vector<size_t> bare;
  for (size_t i = 0; i < dumps.size(); ++i) {
    if (dumps[i].bare_list) bare.push_back(i);
  }
  if (bare.empty()) return {};
  std::sort(bare.begin(), bare.end(), [&](size_t a, size_t b) { return dumps[a].rank < dumps[b].rank; });
  bool idle_without_dump = false;
  const std::vector<uint32_t> idle = IdleRanks(dumps, idle_without_dump);
  const BareListGroups matched = MatchStreams(dumps, bare);
  for (const size_t i : bare) {
    FrDump& dump = dumps[i];
    for (FrEntry& e : dump.entries) {
      const auto it = matched.group_of.find({i, e.pg_id});
      if (it == matched.group_of.end()) continue;  // a point-to-point call on an id with no collective
      const BareListGroups::Group& group = matched.groups[it->second];
      e.pg_name = group.name;
      if (dump.pg_config.count(group.name) > 0) continue;
      FrGroupConfig config;
      config.name = group.name;
      std::set_union(group.ranks.begin(), group.ranks.end(), idle.begin(), idle.end(),
                     std::back_inserter(config.ranks));
      PETRSIM_ASSERT(config.ranks.size() >= group.ranks.size());
      dump.pg_config[group.name] = std::move(config);
    }
  }

  std::vector<std::string> notes;
  notes.push_back(fmt::format(
      "bare-list dumps (PyTorch 2.2) name a process group by its index among the groups each process created "
      "(ProcessGroupNCCL::uid_), which differs from rank to rank, and not its members: {} group(s) matched across "
      "ranks by their calls (the same op at each sequence number two ranks both recorded), named <index>@<ranks>",
      matched.groups.size()));
  if (!idle.empty()) {
    notes.push_back(
        fmt::format("rank(s) {} wait in no call (nothing pending in their dump{}): the bare list cannot "
                    "say which groups they belong to, so each group counts them among its members",
                    CompactRanks(idle, ", "), idle_without_dump ? ", or no dump" : ""));
  }
  return notes;
}

}  // namespace petrsim
