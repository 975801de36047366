// `petrsim diagnose --scenario S`: the cross-check of a Diagnosis against what S predicts (its
// plan, `check`'s first livelock hit and the simulator), as text and JSON; see diagnose.h.
#include "replay/diagnose.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "model/dataset.h"
#include "model/error.h"
#include "model/iteration_plan.h"
#include "model/outcome.h"
#include "model/preflight.h"
#include "model/sampler.h"
#include "replay/diagnose_internal.h"
#include "sim/simulator.h"

namespace petrsim {

using diagnose_internal::RankList;

namespace {

std::string CollectiveText(const Collective& c) {
  return fmt::format("{} {} x {} on {} (\"{}\")", OpTypeName(c.op()), Collective::Dtype_Name(c.dtype()), c.numel(),
                     c.process_group(), c.name());
}

// Where plan `given` first differs from plan `ran` (op, numel, dtype, group or count of a collective), or "".
std::string FirstPlanDifference(const ExpandedPlan& given, const ExpandedPlan& ran) {
  const auto compare = [](const std::vector<Collective>& a, const std::vector<Collective>& b,
                          const std::string& where) -> std::string {
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      if (i >= a.size() || i >= b.size()) {
        return fmt::format("{}: the scenario has {} collectives, the recorded plan {}", where, a.size(), b.size());
      }
      const Collective& x = a[i];
      const Collective& y = b[i];
      if (x.op() != y.op() || x.numel() != y.numel() || x.dtype() != y.dtype() ||
          x.process_group() != y.process_group()) {
        return fmt::format("{}, collective {}: the scenario's is {}, the recorded one {}", where, i + 1,
                           CollectiveText(x), CollectiveText(y));
      }
    }
    return "";
  };
  std::string diff = compare(given.startup, ran.startup, "startup");
  for (size_t i = 0; diff.empty() && i < std::max(given.leading.size(), ran.leading.size()); ++i) {
    diff = compare(given.Iteration(i), ran.Iteration(i), fmt::format("iteration {}", i));
  }
  if (diff.empty()) diff = compare(given.per_iteration, ran.per_iteration, "every later iteration");
  if (diff.empty() && given.periodic.size() != ran.periodic.size()) {
    diff = fmt::format("periodic collectives: the scenario has {}, the recorded plan {}", given.periodic.size(),
                       ran.periodic.size());
  }
  return diff;
}

}  // namespace

ScenarioCrossCheck CrossCheck(const Diagnosis& diagnosis, const Scenario& scenario, const std::string& scenario_name) {
  ScenarioCrossCheck cross;
  cross.scenario_name = scenario_name;
  const Dataset dataset = BuildDataset(scenario, scenario_name);
  CheckSamplerConstructible(scenario, dataset, scenario_name);
  ExpandedPlan plan = ExpandPlan(scenario);
  const uint64_t job_iterations = JobIterations(scenario, dataset);
  if (diagnosis.recorded_scenario) {
    // Place the recorded sequence numbers in the plan that ran, and say when the given scenario's differs.
    ExpandedPlan ran = ExpandPlan(*diagnosis.recorded_scenario);
    cross.plan_difference = FirstPlanDifference(plan, ran);
    if (!cross.plan_difference.empty()) plan = std::move(ran);
  }
  std::set<std::string> plan_groups;
  for (const auto& c : plan.startup) plan_groups.insert(c.process_group());
  for (const auto& c : plan.per_iteration) plan_groups.insert(c.process_group());
  for (const auto& p : plan.periodic) plan_groups.insert(p.collective().process_group());
  for (const StuckCollective& stuck : diagnosis.stuck) {
    if (!stuck.root) continue;
    ScenarioCrossCheck::Placed placed;
    placed.group = stuck.group;
    placed.seq = stuck.seq;
    // Flight Recorder names groups by number; the world group is "0", described "default_pg".
    if (plan_groups.count(stuck.group) > 0) {
      placed.plan_group = stuck.group;
    } else if (plan_groups.count(stuck.desc) > 0) {
      placed.plan_group = stuck.desc;
    } else if (stuck.group == "0") {
      placed.plan_group = "default_pg";
    }
    if (!placed.plan_group.empty() && stuck.seq > 0) {
      if (const auto position =
              LocateCollective(plan, placed.plan_group, static_cast<uint64_t>(stuck.seq), job_iterations)) {
        placed.found = true;
        placed.startup = position->startup;
        placed.iteration = position->iteration;
        placed.step = position->step;
      }
    }
    cross.placed.push_back(placed);
  }
  const CheckReport check = RunPreflight(scenario, dataset);
  if (NeedsFixes(check)) cross.fixes = ProveFixes(scenario, dataset, scenario_name, check);
  if (check.first_hit) {
    cross.check_hit = true;
    cross.hit_rank = check.first_hit->rank;
    cross.hit_worker = check.first_hit->worker;
    cross.hit_slot = check.first_hit->slot;
    cross.hit_iteration = check.first_hit->iteration;
    cross.hit_index = check.first_hit->index;
    for (const TrapPool& pool : check.pools) {
      if (check.first_hit->index < pool.first_frame || check.first_hit->index > pool.last_frame) continue;
      cross.hit_pool = pool;
      cross.pool = fmt::format(
          "sub-dataset '{}', scene '{}', frames {}..{} (dataset indices {}..{}, {} frames), "
          "none with GT after the filters",
          pool.subdataset_name, pool.scene_name, pool.first_frame_in_scene, pool.last_frame_in_scene, pool.first_frame,
          pool.last_frame, pool.frames);
    }
  }
  if (cross.check_hit) {
    // The ranks that do start the hit iteration block in its first collective on the world group.
    cross.predicted_seq = CollectivesBefore(plan, "default_pg", cross.hit_iteration) + 1;
    if (const auto at = LocateCollective(plan, "default_pg", cross.predicted_seq, job_iterations)) {
      if (at->collective != nullptr) {
        cross.predicted_op = OpTypeName(at->collective->op());
        cross.predicted_frame = at->collective->python_frame();
      }
    }
  }
  if (diagnosis.log) {
    cross.from_log = true;
    const TrainingLog& log = *diagnosis.log;
    if (log.seed && *log.seed != static_cast<int64_t>(scenario.job().seed())) {
      cross.notes.push_back(fmt::format("the log's seed is {} (`Set random seed to`), the scenario's job.seed {}",
                                        *log.seed, scenario.job().seed()));
    }
    cross.log_bound = diagnosis.hang_iterations;
    if (!diagnosis.hang_iterations && log.last_iteration) {
      cross.log_bound = IterationBound{log.last_iteration->done, job_iterations == 0 ? 0 : job_iterations - 1};
    }
    for (const auto& [r, rank] : log.ranks) {
      if (const LogFrame* f = diagnose_internal::WaitingFrame(rank)) {
        cross.log_frame = diagnose_internal::FrameText(*f);
        if (!cross.predicted_frame.empty()) {
          // The plan names "path/file.py, in function: code"; the traceback an absolute path.
          const std::string plan_file = cross.predicted_frame.substr(0, cross.predicted_frame.find(", in "));
          const size_t in = cross.predicted_frame.find(", in ");
          const std::string plan_function =
              in == std::string::npos
                  ? ""
                  : cross.predicted_frame.substr(in + 5, cross.predicted_frame.find(':', in + 5) - (in + 5));
          const bool file_matches =
              f->file.size() >= plan_file.size() &&
              f->file.compare(f->file.size() - plan_file.size(), plan_file.size(), plan_file) == 0;
          cross.log_frame_matches = file_matches && f->function == plan_function;
        }
        break;
      }
    }
  }
  const sim::SimResult result = sim::Simulate(scenario, dataset, sim::SimOptions{});
  cross.sim_outcome = OutcomeName(result.outcome);
  cross.sim_cause = CauseName(result.cause);
  cross.sim_stuck_ranks = result.stuck_ranks;
  if (result.collective) {
    cross.sim_group = result.collective->process_group;
    cross.sim_seq = result.collective->seq;
    cross.sim_iteration = result.collective->iteration;
  }

  // Consistent: a root stuck collective lacks the rank check names, at the iteration it names
  // (or at the simulator's sequence number).
  std::vector<uint32_t> missing;
  for (size_t i = 0, p = 0; i < diagnosis.stuck.size(); ++i) {
    const StuckCollective& stuck = diagnosis.stuck[i];
    if (!stuck.root) continue;
    const auto& placed = cross.placed[p++];
    missing.insert(missing.end(), stuck.missing_ranks.begin(), stuck.missing_ranks.end());
    if (!cross.check_hit) continue;
    const bool rank_missing =
        std::find(stuck.missing_ranks.begin(), stuck.missing_ranks.end(), cross.hit_rank) != stuck.missing_ranks.end();
    bool same_place = (placed.found && !placed.startup && placed.iteration == cross.hit_iteration) ||
                      (!placed.plan_group.empty() && placed.plan_group == cross.sim_group &&
                       static_cast<uint64_t>(stuck.seq) == cross.sim_seq);
    if (stuck.seq == 0 && diagnosis.log) {
      // A log without SeqNum: the iteration the log bounds, the op and the frame must all fit the plan's step.
      // What the log does not print cannot contradict: no op (Gloo names its transport wait, not the
      // collective), no iteration line (the hang is anywhere in the job), no traceback.
      if (!stuck.op.empty() && stuck.op != "?") cross.log_op_matches = stuck.op == cross.predicted_op;
      const bool in_bound = !cross.log_bound || (cross.log_bound->first <= cross.hit_iteration &&
                                                 cross.hit_iteration <= cross.log_bound->last);
      same_place = in_bound && cross.log_op_matches.value_or(true) && cross.log_frame_matches.value_or(true);
    }
    if (rank_missing && same_place) cross.consistent = true;
  }
  if (cross.consistent) {
    cross.verdict = fmt::format(
        "consistent with a sampler livelock on rank {}: its DataLoader worker {} spins forever on batch {} "
        "(slot {}), in the pool {}",
        cross.hit_rank, cross.hit_worker, cross.hit_iteration, cross.hit_slot, cross.pool);
  } else if (!cross.check_hit) {
    cross.verdict =
        "not a sampler livelock: the scenario's resample loop terminates (or its livelock pools are "
        "never drawn within the job), so the missing ranks stopped for another reason";
  } else if (missing.empty()) {
    cross.verdict = fmt::format(
        "nothing is stuck in the recordings, but the scenario predicts a livelock of rank {} "
        "at iteration {}: the recordings end earlier, or come from another job",
        cross.hit_rank, cross.hit_iteration);
  } else {
    cross.verdict = fmt::format(
        "not what the scenario predicts: it predicts rank {} stuck at iteration {} (simulated: {} seq {} on {}), "
        "the recordings miss rank(s) {}",
        cross.hit_rank, cross.hit_iteration, cross.sim_outcome, cross.sim_seq,
        cross.sim_group.empty() ? "-" : cross.sim_group, RankList(missing));
  }
  return cross;
}

std::string FormatCrossCheck(const ScenarioCrossCheck& cross) {
  std::string out = fmt::format("\nscenario {}:\n", cross.scenario_name);
  if (!cross.plan_difference.empty()) {
    out += fmt::format(
        "  its plan differs from the one the recording ran ({}); the sequence numbers are placed in the recorded "
        "plan\n",
        cross.plan_difference);
  }
  for (const auto& placed : cross.placed) {
    if (placed.seq == 0) {
      out += fmt::format("  {}: the log prints no SeqNum", placed.group);
      if (cross.log_bound) {
        out +=
            fmt::format("; the log bounds the hang to iteration {}..{}", cross.log_bound->first, cross.log_bound->last);
      } else {
        out += " and no iteration line: it places the hang nowhere within the job";
      }
      out += "\n";
      continue;
    }
    if (!placed.found) {
      out += fmt::format("  {} seq {}: not a collective of the scenario's plan within the job{}\n", placed.group,
                         placed.seq, placed.plan_group.empty() ? " (no process group of that name)" : "");
    } else if (placed.startup) {
      out += fmt::format("  {} seq {} is the startup step \"{}\"\n", placed.group, placed.seq, placed.step);
    } else {
      out += fmt::format("  {} seq {} is iteration {}, step \"{}\"\n", placed.group, placed.seq, placed.iteration,
                         placed.step);
    }
  }
  if (cross.check_hit) {
    out += fmt::format(
        "  check: rank {}'s DataLoader worker {} first draws a livelock pool at iteration {} (slot "
        "{}): {}\n",
        cross.hit_rank, cross.hit_worker, cross.hit_iteration, cross.hit_slot, cross.pool);
    out += fmt::format("  the other ranks then wait in default_pg seq {}: {} \"{}\"\n", cross.predicted_seq,
                       cross.predicted_op, cross.predicted_frame);
    if (cross.log_op_matches) {
      out += fmt::format("  the log's op {} the plan's\n", *cross.log_op_matches ? "matches" : "differs from");
    } else if (cross.from_log) {
      out += "  the log names no collective (Gloo prints the transport wait that timed out, not the op)\n";
    }
    if (cross.log_frame_matches) {
      out += fmt::format("  the log's frame ({}) {} the plan's\n", cross.log_frame,
                         *cross.log_frame_matches ? "matches" : "differs from");
    }
  } else {
    out += "  check: no livelock pool is drawn within the job\n";
  }
  for (const std::string& note : cross.notes) out += fmt::format("  note: {}\n", note);
  out += fmt::format("  simulator: {} ({})", cross.sim_outcome, cross.sim_cause);
  if (!cross.sim_group.empty()) {
    out += fmt::format("; rank(s) {} never reach seq {} on {} (iteration {})", RankList(cross.sim_stuck_ranks),
                       cross.sim_seq, cross.sim_group, cross.sim_iteration);
  }
  out += fmt::format("\n  verdict: {}\n", cross.verdict);
  out += FormatFixes(cross.fixes, "");
  return out;
}

std::string FormatFixes(const std::vector<Fix>& fixes, const std::string& preface) {
  if (fixes.empty()) return "";
  std::string out = "\n" + (preface.empty() ? "" : preface + "\n");
  for (const std::string& line : FixLines(fixes)) out += line + "\n";
  return out;
}

std::vector<Fix> RecordedScenarioFixes(const Diagnosis& diagnosis) {
  if (!diagnosis.recorded_scenario || !diagnosis.cause_detail || diagnosis.cause_detail->kind != "livelock") return {};
  const Scenario& scenario = *diagnosis.recorded_scenario;
  try {
    const Dataset dataset = BuildDataset(scenario, "the trace's scenario");
    const CheckReport check = RunPreflight(scenario, dataset);
    if (!NeedsFixes(check)) return {};
    return ProveFixes(scenario, dataset, "the trace's scenario", check);
  } catch (const ScenarioError&) {
    return {};  // the recorded scenario cannot be rebuilt here (e.g. an imported dataset's files are gone)
  }
}

nlohmann::json CrossCheckJson(const ScenarioCrossCheck& cross) {
  nlohmann::json placed = nlohmann::json::array();
  for (const auto& p : cross.placed) {
    nlohmann::json j = {{"pg_id", p.group}, {"plan_group", p.plan_group}, {"seq", p.seq}, {"found", p.found}};
    if (p.found) {
      j["startup"] = p.startup;
      j["iteration"] = p.iteration;
      j["step"] = p.step;
    }
    placed.push_back(j);
  }
  nlohmann::json check = nullptr;
  if (cross.check_hit) {
    check = {{"rank", cross.hit_rank},
             {"worker", cross.hit_worker},
             {"slot", cross.hit_slot},
             {"iteration", cross.hit_iteration},
             {"index", cross.hit_index},
             {"pool", cross.pool},
             {"waiting_seq", cross.predicted_seq},
             {"waiting_op", cross.predicted_op},
             {"waiting_frame", cross.predicted_frame}};
  }
  if (cross.hit_pool) {
    const TrapPool& pool = *cross.hit_pool;
    check["group"] = pool.group;
    check["subdataset"] = pool.subdataset;
    check["subdataset_name"] = pool.subdataset_name;
    check["scene"] = pool.scene;
    check["scene_name"] = pool.scene_name;
    check["pool_frames"] = {{"first", pool.first_frame},
                            {"last", pool.last_frame},
                            {"first_in_scene", pool.first_frame_in_scene},
                            {"last_in_scene", pool.last_frame_in_scene},
                            {"frames", pool.frames}};
  }
  nlohmann::json log = nullptr;
  if (cross.log_bound || cross.log_op_matches || cross.log_frame_matches) {
    const auto opt = [](const std::optional<bool>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    log = {{"hang_iterations",
            cross.log_bound ? nlohmann::json({{"first", cross.log_bound->first}, {"last", cross.log_bound->last}})
                            : nullptr},
           {"op_matches", opt(cross.log_op_matches)},
           {"frame", cross.log_frame},
           {"frame_matches", opt(cross.log_frame_matches)}};
  }
  return {{"scenario", cross.scenario_name},
          {"placed", placed},
          {"check_first_hit", check},
          {"sim",
           {{"outcome", cross.sim_outcome},
            {"cause", cross.sim_cause},
            {"stuck_ranks", cross.sim_stuck_ranks},
            {"pg", cross.sim_group},
            {"seq", cross.sim_seq},
            {"iteration", cross.sim_iteration}}},
          {"log", log},
          {"plan_difference",
           cross.plan_difference.empty() ? nlohmann::json(nullptr) : nlohmann::json(cross.plan_difference)},
          {"notes", cross.notes},
          {"consistent_with_livelock", cross.consistent},
          {"fixes", FixesJson(cross.fixes)},
          {"verdict", cross.verdict}};
}

}  // namespace petrsim
