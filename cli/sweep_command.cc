// `petrsim sweep` and `petrsim merge`; see sweep_command.h.
#include "cli/sweep_command.h"

#include <CLI/CLI.hpp>

#include "base/error.h"
#include "cli/progress_bar.h"
#include "cli/scenario_args.h"

namespace petrsim {
namespace {

constexpr const char* kHtmlHelp =
    "also write a self-contained HTML page with SVG plots there: hang probability per combination with its 95% "
    "Wilson interval, time to hang, stream breaks per run";

SweepFormat Format(bool json, bool csv) {
  if (json && csv) throw ScenarioError("--json and --csv: choose one");
  return json ? SweepFormat::kJson : csv ? SweepFormat::kCsv : SweepFormat::kTable;
}

}  // namespace

CLI::App* AddSweepCommand(CLI::App& app, SweepFlags& flags) {
  auto* sweep =
      app.add_subcommand("sweep",
                         "Many simulated runs: every combination of the --vary values x --seeds seeds, in "
                         "parallel, summarised in one table (hang probability, time to hang, iterations/s, stream "
                         "breaks).");
  sweep->add_option("scenario", flags.spec.scenario_path, "scenario file (.pbtxt, .pb or .json)")->required();
  sweep->add_option("--vary", flags.vary, "a field and its values, e.g. --vary job.world_size=8,16,32 (repeatable)");
  sweep->add_option("--seeds", flags.spec.seeds,
                    "seeds per combination: run i uses job.seed + i and run seed i (default 1)");
  // Run seeds are seed_base + i: kept far below 2^64 so that they never wrap.
  sweep->add_option("--seed-base", flags.spec.seed_base, "the first run seed (default 0)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 62));
  sweep->add_option("--jobs", flags.spec.jobs, "parallel runs (default: the cores available)")
      ->check(CLI::Range(uint32_t{1}, uint32_t{4096}));
  sweep->add_option("--shard", flags.shard,
                    "K/N: run only the K-th of N slices and write its JSON for `petrsim merge`");
  sweep->add_option("--set", flags.spec.sets, kSetHelp);
  sweep->add_flag("--json", flags.json, "print a JSON object");
  sweep->add_flag("--csv", flags.csv, "print CSV, one line per combination");
  sweep->add_flag("--runs", flags.spec.json_runs, "with --json: list every run's record");
  sweep->add_option("--html", flags.spec.html_path, kHtmlHelp);
  sweep->add_flag("--quiet", flags.quiet, "no progress bar on stderr (there is none when stderr is not a terminal)");
  return sweep;
}

int RunSweepCommand(SweepFlags& flags, std::FILE* out) {
  for (const auto& flag : flags.vary) flags.spec.vary.push_back(ParseVary(flag));
  if (!flags.shard.empty()) flags.spec.shard = ParseShard(flags.shard);
  flags.spec.format = Format(flags.json, flags.csv);
  ProgressBar bar("runs", flags.quiet);
  flags.spec.progress = [&bar](uint64_t done, uint64_t total) {
    bar.Update(done, total);
    if (done == total) bar.Clear();  // the table follows on the same terminal
  };
  return RunSweep(flags.spec, out);
}

CLI::App* AddMergeCommand(CLI::App& app, MergeFlags& flags) {
  auto* merge =
      app.add_subcommand("merge", "Join the JSON of `petrsim sweep --shard K/N` runs into the sweep's table.");
  merge->add_option("shards", flags.paths, "shard files, one per K")->required();
  merge->add_flag("--json", flags.json, "print a JSON object");
  merge->add_flag("--csv", flags.csv, "print CSV, one line per combination");
  merge->add_flag("--runs", flags.runs, "with --json: list every run's record");
  merge->add_option("--html", flags.html_path, kHtmlHelp);
  return merge;
}

int RunMergeCommand(const MergeFlags& flags, std::FILE* out) {
  return RunMerge(flags.paths, Format(flags.json, flags.csv), flags.runs, out, flags.html_path);
}

}  // namespace petrsim
