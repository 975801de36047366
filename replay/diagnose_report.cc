// `petrsim diagnose`, the report: a Diagnosis as text (FormatDiagnosis) and JSON (DiagnosisJson),
// and the text of sizes and rank lists the other files share; see diagnose.h.
#include "replay/diagnose.h"

#include <fmt/format.h>

#include "replay/diagnose_internal.h"

namespace petrsim {
namespace diagnose_internal {

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

nlohmann::json PoolJson(int64_t first, int64_t last, uint32_t first_in_scene, uint32_t last_in_scene, int64_t frames) {
  return {{"first", first},
          {"last", last},
          {"first_in_scene", first_in_scene},
          {"last_in_scene", last_in_scene},
          {"frames", frames}};
}

nlohmann::json GetitemJson(const StuckGetitem& g, bool pool_known) {
  nlohmann::json j = {{"worker", g.worker}, {"batch", g.batch}, {"slot", g.slot}, {"index", g.index}};
  if (pool_known) {
    j["group"] = g.group;
    j["subdataset"] = g.subdataset;
    j["subdataset_name"] = g.subdataset_name;
    j["scene"] = g.scene;
    j["scene_name"] = g.scene_name;
    j["pool"] = PoolJson(g.pool_first, g.pool_last, g.pool_first_in_scene, g.pool_last_in_scene,
                         g.pool_last - g.pool_first + 1);
  }
  return j;
}

}  // namespace diagnose_internal

namespace {

std::string DtypeName(const std::string& dtype) { return dtype.empty() ? "-" : dtype; }

}  // namespace

using diagnose_internal::FormatLogSection;
using diagnose_internal::GetitemJson;
using diagnose_internal::LogJson;
using diagnose_internal::RankList;
using diagnose_internal::Shape;

namespace {

// The report's first line: what was read.
std::string Headline(const Diagnosis& d) {
  if (d.format == "training_log") {
    const std::string world =
        d.world_size_known ? fmt::format("{} ranks", d.world_size)
                           : fmt::format("world size unknown (not in the log; ranks 0-{} seen; give --world-size N)",
                                         d.world_size == 0 ? 0 : d.world_size - 1);
    return fmt::format("petrsim diagnose: {}, training logs ({} lines, {} watchdog timeouts)\n", world, d.events,
                       d.calls);
  }
  return fmt::format(
      "petrsim diagnose: {} ranks, {} ({} events, {} collective calls; happens-before "
      "graph of {} pending collectives, {} edges)\n",
      d.world_size, d.format == "petrsim" ? "petrsim traces" : "Flight Recorder dumps", d.events, d.calls,
      d.graph_vertices, d.graph_edges);
}

// The rows of the root stuck collectives (`root`) or of the consequences.
std::string StuckRows(const Diagnosis& d, bool root) {
  std::string rows;
  for (const StuckCollective& s : d.stuck) {
    if (s.root != root) continue;
    std::string where;
    if (s.iteration) where = fmt::format("  (iteration {}, {})", *s.iteration, s.step);
    std::string missing = RankList(s.missing_ranks);
    if (!s.without_file.empty()) missing += "*";
    // A training log of 1.8-1.10 prints no SeqNum.
    const std::string seq = s.seq == 0 && d.format == "training_log" ? "-" : std::to_string(s.seq);
    rows += fmt::format("  {:<10} {:<40} {:<7} {:<26} {:<14} {:<9} {:<14} {}{}\n", s.group, s.desc, seq, s.op,
                        Shape(s.sizes), DtypeName(s.dtype), missing, RankList(s.waiting_ranks), where);
  }
  return rows;
}

// The stuck collectives (roots, the probe's stalls, then the consequences), desyncs and wait-for cycles.
std::string FindingsSection(const Diagnosis& d) {
  std::string out;
  const std::string header =
      fmt::format("  {:<10} {:<40} {:<7} {:<26} {:<14} {:<9} {:<14} {}\n", "PGID", "Process Group Desc", "Seq",
                  "Op Type", "Size", "Dtype", "Missing Ranks", "Waiting Ranks");
  const std::string roots = StuckRows(d, true);
  if (roots.empty()) {
    out += d.format == "training_log"
               ? "\nno timeout found: the log holds no watchdog or collective timeout line\n"
               : "\nno stuck collective: every collective recorded was joined by every member of its group\n";
  } else {
    out += "\nstuck: the first collective of each process group that not every member joined\n" + header + roots;
  }
  out += diagnose_internal::FormatStalls(d);
  const std::string consequences = StuckRows(d, false);
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
  return out;
}

// The cause line when the diagnosis names none: why the recordings cannot say.
std::string UnknownCause(const Diagnosis& d) {
  if (d.stuck.empty()) return "none found";
  if (d.format == "training_log" && !d.world_size_known) {
    return fmt::format(
        "every rank seen (0-{}) printed a timeout, and the log does not say how many ranks the job has: the ranks "
        "that never reached the collective are above {}, unnamed; give --world-size N (or --scenario)",
        d.world_size == 0 ? 0 : d.world_size - 1, d.world_size == 0 ? 0 : d.world_size - 1);
  }
  if (d.format == "training_log") {
    return "every rank of the world printed a timeout: none is missing; the collective never completed for "
           "another reason (a network or NCCL fault), or the log lacks ranks";
  }
  return d.format == "petrsim" ? "the missing ranks recorded neither a spinning worker nor a death"
                               : "not in the recordings (Flight Recorder dumps hold no sampler or worker events); run "
                                 "with --scenario to check the data";
}

// The verdict and the exit code it gives (DiagnosisExitCode), in words.
std::string VerdictLine(const Diagnosis& d) {
  const std::string verdict = DiagnosisVerdict(d);
  if (verdict == "failed") return "verdict: the job failed (exit 1)\n";
  if (verdict == "incomplete") {
    return "verdict: incomplete recordings (exit 3): no failure among what was read, but the job's health cannot be "
           "told without every rank's whole recording\n";
  }
  return "verdict: healthy (exit 0): every rank's recording is complete and shows no failure\n";
}

}  // namespace

std::string FormatDiagnosis(const Diagnosis& d) {
  std::string out = Headline(d);
  if (!d.ranks_without_file.empty()) {
    out += fmt::format(
        "  no file for rank(s) {}: unknown what they joined; named (marked *) beside the first "
        "collective their groups' other members all reached\n",
        RankList(d.ranks_without_file));
  }
  for (const std::string& note : d.partial) out += fmt::format("  partial: {}\n", note);
  out += FindingsSection(d);
  // A stuck collective or a desync says the job failed, and its cause the rest; else what else the recordings show.
  const bool collectives_failed = !d.stuck.empty() || !d.desyncs.empty();
  if (!collectives_failed) out += diagnose_internal::FormatHealth(d);
  if (d.log) out += FormatLogSection(d);
  out += fmt::format("\ncause: {}\n", d.cause ? *d.cause : UnknownCause(d));
  if (!collectives_failed && d.format != "training_log") out += VerdictLine(d);
  return out;
}

nlohmann::json DiagnosisJson(const Diagnosis& d) {
  const auto stuck_json = [](const StuckCollective& s) {
    nlohmann::json j = {{"pg_id", s.group},
                        {"desc", s.desc},
                        {"op", s.op},
                        {"seq", s.seq == 0 ? nlohmann::json(nullptr) : nlohmann::json(s.seq)},
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
  nlohmann::json out = {{"format", d.format},
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
  if (d.cause_detail) {
    const CauseDetail& c = *d.cause_detail;
    nlohmann::json detail = {{"kind", c.kind}, {"rank", c.rank}};
    if (c.getitem) detail.update(GetitemJson(*c.getitem, c.pool_known));
    if (c.died) detail["died"] = *c.died;
    out["cause_detail"] = detail;
  } else {
    out["cause_detail"] = nullptr;
  }
  if (d.log) out["log"] = LogJson(d);
  out.update(diagnose_internal::HealthJson(d));
  diagnose_internal::AddStallsJson(d, out);
  return out;
}

}  // namespace petrsim
