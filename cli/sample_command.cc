// Output of the sample stream; see sample_command.h.
#include "cli/sample_command.h"

#include <charconv>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "base/error.h"
#include "cli/scenario_args.h"
#include "data/sampler.h"
#include "scenario/scenario_validation.h"

namespace petrsim {
namespace {

uint32_t ParseRank(std::string_view text, const std::string& whole, uint32_t world_size) {
  uint32_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || text.empty()) {
    throw ScenarioError("--ranks: expected a list like 0,3,5-7, got '" + whole + "'");
  }
  if (value >= world_size) {
    throw ScenarioError("--ranks: rank " + std::to_string(value) + " must be < job.world_size (" +
                        std::to_string(world_size) + ")");
  }
  return value;
}

}  // namespace

std::vector<uint32_t> ParseRankList(const std::string& text, uint32_t world_size) {
  std::vector<uint32_t> ranks;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string_view item(text.data() + start, comma - start);
    const size_t dash = item.find('-');
    if (dash == std::string_view::npos) {
      ranks.push_back(ParseRank(item, text, world_size));
    } else {
      const uint32_t first = ParseRank(item.substr(0, dash), text, world_size);
      const uint32_t last = ParseRank(item.substr(dash + 1), text, world_size);
      if (first > last) throw ScenarioError("--ranks: empty range in '" + text + "'");
      for (uint32_t r = first; r <= last; ++r) ranks.push_back(r);
    }
    start = comma + 1;
  }
  return ranks;
}

uint64_t ParseSampleFrom(const std::string& text, uint64_t job_iterations) {
  uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || text.front() == '-' || text.front() == '+' || error != std::errc() ||
      end != text.data() + text.size()) {
    throw ScenarioError("--from: expected a whole number >= 0, the first iteration to print, got '" + text + "'");
  }
  if (value >= job_iterations) {
    throw ScenarioError(fmt::format("--from: iteration {} is beyond the end of the job: it has {} iterations (0..{})",
                                    value, job_iterations, job_iterations - 1));
  }
  return value;
}

std::string SampleHeader(uint64_t first, uint64_t end, uint64_t job_iterations, const std::vector<uint32_t>& ranks,
                         uint32_t world_size, uint64_t rows) {
  std::string ranks_text;
  if (ranks.empty()) {
    ranks_text = world_size == 1 ? "rank 0" : fmt::format("ranks 0-{}", world_size - 1);
  } else {
    ranks_text = ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size();) {
      size_t j = i;
      while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
      if (i > 0) ranks_text += ",";
      ranks_text += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
      i = j + 1;
    }
  }
  return fmt::format("iterations {}..{} of {}, {}: {} row{}{}", first, end - 1, job_iterations, ranks_text, rows,
                     rows == 1 ? "" : "s",
                     rows == 0 ? fmt::format(" (the stream ends before iteration {}: a DataLoader worker never "
                                             "returns an earlier batch)",
                                             first)
                               : "");
}

uint64_t WriteSampleStream(const Scenario& scenario, const Dataset& dataset, const SampleStreamOptions& options,
                           bool json, std::FILE* out, uint64_t from) {
  uint64_t rows = 0;
  fmt::memory_buffer buffer;
  auto flush = [&](bool force) {
    if (buffer.size() >= (1 << 16) || force) {
      std::fwrite(buffer.data(), 1, buffer.size(), out);
      buffer.clear();
    }
  };
  if (json) {
    fmt::format_to(std::back_inserter(buffer), "[");
  } else {
    fmt::format_to(std::back_inserter(buffer), "{:>9} {:>5} {:>4} {:>6} {:>9} {:>7}  {}\n", "iteration", "rank", "slot",
                   "worker", "index", "group", "status");
  }
  GenerateSampleStream(scenario, dataset, options, [&](const SampleRow& row) {
    if (row.iteration < from) return;
    const std::string status = SampleStatusName(row.status);
    if (json) {
      fmt::format_to(std::back_inserter(buffer),
                     "{}\n{{\"iteration\": {}, \"rank\": {}, \"slot\": {}, \"worker\": {}, "
                     "\"index\": {}, \"group\": {}, \"status\": \"{}\", \"final_index\": {}, "
                     "\"attempts\": {}, \"consumed\": {}}}",
                     rows == 0 ? "" : ",", row.iteration, row.rank, row.slot, row.worker, row.index, row.group, status,
                     row.final_index, row.attempts, row.consumed);
    } else {
      fmt::format_to(std::back_inserter(buffer), "{:>9} {:>5} {:>4} {:>6} {:>9} {:>7}  {}", row.iteration, row.rank,
                     row.slot, row.worker, row.index, row.group, status);
      switch (row.status) {
        case SampleStatus::kResampled:
          fmt::format_to(std::back_inserter(buffer), " -> {} after {} loads", row.final_index, row.attempts);
          break;
        case SampleStatus::kLivelock:
          fmt::format_to(std::back_inserter(buffer), " (no frame of its pool has GT: the loader spins forever)");
          break;
        case SampleStatus::kAttemptsLimit:
          fmt::format_to(std::back_inserter(buffer),
                         " (petrsim stopped after {} loads, its limit; the pool has frames with GT)", row.attempts);
          break;
        case SampleStatus::kError:
          fmt::format_to(std::back_inserter(buffer),
                         " (bounded: gave up after {} loads; the batch raises, the job fails)", row.attempts);
          break;
        default:
          break;
      }
      if (!row.consumed) fmt::format_to(std::back_inserter(buffer), " [never consumed]");
      fmt::format_to(std::back_inserter(buffer), "\n");
    }
    ++rows;
    flush(false);
  });
  if (json) fmt::format_to(std::back_inserter(buffer), "\n]\n");
  flush(true);
  return rows;
}

CLI::App* AddSampleCommand(CLI::App& app, SampleFlags& flags) {
  auto* sample = app.add_subcommand("sample", "Print the exact per-rank, per-slot index stream and resample draws.");
  sample->add_option("scenario", flags.scenario_path, "scenario file (.pbtxt, .pb or .json)")->required();
  sample->add_option("--ranks", flags.ranks, "ranks to print, e.g. 0,3,5-7 (default: all)");
  sample->add_option("--from", flags.from, "the first iteration to print (default 0)");
  sample->add_option("--iterations", flags.iterations, "iterations to print (default: to the end of the job)")
      ->check(CLI::Range(uint64_t{0}, kIterationsMax));
  sample->add_flag("--json", flags.json, "print a JSON list of rows");
  sample->add_option("--set", flags.sets, kSetHelp);
  return sample;
}

int RunSampleCommand(const SampleFlags& flags) {
  const Scenario scenario = LoadWithOverrides(flags.scenario_path, flags.sets);
  const Dataset dataset = BuildDataset(scenario, flags.scenario_path);
  // Checked here, before any output, so the error names the file and nothing is half-written.
  CheckSamplerConstructible(scenario, dataset, flags.scenario_path);
  if (flags.iterations > kIterationsMax) {
    throw ScenarioError("--iterations: must be <= " + std::to_string(kIterationsMax) + ", got " +
                        std::to_string(flags.iterations));
  }
  SampleStreamOptions options;
  if (!flags.ranks.empty()) options.ranks = ParseRankList(flags.ranks, scenario.job().world_size());
  const uint64_t job_iterations = JobIterations(scenario, dataset);
  const uint64_t from = flags.from.empty() ? 0 : ParseSampleFrom(flags.from, job_iterations);
  // The stream is generated from iteration 0 (each rank's sampler and worker RNGs run through the
  // iterations before `from`); rows before it are not printed.
  const uint64_t end = flags.iterations != 0 ? from + flags.iterations : job_iterations;
  options.iterations = end;
  // Counted first (the stream is cheap to generate), so the line before the rows is exact.
  uint64_t rows = 0;
  GenerateSampleStream(scenario, dataset, options, [&](const SampleRow& row) { rows += row.iteration >= from; });
  const std::string header =
      SampleHeader(from, end, job_iterations, options.ranks, scenario.job().world_size(), rows) + "\n";
  std::fwrite(header.data(), 1, header.size(), flags.json ? stderr : stdout);
  WriteSampleStream(scenario, dataset, options, flags.json, stdout, from);
  return 0;
}

}  // namespace petrsim
