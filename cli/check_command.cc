// Formatting of the pre-flight report; see check_command.h.
#include "cli/check_command.h"

#include <cerrno>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/json_text.h"
#include "base/run_record.h"
#include "base/temp_files.h"
#include "check/fixes.h"
#include "check/memory_estimate.h"
#include "check/preflight.h"
#include "check/user_change.h"
#include "cli/scenario_args.h"
#include "data/sampler.h"
#include "plan/iteration_plan.h"
#include "scenario/outcome.h"
#include "scenario/scenario_defaults.h"
#include "scenario/torch_version.h"

namespace petrsim {
namespace {

std::string OnOff(bool value) { return value ? "on" : "off"; }

nlohmann::json HitJson(const std::optional<SamplerHit>& hit) {
  if (!hit) return nullptr;
  return {{"iteration", hit->iteration}, {"rank", hit->rank},   {"slot", hit->slot},
          {"worker", hit->worker},       {"index", hit->index}, {"group", hit->group}};
}

nlohmann::json PoolJson(const TrapPool& pool) {
  return {{"subdataset", pool.subdataset},
          {"subdataset_name", pool.subdataset_name},
          {"group", pool.group},
          {"scene", pool.scene_name},
          {"scene_index", pool.scene_index_in_subdataset},
          {"scenes_spanned", pool.scenes_spanned},
          {"first_frame", pool.first_frame},
          {"last_frame", pool.last_frame},
          {"first_frame_in_scene", pool.first_frame_in_scene},
          {"last_frame_in_scene", pool.last_frame_in_scene},
          {"frames", pool.frames},
          {"first_hit", HitJson(pool.first_hit)}};
}

std::string SplitDescription(const Grouping& grouping) {
  if (!grouping.seq_mode()) return "seq_mode off: one group per sub-dataset";
  if (grouping.seq_split_all()) return "seq_mode, seq_split_num 'all': one group per frame";
  return fmt::format("seq_mode, seq_split_num {}", grouping.seq_split_num());
}

// The sequence number of the first collective of `iteration` on the default group.
uint64_t FirstSeqOfIteration(const ExpandedPlan& plan, uint64_t iteration) {
  return CollectivesBefore(plan, "default_pg", iteration) + 1;
}

// That collective as the report names it: `ALLREDUCE "step"`, and the frame the ranks blocked in
// it show.
std::string FirstCollectiveOfIteration(const ExpandedPlan& plan, uint64_t iteration) {
  const auto at = LocateCollective(plan, "default_pg", FirstSeqOfIteration(plan, iteration), iteration + 1);
  if (!at || at->collective == nullptr) return "";
  std::string out = fmt::format(": {} \"{}\"", OpTypeName(at->collective->op()), at->step);
  if (!at->collective->python_frame().empty()) {
    out += fmt::format(", its Python traceback ending in {}", at->collective->python_frame());
  }
  return out;
}

// Who loads a batch: a DataLoader worker, or the main process when there are none.
std::string Loader(const Job& job, uint32_t worker) {
  if (job.workers_per_gpu() == 0) return "main process (workers_per_gpu 0)";
  return fmt::format("DataLoader worker {}", worker);
}

// Appends one line of the report; every section writes through it so each line ends the same way.
void Line(std::string& out, const std::string& text) { out += text + "\n"; }

// The header: what was checked (dataset, filters, grouping, sampler, job, comm, graph), so a
// reader can tell the verdict below belongs to this configuration.
void AppendCheckHeader(std::string& out, const Scenario& scenario, const std::string& path, const Dataset& dataset,
                       const CheckReport& report) {
  const auto& job = scenario.job();
  const auto& stats = report.statistics;
  Line(out, fmt::format("petrsim check: {} ({})", scenario.name().empty() ? "scenario" : scenario.name(), path));
  std::string subs;
  for (const auto& sub : dataset.subdatasets()) {
    if (!subs.empty()) subs += ", ";
    subs += fmt::format("{} [{}, {}) {} scenes", sub.name, sub.begin, sub.end, sub.scene_end - sub.scene_begin);
  }
  Line(out, fmt::format("  dataset   {} frames, {} scenes, {} sub-dataset(s): {}", dataset.size(),
                        dataset.scenes().size(), dataset.subdatasets().size(), subs));
  const auto classes = EffectiveClasses(scenario.filters());
  Line(out, fmt::format("  filters   filter_empty_gt {}, use_valid_flag {}, {} classes, BEV ({}, {}) m",
                        OnOff(RejectsEmptyFrames(scenario)), OnOff(scenario.filters().use_valid_flag()), classes.size(),
                        scenario.filters().bev_range_min_m(), scenario.filters().bev_range_max_m()));
  Line(out, fmt::format("            frames with zero GT after the filters: {} of {}{}", stats.frames_without_gt,
                        stats.frames, RejectsEmptyFrames(scenario) ? "" : " (kept: filter_empty_gt is off)"));
  Line(out, fmt::format("  grouping  {}: {} chunks ({} all without GT, {} partly), {} sampler groups",
                        SplitDescription(scenario.grouping()), stats.chunks, stats.chunks_all_rejected,
                        stats.chunks_partly_rejected, report.groups_num));
  if (stats.chunks_dropped > 0) {
    Line(out, fmt::format("            drop_empty_groups removed {} chunks ({} frames)", stats.chunks_dropped,
                          stats.frames_dropped));
  }
  Line(out, fmt::format("  sampler   {}, seed {}, {} ranks x {} samples = global batch {}",
                        SamplerKindName(scenario.sampler().kind()), job.seed(), job.world_size(), job.samples_per_gpu(),
                        report.global_batch));
  Line(out, fmt::format("  job       {} iterations ({} per epoch: {}), {} workers per rank", report.job_iterations,
                        report.iterations_per_epoch, IterationsPerEpochSource(scenario), job.workers_per_gpu()));
  Line(out, fmt::format("  resample  {}{}", PolicyName(scenario.resample().policy()),
                        scenario.resample().policy() == Resample::bounded
                            ? fmt::format(" (attempts_max {})", scenario.resample().attempts_max())
                            : ""));
  Line(out, fmt::format("  comm      {}, timeout {} ms, {}", scenario.comm().backend() == Comm::nccl ? "nccl" : "gloo",
                        scenario.comm().timeout_ms(),
                        TorchReleaseText(scenario.comm().has_torch_version(), scenario.comm().torch_version())));
  Line(out, fmt::format("  graph     {} vertices, {} edges, {} closed classes", report.graph_vertices,
                        report.graph_edges, report.closed_classes));
  Line(out, "");
}

// Sampler problems come before the resample analysis because they fail the job before any
// getitem runs: a sampler that cannot be built, or ranks with different batch counts.
void AppendSamplerProblems(std::string& out, const CheckReport& report) {
  if (!report.sampler_failure.empty()) {
    Line(out, "SAMPLER FAILS: " + report.sampler_failure);
    Line(out, "");
  }
  if (report.batches_equal) return;
  std::string counts;
  for (size_t r = 0; r < report.batches_per_epoch_by_rank.size(); ++r) {
    if (report.batches_per_epoch_by_rank[r] == report.batches_per_epoch_by_rank.front() && r != 0) {
      continue;
    }
    counts += fmt::format("{}rank {}: {}", counts.empty() ? "" : ", ", r, report.batches_per_epoch_by_rank[r]);
  }
  Line(out, "UNEVEN BATCHES: ranks get different batch counts per epoch (" + counts +
                "); the rank that runs out first stops issuing collectives and the others wait in one.");
  Line(out, "");
}

// One trap pool: where it lies (within one scene, or across several), and when the sampler
// first draws it, so the reader can find the frames and the iteration that hangs.
void AppendPool(std::string& out, const Job& job, const CheckReport& report, size_t p, const TrapPool& pool) {
  if (pool.scenes_spanned == 1) {
    Line(out, fmt::format("  [{}] sub-dataset {} '{}', scene {} '{}', frames {}..{} of the scene "
                          "(dataset indices {}..{}), group {}, {} frames",
                          p + 1, pool.subdataset, pool.subdataset_name, pool.scene_index_in_subdataset, pool.scene_name,
                          pool.first_frame_in_scene, pool.last_frame_in_scene, pool.first_frame, pool.last_frame,
                          pool.group, pool.frames));
  } else {
    Line(out, fmt::format("  [{}] {} frames over {} scenes, dataset indices {}..{} (from sub-dataset "
                          "{} '{}', scene '{}')",
                          p + 1, pool.frames, pool.scenes_spanned, pool.first_frame, pool.last_frame, pool.subdataset,
                          pool.subdataset_name, pool.scene_name));
  }
  if (pool.first_hit) {
    const SamplerHit& hit = *pool.first_hit;
    Line(out, fmt::format("      first hit: iteration {}, rank {}, slot {}, {} (index {}, "
                          "sampler group {})",
                          hit.iteration, hit.rank, hit.slot, Loader(job, hit.worker), hit.index, hit.group));
  } else {
    Line(out, fmt::format("      not drawn within the job's {} iterations for job.seed {}", report.job_iterations,
                          job.seed()));
  }
}

// The termination result: why the resample loop always ends, or every pool it can never leave.
void AppendTermination(std::string& out, const Scenario& scenario, const CheckReport& report) {
  const bool bounded = scenario.resample().policy() == Resample::bounded;
  if (report.pools.empty() && !RejectsEmptyFrames(scenario)) {
    Line(out, "TERMINATES: filter_empty_gt is off, so no frame is ever resampled.");
  } else if (report.pools.empty()) {
    Line(out, bounded ? "TERMINATES: every getitem ends, with a sample or with the bounded error."
                      : "TERMINATES: every frame the resample loop can reach leads to a frame with GT.");
  } else {
    Line(out,
         fmt::format("{}: {} pool(s) the resample loop can never leave (no frame with GT):",
                     bounded ? "ERROR POOLS (bounded: every draw of them gives up)" : "LIVELOCK", report.pools.size()));
    for (size_t p = 0; p < report.pools.size(); ++p) AppendPool(out, scenario.job(), report, p, report.pools[p]);
  }
}

// What the first livelock hit does to the job: the stuck rank never starts the iteration, so
// every other rank blocks in a collective until its watchdog fires.
void AppendHangConsequence(std::string& out, const Scenario& scenario, const CheckReport& report) {
  const auto& job = scenario.job();
  const SamplerHit& hit = *report.first_hit;
  Line(out, "");
  std::string consequence;
  if (job.world_size() == 1) {
    consequence = "The only rank waits forever; no collective is pending, so no watchdog fires.";
  } else {
    const ExpandedPlan plan = ExpandPlan(scenario);
    consequence = fmt::format(
        "Every other rank blocks in its first collective of iteration {} (c10d sequence "
        "number {} on default_pg{}) and its watchdog aborts after Timeout(ms)={}.",
        hit.iteration, FirstSeqOfIteration(plan, hit.iteration), FirstCollectiveOfIteration(plan, hit.iteration),
        scenario.comm().timeout_ms());
  }
  Line(out, fmt::format("Rank {}'s {} spins forever on batch {} (slot {}, index {}): rank {} never "
                        "starts iteration {}. {}",
                        hit.rank, Loader(job, hit.worker), hit.iteration, hit.slot, hit.index, hit.rank, hit.iteration,
                        consequence));
}

// Under the bounded policy the replay tells whether some getitem actually gives up within the job.
void AppendBoundedReplay(std::string& out, const Scenario& scenario, const CheckReport& report) {
  if (report.first_bounded_error) {
    const SamplerHit& hit = *report.first_bounded_error;
    Line(out, "");
    Line(out, fmt::format("Replayed with the workers' numpy draws: rank {}'s {} gives up on batch {} "
                          "(slot {}, index {}) after {} loads and raises; the job fails at iteration "
                          "{}.",
                          hit.rank, Loader(scenario.job(), hit.worker), hit.iteration, hit.slot, hit.index,
                          scenario.resample().attempts_max(), hit.iteration));
  } else if (RejectsEmptyFrames(scenario)) {
    Line(out, "");
    Line(out, fmt::format("Replayed with the workers' numpy draws: no getitem gives up within the "
                          "job's {} iterations.",
                          report.job_iterations));
  }
}

// The expected cost of resampling per epoch, which matters even when the job terminates.
void AppendCheckStatistics(std::string& out, const Scenario& scenario, const CheckReport& report) {
  const auto& stats = report.statistics;
  const bool bounded = scenario.resample().policy() == Resample::bounded;
  Line(out, "");
  Line(out,
       fmt::format("statistics per epoch ({} samples; the job runs {:.2f} epochs)", stats.frames, stats.epochs_in_job));
  Line(out,
       fmt::format("  draws of a frame without GT {:.0f}, expected extra loads {:.1f}, expected "
                   "stream breaks {:.1f}{}",
                   stats.resample_visits_per_epoch, stats.extra_loads_per_epoch, stats.stream_breaks_per_epoch,
                   bounded ? fmt::format(", expected bounded errors {:.3g}", stats.bounded_errors_per_epoch) : ""));
  if (!report.pools.empty() && !bounded) {
    Line(out, "  (frames of the livelock pools are left out: their getitem never returns)");
  }
  Line(out, "");
}

// The verdict names the first thing that goes wrong, in the order the job would meet it.
std::string CheckVerdict(const Scenario& scenario, const CheckReport& report, int exit_code) {
  const bool bounded = scenario.resample().policy() == Resample::bounded;
  if (exit_code == 0) return "proven: every getitem ends with a sample, and the sampler works";
  if (!report.sampler_failure.empty()) return "the job fails when it builds its sampler";
  if (report.first_hit && !bounded) return fmt::format("the job hangs at iteration {}", report.first_hit->iteration);
  if (report.first_bounded_error) {
    return fmt::format("the job fails at iteration {}", report.first_bounded_error->iteration);
  }
  if (!report.batches_equal) return "the ranks run out of batches at different iterations";
  return "a livelock is possible (not drawn within this job for this seed)";
}

}  // namespace

int CheckExitCode(const CheckReport& report) { return report.job_fails ? 1 : 0; }

std::string FormatCheckReport(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                              const CheckReport& report, const std::vector<Fix>& fixes) {
  const bool bounded = scenario.resample().policy() == Resample::bounded;
  std::string out;
  AppendCheckHeader(out, scenario, path, dataset, report);
  AppendSamplerProblems(out, report);
  AppendTermination(out, scenario, report);
  if (report.first_hit && !bounded) AppendHangConsequence(out, scenario, report);
  if (bounded) AppendBoundedReplay(out, scenario, report);
  AppendCheckStatistics(out, scenario, report);
  if (!fixes.empty()) {
    for (const auto& text : FixLines(fixes)) Line(out, text);
    Line(out, "");
  }
  const int exit_code = CheckExitCode(report);
  Line(out, fmt::format("verdict: {} (exit {}); reproduce with seed={} job.seed={}",
                        CheckVerdict(scenario, report, exit_code), exit_code, scenario.seed(), scenario.job().seed()));
  return out;
}

std::string FormatCheckJson(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                            const CheckReport& report, const std::vector<Fix>& fixes) {
  const auto& stats = report.statistics;
  nlohmann::json livelock = nlohmann::json::array();
  nlohmann::json errors = nlohmann::json::array();
  for (const auto& pool : report.pools) {
    (pool.kind == PoolKind::kLivelock ? livelock : errors).push_back(PoolJson(pool));
  }
  nlohmann::json subdatasets = nlohmann::json::array();
  for (const auto& sub : dataset.subdatasets()) {
    subdatasets.push_back({{"name", sub.name},
                           {"first_frame", sub.begin},
                           {"end_frame", sub.end},
                           {"scenes", sub.scene_end - sub.scene_begin},
                           {"chunks_dropped", sub.chunks_dropped},
                           {"frames_dropped", sub.frames_dropped}});
  }
  nlohmann::json json = {
      {"scenario", scenario.name()},
      {"file", path},
      {"seed", scenario.seed()},
      {"job_seed", scenario.job().seed()},
      {"terminates", report.terminates},
      {"job_fails", report.job_fails},
      {"exit_code", CheckExitCode(report)},
      {"resample_policy", PolicyName(scenario.resample().policy())},
      {"livelock_pools", livelock},
      {"error_pools", errors},
      {"first_hit", HitJson(report.first_hit)},
      {"first_bounded_error", HitJson(report.first_bounded_error)},
      {"first_hit_collective_seq",
       report.first_hit ? nlohmann::json(FirstSeqOfIteration(ExpandPlan(scenario), report.first_hit->iteration))
                        : nlohmann::json(nullptr)},
      {"sampler",
       {{"kind", SamplerKindName(scenario.sampler().kind())},
        {"groups_num", report.groups_num},
        {"global_batch", report.global_batch},
        {"assertion_fails", report.sampler_assertion_fails},
        {"failure", report.sampler_failure.empty() ? nlohmann::json(nullptr) : nlohmann::json(report.sampler_failure)},
        {"batches_per_epoch_by_rank", report.batches_per_epoch_by_rank},
        {"batches_equal", report.batches_equal}}},
      {"job", {{"iterations", report.job_iterations}, {"iterations_per_epoch", report.iterations_per_epoch}}},
      {"dataset",
       {{"frames", stats.frames},
        {"scenes", dataset.scenes().size()},
        {"subdatasets", subdatasets},
        {"frames_without_gt", stats.frames_without_gt},
        {"chunks", stats.chunks},
        {"chunks_all_without_gt", stats.chunks_all_rejected},
        {"chunks_partly_without_gt", stats.chunks_partly_rejected},
        {"chunks_dropped", stats.chunks_dropped}}},
      {"graph",
       {{"vertices", report.graph_vertices}, {"edges", report.graph_edges}, {"closed_classes", report.closed_classes}}},
      {"statistics",
       {{"resampled_draws_per_epoch", stats.resample_visits_per_epoch},
        {"bounded_errors_per_epoch", stats.bounded_errors_per_epoch},
        {"extra_loads_per_epoch", stats.extra_loads_per_epoch},
        {"stream_breaks_per_epoch", stats.stream_breaks_per_epoch},
        {"epochs_in_job", stats.epochs_in_job}}},
      {"fixes", FixesJson(fixes)},
  };
  return JsonText(json, 2) + "\n";
}

CLI::App* AddCheckCommand(CLI::App& app, CheckFlags& flags) {
  auto* check =
      app.add_subcommand("check",
                         "Static pre-flight: prove the resample loop terminates, or list every pool it can never "
                         "leave, when the sampler first hits it, and the fixes that make the job terminate, each "
                         "checked again with it applied. Exit 0 proven, 1 livelock possible or job fails, 2 bad "
                         "input.");
  check->add_option("scenario", flags.scenario_path, "scenario file (.pbtxt, .pb or .json)")->required();
  check->add_flag("--json", flags.json, "print a JSON object");
  check->add_option("--set", flags.sets, kSetHelp);
  AddTorchVersionOption(*check, flags.sets);
  check->add_option("--write-drops", flags.write_drops,
                    "write the data fix (the info frames to drop, by sample token) as a Python script FILE.py that "
                    "writes fixed copies of the info files");
  check->add_option("--memory-max", flags.memory_max, kMemoryMaxHelp);
  check->add_flag("--no-cache", flags.no_cache,
                  "check again even when the scenario and petrsim are unchanged since the same check (the "
                  "recorded verdict is kept in petrsim's cache directory: $PETRSIM_CACHE_DIR, "
                  "$XDG_CACHE_HOME/petrsim or ~/.cache/petrsim; PETRSIM_CACHE_DIR=off keeps none)");
  return check;
}

namespace {

// --write-drops: the proven drop_frames fixes as a script, written whole or not at all (FILE.tmp renamed onto FILE).
void WriteDrops(const Scenario& scenario, const CheckFlags& flags, const std::vector<Fix>& fixes) {
  std::vector<Fix> drops;
  for (const Fix& fix : fixes) {
    if (fix.kind == "drop_frames" && fix.proven) drops.push_back(fix);
  }
  if (drops.empty()) {
    throw ScenarioError(
        fmt::format("--write-drops {}: the check proves no frames to drop (no livelock pool, or "
                    "dropping them does not make the job terminate); nothing written",
                    flags.write_drops));
  }
  const std::string text = DropScript(scenario, drops, flags.scenario_path);
  WriteFileAtomically(flags.write_drops, text);
}

}  // namespace

namespace {

int RunCheckOnce(const CheckFlags& flags, std::string& text) {
  const Scenario scenario = LoadWithOverrides(flags.scenario_path, flags.sets);
  CheckMemory(EstimateCheckMemory(scenario), MemoryMax(flags.memory_max), "the pre-flight check", flags.scenario_path);
  const Dataset dataset = BuildDataset(scenario, flags.scenario_path);
  CheckJobLength(scenario, dataset, flags.scenario_path);
  const CheckReport report = RunPreflight(scenario, dataset);
  const std::vector<Fix> fixes = ProveFixes(scenario, dataset, flags.scenario_path, report);
  if (!flags.write_drops.empty()) WriteDrops(scenario, flags, fixes);
  text = flags.json ? FormatCheckJson(scenario, flags.scenario_path, dataset, report, fixes)
                    : FormatCheckReport(scenario, flags.scenario_path, dataset, report, fixes);
  return CheckExitCode(report);
}

}  // namespace

// A check is a function of the scenario file, the command line, the memory limit and petrsim
// itself: the same check on unchanged files prints its recorded report (base/run_record.h). Not
// with --write-drops (it writes a file), nor without a command line (a test's direct call).
int RunCheckCommand(const CheckFlags& flags) {
  const std::string directory =
      flags.no_cache || !flags.write_drops.empty() || flags.command_line.empty() ? std::string() : CacheDirectory();
  std::vector<std::string> key = flags.command_line;
  key.push_back(fmt::format("--memory-max={}", MemoryMax(flags.memory_max)));
  const std::string record = directory.empty() ? std::string() : directory + "/check-" + RunKeyHash(key);
  if (!record.empty()) {
    if (const std::optional<RecordedRun> run = FindRecordedRun(record, key, "")) {
      std::fwrite(run->printed.data(), 1, run->printed.size(), stdout);
      std::fflush(stdout);
      fmt::print(stderr,
                 "petrsim check: {} and petrsim are unchanged since this check ran: its report as recorded "
                 "({}; --no-cache checks again)\n",
                 flags.scenario_path, record);
      return run->exit_code;
    }
  }
  ClearInputFilesRead();  // what the new record depends on
  std::string text;
  const int code = RunCheckOnce(flags, text);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (!record.empty()) StoreRecordedRun(record, key, InputFilesRead(), InputDirectoriesListed(), "", {text, code});
  return code;
}

}  // namespace petrsim
