// `petrsim diagnose --scenario S`: the cross-check of a Diagnosis against what S predicts (its
// plan, `check`'s first livelock hit and the simulator), as text and JSON; see diagnose.h.
#include "replay/diagnose.h"

#include <algorithm>
#include <cctype>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "base/assert.h"
#include "base/error.h"
#include "check/preflight.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "plan/iteration_plan.h"
#include "replay/diagnose_internal.h"
#include "scenario/outcome.h"
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

using Comparison = ScenarioCrossCheck::Comparison;

std::vector<uint32_t> Sorted(std::set<uint32_t> ranks) { return {ranks.begin(), ranks.end()}; }

// An op as the plan names it (c10d's OpType, "ALLREDUCE") or as recordings do: a Flight Recorder dump's profiling
// name ("nccl:all_reduce"), a log's OpType. Compared without the backend prefix, case and underscores.
std::string OpKey(std::string_view op) {
  if (const size_t colon = op.find(':'); colon != std::string_view::npos) op.remove_prefix(colon + 1);
  std::string key;
  for (const char c : op) {
    if (c != '_') key += static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  }
  return key;
}

// The items of the prediction against the recordings (see ScenarioCrossCheck::comparisons).
void AddItem(ScenarioCrossCheck& cross, std::string what, std::string predicted, std::string recorded,
             std::string result) {
  cross.comparisons.push_back(
      Comparison{std::move(what), std::move(predicted), std::move(recorded), std::move(result)});
}

// The root stuck collective compared with the prediction (the world group's, else the first
// root), where the cross-check placed it in the plan, and the missing ranks of every root.
struct RecordedHang {
  std::set<uint32_t> missing;
  const StuckCollective* first = nullptr;
  const ScenarioCrossCheck::Placed* placed = nullptr;
};

RecordedHang FindRecordedHang(const Diagnosis& diagnosis, const ScenarioCrossCheck& cross) {
  RecordedHang hang;
  for (size_t i = 0, p = 0; i < diagnosis.stuck.size(); ++i) {
    const StuckCollective& stuck = diagnosis.stuck[i];
    if (!stuck.root) continue;
    // CrossCheck placed each root stuck collective, in order: the p-th root is placed[p].
    PETRSIM_ASSERT(p < cross.placed.size());
    PETRSIM_ASSERT(cross.placed[p].group == stuck.group);
    hang.missing.insert(stuck.missing_ranks.begin(), stuck.missing_ranks.end());
    if (hang.first == nullptr || stuck.group == "0" || stuck.desc == "default_pg") {
      hang.first = &stuck;
      hang.placed = &cross.placed[p];
    }
    ++p;
  }
  return hang;
}

void CompareWorldSize(const Diagnosis& diagnosis, const TrainingLog* log, uint32_t world, ScenarioCrossCheck& cross) {
  if (log != nullptr) {
    if (log->world_size) {
      AddItem(cross, "world size", std::to_string(world),
              fmt::format("{} ({})", *log->world_size, log->world_size_from),
              *log->world_size == world ? "match" : "differs");
    } else {
      uint32_t seen = 0;
      for (const auto& [r, rank] : log->ranks) seen = std::max(seen, r + 1);
      AddItem(cross, "world size", std::to_string(world),
              fmt::format("not in the log (ranks 0-{} seen; no gpu_ids, torchrun world size or file per rank)",
                          seen == 0 ? 0 : seen - 1),
              seen <= world ? "open" : "differs");
    }
  } else if (diagnosis.world_size != 0) {
    AddItem(cross, "world size", std::to_string(world), std::to_string(diagnosis.world_size),
            diagnosis.world_size == world ? "match" : "differs");
  }
}

// The iteration and the plan step: from the placed sequence number, else from what a log bounds.
void CompareIterationAndStep(const RecordedHang& hang, const TrainingLog* log, ScenarioCrossCheck& cross) {
  const StuckCollective& first = *hang.first;
  const ScenarioCrossCheck::Placed& placed = *hang.placed;
  const std::string predicted_iteration = std::to_string(cross.hit_iteration);
  const std::string predicted_step =
      fmt::format("default_pg seq {}, \"{}\"", cross.predicted_seq, cross.predicted_step);
  if (first.seq > 0) {
    if (!placed.found || placed.startup) {
      AddItem(cross, "iteration", predicted_iteration,
              placed.startup ? fmt::format("startup (seq {})", first.seq)
                             : fmt::format("{} seq {} is not in the plan within the job", first.group, first.seq),
              "differs");
    } else {
      AddItem(cross, "iteration", predicted_iteration, std::to_string(placed.iteration),
              placed.iteration == cross.hit_iteration ? "match" : "differs");
    }
    const bool same_step =
        (placed.plan_group == "default_pg" && static_cast<uint64_t>(first.seq) == cross.predicted_seq) ||
        (!placed.plan_group.empty() && placed.plan_group == cross.sim_group &&
         static_cast<uint64_t>(first.seq) == cross.sim_seq);
    AddItem(cross, "step", predicted_step,
            placed.found ? fmt::format("{} seq {}, \"{}\"", placed.plan_group, first.seq, placed.step)
                         : fmt::format("{} seq {}", first.group, first.seq),
            same_step ? "match" : "differs");
  } else if (log != nullptr) {
    if (cross.log_bound) {
      const bool in_bound =
          cross.log_bound->first <= cross.hit_iteration && cross.hit_iteration <= cross.log_bound->last;
      AddItem(cross, "iteration", predicted_iteration,
              fmt::format("{}..{} (from the last iteration line and the log interval)", cross.log_bound->first,
                          cross.log_bound->last),
              in_bound ? "match" : "differs");
    } else {
      AddItem(cross, "iteration", predicted_iteration, "the log prints no iteration line", "open");
    }
    AddItem(cross, "step", predicted_step,
            fmt::format("the watchdog lines print no SeqNum (PyTorch {})",
                        log->torch_release.empty() ? std::string("1.8 to 1.10") : log->torch_release),
            "open");
  } else {
    AddItem(cross, "step", predicted_step, "the recordings give no sequence number", "open");
  }
}

// The op: NCCL's watchdog lines and traces name it; Gloo's lines name the transport wait that
// timed out. Then the frame the waiting ranks' tracebacks show.
void CompareOpAndFrame(const StuckCollective& first, const TrainingLog* log, ScenarioCrossCheck& cross) {
  bool gloo = false;
  if (log != nullptr) {
    for (const auto& [r, rank] : log->ranks) {
      for (const LogTimeout& timeout : rank.timeouts) gloo = gloo || timeout.backend == "gloo";
    }
  }
  if (!first.op.empty() && first.op != "?") {
    const bool op_matches = OpKey(first.op) == OpKey(cross.predicted_op);
    if (log != nullptr) cross.log_op_matches = op_matches;  // the JSON's "log" object is a log's alone
    AddItem(cross, "op", cross.predicted_op, first.op, op_matches ? "match" : "differs");
  } else {
    AddItem(cross, "op", cross.predicted_op,
            gloo ? "not printed (Gloo prints the transport wait that timed out, not the op)" : "not recorded", "open");
  }
  if (cross.log_frame_matches) {
    AddItem(cross, "frame", cross.predicted_frame, cross.log_frame, *cross.log_frame_matches ? "match" : "differs");
  } else if (log != nullptr) {
    AddItem(cross, "frame", cross.predicted_frame, "no traceback of a waiting rank in the log", "open");
  }
}

// The verdict from the items: consistent when none differs, naming the open ones.
void Verdict(ScenarioCrossCheck& cross) {
  std::vector<std::string> differs, open;
  for (const Comparison& c : cross.comparisons) {
    if (c.result == "differs")
      differs.push_back(fmt::format("{}: predicted {}, recorded {}", c.what, c.predicted, c.recorded));
    if (c.result == "open") open.push_back(c.what);
  }
  if (!differs.empty()) {
    cross.verdict = fmt::format("not what the scenario predicts: {}", fmt::join(differs, "; "));
    return;
  }
  cross.consistent = true;
  cross.verdict = fmt::format(
      "consistent{} with a sampler livelock on rank {}: its DataLoader worker {} spins forever on batch {} "
      "(slot {}), in the pool {}",
      open.empty() ? std::string() : fmt::format(" as far as the recordings show (open: {})", fmt::join(open, ", ")),
      cross.hit_rank, cross.hit_worker, cross.hit_iteration, cross.hit_slot, cross.pool);
}

// The items of the prediction against the recordings, and the verdict (see ScenarioCrossCheck::comparisons).
void Compare(const Diagnosis& diagnosis, const Scenario& scenario, ScenarioCrossCheck& cross) {
  const RecordedHang hang = FindRecordedHang(diagnosis, cross);
  if (!cross.check_hit) {
    cross.verdict =
        "not a sampler livelock: the scenario's resample loop terminates (or its livelock pools are "
        "never drawn within the job), so the missing ranks stopped for another reason";
    return;
  }
  if (hang.missing.empty()) {
    cross.verdict = fmt::format(
        "nothing is stuck in the recordings, but the scenario predicts a livelock of rank {} "
        "at iteration {}: the recordings end earlier, or come from another job",
        cross.hit_rank, cross.hit_iteration);
    return;
  }
  // Missing ranks come from root stuck collectives, so there is one to compare.
  PETRSIM_ASSERT(hang.first != nullptr);
  PETRSIM_ASSERT(hang.placed != nullptr);
  const std::vector<uint32_t> predicted_missing =
      cross.sim_stuck_ranks.empty() ? std::vector<uint32_t>{cross.hit_rank} : cross.sim_stuck_ranks;
  const std::vector<uint32_t> recorded_missing = Sorted(hang.missing);
  AddItem(cross, "missing ranks", RankList(predicted_missing), RankList(recorded_missing),
          predicted_missing == recorded_missing ? "match" : "differs");
  const TrainingLog* log = diagnosis.log ? &*diagnosis.log : nullptr;
  CompareWorldSize(diagnosis, log, scenario.job().world_size(), cross);
  CompareIterationAndStep(hang, log, cross);
  CompareOpAndFrame(*hang.first, log, cross);
  Verdict(cross);
}

// The frame the plan names ("path/file.py, in function: code") against a traceback's frame (an
// absolute path): the same file (by its end) and function.
bool FrameMatches(const std::string& predicted_frame, const LogFrame& f) {
  const std::string plan_file = predicted_frame.substr(0, predicted_frame.find(", in "));
  const size_t in = predicted_frame.find(", in ");
  const std::string plan_function =
      in == std::string::npos ? "" : predicted_frame.substr(in + 5, predicted_frame.find(':', in + 5) - (in + 5));
  const bool file_matches = f.file.size() >= plan_file.size() &&
                            f.file.compare(f.file.size() - plan_file.size(), plan_file.size(), plan_file) == 0;
  return file_matches && f.function == plan_function;
}

// Each root stuck collective placed in the plan (iteration and step), in order.
void PlaceStuck(const Diagnosis& diagnosis, const ExpandedPlan& plan, uint64_t job_iterations,
                ScenarioCrossCheck& cross) {
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
}

// `check`'s first livelock hit and its pool, and the collective the other ranks then wait in:
// the first of the hit iteration on the world group.
void PredictHit(const CheckReport& check, const ExpandedPlan& plan, uint64_t job_iterations,
                ScenarioCrossCheck& cross) {
  if (!check.first_hit) return;
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
  cross.predicted_seq = CollectivesBefore(plan, "default_pg", cross.hit_iteration) + 1;
  if (const auto at = LocateCollective(plan, "default_pg", cross.predicted_seq, job_iterations)) {
    cross.predicted_step = at->step;
    if (at->collective != nullptr) {
      cross.predicted_op = OpTypeName(at->collective->op());
      cross.predicted_frame = at->collective->python_frame();
    }
  }
}

// A training log: its seed against the scenario's, the hang's iteration bound, and the frame the
// waiting ranks show against the plan's.
void ReadLog(const Diagnosis& diagnosis, const Scenario& scenario, uint64_t job_iterations, ScenarioCrossCheck& cross) {
  if (!diagnosis.log) return;
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
      if (!cross.predicted_frame.empty()) cross.log_frame_matches = FrameMatches(cross.predicted_frame, *f);
      break;
    }
  }
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
  PlaceStuck(diagnosis, plan, job_iterations, cross);
  const CheckReport check = RunPreflight(scenario, dataset);
  if (NeedsFixes(check)) cross.fixes = ProveFixes(scenario, dataset, scenario_name, check);
  PredictHit(check, plan, job_iterations, cross);
  ReadLog(diagnosis, scenario, job_iterations, cross);
  const sim::SimResult result = sim::Simulate(scenario, dataset, sim::SimOptions{});
  cross.sim_outcome = OutcomeName(result.outcome);
  cross.sim_cause = CauseName(result.cause);
  cross.sim_stuck_ranks = result.stuck_ranks;
  if (result.collective) {
    cross.sim_group = result.collective->process_group;
    cross.sim_seq = result.collective->seq;
    cross.sim_iteration = result.collective->iteration;
  }

  Compare(diagnosis, scenario, cross);
  return cross;
}

std::string FormatCrossCheck(const ScenarioCrossCheck& cross) {
  std::string out = fmt::format("\nscenario {}:\n", cross.scenario_name);
  for (const std::string& line : cross.artifact_lines) out += fmt::format("  {}\n", line);
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
  } else {
    out += "  check: no livelock pool is drawn within the job\n";
  }
  for (const std::string& note : cross.notes) out += fmt::format("  note: {}\n", note);
  out += fmt::format("  simulator: {} ({})", cross.sim_outcome, cross.sim_cause);
  if (!cross.sim_group.empty()) {
    out += fmt::format("; rank(s) {} never reach seq {} on {} (iteration {})", RankList(cross.sim_stuck_ranks),
                       cross.sim_seq, cross.sim_group, cross.sim_iteration);
  }
  out += "\n";
  if (!cross.comparisons.empty()) {
    out += "  the prediction against the recordings:\n";
    for (const auto& c : cross.comparisons) {
      out += fmt::format("    {:<8} {:<14} predicted {}; recorded {}\n", c.result, c.what, c.predicted, c.recorded);
    }
  }
  out += fmt::format("  verdict: {}\n", cross.verdict);
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

namespace {

nlohmann::json PlacedJson(const ScenarioCrossCheck& cross) {
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
  return placed;
}

// `check`'s first hit, null when none. Its pool is the same object, under the same key, as
// the "pool" of a livelock's cause_detail (diagnose_internal::PoolJson); "pool_description"
// says it in words.
nlohmann::json CheckFirstHitJson(const ScenarioCrossCheck& cross) {
  nlohmann::json check = nullptr;
  if (cross.check_hit) {
    check = {{"rank", cross.hit_rank},
             {"worker", cross.hit_worker},
             {"slot", cross.hit_slot},
             {"iteration", cross.hit_iteration},
             {"index", cross.hit_index},
             {"pool_description", cross.pool},
             {"waiting_seq", cross.predicted_seq},
             {"waiting_op", cross.predicted_op},
             {"waiting_frame", cross.predicted_frame}};
  }
  if (cross.hit_pool) {
    PETRSIM_ASSERT(cross.check_hit);  // the pool is the one of the hit's index
    const TrapPool& pool = *cross.hit_pool;
    check["group"] = pool.group;
    check["subdataset"] = pool.subdataset;
    check["subdataset_name"] = pool.subdataset_name;
    check["scene"] = pool.scene;
    check["scene_name"] = pool.scene_name;
    check["pool"] = diagnose_internal::PoolJson(pool.first_frame, pool.last_frame, pool.first_frame_in_scene,
                                                pool.last_frame_in_scene, static_cast<int64_t>(pool.frames));
  }
  return check;
}

// What a training log adds (the hang's iteration bound, whether op and frame match), null for
// other recordings.
nlohmann::json LogMatchJson(const ScenarioCrossCheck& cross) {
  if (!cross.log_bound && !cross.log_op_matches && !cross.log_frame_matches) return nullptr;
  const auto opt = [](const std::optional<bool>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  return {{"hang_iterations", cross.log_bound
                                  ? nlohmann::json({{"first", cross.log_bound->first}, {"last", cross.log_bound->last}})
                                  : nullptr},
          {"op_matches", opt(cross.log_op_matches)},
          {"frame", cross.log_frame},
          {"frame_matches", opt(cross.log_frame_matches)}};
}

}  // namespace

nlohmann::json CrossCheckJson(const ScenarioCrossCheck& cross) {
  nlohmann::json comparisons = nlohmann::json::array();
  for (const auto& c : cross.comparisons) {
    comparisons.push_back(
        {{"what", c.what}, {"predicted", c.predicted}, {"recorded", c.recorded}, {"result", c.result}});
  }
  return {{"scenario", cross.scenario_name},
          {"placed", PlacedJson(cross)},
          {"check_first_hit", CheckFirstHitJson(cross)},
          {"sim",
           {{"outcome", cross.sim_outcome},
            {"cause", cross.sim_cause},
            {"stuck_ranks", cross.sim_stuck_ranks},
            {"pg", cross.sim_group},
            {"seq", cross.sim_seq},
            {"iteration", cross.sim_iteration}}},
          {"log", LogMatchJson(cross)},
          {"plan_difference",
           cross.plan_difference.empty() ? nlohmann::json(nullptr) : nlohmann::json(cross.plan_difference)},
          {"notes", cross.notes},
          {"artifacts", cross.artifact_lines},
          {"comparisons", comparisons},
          {"consistent_with_livelock", cross.consistent},
          {"fixes", FixesJson(cross.fixes)},
          {"verdict", cross.verdict}};
}

}  // namespace petrsim
