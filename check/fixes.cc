// Fixes of a stuck job, each proven by re-running the pre-flight; see fixes.h.
#include "check/fixes.h"

#include <algorithm>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <google/protobuf/field_mask.pb.h>
#include <google/protobuf/util/field_mask_util.h>

#include "base/error.h"
#include "check/user_change.h"
#include "scenario/scenario_defaults.h"
#include "scenario/scenario_override.h"
#include "scenario/scenario_validation.h"

namespace petrsim {
namespace {

// The resample policies tried in place of the scenario's, in the order they are listed.
// in_group is the cause being fixed; keep_empty is filter_empty_gt=false, tried on its own.
constexpr Resample::Policy kAlternativePolicies[] = {Resample::global, Resample::next_valid_in_group,
                                                     Resample::drop_empty_groups, Resample::in_subdataset,
                                                     Resample::bounded};

// An error's message on one line (validation lists one violation per line).
std::string OneLine(const std::string& text) {
  std::string out;
  for (const char c : text) out += c == '\n' ? std::string("; ") : std::string(1, c);
  while (out.size() >= 2 && out.compare(out.size() - 2, 2, "; ") == 0) out.resize(out.size() - 2);
  return out;
}

// Whether BuildDataset makes the same dataset of both scenarios: it reads the resample policy only
// through these two (everything else the candidates change is the resample loop).
bool SameDataset(const Scenario& a, const Scenario& b) {
  auto drops = [](const Scenario& s) {
    return s.resample().policy() == Resample::drop_empty_groups && RejectsEmptyFrames(s);
  };
  return RejectsEmptyFrames(a) == RejectsEmptyFrames(b) && drops(a) == drops(b) &&
         a.filters().SerializeAsString() == b.filters().SerializeAsString();
}

// Why a re-run check does not prove termination, from its report (check's verdict, in words);
// `original` is the report of the scenario as given.
std::string WhyNot(const Scenario& scenario, const CheckReport& report, const CheckReport& original) {
  const bool bounded = scenario.resample().policy() == Resample::bounded;
  if (!report.sampler_failure.empty()) {
    return report.sampler_failure == original.sampler_failure
               ? "the sampler still cannot be built, as with the scenario as given"
               : "the sampler cannot be built: " + OneLine(report.sampler_failure);
  }
  const auto pools = report.pools.size();
  if (bounded && report.first_hit) {
    return fmt::format(
        "every draw of the {} pool(s) without a frame with GT gives up after {} loads (no attempts_max helps) and "
        "raises: the job fails at iteration {} instead of hanging",
        pools, scenario.resample().attempts_max(),
        (report.first_bounded_error ? report.first_bounded_error : report.first_hit)->iteration);
  }
  if (bounded && report.first_bounded_error) {
    const SamplerHit& hit = *report.first_bounded_error;
    return fmt::format(
        "a getitem gives up after {} loads and raises at iteration {} (rank {}, index {}): the job fails",
        scenario.resample().attempts_max(), hit.iteration, hit.rank, hit.index);
  }
  if (!report.terminates) {
    const TrapPool& pool = report.pools.front();
    const std::string where =
        pool.scenes_spanned == 1
            ? fmt::format("sub-dataset '{}', scene '{}', frames {}..{} of the scene", pool.subdataset_name,
                          pool.scene_name, pool.first_frame_in_scene, pool.last_frame_in_scene)
            : fmt::format("{} frames over {} scenes from sub-dataset '{}', scene '{}'", pool.frames,
                          pool.scenes_spanned, pool.subdataset_name, pool.scene_name);
    return fmt::format("{} pool(s) the resample loop can never leave remain (first: {}); {}", pools, where,
                       report.first_hit ? fmt::format("the job hangs at iteration {}", report.first_hit->iteration)
                                        : std::string("not drawn within this job for this seed"));
  }
  if (!report.batches_equal) return "the ranks run out of batches at different iterations";
  return "the check still fails";
}

// What a candidate's re-run check found.
struct Trial {
  bool proven = false;
  std::string detail;
  std::optional<CheckReport> report;  // when the changed scenario was built
};

// Validates `changed`, builds its dataset (or reuses `same_dataset`) and re-runs the check.
Trial Recheck(const Scenario& changed, const Dataset* same_dataset, const std::string& display_name,
              const CheckReport& original) {
  Trial trial;
  try {
    ValidateScenario(changed, display_name);
    std::optional<Dataset> built;
    if (same_dataset == nullptr) built = BuildDataset(changed, display_name);
    const Dataset& dataset = same_dataset != nullptr ? *same_dataset : *built;
    trial.report = RunPreflight(changed, dataset);
  } catch (const ScenarioError& error) {
    trial.detail = "the changed scenario fails to build: " + OneLine(error.what());
    return trial;
  }
  trial.proven = !trial.report->job_fails;  // CheckExitCode(report) == 0
  if (!trial.proven) trial.detail = WhyNot(changed, *trial.report, original);
  return trial;
}

std::string ProvenPolicyDetail(const Scenario& changed, const CheckReport& report) {
  const auto& stats = report.statistics;
  std::string detail =
      fmt::format("every getitem ends with a sample; expected per epoch: {:.1f} extra loads, {:.1f} stream breaks",
                  stats.extra_loads_per_epoch, stats.stream_breaks_per_epoch);
  if (stats.chunks_dropped > 0) {
    detail += fmt::format("; {} chunk(s) ({} frames) removed", stats.chunks_dropped, stats.frames_dropped);
  }
  if (changed.resample().policy() == Resample::bounded) {
    detail += fmt::format("; no getitem gives up within the job's {} iterations (attempts_max {})",
                          report.job_iterations, changed.resample().attempts_max());
  }
  return detail;
}

Fix PolicyFix(const Scenario& scenario, const Dataset& dataset, const std::string& display_name,
              const CheckReport& original, Resample::Policy policy) {
  Fix fix;
  fix.kind = "resample_policy";
  fix.set = "resample.policy=" + PolicyName(policy);
  Scenario changed = scenario;
  ApplyOverride(changed, fix.set);
  std::string note;
  if (policy != Resample::bounded && changed.resample().has_attempts_max()) {
    changed.mutable_resample()->clear_attempts_max();  // applies to bounded only
    note = " (and remove resample.attempts_max)";
  }
  const Trial trial = Recheck(changed, SameDataset(scenario, changed) ? &dataset : nullptr,
                              display_name + " (--set " + fix.set + ")", original);
  fix.proven = trial.proven;
  fix.detail = (trial.proven ? ProvenPolicyDetail(changed, *trial.report) : trial.detail) + note;
  return fix;
}

Fix FilterEmptyGtFix(const Scenario& scenario, const std::string& display_name, const CheckReport& original) {
  Fix fix;
  fix.kind = "filter_empty_gt";
  fix.set = "filters.filter_empty_gt=false";
  Scenario changed = scenario;
  ApplyOverride(changed, fix.set);
  const Trial trial = Recheck(changed, nullptr, display_name + " (--set " + fix.set + ")", original);
  fix.proven = trial.proven;
  fix.detail = trial.proven ? fmt::format("no frame is resampled; {} frame(s) without GT are trained on",
                                          trial.report->statistics.frames_without_gt)
                            : trial.detail;
  return fix;
}

bool IsNuScenesToken(const std::string& text) {
  return text.size() == 32 &&
         std::all_of(text.begin(), text.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// The scenario's sample token of frame `frame` of scene `scene` of sub-dataset `subdataset`, when
// its scenes list frames with tokens.
std::string SampleToken(const Scenario& scenario, uint32_t subdataset, uint32_t scene, uint32_t frame) {
  const SubDataset& sub = scenario.dataset().subdatasets(static_cast<int>(subdataset));
  if (!sub.has_explicit_() || scene >= static_cast<uint32_t>(sub.explicit_().scenes_size())) return "";
  const Scene& given = sub.explicit_().scenes(static_cast<int>(scene));
  if (frame >= static_cast<uint32_t>(given.frames_size())) return "";
  return given.frames(static_cast<int>(frame)).token();
}

// The drop_frames fix of dataset indices [first, last] of `dataset` (`frames` of them).
Fix DropRange(const Scenario& scenario, const Dataset& dataset, int64_t first, int64_t last, uint64_t frames) {
  Fix fix;
  fix.kind = "drop_frames";
  const FrameInfo& first_frame = dataset.frame(first);
  const FrameInfo& last_frame = dataset.frame(last);
  const SceneInfo& first_scene = dataset.scenes()[first_frame.scene];
  const SceneInfo& last_scene = dataset.scenes()[last_frame.scene];
  fix.subdataset = first_scene.subdataset;
  fix.subdataset_name = dataset.subdatasets()[first_scene.subdataset].name;
  fix.scene_name = first_scene.name;
  if (IsNuScenesToken(first_scene.name)) fix.scene_token = first_scene.name;
  fix.last_subdataset_name = dataset.subdatasets()[last_scene.subdataset].name;
  fix.last_scene_name = last_scene.name;
  fix.scenes_spanned = last_frame.scene - first_frame.scene + 1;
  fix.first_index = first;
  fix.last_index = last;
  fix.first_frame_in_scene = first_frame.frame_in_scene;
  fix.last_frame_in_scene = last_frame.frame_in_scene;
  fix.frames = frames;
  fix.first_sample_token =
      SampleToken(scenario, first_scene.subdataset, first_scene.index_in_subdataset, first_frame.frame_in_scene);
  fix.last_sample_token =
      SampleToken(scenario, last_scene.subdataset, last_scene.index_in_subdataset, last_frame.frame_in_scene);
  for (int64_t i = first; i <= last; ++i) {
    const FrameInfo& frame = dataset.frame(i);
    const SceneInfo& scene = dataset.scenes()[frame.scene];
    std::string token = SampleToken(scenario, scene.subdataset, scene.index_in_subdataset, frame.frame_in_scene);
    if (token.empty()) {
      fix.sample_tokens.clear();
      break;
    }
    fix.sample_tokens.emplace_back(dataset.subdatasets()[scene.subdataset].name, std::move(token));
  }
  return fix;
}

// The dataset with every frame the scenario gives: `dataset` itself, or, where drop_empty_groups
// removed chunks, the scenario's dataset built again without dropping.
std::optional<Dataset> CompleteDataset(const Scenario& scenario, const Dataset& dataset,
                                       const std::string& display_name) {
  for (const auto& sub : dataset.subdatasets()) {
    if (sub.frames_dropped > 0) {
      Scenario undropped = scenario;
      undropped.mutable_resample()->set_policy(Resample::in_group);
      return BuildDataset(undropped, display_name);
    }
  }
  return std::nullopt;
}

// `scenario` with its dataset written out as what the pre-flight reads of it: per sub-dataset
// (name kept) its scenes (names kept) with each frame's GT count after the filters. It builds
// the same dataset as `scenario` (`full`: the complete one) under any resample policy and
// filter_empty_gt, without generating synthetic boxes or filtering boxes again; the candidates
// are applied to it.
Scenario WithGtCounts(const Scenario& scenario, const Dataset& full) {
  google::protobuf::FieldMask all_but_dataset;
  const auto* descriptor = Scenario::descriptor();
  for (int f = 0; f < descriptor->field_count(); ++f) {
    if (descriptor->field(f)->number() != Scenario::kDatasetFieldNumber) {
      all_but_dataset.add_paths(descriptor->field(f)->name());
    }
  }
  Scenario out;
  google::protobuf::util::FieldMaskUtil::MergeMessageTo(scenario, all_but_dataset, {}, &out);
  for (const SubDatasetInfo& sub : full.subdatasets()) {
    SubDataset& sub_out = *out.mutable_dataset()->add_subdatasets();
    sub_out.set_name(sub.name);
    ExplicitData& data = *sub_out.mutable_explicit_();
    for (uint32_t k = sub.scene_begin; k < sub.scene_end; ++k) {
      const SceneInfo& scene = full.scenes()[k];
      Scene& scene_out = *data.add_scenes();
      scene_out.set_name(scene.name);
      for (int64_t i = scene.begin; i < scene.end; ++i) scene_out.add_gt_counts(full.frame(i).gt_count);
    }
  }
  return out;
}

// `counted` (WithGtCounts of `full`) with the frames flagged in `removed` (by index of `full`)
// taken out, as removing them from the info files does: a scene that loses its first frame (the
// one without lidar sweeps, where StreamPETR starts a scene) and keeps others is appended to the
// previous scene of its sub-dataset; a scene or sub-dataset left without frames is removed.
// `origin` gets the index in `full` of every frame kept, in order; `notes` what was merged or
// removed.
Scenario WithoutFrames(const Scenario& counted, const Dataset& full, const std::vector<bool>& removed,
                       std::vector<int64_t>& origin, std::vector<std::string>& notes) {
  origin.clear();
  notes.clear();
  Scenario changed = counted;
  DatasetSpec& spec = *changed.mutable_dataset();
  spec.clear_subdatasets();
  for (const SubDatasetInfo& sub : full.subdatasets()) {
    SubDataset out;
    out.set_name(sub.name);
    ExplicitData& data = *out.mutable_explicit_();
    for (uint32_t k = sub.scene_begin; k < sub.scene_end; ++k) {
      const SceneInfo& scene = full.scenes()[k];
      const auto kept =
          static_cast<uint32_t>(std::count(removed.begin() + scene.begin, removed.begin() + scene.end, false));
      if (kept == 0) {
        notes.push_back(fmt::format("scene '{}' is left without frames", scene.name));
        continue;
      }
      Scene* target = nullptr;
      if (removed[scene.begin] && data.scenes_size() > 0) {
        target = data.mutable_scenes(data.scenes_size() - 1);
        notes.push_back(fmt::format(
            "the {} frame(s) left of scene '{}' have lidar sweeps, so they join scene '{}' (StreamPETR starts a scene "
            "at a frame without sweeps)",
            kept, scene.name, target->name()));
      } else {
        target = data.add_scenes();
        target->set_name(scene.name);
      }
      for (int64_t i = scene.begin; i < scene.end; ++i) {
        if (removed[i]) continue;
        target->add_gt_counts(full.frame(i).gt_count);
        origin.push_back(i);
      }
    }
    if (data.scenes_size() == 0) {
      notes.push_back(fmt::format("sub-dataset '{}' is left without frames (drop its info file)", sub.name));
      continue;
    }
    *spec.add_subdatasets() = std::move(out);
  }
  return changed;
}

// The index in `full` (the complete dataset) of index `i` of `dataset` (the same scenario's).
int64_t FullIndex(const Dataset& full, const Dataset& dataset, int64_t i) {
  const FrameInfo& frame = dataset.frame(i);
  const SceneInfo& scene = dataset.scenes()[frame.scene];
  return full.scenes()[full.subdatasets()[scene.subdataset].scene_begin + scene.index_in_subdataset].begin +
         frame.frame_in_scene;
}

// Rounds of ProveDrops: removing frames re-cuts the chunks of their scene, which can leave a new
// pool; its frames are removed too, up to this many times.
constexpr int kDropRounds = 4;

// The drop_frames fixes, proven together: the scenario rebuilt without every pool's frames. Where
// that leaves new pools (re-cut chunks without GT), their frames are removed too and listed as
// fixes of their own (`recut`), for up to kDropRounds rebuilds; that needs `dataset` complete
// (`full` is `dataset`), else one round only.
std::vector<Fix> ProveDrops(const Scenario& scenario, const Scenario& counted, const Dataset& full,
                            const Dataset& dataset, const std::string& display_name, const CheckReport& report) {
  std::vector<Fix> fixes;
  for (const TrapPool& pool : report.pools) {
    fixes.push_back(DropRange(scenario, dataset, pool.first_frame, pool.last_frame, pool.frames));
  }
  std::vector<bool> removed(full.size(), false);
  uint64_t pool_frames = 0;
  for (const TrapPool& pool : report.pools) {
    for (int64_t i = pool.first_frame; i <= pool.last_frame; ++i) {
      const int64_t at = FullIndex(full, dataset, i);
      pool_frames += !removed[at];
      removed[at] = true;
    }
  }
  std::vector<bool> recut(full.size(), false);
  uint64_t recut_frames = 0;
  std::vector<int64_t> origin;
  std::vector<std::string> notes;
  Trial trial;
  int rounds = 0;
  while (true) {
    ++rounds;
    trial = Recheck(WithoutFrames(counted, full, removed, origin, notes), nullptr,
                    display_name + " (without the pools' frames)", report);
    const bool more = !trial.proven && trial.report && !trial.report->pools.empty() && &full == &dataset &&
                      rounds < kDropRounds && trial.report->statistics.chunks_dropped == 0;
    if (!more) break;
    for (const TrapPool& pool : trial.report->pools) {
      for (int64_t i = pool.first_frame; i <= pool.last_frame; ++i) {
        recut_frames += !removed[origin[i]];
        removed[origin[i]] = recut[origin[i]] = true;
      }
    }
  }
  // The re-cut frames, as runs of consecutive frames of one scene.
  for (int64_t i = 0; i < full.size(); ++i) {
    if (!recut[i]) continue;
    int64_t last = i;
    while (last + 1 < full.size() && recut[last + 1] && full.frame(last + 1).scene == full.frame(i).scene) ++last;
    Fix fix = DropRange(scenario, full, i, last, static_cast<uint64_t>(last - i + 1));
    fix.recut = true;
    fixes.push_back(fix);
    i = last;
  }

  std::string detail = report.pools.size() == 1
                           ? fmt::format("rebuilt without these {} frame(s)", pool_frames)
                           : fmt::format("rebuilt without the {} pools' {} frames", report.pools.size(), pool_frames);
  if (recut_frames > 0) {
    detail += fmt::format(" and the {} frame(s) of the chunks that removing them re-cuts without GT ({} rebuilds)",
                          recut_frames, rounds);
  }
  detail += ": ";
  detail += trial.proven ? "every getitem ends with a sample" : trial.detail;
  if (!trial.proven && trial.report && !trial.report->pools.empty())
    detail += " (frames counted in the rebuilt scenes)";
  for (const auto& note : notes) detail += "; " + note;
  for (Fix& fix : fixes) {
    fix.proven = trial.proven;
    fix.detail = detail;
  }
  return fixes;
}

}  // namespace

bool NeedsFixes(const CheckReport& report) {
  return report.job_fails && (!report.pools.empty() || report.first_bounded_error.has_value());
}

std::vector<Fix> ProveFixes(const Scenario& scenario, const Dataset& dataset, const std::string& display_name,
                            const CheckReport& report) {
  std::vector<Fix> fixes;
  if (!NeedsFixes(report)) return fixes;
  const std::optional<Dataset> rebuilt = CompleteDataset(scenario, dataset, display_name);
  const Dataset& full = rebuilt ? *rebuilt : dataset;
  const Scenario counted = WithGtCounts(scenario, full);
  for (const Resample::Policy policy : kAlternativePolicies) {
    if (policy == scenario.resample().policy()) continue;
    fixes.push_back(PolicyFix(counted, dataset, display_name, report, policy));
  }
  if (RejectsEmptyFrames(scenario) && scenario.resample().policy() != Resample::keep_empty) {
    fixes.push_back(FilterEmptyGtFix(counted, display_name, report));
  }
  if (!report.pools.empty()) {
    for (Fix& fix : ProveDrops(scenario, counted, full, dataset, display_name, report)) fixes.push_back(std::move(fix));
  }
  for (Fix& fix : fixes) fix.change = UserChange(scenario, fix);
  return fixes;
}

std::vector<std::string> FixLines(const std::vector<Fix>& fixes) {
  std::vector<std::string> lines;
  if (fixes.empty()) return lines;
  lines.emplace_back(
      "fixes (each checked by re-running this check with it applied; --set is its what-if form, the line under it "
      "what you change):");
  size_t width = 0;
  for (const Fix& fix : fixes) {
    if (!fix.set.empty()) width = std::max(width, fix.set.size() + 7);  // "--set " and a space
  }
  for (size_t k = 0; k < fixes.size(); ++k) {
    const Fix& fix = fixes[k];
    const std::string result = (fix.proven ? "proven: " : "not a fix: ") + fix.detail;
    if (!fix.set.empty()) {
      lines.push_back(fmt::format("  {:<{}} {}", "--set " + fix.set, width, result));
      for (const std::string& change : fix.change) lines.push_back("      " + change);
      continue;
    }
    std::string what;
    if (fix.scenes_spanned <= 1) {
      what = fmt::format("sub-dataset '{}', scene '{}', frames {}..{} of the scene (dataset indices {}..{})",
                         fix.subdataset_name, fix.scene_name, fix.first_frame_in_scene, fix.last_frame_in_scene,
                         fix.first_index, fix.last_index);
    } else {
      what = fmt::format(
          "{} scenes from sub-dataset '{}' scene '{}' frame {} to sub-dataset '{}' scene '{}' frame {} (dataset "
          "indices {}..{})",
          fix.scenes_spanned, fix.subdataset_name, fix.scene_name, fix.first_frame_in_scene, fix.last_subdataset_name,
          fix.last_scene_name, fix.last_frame_in_scene, fix.first_index, fix.last_index);
    }
    if (!fix.first_sample_token.empty()) {
      what += fmt::format(", sample tokens {} .. {}", fix.first_sample_token, fix.last_sample_token);
    }
    if (fix.recut) what += " (re-cut without GT by the removal above)";
    lines.push_back("  drop from the info files: " + what);
    // Drops proven together share one result line, after the last of them.
    const bool shared_with_next = k + 1 < fixes.size() && fixes[k + 1].set.empty() &&
                                  fixes[k + 1].proven == fix.proven && fixes[k + 1].detail == fix.detail;
    if (!shared_with_next) {
      lines.push_back(fmt::format("  {:<{}} {}", "", width, result));
      for (const std::string& change : fix.change) lines.push_back("      " + change);
    }
  }
  return lines;
}

nlohmann::json FixesJson(const std::vector<Fix>& fixes) {
  nlohmann::json out = nlohmann::json::array();
  for (const Fix& fix : fixes) {
    nlohmann::json json = {{"kind", fix.kind},
                           {"set", fix.set.empty() ? nlohmann::json(nullptr) : nlohmann::json(fix.set)},
                           {"proven", fix.proven},
                           {"detail", fix.detail},
                           {"change", fix.change}};
    if (fix.kind == "drop_frames") {
      json["subdataset"] = fix.subdataset;
      json["subdataset_name"] = fix.subdataset_name;
      json["scene"] = fix.scene_name;
      json["scene_token"] = fix.scene_token;
      json["last_subdataset_name"] = fix.last_subdataset_name;
      json["last_scene"] = fix.last_scene_name;
      json["scenes_spanned"] = fix.scenes_spanned;
      json["first_frame"] = fix.first_index;
      json["last_frame"] = fix.last_index;
      json["first_frame_in_scene"] = fix.first_frame_in_scene;
      json["last_frame_in_scene"] = fix.last_frame_in_scene;
      json["frames"] = fix.frames;
      json["first_sample_token"] = fix.first_sample_token;
      json["last_sample_token"] = fix.last_sample_token;
      json["recut"] = fix.recut;
    }
    out.push_back(std::move(json));
  }
  return out;
}

}  // namespace petrsim
