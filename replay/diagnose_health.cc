// `petrsim diagnose`, the job's health beyond the collectives: deaths, failed exits, watchdog events, spinning
// workers, refused and incomplete files, and the verdict and exit code they give (a failed job is never called
// healthy, nor is a set of recordings that lacks a rank); see diagnose.h.
#include <fmt/format.h>

#include "replay/diagnose.h"
#include "replay/diagnose_internal.h"

namespace petrsim {
namespace diagnose_internal {
namespace {

// Why the file of present rank `rank` is not a whole record of it; "" when it is.
std::string IncompleteWhy(const Recordings& rec, const RankRecording& rank) {
  if (rank.partial) return "its file was cut short (" + *rank.partial + ")";
  if (rec.format == "petrsim" && rank.events_read == 0) {
    return "its trace holds no event: the rank recorded nothing (it failed or was stopped before it started, e.g. "
           "on a MASTER_PORT another job serves)";
  }
  if (rank.exit_expected && !rank.exit) {
    return "its trace ends without the rank's end (petrsim_train records one on every exit): the process ended "
           "without a word (SIGKILL, a crash) or still runs";
  }
  if (rank.invalid_records > 0) {
    return fmt::format("{} invalid record(s) refused, the first: {}", rank.invalid_records, rank.first_invalid);
  }
  return "";
}

double Seconds(int64_t ns) { return static_cast<double>(ns) / 1e9; }

}  // namespace

void NoteHealth(const Recordings& rec, Diagnosis& out) {
  out.refused_files = rec.refused;
  for (const RankRecording& rank : rec.ranks) {
    if (!rank.present) continue;
    if (std::string why = IncompleteWhy(rec, rank); !why.empty()) out.incomplete.push_back({rank.rank, why});
    if (rank.died) out.deaths.push_back({rank.rank, *rank.died, rank.died_ns - rec.origin_ns, 1});
    if (rank.watchdog_events > 0) {
      out.watchdogs.push_back(
          {rank.rank, rank.first_watchdog, rank.first_watchdog_ns - rec.origin_ns, rank.watchdog_events});
    }
    // A worker still in a getitem when its rank ended well was prefetching, not spinning.
    const bool ended_well = rank.exit && !rank.died;
    if (!rank.spins.empty() && !ended_well) out.spinning_ranks.push_back(rank.rank);
  }
}

std::string FormatHealth(const Diagnosis& d) {
  std::string out;
  if (!d.deaths.empty()) out += "\nranks that died or failed (their recordings' last word):\n";
  for (const RankEvent& e : d.deaths)
    out += fmt::format("  rank {} at {:.3f} s: {}\n", e.rank, Seconds(e.time_ns), e.what);
  if (!d.watchdogs.empty()) out += "\nwatchdogs that fired (the first of each rank):\n";
  for (const RankEvent& e : d.watchdogs) {
    out += fmt::format("  rank {} at {:.3f} s{}: {}\n", e.rank, Seconds(e.time_ns),
                       e.count > 1 ? fmt::format(" ({} events)", e.count) : std::string(), e.what);
  }
  if (!d.spinning_ranks.empty()) {
    out += fmt::format("\nspinning: a DataLoader getitem of rank(s) {} never returned\n", RankList(d.spinning_ranks));
  }
  if (!d.ranks_without_file.empty() || !d.incomplete.empty()) {
    out += fmt::format("\nincomplete recordings (ranks 0-{}):{}\n", d.world_size == 0 ? 0 : d.world_size - 1,
                       d.ranks_without_file.empty()
                           ? std::string()
                           : fmt::format(" no usable file for rank(s) {}", RankList(d.ranks_without_file)));
    for (const IncompleteRank& r : d.incomplete) out += fmt::format("  rank {}: {}\n", r.rank, r.why);
    for (const RefusedFile& f : d.refused_files) out += fmt::format("  refused: {}\n", f.why);
  }
  return out;
}

nlohmann::json HealthJson(const Diagnosis& d) {
  const auto events = [](const std::vector<RankEvent>& list, bool counted) {
    nlohmann::json array = nlohmann::json::array();
    for (const RankEvent& e : list) {
      nlohmann::json j = {{"rank", e.rank}, {"what", e.what}, {"time_s", Seconds(e.time_ns)}};
      if (counted) j["events"] = e.count;
      array.push_back(j);
    }
    return array;
  };
  nlohmann::json refused = nlohmann::json::array(), incomplete = nlohmann::json::array();
  for (const RefusedFile& f : d.refused_files) {
    refused.push_back(
        {{"path", f.path}, {"rank", f.rank < 0 ? nlohmann::json(nullptr) : nlohmann::json(f.rank)}, {"why", f.why}});
  }
  for (const IncompleteRank& r : d.incomplete) incomplete.push_back({{"rank", r.rank}, {"why", r.why}});
  return {{"verdict", DiagnosisVerdict(d)},
          {"exit_code", DiagnosisExitCode(d)},
          {"partial_set", !d.ranks_without_file.empty() || !d.incomplete.empty()},
          {"missing_ranks", d.ranks_without_file},
          {"refused_files", refused},
          {"incomplete_ranks", incomplete},
          {"deaths", events(d.deaths, false)},
          {"watchdogs", events(d.watchdogs, true)},
          {"spinning_ranks", d.spinning_ranks}};
}

}  // namespace diagnose_internal

std::string DiagnosisVerdict(const Diagnosis& d) {
  if (!d.stuck.empty() || !d.desyncs.empty() || !d.deaths.empty() || !d.watchdogs.empty() ||
      !d.spinning_ranks.empty()) {
    return "failed";
  }
  if (!d.ranks_without_file.empty() || !d.incomplete.empty() || !d.refused_files.empty()) return "incomplete";
  return "healthy";
}

int DiagnosisExitCode(const Diagnosis& d) {
  const std::string verdict = DiagnosisVerdict(d);
  return verdict == "failed" ? 1 : verdict == "incomplete" ? 3 : 0;
}

}  // namespace petrsim
