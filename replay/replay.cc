// `petrsim replay`; see replay.h.
#include "replay/replay.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/format.h>
#include <google/protobuf/text_format.h>

#include "base/error.h"
#include "data/dataset.h"
#include "replay/diagnose.h"
#include "scenario/scenario_override.h"
#include "scenario/scenario_validation.h"
#include "trace/reader.h"
#include "trace/trace_event.h"

namespace petrsim {
namespace {

std::string RankList(const std::vector<uint32_t>& ranks) {
  if (ranks.empty()) return "none";
  std::string out;
  for (const uint32_t r : ranks) {
    if (!out.empty()) out += ", ";
    out += std::to_string(r);
  }
  return out;
}

std::string Describe(const ReplayOutcome& o) {
  std::string out = o.outcome;
  if (!o.cause.empty() && o.cause != "none") out += " (" + o.cause + ")";
  if (o.outcome == "completed") return out + fmt::format(", {} iterations", o.iterations_completed);
  if (!o.stuck_ranks.empty()) out += fmt::format("; stuck rank(s) {}", RankList(o.stuck_ranks));
  if (o.has_collective) {
    out += fmt::format("; the others wait in seq {} on {} (iteration {})", o.seq, o.group, o.iteration);
  }
  return out;
}

}  // namespace

ReplayOutcome RealReplayBackend::Run(const RecordedJob& job, const Scenario& scenario, bool use_samples,
                                     bool use_loads) {
  std::error_code error;
  const std::string trace_dir = work_dir_ + "/trace";
  std::filesystem::remove_all(trace_dir, error);
  std::filesystem::create_directories(work_dir_, error);
  if (error)
    throw ScenarioError(fmt::format("{}: cannot create the replay's directory: {}", work_dir_, error.message()));
  const std::string scenario_path = work_dir_ + "/scenario.pbtxt";
  {
    std::string text;
    google::protobuf::TextFormat::PrintToString(scenario, &text);
    std::ofstream out(scenario_path);
    out << "# The scenario `petrsim replay --against real` ran (recorded in " << job.directory << ")\n" << text;
    if (!out) throw ScenarioError(fmt::format("{}: cannot write the scenario", scenario_path));
  }
  std::vector<std::string> args = {train_program_, scenario_path, "--nproc",   std::to_string(job.world_size),
                                   "--trace",      trace_dir,     "--backend", "gloo"};
  if (use_samples) {
    args.insert(args.end(), {"--replay", job.directory});
    if (!use_loads) args.push_back("--replay-samples-only");
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) throw ScenarioError("petrsim replay --against real: fork failed");
  if (pid == 0) {
    ::dup2(2, 1);  // the trainer talks on stderr; stdout is the report's
    ::execv(argv[0], argv.data());
    std::fprintf(stderr, "petrsim replay --against real: cannot run %s: %s\n", argv[0], std::strerror(errno));
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status) && (WEXITSTATUS(status) == 2 || WEXITSTATUS(status) == 127)) {
    throw ScenarioError(fmt::format("petrsim replay --against real: {} failed before training (exit {})",
                                    train_program_, WEXITSTATUS(status)));
  }
  std::fprintf(stderr, "petrsim replay: the real run's traces are in %s\n", trace_dir.c_str());
  return LoadRecordedJob(trace_dir).recorded;
}

RecordedJob LoadRecordedJob(const std::string& directory) {
  RecordedJob job;
  static_cast<Recording&>(job) = ReadRecording(directory);
  const std::vector<uint64_t>& iterations_done = job.iterations_done;
  const bool died = job.rank_died;
  // The recorded outcome, from the post-mortem of the same files.
  const Diagnosis diagnosis = Diagnose(LoadRecordings(job.files));  // the rank files only
  ReplayOutcome& recorded = job.recorded;
  recorded.iterations_completed =
      iterations_done.empty() ? 0 : *std::min_element(iterations_done.begin(), iterations_done.end());
  const StuckCollective* root = nullptr;
  for (const StuckCollective& stuck : diagnosis.stuck) {
    if (stuck.root && root == nullptr) root = &stuck;
  }
  if (!diagnosis.desyncs.empty()) {
    recorded.outcome = "desync";
  } else if (root != nullptr) {
    recorded.outcome = died ? "rank_died" : "hang";
  } else {
    recorded.outcome = died ? "rank_died" : "completed";
  }
  if (root != nullptr) {
    recorded.stuck_ranks = root->missing_ranks;
    recorded.has_collective = true;
    recorded.group = root->group;
    recorded.seq = static_cast<uint64_t>(root->seq);
    recorded.iteration = root->iteration.value_or(0);
  }
  return job;
}

ReplayOutcome SimReplayBackend::Run(const RecordedJob& job, const Scenario& scenario, bool use_samples,
                                    bool use_loads) {
  const Dataset dataset =
      BuildDataset(scenario, job.scenario_path.empty() ? "the recorded scenario" : job.scenario_path);
  const std::unique_ptr<ReplaySource> source = MakeRecordedSource(job, use_samples, use_loads);
  sim::SimOptions options;
  options.replay = source.get();
  const sim::SimResult result = sim::Simulate(scenario, dataset, options);
  ReplayOutcome out;
  out.outcome = OutcomeName(result.outcome);
  out.cause = CauseName(result.cause);
  out.stuck_ranks = result.stuck_ranks;
  out.iterations_completed = result.iterations_completed;
  if (result.collective && result.outcome != Outcome::kCompleted) {
    out.has_collective = true;
    out.group = result.collective->process_group;
    out.seq = result.collective->seq;
    out.iteration = result.collective->iteration;
  }
  return out;
}

ReplayReport Replay(const RecordedJob& job, ReplayBackend& backend, const std::vector<std::string>& sets) {
  ReplayReport report;
  report.backend = backend.name();
  report.sets = sets;
  report.recorded = job.recorded;
  Scenario scenario = job.scenario;
  if (!sets.empty()) {
    ApplyOverrides(scenario, sets);
    ValidateScenario(scenario, job.directory + " (the recorded scenario, after --set)");
  }
  report.used_loads = sets.empty();
  report.used_samples = true;
  if (!sets.empty()) {
    // The recorded indices mean the same frames only if the dataset is the same.
    const Dataset before = BuildDataset(job.scenario, "the recorded scenario");
    const Dataset after = BuildDataset(scenario, "the recorded scenario after --set");
    bool same = before.size() == after.size() && before.groups_num() == after.groups_num();
    for (int64_t i = 0; same && i < before.size(); ++i) same = before.group_of(i) == after.group_of(i);
    if (!same) {
      report.used_samples = false;
      report.samples_note = fmt::format(
          "the changed scenario builds another dataset ({} frames, {} groups instead of {} and {}), so the "
          "recorded indices do not apply: its own sampler runs",
          after.size(), after.groups_num(), before.size(), before.groups_num());
    }
  }
  report.replayed = backend.Run(job, scenario, report.used_samples, report.used_loads);

  const ReplayOutcome& a = report.recorded;
  const ReplayOutcome& b = report.replayed;
  if (a.outcome != b.outcome)
    report.differences.push_back(fmt::format("outcome: recorded {}, replayed {}", a.outcome, b.outcome));
  if (a.stuck_ranks != b.stuck_ranks) {
    report.differences.push_back(
        fmt::format("stuck ranks: recorded {}, replayed {}", RankList(a.stuck_ranks), RankList(b.stuck_ranks)));
  }
  if (a.has_collective != b.has_collective || a.seq != b.seq || a.group != b.group) {
    report.differences.push_back(fmt::format("stuck collective: recorded {}, replayed {}",
                                             a.has_collective ? fmt::format("seq {} on {}", a.seq, a.group) : "none",
                                             b.has_collective ? fmt::format("seq {} on {}", b.seq, b.group) : "none"));
  }
  if (a.has_collective && b.has_collective && a.iteration != b.iteration) {
    report.differences.push_back(fmt::format("iteration: recorded {}, replayed {}", a.iteration, b.iteration));
  }
  if (a.iterations_completed != b.iterations_completed) {
    report.differences.push_back(fmt::format("iterations completed by every rank: recorded {}, replayed {}",
                                             a.iterations_completed, b.iterations_completed));
  }
  report.reproduced = report.differences.empty();
  return report;
}

std::string FormatReplay(const RecordedJob& job, const ReplayReport& report) {
  // A probe's traces carry the scenario they ran in their header but no path to a file.
  const std::string scenario = !job.scenario_path.empty() ? job.scenario_path
                               : !job.scenario.name().empty()
                                   ? fmt::format("'{}', recorded in the traces", job.scenario.name())
                                   : std::string("recorded in the traces");
  std::string out = fmt::format("petrsim replay: {} ({} ranks, recorded by {}, scenario {}) against {}\n",
                                job.directory, job.world_size, job.backend, scenario, report.backend);
  for (const std::string& note : job.partial) out += fmt::format("  partial: {}\n", note);
  if (!report.sets.empty()) {
    std::string sets;
    for (const auto& set : report.sets) {
      if (!sets.empty()) sets += ' ';
      sets += set;
    }
    out += fmt::format("  what-if: {}\n", sets);
  }
  out +=
      fmt::format("  driven by: {}{}\n", report.used_samples ? "the recorded sample order" : "the scenario's sampler",
                  report.used_loads ? ", getitem results and load times" : "; resampling and times from the scenario");
  if (!report.samples_note.empty()) out += fmt::format("  ({})\n", report.samples_note);
  out += fmt::format("\nrecorded: {}\nreplayed: {}\n", Describe(report.recorded), Describe(report.replayed));
  if (report.sets.empty()) {
    out += report.reproduced ? "\nreproduced: the replay ends as the recording does\n" : "\nNOT reproduced:\n";
  } else {
    out += report.reproduced ? "\nwhat-if: the outcome does not change\n" : "\nwhat-if: the outcome changes:\n";
  }
  for (const std::string& d : report.differences) out += "  " + d + "\n";
  return out;
}

nlohmann::json ReplayJson(const ReplayReport& report) {
  const auto outcome = [](const ReplayOutcome& o) {
    nlohmann::json j = {
        {"outcome", o.outcome}, {"stuck_ranks", o.stuck_ranks}, {"iterations_completed", o.iterations_completed}};
    if (!o.cause.empty()) j["cause"] = o.cause;
    if (o.has_collective) j["collective"] = {{"pg", o.group}, {"seq", o.seq}, {"iteration", o.iteration}};
    return j;
  };
  return {{"backend", report.backend},
          {"sets", report.sets},
          {"used_recorded_samples", report.used_samples},
          {"used_recorded_loads", report.used_loads},
          {"recorded", outcome(report.recorded)},
          {"replayed", outcome(report.replayed)},
          {"reproduced", report.reproduced},
          {"differences", report.differences}};
}

}  // namespace petrsim
