// Internals of `petrsim diagnose` (diagnose.h) shared by its files: the text of sizes and rank
// lists (defined in diagnose_report.cc).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "replay/diagnose.h"

namespace petrsim::diagnose_internal {

std::string Shape(const std::vector<std::vector<int64_t>>& sizes);

// "9, 14" or "0-3, 7".
std::string RankList(const std::vector<uint32_t>& ranks);

// A trap pool as JSON: {first, last, first_in_scene, last_in_scene, frames}. The one shape of "pool" wherever the
// diagnosis names one (a livelock's cause_detail, the cross-check's check_first_hit).
nlohmann::json PoolJson(int64_t first, int64_t last, uint32_t first_in_scene, uint32_t last_in_scene, int64_t frames);

// A stuck getitem's fields as JSON ("worker", "batch", "slot", "index", and with `pool_known` "group", "subdataset",
// "subdataset_name", "scene", "scene_name", "pool": PoolJson).
nlohmann::json GetitemJson(const StuckGetitem& getitem, bool pool_known);

// Training logs (diagnose_log.cc): the frame a rank waits in (its traceback's innermost frame outside torch), or
// null; as text; the log section of a diagnosis as text and JSON.
const LogFrame* WaitingFrame(const RankLog& rank);
std::string FrameText(const LogFrame& frame);
std::string FormatLogSection(const Diagnosis& d);
nlohmann::json LogJson(const Diagnosis& d);

// The job's health beyond the collectives (diagnose_health.cc): `out`'s deaths, watchdogs, spinning ranks, refused
// files and incomplete ranks from `rec`; as text (printed where no stuck collective or desync says the job failed) and
// as JSON fields ("verdict", "exit_code", "partial_set", "missing_ranks", "refused_files", "incomplete_ranks",
// "deaths", "watchdogs", "spinning_ranks").
void NoteHealth(const Recordings& rec, Diagnosis& out);
std::string FormatHealth(const Diagnosis& d);
nlohmann::json HealthJson(const Diagnosis& d);

// A stuck collective that may be a root cause (diagnose_roots.cc): its vertex in the happens-before graph, the ranks
// it is missing (ascending, no repeats) and its time.
struct RootCandidate {
  size_t vertex = 0;
  std::vector<uint32_t> missing;
  int64_t time_ns = 0;
};

// Per candidate, whether it is a root cause: whether some rank it is missing is not missing from another candidate
// that happens before it. Candidate a happens before b when b's vertex is reachable from a's along `edges` (program
// order) and a's is not from b's, or, where each reaches the other (a cycle), when a is earlier. Linear in the graph
// per 64 distinct ranks missing from two candidates or more.
std::vector<bool> RootCandidates(size_t vertices, const std::vector<std::pair<size_t, size_t>>& edges,
                                 const std::vector<RootCandidate>& candidates);

}  // namespace petrsim::diagnose_internal
