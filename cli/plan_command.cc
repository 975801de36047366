// `petrsim plan`; see plan_command.h.
#include "cli/plan_command.h"

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/host_memory.h"
#include "base/json_text.h"
#include "cli/scenario_args.h"
#include "plan/backend.h"
#include "scenario/outcome.h"
#include "scenario/scenario_override.h"
#include "scenario/scenario_validation.h"
#include "trace/reader.h"
#include "trace/trace_event.h"

namespace petrsim {
namespace {

const char* SectionName(RankProgram::Section section) {
  switch (section) {
    case RankProgram::Section::kStartup:
      return "startup";
    case RankProgram::Section::kPerIteration:
      return "per_iteration";
    case RankProgram::Section::kPeriodic:
      return "periodic";
  }
  return "?";
}

// The most collectives `plan` lists, and what each costs on the way to stdout (the row's text or
// JSON object and its place in the list); the tiny scenario's 1,000,000 iterations (51 M collectives)
// ended in bad_alloc at 4.9 GB, before the text was complete.
constexpr uint64_t kListedCollectivesMax = 1'000'000;
constexpr uint64_t kListedCollectiveBytes = 150;

// Collectives the first `iterations` iterations issue with the startup ones, on every process group.
uint64_t CollectivesListed(const ExpandedPlan& plan, uint64_t iterations) {
  uint64_t total = 0;
  for (const std::string& group : ProcessGroupNames(plan)) total += CollectivesBefore(plan, group, iterations);
  return total;
}

// Refuses a listing beyond kListedCollectivesMax before it is built, with its size and the most
// iterations that fit.
void CheckListingSize(const ExpandedPlan& plan, uint64_t iterations, const std::string& path) {
  const uint64_t listed = CollectivesListed(plan, iterations);
  if (listed <= kListedCollectivesMax) return;
  uint64_t low = 0, high = iterations;  // CollectivesListed(low) fits, CollectivesListed(high) does not
  while (high - low > 1) {
    const uint64_t mid = low + (high - low) / 2;
    (CollectivesListed(plan, mid) <= kListedCollectivesMax ? low : high) = mid;
  }
  throw ScenarioError(fmt::format(
      "--iterations {}: expected a listing of at most {} collectives, found {} for {} (about {} to build and print); "
      "use --iterations {} or fewer",
      iterations, kListedCollectivesMax, listed, path, FormatBytes(listed * kListedCollectiveBytes), low));
}

}  // namespace

CLI::App* AddPlanCommand(CLI::App& app, PlanFlags& flags) {
  auto* plan = app.add_subcommand("plan",
                                  "Every collective the job issues, in order, with its c10d sequence number per "
                                  "process group: the startup ones, then --iterations iterations.");
  plan->add_option("scenario", flags.scenario_path,
                   "scenario file (.pbtxt, .pb or .json), or a recorded run's trace (rank_<r>.pbtrace, or a directory "
                   "of them: rank 0's) for the plan of the scenario it ran")
      ->required();
  plan->add_option("--iterations", flags.iterations,
                   "iterations to list after the startup collectives (default 3; at most 1,000,000 collectives in all, "
                   "refused before any is built)")
      ->check(CLI::Range(uint64_t{0}, uint64_t{1000000}));
  plan->add_flag("--json", flags.json, "print a JSON object");
  plan->add_option("--set", flags.sets, kSetHelp);
  AddTorchVersionOption(*plan, flags.sets);
  return plan;
}

std::string FormatPlan(const std::string& path, const std::vector<PlannedCollective>& collectives,
                       uint64_t iterations) {
  std::string out = fmt::format(
      "petrsim plan: {}: {} collectives, startup and {} iteration(s); rank 0, every batch with GT (a rank "
      "whose batch has none skips the conditional ones, marked *)\n",
      path, collectives.size(), iterations);
  out += fmt::format("  {:<16} {:>8}  {:<9} {:<14} {:<10} {:>12}  {:<8} {}\n", "process_group", "seq", "iteration",
                     "op", "reduce", "numel", "dtype", "step");
  for (const PlannedCollective& c : collectives) {
    const Collective& collective = *c.collective;
    const std::string iteration =
        c.section == RankProgram::Section::kStartup ? "startup" : fmt::format("{}", c.iteration);
    out += fmt::format("  {:<16} {:>8}  {:<9} {:<14} {:<10} {:>12}  {:<8} {}{}{}\n", collective.process_group(), c.seq,
                       iteration, OpTypeName(collective.op()),
                       comm::OpReduces(collective.op()) ? Collective::ReduceOp_Name(collective.reduce_op()) : "-",
                       collective.numel(), Collective::Dtype_Name(collective.dtype()), collective.name(),
                       collective.only_when_local_batch_has_gt() ? " *" : "", collective.blocking() ? "" : " (async)");
  }
  return out;
}

std::string FormatPlanJson(const std::string& path, const std::vector<PlannedCollective>& collectives,
                           uint64_t iterations) {
  nlohmann::ordered_json doc;
  doc["scenario"] = path;
  doc["iterations"] = iterations;
  doc["rank"] = 0;
  auto& list = doc["collectives"] = nlohmann::ordered_json::array();
  for (const PlannedCollective& c : collectives) {
    const Collective& collective = *c.collective;
    nlohmann::ordered_json item;
    item["process_group"] = collective.process_group();
    item["seq"] = c.seq;
    item["section"] = SectionName(c.section);
    item["iteration"] = c.iteration;
    item["op"] = OpTypeName(collective.op());
    item["reduce_op"] = Collective::ReduceOp_Name(collective.reduce_op());
    item["numel"] = collective.numel();
    item["dtype"] = Collective::Dtype_Name(collective.dtype());
    item["step"] = collective.name();
    item["python_frame"] = collective.python_frame();
    item["blocking"] = collective.blocking();
    item["only_when_local_batch_has_gt"] = collective.only_when_local_batch_has_gt();
    list.push_back(std::move(item));
  }
  return JsonText(doc, 2) + "\n";
}

Scenario LoadPlanScenario(const std::string& path, const std::vector<std::string>& sets) {
  std::error_code error;
  const bool directory = std::filesystem::is_directory(path, error);
  if (!directory && !path.ends_with(".pbtrace")) return LoadWithOverrides(path, sets);
  const std::string file = directory ? RankTracePath(path, 0) : path;
  std::string partial;
  const TraceHeader header = ScanTraceEvents(
      file, [](const TraceEventView&) {}, &partial);
  if (!header.has_scenario()) throw ScenarioError(file + ": the trace's header holds no scenario");
  Scenario scenario = header.scenario();
  // A header is input like any scenario file: expanding an invalid plan is undefined.
  ValidateScenario(scenario, file + " (the scenario in its header)");
  if (!sets.empty()) {
    ApplyOverrides(scenario, sets);
    ValidateScenario(scenario, file + " (after --set)");
  }
  return scenario;
}

int RunPlanCommand(const PlanFlags& flags) {
  const Scenario scenario = LoadPlanScenario(flags.scenario_path, flags.sets);
  const ExpandedPlan plan = ExpandPlan(scenario);
  CheckListingSize(plan, flags.iterations, flags.scenario_path);
  const std::vector<PlannedCollective> collectives = ListCollectives(plan, 0, flags.iterations);
  const std::string text = flags.json ? FormatPlanJson(flags.scenario_path, collectives, flags.iterations)
                                      : FormatPlan(flags.scenario_path, collectives, flags.iterations);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}

}  // namespace petrsim
