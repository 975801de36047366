// Internals of the sweep (sweep.h) shared by its files: the sweep's identity, the per-run record
// and the functions one file gives another. sweep.cc checks a spec and expands its combinations,
// sweep_run.cc runs them, sweep_report.cc summarises and prints, sweep_merge.cc writes and joins
// shard files, sweep_html.cc draws the page of --html.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "proto/scenario.pb.h"
#include "sweep/sweep.h"

namespace petrsim::sweep_internal {

using Json = nlohmann::ordered_json;

// The standard normal quantile of 0.975: a two-sided 95% interval.
inline constexpr double kWilsonZ95 = 1.959963984540054;

// ---------------------------------------------------------------------------------------------
// The sweep's identity: everything that decides which runs it has and what they simulate.

struct SweepIdentity {
  std::string scenario_path;
  std::string scenario_hash;  // FNV-1a 64 of the file's bytes, 16 hex digits
  std::vector<SweepAxis> vary;
  std::vector<std::string> sets;
  uint32_t seeds = 1;
  std::optional<uint64_t> seed_base;

  uint64_t Combinations() const {
    uint64_t count = 1;
    for (const SweepAxis& axis : vary) count *= axis.values.size();
    return count;
  }
  uint64_t Runs() const { return Combinations() * seeds; }

  // The values of combination `c`, one per axis; the last axis varies fastest.
  std::vector<std::string> Values(uint64_t c) const {
    std::vector<std::string> values(vary.size());
    for (size_t a = vary.size(); a-- > 0;) {
      const uint64_t size = vary[a].values.size();
      values[a] = vary[a].values[c % size];
      c /= size;
    }
    return values;
  }

  // "job.world_size=8 resample.policy=global", or "(no --vary)".
  std::string Describe(uint64_t c) const {
    if (vary.empty()) return "(no --vary)";
    const std::vector<std::string> values = Values(c);
    std::string text;
    for (size_t a = 0; a < vary.size(); ++a) {
      if (a > 0) text += ' ';
      text += vary[a].path + "=" + values[a];
    }
    return text;
  }
};

// ---------------------------------------------------------------------------------------------
// Per run records

struct RunRecord {
  uint64_t run = 0;
  uint64_t combination = 0;
  uint32_t seed_index = 0;
  uint64_t scenario_seed = 0;
  uint32_t job_seed = 0;
  std::string outcome;
  std::string cause;
  uint64_t job_iterations = 0;
  uint64_t iterations_completed = 0;
  std::optional<int64_t> time_to_hang_ns;
  int64_t end_ns = 0;
  int64_t last_iteration_end_ns = 0;
  uint64_t stream_breaks = 0;
  uint64_t events = 0;

  // Iterations per second of virtual time; none before the first completed iteration.
  std::optional<double> IterationsPerSecond() const {
    if (iterations_completed == 0 || last_iteration_end_ns <= 0) return std::nullopt;
    return static_cast<double>(iterations_completed) / (static_cast<double>(last_iteration_end_ns) * 1e-9);
  }
};

// ---------------------------------------------------------------------------------------------
// Per combination summaries (sweep.h says what each field means)

struct CombinationSummary {
  uint64_t runs = 0;
  uint64_t not_completed = 0;
  std::vector<uint64_t> outcome_counts;                  // by OutcomeNames()
  std::vector<std::pair<std::string, uint64_t>> causes;  // sorted by name, non-completed runs
  std::vector<int64_t> times_to_hang;                    // sorted
  std::optional<int64_t> time_to_hang_median;
  std::optional<int64_t> time_to_hang_p90;
  uint64_t rate_runs = 0;
  std::optional<double> mean_iterations_per_s;
  double mean_stream_breaks = 0;

  double HangProbability() const {
    return runs == 0 ? 0.0 : static_cast<double>(not_completed) / static_cast<double>(runs);
  }
};

// The Wilson score interval of a binomial proportion, `successes` of `trials`, at the normal
// quantile `z` (1.959964: 95%). [0, 1] when there are no trials.
struct ProportionInterval {
  double low = 0, high = 1;
};
ProportionInterval WilsonInterval(uint64_t successes, uint64_t trials, double z = kWilsonZ95);

// sweep.cc
std::string ReadFileBytes(const std::string& path, const char* what);
Scenario CombinationScenario(const Scenario& base, const SweepIdentity& identity, uint64_t c);

// sweep_run.cc
std::vector<RunRecord> RunAll(const Scenario& base, const SweepIdentity& identity, const std::vector<uint64_t>& runs,
                              const SweepSpec& spec);

// sweep_report.cc
const std::vector<std::string>& OutcomeNames();
Json IdentityJson(const SweepIdentity& identity);
Json RecordJson(const SweepIdentity& identity, const RunRecord& record);
std::string FormatSweep(const SweepIdentity& identity, const std::vector<RunRecord>& records, SweepFormat format,
                        bool json_runs);
void Write(const std::string& text, std::FILE* out);
// `records` holds every run of the sweep, by run index; one summary per combination.
std::vector<CombinationSummary> Summaries(const SweepIdentity& identity, const std::vector<RunRecord>& records);
// The `runs` of one combination, by seed index.
CombinationSummary Summarize(const std::vector<const RunRecord*>& runs);

// sweep_html.cc: the page of `--html` (hang probability with its Wilson interval, time to hang,
// stream breaks per run), from every run's record.
std::string SweepHtml(const SweepIdentity& identity, const std::vector<RunRecord>& records);

// sweep_merge.cc
std::string FormatShard(const SweepIdentity& identity, const SweepShard& shard, const std::vector<RunRecord>& records);
std::vector<uint64_t> ShardRuns(uint64_t total, const SweepShard& shard);

}  // namespace petrsim::sweep_internal
