// Run report formatting; see run_command.h.
#include "cli/run_command.h"
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include "base/assert.h"
#include "base/error.h"
#include "base/json_text.h"
#include "check/memory_estimate.h"
#include "check/preflight.h"
#include "cli/progress_bar.h"
#include "cli/scenario_args.h"
#include "data/sampler.h"
#include "scenario/torch_version.h"
#include "trace/directory_writer.h"
#include "trace/fan_out_sink.h"
#include "trace/perfetto_writer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "plan/iteration_plan.h"
#include "scenario/scenario_defaults.h"

namespace petrsim {
namespace {

double PerSecond(uint64_t count, int64_t ns) {
  return ns > 0 ? static_cast<double>(count) * 1e9 / static_cast<double>(ns) : 0.0;
}

// " (iteration 0: a, iteration 1: b)" where DDP's first iterations differ from the later ones.
std::string LeadingCounts(const ExpandedPlan& plan) {
  std::string out;
  for (size_t i = 0; i < plan.leading.size(); ++i) {
    out += fmt::format("{}iteration {}: {}", i == 0 ? " (" : ", ", i, plan.leading[i].size());
  }
  return out.empty() ? out : out + ")";
}

std::string Seconds(int64_t ns) { return fmt::format("{:.3f}", static_cast<double>(ns) / 1e9); }

// "0-6", "0-3,5,7".
std::string RankList(const std::vector<uint32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ",";
    out += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string DescribeCollective(const CollectiveRef& c) {
  return fmt::format("{} seq {} on {}: \"{}\", {}", OpTypeName(c.op), c.seq, c.process_group, c.step,
                     c.startup ? std::string("at startup") : fmt::format("iteration {}", c.iteration));
}

nlohmann::json CollectiveJson(const CollectiveRef& c) {
  return {{"group", c.process_group},      {"seq", c.seq},         {"op", OpTypeName(c.op)}, {"step", c.step},
          {"iteration", c.iteration},      {"startup", c.startup}, {"numel_in", c.numel_in}, {"numel_out", c.numel_out},
          {"python_frame", c.python_frame}};
}

}  // namespace

std::string FormatVirtualTime(int64_t ns) {
  const int64_t seconds = ns / 1'000'000'000;
  return fmt::format("{} s ({}:{:02}:{:02})", Seconds(ns), seconds / 3600, seconds / 60 % 60, seconds % 60);
}

int RunExitCode(const sim::SimResult& result) {
  switch (result.outcome) {
    case Outcome::kCompleted:
      return 0;
    case Outcome::kLimitReached:
      return 3;
    default:
      return 1;
  }
}

std::string ShellQuote(const std::string& text) {
  const bool plain = !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_-+=.,/:@%").find(c) != std::string_view::npos;
  });
  if (plain) return text;
  std::string out = "'";
  for (const char c : text) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

namespace {

// Appends one line of the report; every section writes through it so each line ends the same way.
void Line(std::string& out, const std::string& text) { out += text + "\n"; }

// The header: the job, its collective plan and the dataset, so the outcome below can be read
// against the configuration that produced it.
void AppendRunHeader(std::string& out, const Scenario& scenario, const std::string& path, const Dataset& dataset,
                     const sim::SimResult& result, const ExpandedPlan& plan) {
  const auto& job = scenario.job();
  Line(out, fmt::format("petrsim run: {} ({})", scenario.name().empty() ? "scenario" : scenario.name(), path));
  Line(out,
       fmt::format("  job       {} ranks x {} samples, {} workers, prefetch {}, {} sampler, {} "
                   "resample; {} iterations ({} per epoch: {})",
                   job.world_size(), job.samples_per_gpu(), job.workers_per_gpu(), job.prefetch_factor(),
                   SamplerKindName(scenario.sampler().kind()), PolicyName(scenario.resample().policy()),
                   result.job_iterations, IterationsPerEpoch(scenario, dataset), IterationsPerEpochSource(scenario)));
  Line(out, fmt::format("  plan      {} collectives at startup, {} per iteration{}, {} periodic; {}, timeout {} ms, {}",
                        plan.startup.size(), plan.per_iteration.size(), LeadingCounts(plan), plan.periodic.size(),
                        scenario.comm().backend() == Comm::nccl ? "nccl" : "gloo", scenario.comm().timeout_ms(),
                        TorchReleaseText(scenario.comm().has_torch_version(), scenario.comm().torch_version())));
  Line(out, fmt::format("  dataset   {} frames, {} sampler groups", dataset.size(), dataset.groups_num()));
  Line(out, "");
}

// The outcome line; a limit_reached run says the job itself was still running, so it is not
// mistaken for a hang.
void AppendOutcome(std::string& out, const sim::SimResult& result) {
  if (result.outcome == Outcome::kCompleted) {
    Line(out, fmt::format("outcome: completed ({} of {} iterations on every rank)", result.iterations_completed,
                          result.job_iterations));
  } else if (result.outcome == Outcome::kLimitReached) {
    Line(out, fmt::format("outcome: limit_reached: {}; the job itself was still running "
                          "({} of {} iterations)",
                          result.limit_note, result.iterations_completed, result.job_iterations));
  } else {
    Line(out, fmt::format("outcome: {} ({})", OutcomeName(result.outcome), CauseName(result.cause)));
  }
}

// A desync shows both mismatched calls side by side, because the real job gives no error for
// it: NCCL pairs calls by sequence number alone.
void AppendDesync(std::string& out, const sim::SimResult& result) {
  const auto& d = *result.desync;
  Line(out, fmt::format("  collectives mismatch at seq {} on {}, at {} of virtual time:", d.seq, d.process_group,
                        FormatVirtualTime(d.at_ns)));
  Line(out, fmt::format("    rank {} issued {} NumelIn={} dtype {}: \"{}\", iteration {}", d.first_rank,
                        OpTypeName(d.first.op), d.first.numel_in, Collective::Dtype_Name(d.first.dtype), d.first.step,
                        d.first.iteration));
  Line(out, fmt::format("    rank {} issued {} NumelIn={} dtype {}: \"{}\", iteration {}", d.other_rank,
                        OpTypeName(d.other.op), d.other.numel_in, Collective::Dtype_Name(d.other.dtype), d.other.step,
                        d.other.iteration));
  if (result.cause == Cause::kConditionalCollective) {
    Line(out,
         "    a rank whose local batch had no GT skipped the conditional collectives "
         "(plan.streampetr.old_code_skips_dn_without_gt), so its sequence numbers ran ahead");
  }
  Line(out,
       "    NCCL pairs the calls by sequence number and does not compare them: the real job "
       "reduces mismatched buffers or hangs; TORCH_DISTRIBUTED_DEBUG=DETAIL reports the "
       "mismatch");
}

// The collective a failed run ended in: which ranks never reached it, which wait in it, and when
// the watchdogs fire, which is what the real job's logs show.
void AppendBlockedCollective(std::string& out, const Scenario& scenario, const sim::SimResult& result) {
  const auto& c = *result.collective;
  if (!result.stuck_ranks.empty()) {
    Line(out, fmt::format("  {} {} never reached {}", result.stuck_ranks.size() == 1 ? "rank" : "ranks",
                          RankList(result.stuck_ranks), DescribeCollective(c)));
  }
  if (!result.waiting_ranks.empty()) {
    const bool one = result.waiting_ranks.size() == 1;
    Line(out,
         fmt::format("  {} {} {} in it; the last blocked at {}", one ? "rank" : "ranks", RankList(result.waiting_ranks),
                     one ? "waits" : "wait", FormatVirtualTime(result.blocked_at_ns)));
    if (!c.python_frame.empty()) Line(out, fmt::format("  their Python traceback ends in {}", c.python_frame));
  }
  if (result.first_watchdog_ns >= 0) {
    const uint64_t poll_ms = scenario.comm().watchdog_poll_ms();
    Line(out, fmt::format("  the watchdogs fire at {} (timeout {} ms, {})", FormatVirtualTime(result.first_watchdog_ns),
                          scenario.comm().timeout_ms(),
                          poll_ms == 0 ? std::string("watchdog_poll_ms 0: exactly at the deadline")
                                       : fmt::format("checked every {} ms", poll_ms)));
  }
}

// The loader stuck in the resample loop, with the pool it cannot leave, so the frames to fix
// can be found.
void AppendStuckLoader(std::string& out, const sim::SimResult& result) {
  const auto& s = *result.stuck;
  Line(out, fmt::format("  stuck: rank {}, {}, batch of iteration {}, slot {}: the resample loop {}", s.rank,
                        s.worker < 0 ? std::string("main process") : fmt::format("worker {}", s.worker), s.batch,
                        s.slot, s.proven ? "never ends" : "ran past petrsim's attempts bound"));
  Line(out, fmt::format("    index {} of sampler group {}: sub-dataset {} '{}', scene '{}' (dataset scene {})", s.index,
                        s.group, s.subdataset, s.subdataset_name, s.scene_name, s.scene));
  Line(out, fmt::format("    its pool is frames {}..{} of the scene (dataset indices {}..{}), none with "
                        "GT after the filters",
                        s.pool_first_in_scene, s.pool_last_in_scene, s.pool_first, s.pool_last));
  Line(out,
       fmt::format("    spinning since {}: {} attempts when the run ended", FormatVirtualTime(s.since_ns), s.attempts));
}

// Dead ranks, and why the others may outlive them: only torchrun's agent tears the job down.
void AppendDeadRanks(std::string& out, const sim::SimResult& result) {
  for (const auto& rank : result.ranks) {
    if (rank.died_ns >= 0) {
      Line(out, fmt::format("  rank {} died at {}: {}", rank.rank, FormatVirtualTime(rank.died_ns), rank.died_why));
    }
  }
  if (result.outcome == Outcome::kRankDied) {
    Line(out,
         "  under torchrun the agent tears the job down within seconds of a rank's exit; "
         "without it the others wait until their watchdogs fire");
  }
}

// The log the real job would print, so the report can be matched against a real failure.
void AppendJobLog(std::string& out, const Scenario& scenario, const sim::SimResult& result) {
  if (result.job_log.empty()) return;
  Line(out, "");
  Line(out, fmt::format("{} log (what the job prints, PyTorch {}; times aside):",
                        scenario.comm().backend() == Comm::nccl ? "NCCL" : "Gloo", scenario.comm().torch_version()));
  for (const auto& text : result.job_log) Line(out, "  " + text);
  if (!result.job_log_note.empty()) Line(out, "  (" + result.job_log_note + ")");
}

// The per-rank table. With many ranks it shows the first 16 and every rank that is not simply
// waiting in the collective, so the interesting rows are not lost among identical ones.
void AppendRankTable(std::string& out, const sim::SimResult& result) {
  Line(out, "");
  Line(out, "per rank (virtual seconds):");
  Line(out, "  rank  iterations  samples   data wait  collectives     compute  resample  breaks  state");
  constexpr size_t kRanksShown = 16;
  std::vector<bool> shown(result.ranks.size(), result.ranks.size() <= 2 * kRanksShown);
  for (size_t r = 0; r < result.ranks.size() && r < kRanksShown; ++r) shown[r] = true;
  for (const uint32_t r : result.stuck_ranks) shown[r] = true;
  for (const auto& rank : result.ranks) {
    if (rank.died_ns >= 0) shown[rank.rank] = true;
  }
  size_t hidden = 0;
  for (const auto& rank : result.ranks) {
    if (!shown[rank.rank]) {
      ++hidden;
      continue;
    }
    Line(out, fmt::format("  {:>4}  {:>10}  {:>7}  {:>10}  {:>11}  {:>10}  {:>8}  {:>6}  {}", rank.rank,
                          rank.iterations_completed, rank.samples, Seconds(rank.data_wait_ns),
                          Seconds(rank.collective_wait_ns), Seconds(rank.compute_ns), rank.resample_attempts,
                          rank.stream_breaks, rank.state));
  }
  if (hidden > 0) Line(out, fmt::format("  ... {} more ranks (--json lists every rank)", hidden));
  Line(out, "");
}

// The totals, and the command line that reproduces this run exactly (its trace hash included).
void AppendRunTotals(std::string& out, const Scenario& scenario, const std::string& path, const sim::SimResult& result,
                     std::optional<double> wall_ms, const std::vector<std::string>& sets) {
  uint64_t jumps = 0;
  for (const auto& rank : result.ranks) jumps += rank.resample_jumps;
  Line(out, fmt::format("iterations  {} of {} on every rank; virtual time {}", result.iterations_completed,
                        result.job_iterations, FormatVirtualTime(result.end_ns)));
  Line(out, fmt::format("throughput  {:.2f} iterations/s, {:.2f} samples/s (virtual, up to the last "
                        "iteration every rank completed)",
                        PerSecond(result.iterations_completed, result.last_iteration_end_ns),
                        PerSecond(result.samples, result.last_iteration_end_ns)));
  Line(out, fmt::format("data        {} samples, {} resample attempts, {} resample jumps, {} stream "
                        "breaks (frames fed with prev_exists after another frame)",
                        result.samples, result.resample_attempts, jumps, result.stream_breaks));
  if (wall_ms) {
    Line(out, fmt::format("engine      {} events in {:.1f} ms wall ({:.2f} M events/s)", result.events, *wall_ms,
                          *wall_ms > 0 ? result.events / *wall_ms / 1e3 : 0.0));
  } else {
    Line(out, fmt::format("engine      {} events", result.events));
  }
  std::string command = "petrsim " + ShellQuote(path);
  for (const std::string& set : sets) command += " --set " + ShellQuote(set);
  Line(out, fmt::format("reproduce   {} (seed {}, job.seed {}, trace hash {:016x})", command, scenario.seed(),
                        scenario.job().seed(), result.trace_hash));
}

// The loader stuck in the resample loop, or null when no loader is (a rank died, or the hang is
// in the collectives alone).
nlohmann::json StuckJson(const sim::SimResult& result) {
  if (!result.stuck) return nullptr;
  const auto& s = *result.stuck;
  return {{"rank", s.rank},
          {"worker", s.worker},
          {"batch", s.batch},
          {"slot", s.slot},
          {"index", s.index},
          {"group", s.group},
          {"subdataset", s.subdataset},
          {"subdataset_name", s.subdataset_name},
          {"scene", s.scene},
          {"scene_name", s.scene_name},
          {"first_frame", s.pool_first},
          {"last_frame", s.pool_last},
          {"first_frame_in_scene", s.pool_first_in_scene},
          {"last_frame_in_scene", s.pool_last_in_scene},
          {"since_ns", s.since_ns},
          {"attempts_so_far", s.attempts},
          {"proven", s.proven}};
}

// The hang, for a run that hung or lost a rank; null otherwise, so consumers test one field.
nlohmann::json HangJson(const sim::SimResult& result) {
  if (result.outcome != Outcome::kHang && result.outcome != Outcome::kRankDied) return nullptr;
  nlohmann::json hang = nlohmann::json::object();
  hang["cause"] = CauseName(result.cause);
  hang["stuck_ranks"] = result.stuck_ranks;
  hang["waiting_ranks"] = result.waiting_ranks;
  hang["iteration"] = result.collective ? nlohmann::json(result.collective->iteration) : nullptr;
  hang["collective"] = result.collective ? CollectiveJson(*result.collective) : nullptr;
  hang["blocked_at_ns"] = result.blocked_at_ns;
  hang["watchdog_fires_ns"] = result.first_watchdog_ns;
  hang["stuck"] = StuckJson(result);
  return hang;
}

// The mismatched pair of collectives, or null when the ranks' calls matched.
nlohmann::json DesyncJson(const sim::SimResult& result) {
  if (!result.desync) return nullptr;
  const auto& d = *result.desync;
  return {{"group", d.process_group},
          {"seq", d.seq},
          {"at_ns", d.at_ns},
          {"first_rank", d.first_rank},
          {"first", CollectiveJson(d.first)},
          {"other_rank", d.other_rank},
          {"other", CollectiveJson(d.other)}};
}

// Every rank, unlike the text table, which leaves out ranks that only wait.
nlohmann::json RanksJson(const sim::SimResult& result) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : result.ranks) {
    nlohmann::json rank = {{"rank", r.rank},
                           {"iterations_completed", r.iterations_completed},
                           {"samples", r.samples},
                           {"loads", r.loads},
                           {"resample_attempts", r.resample_attempts},
                           {"resample_jumps", r.resample_jumps},
                           {"stream_breaks", r.stream_breaks},
                           {"collectives", r.collectives},
                           {"collectives_skipped", r.collectives_skipped},
                           {"data_wait_ns", r.data_wait_ns},
                           {"collective_wait_ns", r.collective_wait_ns},
                           {"compute_ns", r.compute_ns},
                           {"state", r.state},
                           {"blocked_since_ns", r.blocked_since_ns},
                           {"watchdog_fires_ns", r.watchdog_fires_ns},
                           {"died_ns", r.died_ns}};
    rank["blocked_in"] = r.blocked_in ? CollectiveJson(*r.blocked_in) : nlohmann::json(nullptr);
    ranks.push_back(std::move(rank));
  }
  return ranks;
}

// The run's totals and the engine's speed; wall_ms is null when the run was not timed.
nlohmann::json RunStatsJson(const Dataset& dataset, const sim::SimResult& result, std::optional<double> wall_ms) {
  nlohmann::json stats;
  stats["events"] = result.events;
  stats["wall_ms"] = wall_ms ? nlohmann::json(*wall_ms) : nlohmann::json(nullptr);
  stats["virtual_time_ns"] = result.end_ns;
  stats["samples"] = result.samples;
  stats["samples_per_s"] = PerSecond(result.samples, result.last_iteration_end_ns);
  stats["iterations_per_s"] = PerSecond(result.iterations_completed, result.last_iteration_end_ns);
  stats["resample_attempts"] = result.resample_attempts;
  stats["stream_breaks"] = result.stream_breaks;
  stats["trace_hash"] = fmt::format("{:016x}", result.trace_hash);
  stats["dataset_frames"] = dataset.size();
  return stats;
}

}  // namespace

std::string FormatRunReport(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                            const sim::SimResult& result, std::optional<double> wall_ms,
                            const std::vector<std::string>& sets) {
  const ExpandedPlan plan = ExpandPlan(scenario);
  std::string out;
  AppendRunHeader(out, scenario, path, dataset, result, plan);
  AppendOutcome(out, result);
  if (result.desync) AppendDesync(out, result);
  if (result.collective && result.outcome != Outcome::kCompleted) AppendBlockedCollective(out, scenario, result);
  if (result.stuck) AppendStuckLoader(out, result);
  AppendDeadRanks(out, result);
  AppendJobLog(out, scenario, result);
  AppendRankTable(out, result);
  AppendRunTotals(out, scenario, path, result, wall_ms, sets);
  return out;
}

std::string FormatRunJson(const Scenario& scenario, const std::string& path, const Dataset& dataset,
                          const sim::SimResult& result, std::optional<double> wall_ms, const std::vector<Fix>& fixes) {
  nlohmann::json j;
  j["scenario"] = path;
  j["name"] = scenario.name();
  j["seed"] = scenario.seed();
  j["job_seed"] = scenario.job().seed();
  j["outcome"] = OutcomeName(result.outcome);
  j["cause"] = CauseName(result.cause);
  j["iterations_completed"] = result.iterations_completed;
  j["job_iterations"] = result.job_iterations;
  if (!result.limit_note.empty()) j["limit"] = result.limit_note;
  j["hang"] = HangJson(result);
  j["desync"] = DesyncJson(result);
  j["nccl_log"] = result.nccl_log;
  j["job_log"] = result.job_log;
  j["torch_version"] = scenario.comm().torch_version();
  j["torch_version_assumed"] = !scenario.comm().has_torch_version();
  j["ranks"] = RanksJson(result);
  j["fixes"] = FixesJson(fixes);
  j["stats"] = RunStatsJson(dataset, result, wall_ms);
  return JsonText(j, 2) + "\n";
}

namespace {
constexpr const char* kBuildId = "petrsim 0.3 (simulator)";
}  // namespace

void AddRunOptions(CLI::App& app, RunFlags& flags) {
  app.add_option("scenario", flags.scenario_path,
                 "scenario to simulate (petrsim SCENARIO): exit 0 completed, 1 hang, desync or "
                 "dead rank, 2 bad input, 3 petrsim's own limit reached");
  app.add_flag("--json", flags.json, "print the run's report as a JSON object");
  app.add_option("--set", flags.sets, kSetHelp);
  AddTorchVersionOption(app, flags.sets);
  app.add_option("--perfetto", flags.perfetto, "write a Chrome/Perfetto trace-event timeline (JSON) to this file");
  AddPerfettoOptions(app, flags.perfetto_flags, "virtual");
  app.add_option("--trace-records-max", flags.trace_records_max,
                 "with --trace: write at most this many events in all (default 100,000,000); each "
                 "rank's file then ends with a `truncated` event counting the rest")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
  app.add_option("--trace-ring", flags.trace_ring,
                 "with --trace: keep only the last N events of each rank, like PyTorch's Flight "
                 "Recorder (0: all)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1} << 32));
  app.add_option("--trace", flags.trace_dir,
                 "write per-rank trace files (rank_<r>.pbtrace, proto/trace.proto) to this directory");
  app.add_option("--memory-max", flags.memory_max, kMemoryMaxHelp);
  app.add_flag("--no-wall-time", flags.no_wall_time,
               "leave the wall-clock time out of the report (byte-reproducible output)");
  app.add_flag("--quiet", flags.quiet, "no progress bar on stderr (a long run draws one when stderr is a terminal)");
}

void CheckRunFlags(const RunFlags& flags) {
  if (flags.trace_dir.empty() &&
      (flags.trace_ring != 0 || flags.trace_records_max != TraceDirectoryWriter::kRecordsMaxDefault)) {
    throw ScenarioError("--trace-ring and --trace-records-max need --trace DIR");
  }
  if (flags.perfetto.empty() && flags.perfetto_flags.any()) {
    throw ScenarioError("--perfetto-iterations, --perfetto-last and --perfetto-records-max need --perfetto FILE");
  }
  // Bad windows are bad input before anything runs.
  if (!flags.perfetto_flags.iterations.empty()) ParsePerfettoIterations(flags.perfetto_flags.iterations);
  if (!flags.perfetto_flags.last.empty()) ParsePerfettoLast(flags.perfetto_flags.last);
  MakePerfettoWindow(flags.perfetto_flags, 0);  // refuses two windows
  if (flags.trace_ring > flags.trace_records_max) {
    throw ScenarioError(
        fmt::format("--trace-ring {}: expected at most --trace-records-max ({}), the events written "
                    "in all: a larger ring never wraps",
                    flags.trace_ring, flags.trace_records_max));
  }
  if (flags.scenario_path.empty() && (flags.json || flags.no_wall_time || flags.quiet || !flags.sets.empty() ||
                                      !flags.perfetto.empty() || !flags.trace_dir.empty())) {
    throw ScenarioError(
        "no scenario given: petrsim SCENARIO [--json] [--set ...] "
        "[--perfetto FILE] [--trace DIR]");
  }
}

namespace {

// The output files a run streams into temporary files and renames only after it, so a failed (or
// interrupted: base/temp_files.h) run leaves nothing half-written.
struct RunWriters {
  std::unique_ptr<PerfettoWriter> perfetto;
  std::unique_ptr<TraceDirectoryWriter> trace;
  FanOutSink sinks;
};

// Opens the writers the flags ask for; `end_ns` places a --perfetto-last window.
void OpenWriters(const RunFlags& flags, const Scenario& scenario, int64_t end_ns, RunWriters& writers) {
  if (!flags.perfetto.empty()) {
    writers.perfetto = std::make_unique<PerfettoWriter>(flags.perfetto, flags.perfetto_flags.records_max,
                                                        MakePerfettoWindow(flags.perfetto_flags, end_ns));
    writers.sinks.Add(writers.perfetto.get());
  }
  if (!flags.trace_dir.empty()) {
    writers.trace = std::make_unique<TraceDirectoryWriter>(flags.trace_dir, scenario, flags.scenario_path,
                                                           scenario.job().world_size(), "sim", kBuildId,
                                                           flags.trace_records_max, flags.trace_ring);
    writers.sinks.Add(writers.trace.get());
  }
}

// Finishes the writers (the timeline's otherData: the outcome and the seeds), saying on stderr
// where the timeline was cut.
void FinishWriters(const std::string& path, const Scenario& scenario, const sim::SimResult& result,
                   const RunFlags& flags, RunWriters& writers) {
  if (writers.perfetto) {
    writers.perfetto->Finish({{"scenario", path},
                              {"outcome", OutcomeName(result.outcome)},
                              {"cause", CauseName(result.cause)},
                              {"seed", scenario.seed()},
                              {"job_seed", scenario.job().seed()}});
    if (const auto& cut = writers.perfetto->truncated_at()) {
      const auto notice =
          PerfettoTruncationNotice(flags.perfetto, *writers.perfetto, "virtual time " + FormatVirtualTime(cut->at_ns));
      std::fprintf(stderr, "%s\n", notice->c_str());
    }
  }
  if (writers.trace) writers.trace->Finish();
}

// The report (text or JSON). A job that hangs (or fails) in its data: what the user changes, each
// fix proven by `check` (check/fixes.h).
std::string RunReport(const RunFlags& flags, const Scenario& scenario, const Dataset& dataset,
                      const sim::SimResult& result, std::optional<double> wall) {
  const std::string& path = flags.scenario_path;
  std::vector<Fix> fixes;
  if (result.outcome != Outcome::kCompleted && result.outcome != Outcome::kLimitReached) {
    const CheckReport check = RunPreflight(scenario, dataset);
    if (NeedsFixes(check)) fixes = ProveFixes(scenario, dataset, path, check);
  }
  std::string text = flags.json ? FormatRunJson(scenario, path, dataset, result, wall, fixes)
                                : FormatRunReport(scenario, path, dataset, result, wall, flags.sets);
  if (!flags.json && !fixes.empty()) {
    text += "\n";
    for (const std::string& fix_line : FixLines(fixes)) text += fix_line + "\n";
  }
  return text;
}

}  // namespace

int RunSimulation(const RunFlags& flags) {
  const std::string& path = flags.scenario_path;
  const Scenario scenario = LoadWithOverrides(path, flags.sets);
  CheckMemory(EstimateRunMemory(scenario), MemoryMax(flags.memory_max), "simulating it", path);
  const Dataset dataset = BuildDataset(scenario, path);
  CheckSamplerConstructible(scenario, dataset, path);
  const uint64_t job_iterations = JobIterations(scenario, dataset);
  ProgressBar bar("iterations", flags.quiet);
  sim::SimOptions options;
  const auto progress = [&bar, job_iterations](std::string_view what) {
    return [&bar, job_iterations, what](int64_t now_ns, uint64_t iterations) {
      if (!bar.enabled()) return;
      bar.Update(iterations, job_iterations,
                 fmt::format("{}virtual {:.0f} s", what, static_cast<double>(now_ns) / 1e9));
    };
  };
  // --perfetto-last: where the run ends is known only after it; the simulation is deterministic,
  // so a first run without any writer finds it.
  int64_t end_ns = 0;
  std::optional<uint64_t> first_hash;
  if (!flags.perfetto.empty() && !flags.perfetto_flags.last.empty()) {
    options.progress = progress("finding the end for --perfetto-last, ");
    const sim::SimResult first = sim::Simulate(scenario, dataset, options);
    end_ns = first.end_ns;
    first_hash = first.trace_hash;
    bar.Restart();
  }
  RunWriters writers;
  OpenWriters(flags, scenario, end_ns, writers);
  if (!writers.sinks.empty()) options.trace = &writers.sinks;
  options.progress = progress("");
  const auto start = std::chrono::steady_clock::now();
  const sim::SimResult result = sim::Simulate(scenario, dataset, options);
  const double wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  bar.Clear();  // the report follows, maybe on the same terminal
  PETRSIM_ASSERT(!first_hash || *first_hash == result.trace_hash);
  const std::optional<double> wall = flags.no_wall_time ? std::nullopt : std::optional<double>(wall_ms);
  const std::string text = RunReport(flags, scenario, dataset, result, wall);
  FinishWriters(path, scenario, result, flags, writers);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return RunExitCode(result);
}

}  // namespace petrsim
