// Sweeps and merges of simulated runs; see sweep.h.
#include "sweep/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <fstream>
#include <future>
#include <initializer_list>
#include <iterator>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>
#include <thread>
#include <utility>

#include "model/assert.h"
#include "model/dataset.h"
#include "model/error.h"
#include "model/file_io.h"
#include "model/sampler.h"
#include "model/scenario.pb.h"
#include "model/scenario_loader.h"
#include "model/scenario_override.h"
#include "model/scenario_validation.h"
#include "sim/simulator.h"

namespace petrsim {
namespace {

using Json = nlohmann::ordered_json;

constexpr std::string_view kShardFormat = "petrsim-sweep-shard";
constexpr int kShardVersion = 1;
constexpr uint64_t kJobSeedModulus = uint64_t{1} << 31;

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

std::string Fnv1a64Hex(std::string_view bytes) {
  uint64_t hash = 0xCBF29CE484222325ULL;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001B3ULL;
  }
  return fmt::format("{:016x}", hash);
}

Json IdentityJson(const SweepIdentity& identity) {
  Json vary = Json::array();
  for (const SweepAxis& axis : identity.vary) {
    vary.push_back(Json{{"path", axis.path}, {"values", axis.values}});
  }
  Json seed_base = nullptr;
  if (identity.seed_base) seed_base = *identity.seed_base;
  return Json{{"scenario", identity.scenario_path},
              {"scenario_fnv1a64", identity.scenario_hash},
              {"vary", vary},
              {"sets", identity.sets},
              {"seeds", identity.seeds},
              {"seed_base", seed_base},
              {"combinations", identity.Combinations()},
              {"runs", identity.Runs()}};
}

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

const std::vector<std::string>& OutcomeNames() {
  static const std::vector<std::string> names = {OutcomeName(Outcome::kCompleted), OutcomeName(Outcome::kHang),
                                                 OutcomeName(Outcome::kDesync), OutcomeName(Outcome::kRankDied),
                                                 OutcomeName(Outcome::kLimitReached)};
  return names;
}

Json OptionalJson(const std::optional<int64_t>& value) {
  if (!value) return nullptr;
  return *value;
}

Json OptionalJson(const std::optional<double>& value) {
  if (!value) return nullptr;
  return *value;
}

Json RecordJson(const SweepIdentity& identity, const RunRecord& record) {
  Json values = Json::object();
  const std::vector<std::string> combination_values = identity.Values(record.combination);
  for (size_t a = 0; a < identity.vary.size(); ++a) {
    values[identity.vary[a].path] = combination_values[a];
  }
  return Json{{"run", record.run},
              {"combination", record.combination},
              {"values", values},
              {"seed_index", record.seed_index},
              {"run_seed", record.scenario_seed},
              {"job_seed", record.job_seed},
              {"outcome", record.outcome},
              {"cause", record.cause},
              {"job_iterations", record.job_iterations},
              {"iterations_completed", record.iterations_completed},
              {"time_to_hang_ns", OptionalJson(record.time_to_hang_ns)},
              {"end_ns", record.end_ns},
              {"last_iteration_end_ns", record.last_iteration_end_ns},
              {"iterations_per_s", OptionalJson(record.IterationsPerSecond())},
              {"stream_breaks", record.stream_breaks},
              {"events", record.events}};
}

RunRecord RecordFromResult(const sim::SimResult& result) {
  RunRecord record;
  record.outcome = OutcomeName(result.outcome);
  record.cause = CauseName(result.cause);
  record.job_iterations = result.job_iterations;
  record.iterations_completed = result.iterations_completed;
  if (result.outcome == Outcome::kHang || result.outcome == Outcome::kDesync || result.outcome == Outcome::kRankDied) {
    if (result.blocked_at_ns >= 0) {
      record.time_to_hang_ns = result.blocked_at_ns;
    } else if (result.desync) {
      record.time_to_hang_ns = result.desync->at_ns;
    } else if (result.first_watchdog_ns >= 0) {
      record.time_to_hang_ns = result.first_watchdog_ns;
    } else {
      record.time_to_hang_ns = result.end_ns;
    }
  }
  record.end_ns = result.end_ns;
  record.last_iteration_end_ns = result.last_iteration_end_ns;
  record.stream_breaks = result.stream_breaks;
  record.events = result.events;
  return record;
}

// ---------------------------------------------------------------------------------------------
// Summary and output (shared by sweep and merge, so that both print the same bytes)

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
};

// Nearest rank: the ceil(p/100 * n)-th smallest (1-based), for sorted, non-empty `values`.
int64_t NearestRank(const std::vector<int64_t>& values, uint32_t percent) {
  const uint64_t n = values.size();
  uint64_t rank = (percent * n + 99) / 100;
  if (rank == 0) rank = 1;
  return values[rank - 1];
}

// `records` are the runs of one combination, by seed index.
CombinationSummary Summarize(const std::vector<const RunRecord*>& records) {
  CombinationSummary summary;
  summary.outcome_counts.assign(OutcomeNames().size(), 0);
  std::vector<std::pair<std::string, uint64_t>> causes;
  double rate_sum = 0;
  uint64_t breaks_sum = 0;
  for (const RunRecord* record : records) {
    ++summary.runs;
    const auto& names = OutcomeNames();
    const size_t outcome = std::find(names.begin(), names.end(), record->outcome) - names.begin();
    PETRSIM_ASSERT(outcome < names.size());
    ++summary.outcome_counts[outcome];
    if (outcome != 0) {
      ++summary.not_completed;
      auto it =
          std::find_if(causes.begin(), causes.end(), [&](const auto& entry) { return entry.first == record->cause; });
      if (it == causes.end()) {
        causes.emplace_back(record->cause, 1);
      } else {
        ++it->second;
      }
    }
    if (record->time_to_hang_ns) summary.times_to_hang.push_back(*record->time_to_hang_ns);
    if (const auto rate = record->IterationsPerSecond()) {
      rate_sum += *rate;
      ++summary.rate_runs;
    }
    breaks_sum += record->stream_breaks;
  }
  std::sort(causes.begin(), causes.end());
  summary.causes = std::move(causes);
  std::sort(summary.times_to_hang.begin(), summary.times_to_hang.end());
  if (!summary.times_to_hang.empty()) {
    summary.time_to_hang_median = NearestRank(summary.times_to_hang, 50);
    summary.time_to_hang_p90 = NearestRank(summary.times_to_hang, 90);
  }
  if (summary.rate_runs > 0) {
    summary.mean_iterations_per_s = rate_sum / static_cast<double>(summary.rate_runs);
  }
  if (summary.runs > 0) {
    summary.mean_stream_breaks = static_cast<double>(breaks_sum) / static_cast<double>(summary.runs);
  }
  return summary;
}

double Seconds(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

// "1835.120 s (0:30:35)"; the clock part is truncated to whole seconds.
std::string FormatSeconds(int64_t ns) {
  const int64_t total = ns / 1'000'000'000;
  return fmt::format("{:.3f} s ({}:{:02}:{:02})", Seconds(ns), total / 3600, total / 60 % 60, total % 60);
}

std::string FormatOptionalSeconds(const std::optional<int64_t>& ns) { return ns ? FormatSeconds(*ns) : "-"; }

std::string OutcomeList(const CombinationSummary& summary) {
  std::string text;
  for (size_t o = 0; o < OutcomeNames().size(); ++o) {
    if (summary.outcome_counts[o] == 0) continue;
    if (!text.empty()) text += ", ";
    text += fmt::format("{} {}", OutcomeNames()[o], summary.outcome_counts[o]);
  }
  return text;
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
  std::string quoted = "\"";
  for (const char c : text) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

std::string FormatTable(const SweepIdentity& identity, const std::vector<CombinationSummary>& summaries) {
  std::string text = fmt::format("sweep of {}: {} combination{} x {} seed{} = {} runs\n", identity.scenario_path,
                                 identity.Combinations(), identity.Combinations() == 1 ? "" : "s", identity.seeds,
                                 identity.seeds == 1 ? "" : "s", identity.Runs());
  for (const std::string& set : identity.sets) text += "--set " + set + "\n";
  text += fmt::format(
      "run i of a combination: job.seed = (job.seed + i) mod 2^31, run seed (cost jitter) = {} "
      "+ i, i = 0..{}\n",
      identity.seed_base ? std::to_string(*identity.seed_base) : "0", identity.seeds - 1);
  text += "hang p: runs not completed; time to hang: when the waiting ranks blocked (virtual)\n\n";

  struct Column {
    std::string header;
    bool left = false;
    std::vector<std::string> cells;
  };
  std::vector<Column> columns;
  for (const SweepAxis& axis : identity.vary) columns.push_back({axis.path, true, {}});
  const size_t axes = columns.size();
  for (const char* header : {"runs", "hang p", "time to hang median", "p90", "it/s", "breaks/run"}) {
    columns.push_back({header, false, {}});
  }
  columns.push_back({"outcomes", true, {}});
  for (uint64_t c = 0; c < summaries.size(); ++c) {
    const CombinationSummary& summary = summaries[c];
    const std::vector<std::string> values = identity.Values(c);
    for (size_t a = 0; a < axes; ++a) columns[a].cells.push_back(values[a]);
    size_t k = axes;
    columns[k++].cells.push_back(std::to_string(summary.runs));
    columns[k++].cells.push_back(fmt::format(
        "{:.3f} ({}/{})",
        summary.runs == 0 ? 0.0 : static_cast<double>(summary.not_completed) / static_cast<double>(summary.runs),
        summary.not_completed, summary.runs));
    columns[k++].cells.push_back(FormatOptionalSeconds(summary.time_to_hang_median));
    columns[k++].cells.push_back(FormatOptionalSeconds(summary.time_to_hang_p90));
    columns[k++].cells.push_back(summary.mean_iterations_per_s ? fmt::format("{:.3f}", *summary.mean_iterations_per_s)
                                                               : "-");
    columns[k++].cells.push_back(fmt::format("{:.2f}", summary.mean_stream_breaks));
    columns[k++].cells.push_back(OutcomeList(summary));
  }
  std::vector<size_t> widths;
  for (const Column& column : columns) {
    size_t width = column.header.size();
    for (const std::string& cell : column.cells) width = std::max(width, cell.size());
    widths.push_back(width);
  }
  auto row = [&](auto cell_of) {
    std::string line;
    for (size_t k = 0; k < columns.size(); ++k) {
      const std::string& cell = cell_of(columns[k]);
      if (k > 0) line += "  ";
      if (k + 1 == columns.size()) {
        line += cell;  // the last column is left aligned: no trailing blanks
      } else if (columns[k].left) {
        line += fmt::format("{:<{}}", cell, widths[k]);
      } else {
        line += fmt::format("{:>{}}", cell, widths[k]);
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  text += row([](const Column& column) -> const std::string& { return column.header; });
  for (size_t r = 0; r < summaries.size(); ++r) {
    text += row([r](const Column& column) -> const std::string& { return column.cells[r]; });
  }
  return text;
}

std::string FormatCsv(const SweepIdentity& identity, const std::vector<CombinationSummary>& summaries) {
  std::vector<std::string> header;
  for (const SweepAxis& axis : identity.vary) header.push_back(CsvField(axis.path));
  for (const char* name : {"runs", "not_completed", "hang_probability"}) header.push_back(name);
  for (const std::string& name : OutcomeNames()) header.push_back(name);
  for (const char* name : {"time_to_hang_runs", "time_to_hang_median_s", "time_to_hang_p90_s", "mean_iterations_per_s",
                           "mean_stream_breaks"}) {
    header.push_back(name);
  }
  std::string text = fmt::format("{}\n", fmt::join(header, ","));
  for (uint64_t c = 0; c < summaries.size(); ++c) {
    const CombinationSummary& summary = summaries[c];
    std::vector<std::string> fields;
    for (const std::string& value : identity.Values(c)) fields.push_back(CsvField(value));
    fields.push_back(std::to_string(summary.runs));
    fields.push_back(std::to_string(summary.not_completed));
    fields.push_back(fmt::format(
        "{:.6f}",
        summary.runs == 0 ? 0.0 : static_cast<double>(summary.not_completed) / static_cast<double>(summary.runs)));
    for (const uint64_t count : summary.outcome_counts) fields.push_back(std::to_string(count));
    fields.push_back(std::to_string(summary.times_to_hang.size()));
    fields.push_back(summary.time_to_hang_median ? fmt::format("{:.3f}", Seconds(*summary.time_to_hang_median)) : "");
    fields.push_back(summary.time_to_hang_p90 ? fmt::format("{:.3f}", Seconds(*summary.time_to_hang_p90)) : "");
    fields.push_back(summary.mean_iterations_per_s ? fmt::format("{:.6f}", *summary.mean_iterations_per_s) : "");
    fields.push_back(fmt::format("{:.6f}", summary.mean_stream_breaks));
    text += fmt::format("{}\n", fmt::join(fields, ","));
  }
  return text;
}

std::string FormatJson(const SweepIdentity& identity, const std::vector<CombinationSummary>& summaries,
                       const std::vector<RunRecord>& records, bool json_runs) {
  Json combinations = Json::array();
  for (uint64_t c = 0; c < summaries.size(); ++c) {
    const CombinationSummary& summary = summaries[c];
    Json values = Json::object();
    const std::vector<std::string> combination_values = identity.Values(c);
    for (size_t a = 0; a < identity.vary.size(); ++a) {
      values[identity.vary[a].path] = combination_values[a];
    }
    Json outcomes = Json::object();
    for (size_t o = 0; o < OutcomeNames().size(); ++o) {
      outcomes[OutcomeNames()[o]] = summary.outcome_counts[o];
    }
    Json causes = Json::object();
    for (const auto& [cause, count] : summary.causes) causes[cause] = count;
    Json hang = Json{{"runs", summary.times_to_hang.size()},
                     {"median_ns", OptionalJson(summary.time_to_hang_median)},
                     {"p90_ns", OptionalJson(summary.time_to_hang_p90)}};
    Json combination{
        {"combination", c},
        {"values", values},
        {"run_count", summary.runs},
        {"not_completed", summary.not_completed},
        {"hang_probability",
         summary.runs == 0 ? 0.0 : static_cast<double>(summary.not_completed) / static_cast<double>(summary.runs)},
        {"outcomes", outcomes},
        {"causes", causes},
        {"time_to_hang", hang},
        {"mean_iterations_per_s", OptionalJson(summary.mean_iterations_per_s)},
        {"mean_stream_breaks", summary.mean_stream_breaks}};
    if (json_runs) {
      Json runs = Json::array();
      for (uint64_t i = 0; i < identity.seeds; ++i) {
        runs.push_back(RecordJson(identity, records[c * identity.seeds + i]));
      }
      combination["runs"] = std::move(runs);
    }
    combinations.push_back(std::move(combination));
  }
  const Json document{{"sweep", IdentityJson(identity)}, {"combinations", combinations}};
  return document.dump(2) + "\n";
}

// `records` holds every run of the sweep, by run index.
std::string FormatSweep(const SweepIdentity& identity, const std::vector<RunRecord>& records, SweepFormat format,
                        bool json_runs) {
  PETRSIM_ASSERT(records.size() == identity.Runs());
  std::vector<CombinationSummary> summaries;
  for (uint64_t c = 0; c < identity.Combinations(); ++c) {
    std::vector<const RunRecord*> runs;
    for (uint64_t i = 0; i < identity.seeds; ++i) runs.push_back(&records[c * identity.seeds + i]);
    summaries.push_back(Summarize(runs));
  }
  switch (format) {
    case SweepFormat::kJson:
      return FormatJson(identity, summaries, records, json_runs);
    case SweepFormat::kCsv:
      return FormatCsv(identity, summaries);
    case SweepFormat::kTable:
      break;
  }
  return FormatTable(identity, summaries);
}

void Write(const std::string& text, std::FILE* out) {
  std::fwrite(text.data(), 1, text.size(), out);
  std::fflush(out);
}

// ---------------------------------------------------------------------------------------------
// Running

// Shared by the workers: datasets by key, least recently used first out.
class DatasetCache {
 public:
  using Entry = std::shared_future<std::shared_ptr<const Dataset>>;

  std::shared_ptr<const Dataset> Get(const std::string& key, const Scenario& scenario,
                                     const std::string& display_name) {
    std::unique_lock lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first == key) {
        entries_.splice(entries_.begin(), entries_, it);
        const Entry entry = entries_.front().second;
        lock.unlock();
        return entry.get();  // waits while another worker builds it
      }
    }
    std::promise<std::shared_ptr<const Dataset>> promise;
    entries_.emplace_front(key, promise.get_future().share());
    if (entries_.size() > kDatasetCacheSize) entries_.pop_back();
    lock.unlock();
    try {
      auto dataset = std::make_shared<const Dataset>(BuildDataset(scenario, display_name));
      promise.set_value(dataset);
      return dataset;
    } catch (...) {
      promise.set_exception(std::current_exception());
      throw;
    }
  }

 private:
  std::mutex mutex_;
  std::list<std::pair<std::string, Entry>> entries_;
};

// What BuildDataset reads: the dataset, the filters, the grouping, the resample policy
// (drop_empty_groups) and, for synthetic data, the seed.
std::string DatasetKey(const Scenario& scenario) {
  std::string key;
  for (const google::protobuf::Message* part : std::initializer_list<const google::protobuf::Message*>{
           &scenario.dataset(), &scenario.filters(), &scenario.grouping(), &scenario.resample()}) {
    const std::string bytes = part->SerializeAsString();
    key += std::to_string(bytes.size()) + ":" + bytes;
  }
  const bool synthetic = std::any_of(scenario.dataset().subdatasets().begin(), scenario.dataset().subdatasets().end(),
                                     [](const SubDataset& sub) { return sub.source_case() == SubDataset::kSynthetic; });
  if (synthetic) key += "seed:" + std::to_string(scenario.seed());  // e.g. --vary seed=1,2
  return key;
}

// The base scenario (with --set) plus the values of combination `c`. The values were checked by
// CheckSweep, so ApplyOverride does not throw here.
Scenario CombinationScenario(const Scenario& base, const SweepIdentity& identity, uint64_t c) {
  Scenario scenario = base;
  const std::vector<std::string> values = identity.Values(c);
  for (size_t a = 0; a < identity.vary.size(); ++a) {
    ApplyOverride(scenario, identity.vary[a].path + "=" + values[a]);
  }
  return scenario;
}

std::string CombinationDisplay(const SweepIdentity& identity, uint64_t c) {
  if (identity.vary.empty()) return identity.scenario_path;
  return identity.scenario_path + " with --vary " + identity.Describe(c);
}

RunRecord RunOne(const Scenario& base, const SweepIdentity& identity, uint64_t run, DatasetCache& cache) {
  const uint64_t c = run / identity.seeds;
  const uint32_t i = static_cast<uint32_t>(run % identity.seeds);
  Scenario scenario = CombinationScenario(base, identity, c);
  const uint64_t scenario_seed = identity.seed_base.value_or(0) + i;  // the run seed
  const uint32_t job_seed = static_cast<uint32_t>((uint64_t{scenario.job().seed()} + i) % kJobSeedModulus);
  scenario.mutable_job()->set_seed(job_seed);
  sim::SimOptions options;
  options.run_seed = scenario_seed;
  const std::string context =
      fmt::format("run {} ({}, seed index {}: run seed {}, job.seed {}): ", run,
                  identity.vary.empty() ? std::string("no --vary") : identity.Describe(c), i, scenario_seed, job_seed);
  try {
    ValidateScenario(scenario, identity.scenario_path);
    const std::shared_ptr<const Dataset> dataset = cache.Get(DatasetKey(scenario), scenario, identity.scenario_path);
    CheckSamplerConstructible(scenario, *dataset, identity.scenario_path);
    const sim::SimResult result = sim::Simulate(scenario, *dataset, options);
    RunRecord record = RecordFromResult(result);
    record.run = run;
    record.combination = c;
    record.seed_index = i;
    record.scenario_seed = scenario_seed;
    record.job_seed = job_seed;
    return record;
  } catch (const ScenarioError& error) {
    throw ScenarioError(context + error.what());
  }
}

std::string ReadFileBytes(const std::string& path, const char* what) {
  return ReadRegularFile(path, what, uint64_t{1} << 30);
}

// Checks the spec, the --set and --vary values and every combination; returns the base scenario
// (file + --set) and fills `identity`.
Scenario CheckSweep(const SweepSpec& spec, SweepIdentity& identity) {
  if (spec.seeds == 0) throw ScenarioError("--seeds: must be >= 1, got 0");
  if (spec.shard && (spec.shard->count == 0 || spec.shard->index == 0 || spec.shard->index > spec.shard->count)) {
    throw ScenarioError(
        fmt::format("--shard: expected K/N with 1 <= K <= N, got {}/{}", spec.shard->index, spec.shard->count));
  }
  if (spec.shard && spec.format == SweepFormat::kCsv) {
    throw ScenarioError(
        "--shard writes a JSON shard file for `petrsim merge`; --csv and the "
        "table are printed by merge");
  }
  for (size_t a = 0; a < spec.vary.size(); ++a) {
    if (spec.vary[a].values.empty()) {
      throw ScenarioError("--vary " + spec.vary[a].path + "=: no values after '='");
    }
    for (size_t b = 0; b < a; ++b) {
      if (spec.vary[a].path == spec.vary[b].path) {
        throw ScenarioError("--vary " + spec.vary[a].path + ": the field is varied twice");
      }
    }
  }
  uint64_t runs = spec.seeds;
  for (const SweepAxis& axis : spec.vary) {
    if (runs * axis.values.size() > kSweepRunsMax) {
      throw ScenarioError(fmt::format("--vary x --seeds: more than {} runs", kSweepRunsMax));
    }
    runs *= axis.values.size();
  }
  if (runs > kSweepRunsMax) {
    throw ScenarioError(fmt::format("--vary x --seeds: more than {} runs", kSweepRunsMax));
  }

  const std::string bytes = ReadFileBytes(spec.scenario_path, "scenario file");
  identity.scenario_path = spec.scenario_path;
  identity.scenario_hash = Fnv1a64Hex(bytes);
  identity.vary = spec.vary;
  identity.sets = spec.sets;
  identity.seeds = spec.seeds;
  identity.seed_base = spec.seed_base;

  Scenario base = LoadScenario(bytes, spec.scenario_path);
  ApplyOverrides(base, spec.sets);
  for (const SweepAxis& axis : spec.vary) {
    for (const std::string& value : axis.values) {
      Scenario probe = base;
      const std::string text = axis.path + "=" + value;
      try {
        ApplyOverride(probe, text);
      } catch (const ScenarioError& error) {
        std::string what = error.what();
        const std::string prefix = "--set " + text + ": ";
        if (what.starts_with(prefix)) what.erase(0, prefix.size());
        throw ScenarioError("--vary " + axis.path + "=" + fmt::format("{}", fmt::join(axis.values, ",")) + ": value '" +
                            value + "': " + what);
      }
    }
  }
  for (uint64_t c = 0; c < identity.Combinations(); ++c) {
    ValidateScenario(CombinationScenario(base, identity, c), CombinationDisplay(identity, c));
  }
  return base;
}

// Runs `runs` (global run indices, ascending) and returns their records in the same order.
std::vector<RunRecord> RunAll(const Scenario& base, const SweepIdentity& identity, const std::vector<uint64_t>& runs,
                              const SweepSpec& spec) {
  std::vector<RunRecord> records(runs.size());
  // Seed-major execution order: runs of one seed (that may share a dataset) run together.
  std::vector<size_t> order(runs.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return runs[a] % identity.seeds < runs[b] % identity.seeds; });

  DatasetCache cache;
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mutex;  // guards errors, done and the progress callback
  std::vector<std::pair<uint64_t, std::exception_ptr>> errors;
  uint64_t done = 0;
  auto work = [&] {
    while (!stop.load()) {
      const size_t k = next.fetch_add(1);
      if (k >= order.size()) break;
      const size_t slot = order[k];
      try {
        records[slot] = RunOne(base, identity, runs[slot], cache);
      } catch (...) {
        std::lock_guard lock(mutex);
        errors.emplace_back(runs[slot], std::current_exception());
        stop.store(true);
        continue;
      }
      std::lock_guard lock(mutex);
      ++done;
      if (spec.progress) spec.progress(done, runs.size());
    }
  };

  uint32_t jobs = spec.jobs;
  if (jobs == 0) jobs = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>(jobs, runs.size());
  if (threads <= 1) {
    work();
  } else {
    std::vector<std::thread> workers;
    workers.reserve(threads);
    try {
      for (size_t t = 0; t < threads; ++t) workers.emplace_back(work);
    } catch (...) {
      stop.store(true);
      for (std::thread& worker : workers) worker.join();
      throw;
    }
    for (std::thread& worker : workers) worker.join();
  }
  if (!errors.empty()) {
    // The failing run with the lowest index among those that ran.
    std::sort(errors.begin(), errors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::rethrow_exception(errors.front().second);
  }
  return records;
}

// ---------------------------------------------------------------------------------------------
// Shard files

// Reads a JSON member for merge, with errors naming the file and the member.
class ShardReader {
 public:
  explicit ShardReader(std::string path) : path_(std::move(path)) {}

  [[noreturn]] void Fail(const std::string& where, const std::string& what) const {
    throw ScenarioError(path_ + ": " + where + ": " + what);
  }

  const Json& Member(const Json& object, const std::string& where, const char* name) const {
    if (!object.is_object()) Fail(where, "expected an object");
    const auto it = object.find(name);
    if (it == object.end()) Fail(where, std::string("missing member '") + name + "'");
    return *it;
  }

  uint64_t Unsigned(const Json& object, const std::string& where, const char* name, uint64_t max = UINT64_MAX) const {
    const Json& value = Member(object, where, name);
    if (!value.is_number_unsigned() && !(value.is_number_integer() && value.get<int64_t>() >= 0)) {
      Fail(where + "." + name, "expected an unsigned integer, got " + value.dump());
    }
    const uint64_t number = value.get<uint64_t>();
    if (number > max) Fail(where + "." + name, fmt::format("must be <= {}, got {}", max, number));
    return number;
  }

  int64_t Signed(const Json& object, const std::string& where, const char* name) const {
    const Json& value = Member(object, where, name);
    if (!value.is_number_integer() || (value.is_number_unsigned() && value.get<uint64_t>() > uint64_t{INT64_MAX})) {
      Fail(where + "." + name, "expected a 64-bit integer, got " + value.dump());
    }
    return value.get<int64_t>();
  }

  std::string String(const Json& object, const std::string& where, const char* name) const {
    const Json& value = Member(object, where, name);
    if (!value.is_string()) Fail(where + "." + name, "expected a string, got " + value.dump());
    return value.get<std::string>();
  }

  std::vector<std::string> Strings(const Json& value, const std::string& where) const {
    if (!value.is_array()) Fail(where, "expected a list of strings, got " + value.dump());
    std::vector<std::string> strings;
    for (const Json& item : value) {
      if (!item.is_string()) Fail(where, "expected a list of strings, got " + value.dump());
      strings.push_back(item.get<std::string>());
    }
    return strings;
  }

 private:
  std::string path_;
};

SweepIdentity IdentityFromJson(const ShardReader& reader, const Json& json) {
  SweepIdentity identity;
  identity.scenario_path = reader.String(json, "sweep", "scenario");
  identity.scenario_hash = reader.String(json, "sweep", "scenario_fnv1a64");
  const Json& vary = reader.Member(json, "sweep", "vary");
  if (!vary.is_array()) reader.Fail("sweep.vary", "expected a list");
  for (size_t a = 0; a < vary.size(); ++a) {
    const std::string where = fmt::format("sweep.vary[{}]", a);
    SweepAxis axis;
    axis.path = reader.String(vary[a], where, "path");
    axis.values = reader.Strings(reader.Member(vary[a], where, "values"), where + ".values");
    if (axis.values.empty()) reader.Fail(where + ".values", "empty");
    identity.vary.push_back(std::move(axis));
  }
  identity.sets = reader.Strings(reader.Member(json, "sweep", "sets"), "sweep.sets");
  identity.seeds = static_cast<uint32_t>(reader.Unsigned(json, "sweep", "seeds", UINT32_MAX));
  if (identity.seeds == 0) reader.Fail("sweep.seeds", "must be >= 1");
  if (!reader.Member(json, "sweep", "seed_base").is_null()) {
    identity.seed_base = reader.Unsigned(json, "sweep", "seed_base");
  }
  uint64_t runs = identity.seeds;
  for (const SweepAxis& axis : identity.vary) {
    if (runs * axis.values.size() > kSweepRunsMax) reader.Fail("sweep", "too many runs");
    runs *= axis.values.size();
  }
  if (reader.Unsigned(json, "sweep", "runs") != identity.Runs() ||
      reader.Unsigned(json, "sweep", "combinations") != identity.Combinations()) {
    reader.Fail("sweep", "the combinations and runs do not match --vary and --seeds");
  }
  return identity;
}

RunRecord RecordFromJson(const ShardReader& reader, const Json& json, const std::string& where,
                         const SweepIdentity& identity) {
  RunRecord record;
  record.run = reader.Unsigned(json, where, "run");
  if (record.run >= identity.Runs()) {
    reader.Fail(where + ".run", fmt::format("must be < {} (the sweep's runs), got {}", identity.Runs(), record.run));
  }
  record.combination = reader.Unsigned(json, where, "combination");
  record.seed_index = static_cast<uint32_t>(reader.Unsigned(json, where, "seed_index", UINT32_MAX));
  if (record.combination != record.run / identity.seeds || record.seed_index != record.run % identity.seeds) {
    reader.Fail(where, fmt::format("combination {} and seed_index {} do not match run {}", record.combination,
                                   record.seed_index, record.run));
  }
  record.scenario_seed = reader.Unsigned(json, where, "run_seed");
  record.job_seed = static_cast<uint32_t>(reader.Unsigned(json, where, "job_seed", UINT32_MAX));
  record.outcome = reader.String(json, where, "outcome");
  if (std::find(OutcomeNames().begin(), OutcomeNames().end(), record.outcome) == OutcomeNames().end()) {
    reader.Fail(where + ".outcome", "unknown outcome '" + record.outcome + "'");
  }
  record.cause = reader.String(json, where, "cause");
  record.job_iterations = reader.Unsigned(json, where, "job_iterations");
  record.iterations_completed = reader.Unsigned(json, where, "iterations_completed");
  if (!reader.Member(json, where, "time_to_hang_ns").is_null()) {
    record.time_to_hang_ns = reader.Signed(json, where, "time_to_hang_ns");
  }
  record.end_ns = reader.Signed(json, where, "end_ns");
  record.last_iteration_end_ns = reader.Signed(json, where, "last_iteration_end_ns");
  record.stream_breaks = reader.Unsigned(json, where, "stream_breaks");
  record.events = reader.Unsigned(json, where, "events");
  return record;
}

std::string FormatShard(const SweepIdentity& identity, const SweepShard& shard, const std::vector<RunRecord>& records) {
  Json runs = Json::array();
  for (const RunRecord& record : records) runs.push_back(RecordJson(identity, record));
  const Json document{{"format", kShardFormat},
                      {"version", kShardVersion},
                      {"sweep", IdentityJson(identity)},
                      {"shard", Json{{"index", shard.index}, {"count", shard.count}}},
                      {"runs", runs}};
  return document.dump(1) + "\n";
}

// The runs of shard K/N (1-based K) of a sweep of `total` runs, ascending.
std::vector<uint64_t> ShardRuns(uint64_t total, const SweepShard& shard) {
  std::vector<uint64_t> runs;
  for (uint64_t run = shard.index - 1; run < total; run += shard.count) runs.push_back(run);
  return runs;
}

std::string DescribeIdentityDifference(const Json& a, const Json& b) {
  for (const auto& [key, value] : a.items()) {
    const auto it = b.find(key);
    if (it == b.end()) return key + " missing";
    if (*it != value) return key + " " + it->dump() + " instead of " + value.dump();
  }
  return "different sweep";
}

}  // namespace

SweepAxis ParseVary(const std::string& text) {
  const size_t equals = text.find('=');
  if (equals == std::string::npos) {
    throw ScenarioError("--vary " + text + ": expected field.path=value1,value2,..., got no '='");
  }
  SweepAxis axis;
  axis.path = text.substr(0, equals);
  if (axis.path.empty()) throw ScenarioError("--vary " + text + ": the field path is empty");
  const std::string list = text.substr(equals + 1);
  if (list.empty()) throw ScenarioError("--vary " + text + ": no values after '='");
  size_t start = 0;
  while (true) {
    const size_t comma = std::min(list.find(',', start), list.size());
    std::string value = list.substr(start, comma - start);
    if (value.empty()) {
      throw ScenarioError(fmt::format("--vary {}: value {} is empty", text, axis.values.size() + 1));
    }
    if (std::find(axis.values.begin(), axis.values.end(), value) != axis.values.end()) {
      throw ScenarioError("--vary " + text + ": value '" + value + "' given twice");
    }
    axis.values.push_back(std::move(value));
    if (comma == list.size()) break;
    start = comma + 1;
  }
  return axis;
}

SweepShard ParseShard(const std::string& text) {
  const std::string expected = "--shard: expected K/N with 1 <= K <= N (K is 1-based), got '" + text + "'";
  const size_t slash = text.find('/');
  if (slash == std::string::npos) throw ScenarioError(expected);
  auto parse = [&](std::string_view digits) {
    if (digits.empty() || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      throw ScenarioError(expected);
    }
    return static_cast<uint32_t>(std::stoul(std::string(digits)));
  };
  SweepShard shard;
  shard.index = parse(std::string_view(text).substr(0, slash));
  shard.count = parse(std::string_view(text).substr(slash + 1));
  if (shard.count == 0 || shard.index == 0 || shard.index > shard.count) {
    throw ScenarioError(expected);
  }
  return shard;
}

int RunSweep(const SweepSpec& spec, std::FILE* out) {
  SweepIdentity identity;
  const Scenario base = CheckSweep(spec, identity);
  const SweepShard shard = spec.shard.value_or(SweepShard{});
  const std::vector<uint64_t> runs = ShardRuns(identity.Runs(), shard);
  const std::vector<RunRecord> records = RunAll(base, identity, runs, spec);
  if (spec.shard) {
    Write(FormatShard(identity, shard, records), out);
  } else {
    Write(FormatSweep(identity, records, spec.format, spec.json_runs), out);
  }
  return 0;
}

int RunMerge(const std::vector<std::string>& paths, SweepFormat format, bool json_runs, std::FILE* out) {
  if (paths.empty()) throw ScenarioError("merge: no shard files given");
  std::optional<SweepIdentity> identity;
  Json reference_identity;
  std::string reference_path;
  uint32_t count = 0;
  std::vector<std::string> shard_paths;  // by index - 1; empty: not given
  std::vector<RunRecord> records;
  std::vector<bool> seen;
  for (const std::string& path : paths) {
    const std::string bytes = ReadFileBytes(path, "shard file");
    Json document;
    try {
      document = Json::parse(bytes);
    } catch (const Json::parse_error& error) {
      throw ScenarioError(path + ": not a JSON shard file: " + error.what());
    }
    const ShardReader reader(path);
    if (!document.is_object() || !document.contains("format") || document.at("format") != std::string(kShardFormat)) {
      throw ScenarioError(path + ": not a shard file of `petrsim sweep --shard K/N`");
    }
    if (reader.Unsigned(document, "file", "version") != kShardVersion) {
      reader.Fail("version", fmt::format("expected {}", kShardVersion));
    }
    const Json& sweep = reader.Member(document, "file", "sweep");
    const SweepIdentity file_identity = IdentityFromJson(reader, sweep);
    const Json& shard_json = reader.Member(document, "file", "shard");
    const uint64_t index = reader.Unsigned(shard_json, "shard", "index", UINT32_MAX);
    const uint64_t file_count = reader.Unsigned(shard_json, "shard", "count", UINT32_MAX);
    if (file_count == 0 || index == 0 || index > file_count) {
      reader.Fail("shard", fmt::format("expected K/N with 1 <= K <= N, got {}/{}", index, file_count));
    }
    if (!identity) {
      identity = file_identity;
      reference_identity = sweep;
      reference_path = path;
      count = static_cast<uint32_t>(file_count);
      shard_paths.assign(count, "");
      records.resize(identity->Runs());
      seen.assign(identity->Runs(), false);
    } else {
      if (sweep != reference_identity) {
        throw ScenarioError(path + ": from a different sweep than " + reference_path + " (" +
                            DescribeIdentityDifference(reference_identity, sweep) + ")");
      }
      if (file_count != count) {
        throw ScenarioError(fmt::format("{}: shard {}/{} of {} shards, but {} is one of {}", path, index, file_count,
                                        file_count, reference_path, count));
      }
    }
    if (!shard_paths[index - 1].empty()) {
      throw ScenarioError(
          fmt::format("{}: shard {}/{} given twice (also {})", path, index, count, shard_paths[index - 1]));
    }
    shard_paths[index - 1] = path;

    const Json& runs = reader.Member(document, "file", "runs");
    if (!runs.is_array()) reader.Fail("runs", "expected a list");
    const std::vector<uint64_t> expected = ShardRuns(identity->Runs(), SweepShard{static_cast<uint32_t>(index), count});
    if (runs.size() != expected.size()) {
      reader.Fail("runs", fmt::format("shard {}/{} has {} runs, the file holds {}", index, count, expected.size(),
                                      runs.size()));
    }
    for (size_t k = 0; k < runs.size(); ++k) {
      const std::string where = fmt::format("runs[{}]", k);
      RunRecord record = RecordFromJson(reader, runs[k], where, *identity);
      if (record.run != expected[k]) {
        reader.Fail(where + ".run",
                    fmt::format("expected run {} of shard {}/{}, got {}", expected[k], index, count, record.run));
      }
      seen[record.run] = true;
      records[record.run] = std::move(record);
    }
  }
  std::vector<std::string> missing;
  for (uint32_t k = 0; k < count; ++k) {
    if (shard_paths[k].empty()) missing.push_back(fmt::format("{}/{}", k + 1, count));
  }
  if (!missing.empty()) {
    throw ScenarioError(fmt::format("merge: shard{} {} of the sweep in {} missing", missing.size() == 1 ? "" : "s",
                                    fmt::join(missing, ", "), reference_path));
  }
  PETRSIM_ASSERT(std::all_of(seen.begin(), seen.end(), [](bool s) { return s; }));
  Write(FormatSweep(*identity, records, format, json_runs), out);
  return 0;
}

}  // namespace petrsim
