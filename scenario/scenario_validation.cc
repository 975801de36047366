// Semantic validation of scenarios; see scenario_validation.h.
#include "scenario/scenario_validation.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/reflection.h>

#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "base/error.h"
#include "base/host_memory.h"
#include "base/utf8.h"
#include "scenario/message_validation.h"
#include "scenario/scenario_defaults.h"
#include "scenario/torch_version.h"

namespace petrsim {
namespace {

// Accumulates violations with their field paths.
class Violations {
 public:
  template <typename Value>
  void Add(const std::string& path, const std::string& rule, const Value& found) {
    std::ostringstream out;
    out << path << ": " << rule << ", got " << found;
    lines_.push_back(out.str());
  }
  void AddPlain(const std::string& path, const std::string& rule) { lines_.push_back(path + ": " + rule); }
  void AddLine(std::string line) { lines_.push_back(std::move(line)); }
  std::vector<std::string> Take() { return std::move(lines_); }

 private:
  std::vector<std::string> lines_;
};

std::string Index(const std::string& path, int index) { return path + "[" + std::to_string(index) + "]"; }

void CheckFraction(Violations& violations, const std::string& path, double value) {
  if (!std::isfinite(value) || value < 0.0 || value > 1.0) {
    violations.Add(path, "must be a fraction in [0, 1]", value);
  }
}

void CheckSynthetic(Violations& v, const std::string& path, const SyntheticData& synthetic) {
  if (synthetic.scenes() < 1) v.Add(path + ".scenes", "must be >= 1", synthetic.scenes());
  if (synthetic.frames_per_scene_min() < 1) {
    v.Add(path + ".frames_per_scene_min", "must be >= 1", synthetic.frames_per_scene_min());
  }
  if (synthetic.frames_per_scene_max() < synthetic.frames_per_scene_min()) {
    v.Add(path + ".frames_per_scene_max",
          "must be >= frames_per_scene_min (" + std::to_string(synthetic.frames_per_scene_min()) + ")",
          synthetic.frames_per_scene_max());
  }
  if (synthetic.frames_per_scene_max() > 100000) {
    v.Add(path + ".frames_per_scene_max", "must be <= 100000", synthetic.frames_per_scene_max());
  }
  if (synthetic.has_frames_total()) {
    const uint64_t low = uint64_t{synthetic.scenes()} * synthetic.frames_per_scene_min();
    const uint64_t high = uint64_t{synthetic.scenes()} * synthetic.frames_per_scene_max();
    if (synthetic.frames_total() < low || synthetic.frames_total() > high) {
      v.Add(path + ".frames_total",
            "must be in [scenes * frames_per_scene_min, scenes * frames_per_scene_max] = [" + std::to_string(low) +
                ", " + std::to_string(high) + "]",
            synthetic.frames_total());
    }
  }
  const double mean = synthetic.boxes_per_frame_mean();
  if (!std::isfinite(mean) || mean < 0.0 || mean > 1000.0) {
    v.Add(path + ".boxes_per_frame_mean", "must be in [0, 1000]", mean);
  }
  for (int i = 0; i < synthetic.class_mix_size(); ++i) {
    const auto& entry = synthetic.class_mix(i);
    const std::string entry_path = Index(path + ".class_mix", i);
    if (entry.name().empty()) v.AddPlain(entry_path + ".name", "must be set");
    if (!std::isfinite(entry.weight()) || entry.weight() <= 0.0) {
      v.Add(entry_path + ".weight", "must be > 0", entry.weight());
    }
  }
  const double range = synthetic.position_range_m();
  if (!std::isfinite(range) || range <= 0.0 || range > 10000.0) {
    v.Add(path + ".position_range_m", "must be in (0, 10000] metres", range);
  }
  CheckFraction(v, path + ".no_points_fraction", synthetic.no_points_fraction());
  CheckFraction(v, path + ".radar_only_fraction", synthetic.radar_only_fraction());
  if (synthetic.no_points_fraction() + synthetic.radar_only_fraction() > 1.0) {
    v.Add(path + ".radar_only_fraction", "no_points_fraction + radar_only_fraction must be <= 1",
          synthetic.no_points_fraction() + synthetic.radar_only_fraction());
  }
  CheckFraction(v, path + ".empty_frame_fraction", synthetic.empty_frame_fraction());
  CheckFraction(v, path + ".empty_scene_fraction", synthetic.empty_scene_fraction());
  CheckFraction(v, path + ".empty_half_scene_fraction", synthetic.empty_half_scene_fraction());
  for (int i = 0; i < synthetic.plants_size(); ++i) {
    const auto& plant = synthetic.plants(i);
    if (!plant.has_scene()) {
      v.AddPlain(Index(path + ".plants", i) + ".scene", "must be set (a scene index)");
    } else if (plant.scene() >= synthetic.scenes()) {
      v.Add(Index(path + ".plants", i) + ".scene", "must be < scenes (" + std::to_string(synthetic.scenes()) + ")",
            plant.scene());
    }
  }
}

// One column of a frame's box columns: the first value `bad` refuses (with how many more it
// refuses), as "<path>.<column>[i]: <rule>, got <value>".
template <typename Column, typename Bad>
void CheckColumn(Violations& v, const std::string& path, const char* column, const Column& values,
                 const std::string& rule, Bad bad) {
  int first = -1;
  int more = 0;
  for (int i = 0; i < values.size(); ++i) {
    if (!bad(values.Get(i))) continue;
    if (first < 0) {
      first = i;
    } else {
      ++more;
    }
  }
  if (first < 0) return;
  const std::string suffix = more > 0 ? " (and " + std::to_string(more) + " more in this column)" : "";
  v.Add(Index(path + "." + column, first), rule, std::to_string(values.Get(first)) + suffix);
}

void CheckBoxColumns(Violations& v, const std::string& path, const BoxColumns& columns, int class_names) {
  const int n = columns.class_index_size();
  const auto check_length = [&](const char* column, int size, bool may_be_empty) {
    if (size == n || (may_be_empty && size == 0)) return;
    v.Add(path + "." + column,
          std::string("must hold one value per box") + (may_be_empty ? " (or none)" : "") + ", as class_index does (" +
              std::to_string(n) + " boxes)",
          std::to_string(size) + " value(s)");
  };
  check_length("x", columns.x_size(), false);
  check_length("y", columns.y_size(), false);
  check_length("num_lidar_pts", columns.num_lidar_pts_size(), false);
  check_length("num_radar_pts", columns.num_radar_pts_size(), true);
  CheckColumn(v, path, "class_index", columns.class_index(),
              "must be < the number of the sub-dataset's explicit.class_names (" + std::to_string(class_names) + ")",
              [&](uint32_t index) { return index >= static_cast<uint32_t>(class_names); });
  const auto not_finite = [](float value) { return !std::isfinite(value); };
  CheckColumn(v, path, "x", columns.x(), "must be finite", not_finite);
  CheckColumn(v, path, "y", columns.y(), "must be finite", not_finite);
  for (int i = 0; i < columns.valid_flag_differs_size(); ++i) {
    const uint32_t box = columns.valid_flag_differs(i);
    const std::string at = Index(path + ".valid_flag_differs", i);
    if (box >= static_cast<uint32_t>(n)) {
      v.Add(at, "must be a box index < the frame's box count (" + std::to_string(n) + ")", box);
      break;
    }
    if (i > 0 && box <= columns.valid_flag_differs(i - 1)) {
      v.Add(at,
            "must be above the previous index (" + std::to_string(columns.valid_flag_differs(i - 1)) +
                "): ascending, each box once",
            box);
      break;
    }
  }
}

void CheckExplicit(Violations& v, const std::string& path, const ExplicitData& data) {
  if (data.scenes_size() == 0) v.AddPlain(path + ".scenes", "must list at least one scene");
  std::set<std::string> class_names;
  for (int c = 0; c < data.class_names_size(); ++c) {
    const std::string& name = data.class_names(c);
    if (name.empty()) v.AddPlain(Index(path + ".class_names", c), "must not be empty");
    if (!name.empty() && !class_names.insert(name).second) {
      v.Add(Index(path + ".class_names", c), "must not repeat a name", "\"" + name + "\"");
    }
  }
  std::unordered_map<std::string_view, int> scene_names;  // a name repeated makes every report ambiguous
  for (int s = 0; s < data.scenes_size(); ++s) {
    const auto& scene = data.scenes(s);
    const std::string scene_path = Index(path + ".scenes", s);
    if (!scene.name().empty()) {
      const auto [first, inserted] = scene_names.emplace(scene.name(), s);
      if (!inserted) {
        v.Add(scene_path + ".name", "must not repeat the name of " + Index(path + ".scenes", first->second),
              "\"" + scene.name() + "\"");
      }
    }
    if (scene.frames_size() > 0 && scene.gt_counts_size() > 0) {
      v.AddPlain(scene_path, "give either frames or gt_counts, not both");
    }
    if (scene.frames_size() == 0 && scene.gt_counts_size() == 0) {
      v.AddPlain(scene_path, "a scene needs at least one frame (frames or gt_counts)");
    }
    for (int f = 0; f < scene.frames_size(); ++f) {
      const auto& frame = scene.frames(f);
      // Paths are built only for a frame with something to report (a trainval import has a
      // million boxes).
      const auto frame_path = [&] { return Index(scene_path + ".frames", f); };
      if (int{frame.has_gt_count()} + int{frame.boxes_size() > 0} + int{frame.has_box_columns()} > 1) {
        v.AddPlain(frame_path(), "give at most one of boxes, gt_count and box_columns");
      }
      for (int b = 0; b < frame.boxes_size(); ++b) {
        const auto& box = frame.boxes(b);
        if (!box.name().empty() && std::isfinite(box.x()) && std::isfinite(box.y())) continue;
        const std::string box_path = Index(frame_path() + ".boxes", b);
        if (box.name().empty()) v.AddPlain(box_path + ".name", "must be set (a class name)");
        if (!std::isfinite(box.x())) v.Add(box_path + ".x", "must be finite", box.x());
        if (!std::isfinite(box.y())) v.Add(box_path + ".y", "must be finite", box.y());
      }
      if (frame.has_box_columns()) {
        CheckBoxColumns(v, frame_path() + ".box_columns", frame.box_columns(), data.class_names_size());
      }
    }
  }
}

void CheckCollective(Violations& v, const std::string& path, const Collective& collective) {
  // Bounds keep bytes (numel x 8) and virtual times far from 64-bit overflow.
  if (collective.op() != Collective::barrier && (collective.numel() < 1 || collective.numel() > (uint64_t{1} << 40))) {
    v.Add(path + ".numel", "must be in [1, 2^40]", collective.numel());
  }
  if (collective.compute_before_ns() > 1'000'000'000'000'000ULL) {
    v.Add(path + ".compute_before_ns", "must be <= 10^15", collective.compute_before_ns());
  }
  if (collective.process_group().empty()) {
    v.AddPlain(path + ".process_group", "must not be empty");
  }
}

void CheckPlan(Violations& v, const IterationPlan& plan) {
  if (plan.has_streampetr()) {
    const auto& p = plan.streampetr();
    if (p.decoder_layers() < 1 || p.decoder_layers() > 64) {
      v.Add("plan.streampetr.decoder_layers", "must be in [1, 64]", p.decoder_layers());
    }
    // Each term is one all-reduce in every iteration's plan (about 200 bytes held per step): 4e9
    // of them used to end in bad_alloc near 6 GB. StreamPETR's FocalHead logs 5.
    if (p.focal_head_loss_terms() > kFocalHeadLossTermsMax) {
      v.Add("plan.streampetr.focal_head_loss_terms",
            "must be <= " + std::to_string(kFocalHeadLossTermsMax) +
                " (one all-reduce per term in every iteration: the plan would hold about " +
                FormatBytes(uint64_t{p.focal_head_loss_terms()} * kPlanStepBytes) + " for them)",
            p.focal_head_loss_terms());
    }
    for (const auto& [field, set] :
         {std::pair{"parameters", p.has_parameters()}, std::pair{"bucket_cap_mb", p.has_bucket_cap_mb()},
          std::pair{"first_bucket_mb", p.has_first_bucket_mb()}}) {
      if (set) {
        v.AddPlain(std::string("plan.streampetr.") + field,
                   "was replaced by plan.ddp (the model's tensors and DDP's bucket_cap_mb / first_bucket_mb); leave "
                   "plan.ddp out for the reference config's model");
      }
    }
    if (p.old_code_skips_dn_without_gt() && !p.denoising()) {
      v.AddPlain("plan.streampetr.old_code_skips_dn_without_gt",
                 "needs denoising: true (it skips the denoising collectives)");
    }
  }
  if (plan.has_ddp()) {
    for (std::string& line : ValidateDdpModel(plan.ddp(), "plan.ddp")) v.AddLine(std::move(line));
    if (plan.ddp().tensors_size() == 0) {
      v.AddPlain("plan.ddp.tensors",
                 "must list the model's tensors (for the StreamPETR plan, leave plan.ddp out to get the reference "
                 "config's model)");
    }
  }
  if (plan.has_custom()) {
    const auto& p = plan.custom();
    for (int i = 0; i < p.startup_size(); ++i) {
      CheckCollective(v, Index("plan.custom.startup", i), p.startup(i));
    }
    // With a DDP model its collectives may be the iteration's only ones (DDP always has a gradient bucket).
    if (p.per_iteration_size() == 0 && !plan.has_ddp()) {
      v.AddPlain("plan.custom.per_iteration",
                 "must list at least one collective, or plan.ddp be given (DDP's collectives are then the "
                 "iteration's only ones)");
    }
    for (int i = 0; i < p.per_iteration_size(); ++i) {
      CheckCollective(v, Index("plan.custom.per_iteration", i), p.per_iteration(i));
    }
    for (int i = 0; i < p.periodic_size(); ++i) {
      const std::string path = Index("plan.custom.periodic", i);
      if (!p.periodic(i).has_collective()) v.AddPlain(path + ".collective", "must be set");
      CheckCollective(v, path + ".collective", p.periodic(i).collective());
      if (p.periodic(i).every_iterations() < 1) {
        v.Add(path + ".every_iterations", "must be >= 1", p.periodic(i).every_iterations());
      }
    }
  }
}

// Only an epoch ends: a job sized by iterations over the infinite sampler (an IterBasedRunner) never runs out of
// batches on any rank, so an uneven_batches fault would change nothing.
void CheckUnevenBatchesHaveAnEpoch(Violations& v, const Scenario& scenario, const std::string& path) {
  if (scenario.sampler().kind() == Sampler::infinite_group_each_sample_in_batch && scenario.job().has_iterations()) {
    v.AddPlain(path,
               "has no effect here: the infinite sampler never runs out of batches in a job sized by "
               "job.iterations (IterBasedRunner); size the job by job.epochs, or use an epoch sampler "
               "(sampler.kind distributed_group or distributed)");
  }
}

void CheckFaults(Violations& v, const Scenario& scenario) {
  const uint32_t world_size = scenario.job().world_size();
  const uint32_t workers = scenario.job().workers_per_gpu();
  auto check_rank = [&](const std::string& path, uint32_t rank) {
    if (rank >= world_size) {
      v.Add(path + ".rank", "must be < job.world_size (" + std::to_string(world_size) + ")", rank);
    }
  };
  auto check_worker = [&](const std::string& path, uint32_t worker) {
    if (worker >= std::max<uint32_t>(workers, 1)) {
      v.Add(path + ".worker", "must be < job.workers_per_gpu (" + std::to_string(workers) + "; 0 counts as 1)", worker);
    }
  };
  auto check_factor = [&](const std::string& path, double factor) {
    if (!std::isfinite(factor) || factor < 1.0 || factor > 1e6) {
      v.Add(path + ".factor", "must be in [1, 10^6]", factor);
    }
  };
  // Virtual times and delays stay below 2^62 ns so sums of them never overflow int64.
  auto check_time = [&](const std::string& path, uint64_t ns) {
    if (ns > (uint64_t{1} << 62)) v.Add(path, "must be <= 2^62", ns);
  };
  for (int i = 0; i < scenario.faults_size(); ++i) {
    const auto& fault = scenario.faults(i);
    const std::string path = Index("faults", i);
    switch (fault.kind_case()) {
      case Fault::kSlowRank:
        check_rank(path + ".slow_rank", fault.slow_rank().rank());
        check_factor(path + ".slow_rank", fault.slow_rank().factor());
        break;
      case Fault::kSlowWorker:
        check_rank(path + ".slow_worker", fault.slow_worker().rank());
        check_worker(path + ".slow_worker", fault.slow_worker().worker());
        check_factor(path + ".slow_worker", fault.slow_worker().factor());
        break;
      case Fault::kDeadWorker:
        check_rank(path + ".dead_worker", fault.dead_worker().rank());
        check_worker(path + ".dead_worker", fault.dead_worker().worker());
        check_time(path + ".dead_worker.at_ns", fault.dead_worker().at_ns());
        break;
      case Fault::kDeadRank:
        check_rank(path + ".dead_rank", fault.dead_rank().rank());
        check_time(path + ".dead_rank.at_ns", fault.dead_rank().at_ns());
        break;
      case Fault::kStraggler:
        check_rank(path + ".straggler", fault.straggler().rank());
        check_time(path + ".straggler.delay_ns", fault.straggler().delay_ns());
        if (fault.straggler().delay_ns() == 0) {
          v.AddPlain(path + ".straggler.delay_ns", "must be set and > 0 (a straggler without a delay has no effect)");
        }
        break;
      case Fault::kUnevenBatches:
        check_rank(path + ".uneven_batches", fault.uneven_batches().rank());
        if (fault.uneven_batches().batches_fewer() < 1) {
          v.Add(path + ".uneven_batches.batches_fewer", "must be >= 1", fault.uneven_batches().batches_fewer());
        }
        CheckUnevenBatchesHaveAnEpoch(v, scenario, path + ".uneven_batches");
        break;
      case Fault::KIND_NOT_SET:
        v.AddPlain(path,
                   "a fault needs one of slow_rank, slow_worker, dead_worker, dead_rank, "
                   "straggler, uneven_batches");
        break;
    }
  }
}

// The dataset: a source per sub-dataset, and at most kFramesMax frames in all.
void CheckDataset(Violations& v, const Scenario& scenario) {
  const auto& dataset = scenario.dataset();
  if (dataset.subdatasets_size() == 0) {
    v.AddPlain("dataset.subdatasets", "must list at least one sub-dataset");
  }
  uint64_t frames_known = 0;
  std::unordered_map<std::string_view, int> names;
  for (int i = 0; i < dataset.subdatasets_size(); ++i) {
    const auto& subdataset = dataset.subdatasets(i);
    const std::string path = Index("dataset.subdatasets", i);
    if (!subdataset.name().empty()) {
      const auto [first, inserted] = names.emplace(subdataset.name(), i);
      if (!inserted) {
        v.Add(path + ".name", "must not repeat the name of " + Index("dataset.subdatasets", first->second),
              "\"" + subdataset.name() + "\"");
      }
    }
    switch (subdataset.source_case()) {
      case SubDataset::kExplicit:
        CheckExplicit(v, path + ".explicit", subdataset.explicit_());
        for (const auto& scene : subdataset.explicit_().scenes()) {
          frames_known += scene.frames_size() + scene.gt_counts_size();
        }
        break;
      case SubDataset::kSynthetic:
        CheckSynthetic(v, path + ".synthetic", subdataset.synthetic());
        frames_known += uint64_t{subdataset.synthetic().scenes()} * subdataset.synthetic().frames_per_scene_max();
        break;
      case SubDataset::SOURCE_NOT_SET:
        v.AddPlain(path, "needs a source: explicit { ... } or synthetic { ... }");
        break;
    }
  }
  if (frames_known > kFramesMax) {
    v.Add("dataset", "may hold at most " + std::to_string(kFramesMax) + " frames", frames_known);
  }
}

// The filters: classes, ranges and gt_required_frames.
void CheckFilters(Violations& v, const Scenario& scenario) {
  const auto& filters = scenario.filters();
  std::set<std::string> seen_classes;
  for (int i = 0; i < filters.classes_size(); ++i) {
    const std::string path = Index("filters.classes", i);
    if (filters.classes(i).empty()) v.AddPlain(path, "must not be empty");
    if (!seen_classes.insert(filters.classes(i)).second) {
      v.Add(path, "must not repeat a class", "\"" + filters.classes(i) + "\"");
    }
  }
  // Each bound is blamed for itself: a NaN minimum is the minimum's fault, not the maximum's.
  if (!std::isfinite(filters.bev_range_min_m())) {
    v.Add("filters.bev_range_min_m", "must be finite", filters.bev_range_min_m());
  } else if (!std::isfinite(filters.bev_range_max_m()) || filters.bev_range_min_m() >= filters.bev_range_max_m()) {
    v.Add("filters.bev_range_max_m",
          "must be finite and > bev_range_min_m (" + std::to_string(filters.bev_range_min_m()) + ")",
          filters.bev_range_max_m());
  }
  if (filters.gt_required_frames() < 1 || filters.gt_required_frames() > 64) {
    v.Add("filters.gt_required_frames", "must be in [1, 64]", filters.gt_required_frames());
  }
  if (filters.gt_required_frames() > 1 && scenario.grouping().seq_mode()) {
    v.AddPlain("filters.gt_required_frames",
               "applies only without seq_mode (StreamPETR's seq_mode sets num_frame_losses to 1); set "
               "grouping.seq_mode: false or leave it out");
  }
  std::set<std::string> circle_classes;
  for (int i = 0; i < filters.circle_range_size(); ++i) {
    const std::string path = Index("filters.circle_range", i);
    const ClassDistance& c = filters.circle_range(i);
    if (c.name().empty()) v.AddPlain(path + ".name", "must not be empty");
    if (!circle_classes.insert(c.name()).second)
      v.Add(path + ".name", "must not repeat a class", "\"" + c.name() + "\"");
    if (!std::isfinite(c.max_m()) || c.max_m() < 0) v.Add(path + ".max_m", "must be finite and >= 0", c.max_m());
  }
}

// The grouping: seq_split_num and seq_split_all, which apply with seq_mode only.
void CheckGrouping(Violations& v, const Scenario& scenario) {
  const auto& grouping = scenario.grouping();
  if (grouping.has_seq_split_num() && (grouping.seq_split_num() < 1 || grouping.seq_split_num() > 100000)) {
    v.Add("grouping.seq_split_num", "must be in [1, 100000] (or use seq_split_all: true for 'all')",
          grouping.seq_split_num());
  }
  if (grouping.seq_split_all() && grouping.has_seq_split_num()) {
    v.AddPlain("grouping.seq_split_num",
               "must not be set together with seq_split_all: true (that is seq_split_num='all')");
  }
  if (!grouping.seq_mode() && (grouping.has_seq_split_num() || grouping.seq_split_all())) {
    v.AddPlain("grouping.seq_mode", "is false, so seq_split_num / seq_split_all have no effect; remove them");
  }
}

// The sampler: shuffle and drop_last apply to kind distributed only.
void CheckSampler(Violations& v, const Scenario& scenario) {
  const auto& sampler = scenario.sampler();
  if (sampler.kind() != Sampler::distributed) {
    if (sampler.has_shuffle()) {
      v.AddPlain("sampler.shuffle", "applies to kind: distributed only, kind is " + SamplerKindName(sampler.kind()));
    }
    if (sampler.has_drop_last()) {
      v.AddPlain("sampler.drop_last", "applies to kind: distributed only, kind is " + SamplerKindName(sampler.kind()));
    }
  }
}

// The resample policy: attempts_max for bounded only; keep_empty against filter_empty_gt.
void CheckResample(Violations& v, const Scenario& scenario) {
  const auto& filters = scenario.filters();
  const auto& resample = scenario.resample();
  if (resample.policy() == Resample::bounded &&
      (resample.attempts_max() < 1 || resample.attempts_max() > kGetItemAttemptsLimit)) {
    v.Add("resample.attempts_max", "must be in [1, " + std::to_string(kGetItemAttemptsLimit) + "]",
          resample.attempts_max());
  }
  if (resample.policy() != Resample::bounded && resample.has_attempts_max()) {
    v.AddPlain("resample.attempts_max", "applies to policy: bounded only, policy is " + PolicyName(resample.policy()));
  }
  if (resample.policy() == Resample::keep_empty && filters.has_filter_empty_gt() && filters.filter_empty_gt()) {
    v.AddPlain("filters.filter_empty_gt",
               "is true, but resample.policy keep_empty means filter_empty_gt off; "
               "remove one of the two");
  }
  if (resample.pipeline_draws_per_attempt() > 1000) {
    v.Add("resample.pipeline_draws_per_attempt", "must be <= 1000", resample.pipeline_draws_per_attempt());
  }
}

// The job: world size, batch, workers, length and seed.
void CheckJob(Violations& v, const Scenario& scenario) {
  const auto& job = scenario.job();
  if (job.world_size() < 1 || job.world_size() > kWorldSizeMax) {
    v.Add("job.world_size", "must be in [1, " + std::to_string(kWorldSizeMax) + "]", job.world_size());
  }
  if (job.samples_per_gpu() < 1 || job.samples_per_gpu() > kSamplesPerGpuMax) {
    v.Add("job.samples_per_gpu", "must be in [1, " + std::to_string(kSamplesPerGpuMax) + "]", job.samples_per_gpu());
  }
  if (job.workers_per_gpu() > kWorkersPerGpuMax) {
    v.Add("job.workers_per_gpu", "must be <= " + std::to_string(kWorkersPerGpuMax), job.workers_per_gpu());
  }
  if (job.prefetch_factor() < 1 || job.prefetch_factor() > 64) {
    v.Add("job.prefetch_factor", "must be in [1, 64]", job.prefetch_factor());
  }
  if (job.workers_per_gpu() == 0 && job.has_prefetch_factor()) {
    v.AddPlain("job.prefetch_factor",
               "needs workers_per_gpu >= 1 (torch: prefetch_factor option could only be "
               "specified in multiprocessing)");
  }
  if (job.has_iterations() && (job.iterations() < 1 || job.iterations() > kIterationsMax)) {
    v.Add("job.iterations", "must be in [1, " + std::to_string(kIterationsMax) + "]", job.iterations());
  }
  if (job.has_epochs() && (job.epochs() < 1 || job.epochs() > 100000)) {
    v.Add("job.epochs", "must be in [1, 100000]", job.epochs());
  }
  if (job.has_iterations_per_epoch() &&
      (job.iterations_per_epoch() < 1 || job.iterations_per_epoch() > kIterationsMax)) {
    v.Add("job.iterations_per_epoch", "must be in [1, " + std::to_string(kIterationsMax) + "]",
          job.iterations_per_epoch());
  } else if (job.has_iterations_per_epoch() && job.has_epochs() && job.epochs() >= 1 &&
             job.iterations_per_epoch() > kIterationsMax / job.epochs()) {
    // The product in 64 bits without wrapping: epochs <= 10^5 and iterations_per_epoch <= 10^9 here.
    v.Add("job.iterations_per_epoch",
          "times job.epochs (" + std::to_string(job.epochs()) + ") must be at most " + std::to_string(kIterationsMax) +
              " iterations",
          std::to_string(job.iterations_per_epoch()) + " (" +
              std::to_string(job.epochs() * job.iterations_per_epoch()) + " iterations)");
  }
  if (job.has_iterations() && job.has_iterations_per_epoch()) {
    v.AddPlain("job.iterations_per_epoch", "applies with epochs only, iterations is set");
  }
  if (job.seed() > 0x7FFFFFFFu) {
    v.Add("job.seed", "must be < 2^31 (the sampler seed is broadcast as an int32 tensor)", job.seed());
  }
}

// The cost model and comm: durations far from int64 overflow, a supported PyTorch release.
void CheckCostAndComm(Violations& v, const Scenario& scenario) {
  const auto& cost = scenario.cost();
  if (!std::isfinite(cost.jitter_fraction()) || cost.jitter_fraction() < 0.0 || cost.jitter_fraction() >= 1.0) {
    v.Add("cost.jitter_fraction", "must be in [0, 1)", cost.jitter_fraction());
  }
  if (cost.bandwidth_bytes_per_s() < 1) {
    v.Add("cost.bandwidth_bytes_per_s", "must be >= 1", cost.bandwidth_bytes_per_s());
  }
  if (cost.sample_load_ns() < 1) v.Add("cost.sample_load_ns", "must be >= 1", cost.sample_load_ns());
  // Times are int64 nanoseconds in the simulator: keep every duration far from overflow.
  constexpr uint64_t kDurationNsMax = 1'000'000'000'000'000ULL;  // about 11.6 days
  if (cost.sample_load_ns() > kDurationNsMax) {
    v.Add("cost.sample_load_ns", "must be <= 10^15", cost.sample_load_ns());
  }
  if (cost.step_compute_ns() > kDurationNsMax) {
    v.Add("cost.step_compute_ns", "must be <= 10^15", cost.step_compute_ns());
  }
  if (cost.checkpoint_ns() > kDurationNsMax) {
    v.Add("cost.checkpoint_ns", "must be <= 10^15", cost.checkpoint_ns());
  }
  if (cost.collective_latency_ns() > 1'000'000'000'000ULL) {
    v.Add("cost.collective_latency_ns", "must be <= 10^12", cost.collective_latency_ns());
  }
  if (!ParseTorchVersion(scenario.comm().torch_version())) {
    v.Add("comm.torch_version",
          "must be a supported PyTorch release, MAJOR.MINOR[.PATCH] (" + SupportedTorchVersions() + ")",
          "\"" + scenario.comm().torch_version() + "\"");
  }
  if (scenario.comm().timeout_ms() < 1 || scenario.comm().timeout_ms() > 1'000'000'000ULL) {
    v.Add("comm.timeout_ms", "must be in [1, 10^9]", scenario.comm().timeout_ms());
  }
  if (scenario.comm().watchdog_poll_ms() > 3'600'000ULL) {
    v.Add("comm.watchdog_poll_ms", "must be <= 3600000", scenario.comm().watchdog_poll_ms());
  }
}

// Whether messages of `type` hold a string field, themselves or in a message below them (a frame's
// box columns hold none, so a dataset's millions of them are not walked). Memoised per type.
bool HoldsStrings(const google::protobuf::Descriptor* type, std::map<const google::protobuf::Descriptor*, bool>& memo) {
  const auto [at, inserted] = memo.emplace(type, false);  // a recursive type counts as none while open
  if (!inserted) return at->second;
  bool holds = false;
  for (int i = 0; i < type->field_count() && !holds; ++i) {
    const google::protobuf::FieldDescriptor* field = type->field(i);
    if (field->type() == google::protobuf::FieldDescriptor::TYPE_STRING) holds = true;
    if (field->type() == google::protobuf::FieldDescriptor::TYPE_MESSAGE)
      holds = HoldsStrings(field->message_type(), memo);
  }
  memo[type] = holds;
  return holds;
}

// Where CheckUtf8 is: a field of the message its parent link names, one item of it when repeated
// (index >= 0). The path is spelled only for a violation: a trainval scenario has 34 k frames.
struct FieldLink {
  const FieldLink* parent;
  const google::protobuf::FieldDescriptor* field;
  int index;
};
std::string PathOf(const FieldLink* link) {
  if (link == nullptr) return "";
  const std::string parent = PathOf(link->parent);
  const std::string where = (parent.empty() ? "" : parent + ".") + link->field->name();
  return link->index >= 0 ? Index(where, link->index) : where;
}

// Every string field below `message` must be valid UTF-8 (a binary .pb or a text file's escapes
// can hold any bytes; every JSON and text writer after this relies on it). At most 8 lines.
void CheckUtf8(Violations& v, const google::protobuf::Message& message, const FieldLink* parent,
               std::map<const google::protobuf::Descriptor*, bool>& memo, int& found) {
  using google::protobuf::FieldDescriptor;
  const google::protobuf::Reflection* reflection = message.GetReflection();
  const google::protobuf::Descriptor* type = message.GetDescriptor();
  std::string scratch;
  for (int i = 0; i < type->field_count() && found < 8; ++i) {
    const FieldDescriptor* field = type->field(i);
    const bool string = field->type() == FieldDescriptor::TYPE_STRING;
    if (!string && (field->type() != FieldDescriptor::TYPE_MESSAGE || !HoldsStrings(field->message_type(), memo))) {
      continue;
    }
    const int count =
        field->is_repeated() ? reflection->FieldSize(message, field) : (reflection->HasField(message, field) ? 1 : 0);
    for (int k = 0; k < count && found < 8; ++k) {
      const FieldLink at{parent, field, field->is_repeated() ? k : -1};
      if (!string) {
        CheckUtf8(v,
                  field->is_repeated() ? reflection->GetRepeatedMessage(message, field, k)
                                       : reflection->GetMessage(message, field),
                  &at, memo, found);
        continue;
      }
      const std::string& text = field->is_repeated()
                                    ? reflection->GetRepeatedStringReference(message, field, k, &scratch)
                                    : reflection->GetStringReference(message, field, &scratch);
      if (const std::optional<size_t> bad = FirstInvalidUtf8(text)) {
        v.AddPlain(PathOf(&at), "must be text (UTF-8): " + InvalidUtf8Detail(text, *bad));
        ++found;
      }
    }
  }
}

}  // namespace

std::vector<std::string> FindScenarioViolations(const Scenario& scenario) {
  Violations v;
  CheckDataset(v, scenario);
  CheckFilters(v, scenario);
  CheckGrouping(v, scenario);
  CheckSampler(v, scenario);
  CheckResample(v, scenario);
  CheckJob(v, scenario);
  CheckPlan(v, scenario.plan());
  if (scenario.has_pipeline()) {
    for (std::string& line : ValidatePipeline(scenario.pipeline())) v.AddLine(std::move(line));
  }
  CheckCostAndComm(v, scenario);
  CheckFaults(v, scenario);
  std::map<const google::protobuf::Descriptor*, bool> memo;
  int invalid_utf8 = 0;
  CheckUtf8(v, scenario, nullptr, memo, invalid_utf8);
  return v.Take();
}

void ValidateScenario(const Scenario& scenario, const std::string& display_name) {
  const auto violations = FindScenarioViolations(scenario);
  if (violations.empty()) return;
  std::string message;
  for (const auto& line : violations) {
    if (!message.empty()) message += "\n";
    message += display_name + ": " + line;
  }
  throw ScenarioError(message);
}

}  // namespace petrsim
