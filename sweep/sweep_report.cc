// Sweeps, the report (sweep.h): the summary per combination and its table, CSV and JSON, the
// same bytes for a sweep and for the merge of its shards; the JSON of a run's record.
#include "sweep/sweep_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "base/assert.h"
#include "base/json_text.h"
#include "scenario/outcome.h"

namespace petrsim::sweep_internal {

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

const std::vector<std::string>& OutcomeNames() {
  static const std::vector<std::string> names = {OutcomeName(Outcome::kCompleted), OutcomeName(Outcome::kHang),
                                                 OutcomeName(Outcome::kDesync), OutcomeName(Outcome::kRankDied),
                                                 OutcomeName(Outcome::kLimitReached)};
  return names;
}

namespace {

Json OptionalJson(const std::optional<int64_t>& value) {
  if (!value) return nullptr;
  return *value;
}

Json OptionalJson(const std::optional<double>& value) {
  if (!value) return nullptr;
  return *value;
}

}  // namespace

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

namespace {

// Nearest rank: the ceil(p/100 * n)-th smallest (1-based), for sorted, non-empty `values`.
int64_t NearestRank(const std::vector<int64_t>& values, uint32_t percent) {
  const uint64_t n = values.size();
  uint64_t rank = (percent * n + 99) / 100;
  if (rank == 0) rank = 1;
  return values[rank - 1];
}

}  // namespace

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

namespace {

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
  return JsonText(document, 2) + "\n";
}

// `records` holds every run of the sweep, by run index.
}  // namespace

std::vector<CombinationSummary> Summaries(const SweepIdentity& identity, const std::vector<RunRecord>& records) {
  PETRSIM_ASSERT(records.size() == identity.Runs());
  std::vector<CombinationSummary> summaries;
  for (uint64_t c = 0; c < identity.Combinations(); ++c) {
    std::vector<const RunRecord*> runs;
    for (uint64_t i = 0; i < identity.seeds; ++i) runs.push_back(&records[c * identity.seeds + i]);
    summaries.push_back(Summarize(runs));
  }
  return summaries;
}

std::string FormatSweep(const SweepIdentity& identity, const std::vector<RunRecord>& records, SweepFormat format,
                        bool json_runs) {
  PETRSIM_ASSERT(records.size() == identity.Runs());
  const std::vector<CombinationSummary> summaries = Summaries(identity, records);
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

}  // namespace petrsim::sweep_internal
