// Sweeps and merges of simulated runs; see sweep.h. This file: the --vary and --shard flags, the
// check of a sweep's spec and the expansion of its combinations, and RunSweep.
#include "sweep/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string_view>

#include "base/error.h"
#include "base/file_io.h"
#include "base/temp_files.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_override.h"
#include "scenario/scenario_validation.h"
#include "sweep/sweep_internal.h"

namespace petrsim {
namespace sweep_internal {

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

std::string ReadFileBytes(const std::string& path, const char* what) {
  return ReadRegularFile(path, what, uint64_t{1} << 30);
}

}  // namespace sweep_internal

using sweep_internal::CombinationScenario;
using sweep_internal::FormatShard;
using sweep_internal::FormatSweep;
using sweep_internal::ReadFileBytes;
using sweep_internal::RunAll;
using sweep_internal::RunRecord;
using sweep_internal::ShardRuns;
using sweep_internal::SweepIdentity;
using sweep_internal::Write;

namespace {

std::string Fnv1a64Hex(std::string_view bytes) {
  uint64_t hash = 0xCBF29CE484222325ULL;
  for (const char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 0x100000001B3ULL;
  }
  return fmt::format("{:016x}", hash);
}

std::string CombinationDisplay(const SweepIdentity& identity, uint64_t c) {
  if (identity.vary.empty()) return identity.scenario_path;
  return identity.scenario_path + " with --vary " + identity.Describe(c);
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

std::optional<std::string> JobSeedOverlap(const SweepSpec& spec) {
  if (spec.seeds <= 1) return std::nullopt;
  constexpr uint64_t kJobSeedModulus = uint64_t{1} << 31;  // as sweep_run.cc wraps job.seed + i
  for (const SweepAxis& axis : spec.vary) {
    if (axis.path != "job.seed") continue;
    // The values as --set reads them; one it refuses is CheckSweep's to report.
    std::vector<uint64_t> seeds;
    for (const std::string& value : axis.values) {
      Scenario probe;
      try {
        ApplyOverride(probe, axis.path + "=" + value);
      } catch (const ScenarioError&) {
        return std::nullopt;
      }
      seeds.push_back(probe.job().seed() % kJobSeedModulus);
    }
    for (size_t a = 0; a < seeds.size(); ++a) {
      for (size_t b = 0; b < seeds.size(); ++b) {
        // Combination b's job seeds start `gap` after a's (modulo 2^31) and overlap a's when the
        // gap is below --seeds: they share a's last seeds - gap job seeds.
        const uint64_t gap = (seeds[b] + kJobSeedModulus - seeds[a]) % kJobSeedModulus;
        if (a == b || gap >= spec.seeds) continue;
        const uint64_t first = seeds[b], last = (seeds[a] + spec.seeds - 1) % kJobSeedModulus;
        const std::string shared =
            first == last ? fmt::format("job seed {}", first) : fmt::format("job seeds {}..{}", first, last);
        std::vector<uint64_t> spaced;
        for (size_t k = 0; k < seeds.size(); ++k) spaced.push_back((seeds[0] + k * spec.seeds) % kJobSeedModulus);
        return fmt::format(
            "--vary job.seed={} with --seeds {}: run i of a combination uses job.seed + i, so job.seed={} and "
            "job.seed={} both run {}: those runs share their sampler streams, they are not independent samples; "
            "give values at least {} apart (e.g. --vary job.seed={}) or --seeds 1",
            fmt::join(axis.values, ","), spec.seeds, axis.values[a], axis.values[b], shared, spec.seeds,
            fmt::join(spaced, ","));
      }
    }
  }
  return std::nullopt;
}

int RunSweep(const SweepSpec& spec, std::FILE* out) {
  SweepIdentity identity;
  const Scenario base = CheckSweep(spec, identity);
  if (spec.shard && !spec.html_path.empty()) {
    throw ScenarioError(
        "--html with --shard: a shard file holds only some of the runs; give --html to `petrsim merge`");
  }
  if (const auto overlap = JobSeedOverlap(spec)) std::fprintf(stderr, "petrsim sweep: warning: %s\n", overlap->c_str());
  // Opened before the runs, so that a path that cannot be written fails at once.
  std::optional<AtomicFile> html;
  try {
    if (!spec.html_path.empty()) html.emplace(spec.html_path);
  } catch (const ScenarioError& error) {
    throw ScenarioError(std::string("--html: ") + error.what());
  }
  const SweepShard shard = spec.shard.value_or(SweepShard{});
  const std::vector<uint64_t> runs = ShardRuns(identity.Runs(), shard);
  const std::vector<RunRecord> records = RunAll(base, identity, runs, spec);
  if (html) {
    try {
      html->Write(SweepHtml(identity, records));
      html->Commit();
    } catch (const ScenarioError& error) {
      throw ScenarioError(std::string("--html: ") + error.what());
    }
  }
  if (spec.shard) {
    Write(FormatShard(identity, shard, records), out);
  } else {
    Write(FormatSweep(identity, records, spec.format, spec.json_runs), out);
  }
  return 0;
}

}  // namespace petrsim
