// Scenario generators for the property suite (rapidcheck), swarm-style: each case switches a
// random subset of features on (many sub-datasets, scenes, long scenes, empty frames, halves,
// scenes and sub-datasets, other groupings, wide worlds and batches, many workers, deep
// prefetch, long plans, periodic collectives, faults). rapidcheck shrinks towards features
// off and fewer, smaller parts.
#pragma once

#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <algorithm>
#include <chrono>

#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <string>

#include <google/protobuf/text_format.h>

#include "base/error.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "data/sequence_groups.h"
#include "scenario/scenario_validation.h"

namespace petrsim::props {

// What a generated scenario may contain besides its dataset and job shape.
struct GenOptions {
  enum class Samplers { kAny, kInfinite, kEpoch };
  Samplers samplers = Samplers::kAny;
  bool plans = true;    // custom or StreamPETR iteration plans (else the default plan)
  bool faults = false;  // planted faults: every Fault kind and conditional collectives
};

// The features a swarm case switches on (each with probability 1/2, so every case tests a
// different subset, which finds more distinct failures than all features on at once). Off is
// the small, plain choice, and rapidcheck shrinks a bool towards false, so counterexamples
// shrink towards small readable scenarios.
struct Swarm {
  bool subdatasets, many_scenes, long_scenes, empty_frames, empty_halves, empty_scenes, empty_subdataset, grouping,
      wide_world, wide_batch, many_workers, prefetch, policy_knobs, many_collectives, periodic;
};

inline Swarm GenSwarm() {
  const auto on = [] { return *rc::gen::arbitrary<bool>(); };
  return Swarm{on(), on(), on(), on(), on(), on(), on(), on(), on(), on(), on(), on(), on(), on(), on()};
}

// A plan written out collective by collective: 1-4 collectives per iteration (1-60 with
// many_collectives) of every op and dtype, some non-blocking, some on a second process group,
// and 0-3 periodic ones (with `periodic`). `conditional`: one collective is issued only when
// the rank's local batch has GT (the old StreamPETR code's planted desync).
inline IterationPlan GenCustomPlan(const Swarm& swarm, bool conditional) {
  IterationPlan plan;
  auto* custom = plan.mutable_custom();
  const auto fill = [](Collective* c, const std::string& name) {
    c->set_name(name);
    c->set_op(*rc::gen::element(Collective::allreduce, Collective::broadcast, Collective::reduce, Collective::allgather,
                                Collective::reduce_scatter, Collective::alltoall, Collective::barrier));
    c->set_numel(*rc::gen::inRange<uint64_t>(1, 1000));
    c->set_dtype(*rc::gen::element(Collective::float32, Collective::float16, Collective::int64));
    c->set_blocking(*rc::gen::weightedElement<bool>({{3, true}, {1, false}}));
    if (*rc::gen::weightedElement<bool>({{1, true}, {5, false}})) c->set_process_group("pg1");
  };
  const int startup = *rc::gen::inRange(0, 3);
  for (int i = 0; i < startup; ++i) fill(custom->add_startup(), "startup " + std::to_string(i));
  const int steps = swarm.many_collectives ? *rc::gen::inRange(1, 61) : *rc::gen::inRange(1, 5);
  for (int i = 0; i < steps; ++i) fill(custom->add_per_iteration(), "step " + std::to_string(i));
  if (conditional) {
    const int i = *rc::gen::inRange(0, steps);
    custom->mutable_per_iteration(i)->set_only_when_local_batch_has_gt(true);
  }
  const int periodic = swarm.periodic ? *rc::gen::inRange(1, 4) : 0;
  for (int i = 0; i < periodic; ++i) {
    auto* p = custom->add_periodic();
    fill(p->mutable_collective(), "periodic " + std::to_string(i));
    p->set_every_iterations(*rc::gen::inRange<uint32_t>(1, 11));
  }
  if (*rc::gen::weightedElement<bool>({{1, true}, {4, false}})) {
    custom->set_checkpoint_interval(*rc::gen::inRange<uint32_t>(1, 20));
  }
  return plan;
}

// A generated scenario (swarm-style): 1 sub-dataset (1-4 with `subdatasets`, one of them
// possibly all empty) of 1-5 scenes (1-60) of 1-9 frames (1-45), GT counts with empty frames,
// empty second halves and fully empty scenes switched on at random; seq_split_num 2 (1-4,
// 'all' or seq_mode off with `grouping`); every resample policy; the three samplers; world
// size 1-4 (1-64), samples per GPU 1-2 (1-4), workers 0-2 (0-8), prefetch 1-2 (1-4); 1-59
// iterations; a default, StreamPETR or custom plan; and, with options.faults, 0-3 faults of
// every kind. The infinite sampler's world size is chosen so that its assertion
// groups_num >= W * B holds (when the dataset has a group at all).
inline rc::Gen<Scenario> GenScenario(GenOptions options = {}) {
  return rc::gen::exec([options] {
    const Swarm swarm = GenSwarm();
    Scenario scenario;
    // Grouping first: seq_split_num s needs scenes that cut into exactly s chunks.
    uint32_t split = 2;
    if (swarm.grouping) {
      const int grouping = *rc::gen::inRange(0, 6);
      if (grouping <= 3) {
        split = static_cast<uint32_t>(grouping + 1);
        scenario.mutable_grouping()->set_seq_split_num(split);
      } else if (grouping == 4) {
        scenario.mutable_grouping()->set_seq_split_all(true);
        split = 1;
      } else {
        scenario.mutable_grouping()->set_seq_mode(false);
        split = 1;
      }
    }
    const int subdatasets = swarm.subdatasets ? *rc::gen::inRange(1, 5) : 1;
    const int empty_subdataset = swarm.empty_subdataset ? *rc::gen::inRange(0, subdatasets) : -1;
    for (int s = 0; s < subdatasets; ++s) {
      auto* sub = scenario.mutable_dataset()->add_subdatasets();
      std::string name = "s";  // (not "s" + to_string: GCC 12 warns falsely, -Wrestrict)
      name += std::to_string(s);
      sub->set_name(name);
      const int scenes = swarm.many_scenes ? *rc::gen::inRange(1, 61) : *rc::gen::inRange(1, 6);
      for (int i = 0; i < scenes; ++i) {
        auto* scene = sub->mutable_explicit_()->add_scenes();
        uint32_t frames =
            static_cast<uint32_t>(swarm.long_scenes ? *rc::gen::inRange(1, 46) : *rc::gen::inRange(1, 10));
        while (SceneChunkLengths(frames, split).size() != split) ++frames;
        const bool empty_scene =
            s == empty_subdataset || (swarm.empty_scenes && *rc::gen::weightedElement<bool>({{1, true}, {4, false}}));
        const bool empty_half = swarm.empty_halves && *rc::gen::weightedElement<bool>({{1, true}, {3, false}});
        for (uint32_t f = 0; f < frames; ++f) {
          const bool in_empty_half = empty_half && f >= (frames + 1) / 2;
          uint32_t gt = 0;
          if (!empty_scene && !in_empty_half) {
            gt = swarm.empty_frames ? *rc::gen::weightedElement<uint32_t>({{1, 0}, {3, 1}, {1, 5}})
                                    : *rc::gen::element<uint32_t>(1, 5);
          }
          scene->add_gt_counts(gt);
        }
      }
    }
    const auto policy = *rc::gen::element(Resample::in_group, Resample::global, Resample::next_valid_in_group,
                                          Resample::drop_empty_groups, Resample::bounded, Resample::keep_empty,
                                          Resample::in_subdataset);
    scenario.mutable_resample()->set_policy(policy);
    if (policy == Resample::keep_empty) scenario.mutable_filters()->set_filter_empty_gt(false);
    if (swarm.policy_knobs) {
      if (policy == Resample::bounded) {
        scenario.mutable_resample()->set_attempts_max(*rc::gen::inRange<uint64_t>(1, 30));
      }
      scenario.mutable_resample()->set_pipeline_draws_per_attempt(*rc::gen::inRange<uint32_t>(0, 3));
    }

    Sampler::Kind kind = Sampler::infinite_group_each_sample_in_batch;
    if (options.samplers == GenOptions::Samplers::kEpoch ||
        (options.samplers == GenOptions::Samplers::kAny && *rc::gen::weightedElement<bool>({{1, true}, {2, false}}))) {
      kind = *rc::gen::element(Sampler::distributed_group, Sampler::distributed);
    }
    scenario.mutable_sampler()->set_kind(kind);
    if (kind == Sampler::distributed) {
      scenario.mutable_sampler()->set_shuffle(*rc::gen::arbitrary<bool>());
      scenario.mutable_sampler()->set_drop_last(*rc::gen::arbitrary<bool>());
    }

    auto* job = scenario.mutable_job();
    const uint32_t batch = swarm.wide_batch ? *rc::gen::inRange<uint32_t>(1, 5) : *rc::gen::inRange<uint32_t>(1, 3);
    uint32_t world_max = swarm.wide_world ? 64 : 4;
    if (kind == Sampler::infinite_group_each_sample_in_batch) {
      // Respect the sampler's assertion when the dataset allows it (it is built twice; the
      // dataset is small).
      Scenario probe = scenario;
      probe.mutable_job()->set_world_size(1);
      probe.mutable_job()->set_samples_per_gpu(1);
      try {
        const Dataset dataset = BuildDataset(probe, "generated");
        world_max =
            std::min<uint32_t>(world_max, std::max<uint32_t>(1, static_cast<uint32_t>(dataset.groups_num()) / batch));
      } catch (const ScenarioError&) {
      }
    }
    job->set_world_size(*rc::gen::inRange<uint32_t>(1, world_max + 1));
    job->set_samples_per_gpu(batch);
    job->set_workers_per_gpu(swarm.many_workers ? *rc::gen::inRange<uint32_t>(0, 9)
                                                : *rc::gen::inRange<uint32_t>(0, 3));
    if (job->workers_per_gpu() > 0) {  // torch rejects prefetch_factor without workers
      job->set_prefetch_factor(swarm.prefetch ? *rc::gen::inRange<uint32_t>(1, 5) : *rc::gen::inRange<uint32_t>(1, 3));
    }
    job->set_iterations(*rc::gen::inRange<uint64_t>(1, 60));
    job->set_seed(*rc::gen::inRange<uint32_t>(0, 1u << 31));

    bool conditional = false;
    int fault_count = 0;
    if (options.faults) {
      fault_count = *rc::gen::inRange(0, 4);
      conditional = *rc::gen::weightedElement<bool>({{1, true}, {5, false}});
    }
    if (options.plans) {
      const int plan = *rc::gen::inRange(0, 3);
      if (plan == 1) {
        auto* p = scenario.mutable_plan()->mutable_streampetr();
        p->set_decoder_layers(*rc::gen::inRange<uint32_t>(1, 7));
        p->set_log_interval(*rc::gen::inRange<uint32_t>(0, 10));
        p->set_checkpoint_interval(*rc::gen::inRange<uint32_t>(0, 20));
        p->set_old_code_skips_dn_without_gt(conditional);
      } else if (plan == 2 || conditional) {
        *scenario.mutable_plan() = GenCustomPlan(swarm, conditional);
      }
    } else if (conditional) {
      scenario.mutable_plan()->mutable_streampetr()->set_old_code_skips_dn_without_gt(true);
    }

    const uint32_t world = job->world_size();
    const uint32_t workers = std::max<uint32_t>(1, job->workers_per_gpu());
    // An infinite sampler never runs out in a job sized by iterations: no uneven_batches there (validation refuses it).
    const int kinds = scenario.sampler().kind() == Sampler::infinite_group_each_sample_in_batch ? 5 : 6;
    for (int i = 0; i < fault_count; ++i) {
      Fault* fault = scenario.add_faults();
      const uint32_t rank = *rc::gen::inRange<uint32_t>(0, world);
      const uint64_t at_ns = *rc::gen::inRange<uint64_t>(0, 30) * 1'000'000'000ULL;
      switch (*rc::gen::inRange(0, kinds)) {
        case 0:
          fault->mutable_dead_rank()->set_rank(rank);
          fault->mutable_dead_rank()->set_at_ns(at_ns);
          break;
        case 1:
          fault->mutable_dead_worker()->set_rank(rank);
          fault->mutable_dead_worker()->set_worker(*rc::gen::inRange<uint32_t>(0, workers));
          fault->mutable_dead_worker()->set_at_ns(at_ns);
          break;
        case 2:
          fault->mutable_straggler()->set_rank(rank);
          fault->mutable_straggler()->set_iteration(*rc::gen::inRange<uint64_t>(0, 60));
          fault->mutable_straggler()->set_delay_ns(*rc::gen::element<uint64_t>(1'000'000'000ULL, 3'000'000'000'000ULL));
          break;
        case 3:
          fault->mutable_slow_rank()->set_rank(rank);
          fault->mutable_slow_rank()->set_factor(*rc::gen::element(2.0, 5000.0));
          break;
        case 4:
          fault->mutable_slow_worker()->set_rank(rank);
          fault->mutable_slow_worker()->set_worker(*rc::gen::inRange<uint32_t>(0, workers));
          fault->mutable_slow_worker()->set_factor(*rc::gen::element(2.0, 50000.0));
          break;
        default:
          fault->mutable_uneven_batches()->set_rank(rank);
          fault->mutable_uneven_batches()->set_batches_fewer(*rc::gen::inRange<uint64_t>(1, 4));
          break;
      }
    }
    return scenario;
  });
}

// The ranks a planted fault names.
inline std::set<uint32_t> PlantedRanks(const Scenario& scenario) {
  std::set<uint32_t> ranks;
  for (const Fault& fault : scenario.faults()) {
    switch (fault.kind_case()) {
      case Fault::kSlowRank:
        ranks.insert(fault.slow_rank().rank());
        break;
      case Fault::kSlowWorker:
        ranks.insert(fault.slow_worker().rank());
        break;
      case Fault::kDeadWorker:
        ranks.insert(fault.dead_worker().rank());
        break;
      case Fault::kDeadRank:
        ranks.insert(fault.dead_rank().rank());
        break;
      case Fault::kStraggler:
        ranks.insert(fault.straggler().rank());
        break;
      case Fault::kUnevenBatches:
        ranks.insert(fault.uneven_batches().rank());
        break;
      case Fault::KIND_NOT_SET:
        break;
    }
  }
  return ranks;
}

// Builds the dataset, or nothing for a case to discard (invalid, drop_empty_groups left
// nothing to train on, or the sampler cannot be built).
inline std::optional<Dataset> TryBuild(const Scenario& scenario) {
  if (!FindScenarioViolations(scenario).empty()) return std::nullopt;
  try {
    Dataset dataset = BuildDataset(scenario, "generated");
    CheckSamplerConstructible(scenario, dataset, "generated");
    return dataset;
  } catch (const ScenarioError&) {
    return std::nullopt;
  }
}

// Construct it after the case's last RC_PRE: a discarded case unwinds with an exception too.
// Writes the case as a readable .pbtxt when the property fails on it (the destructor runs while
// rapidcheck's failure exception unwinds). rapidcheck re-runs the property on ever smaller
// failing cases, so the file left behind is the shrunk counterexample. Directory:
// $PETRSIM_COUNTEREXAMPLES, else props_counterexamples/ in the working directory.
class CounterexampleOnFailure {
 public:
  CounterexampleOnFailure(const Scenario& scenario, std::string property)
      : scenario_(scenario), property_(std::move(property)), exceptions_(std::uncaught_exceptions()) {}
  ~CounterexampleOnFailure() {
    if (std::uncaught_exceptions() <= exceptions_) return;
    const char* env = std::getenv("PETRSIM_COUNTEREXAMPLES");
    const std::filesystem::path dir = env != nullptr ? env : "props_counterexamples";
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    const std::filesystem::path path = dir / (property_ + ".pbtxt");
    std::string text;
    google::protobuf::TextFormat::PrintToString(scenario_, &text);
    std::ofstream out(path);
    out << "# Counterexample of property " << property_
        << " (rapidcheck shrinks it: the last one written is the smallest).\n"
        << "# Run: petrsim " << path.string() << "\n"
        << text;
    // Printed once per property (each shrinking step rewrites the file).
    static std::set<std::string> announced;
    if (announced.insert(property_).second) {
      std::cerr << "petrsim props: counterexample of " << property_ << " (shrunk) written to "
                << std::filesystem::absolute(path).string() << "\n";
    }
  }

 private:
  const Scenario& scenario_;
  std::string property_;
  int exceptions_;
};

// Cases per second of each property, printed when its test ends (the budget asks for
// the figure in the log). Every property body calls CountCase() once per generated case,
// discarded ones included.
class CaseRate : public ::testing::EmptyTestEventListener {
 public:
  static uint64_t& cases() {
    static uint64_t count = 0;
    return count;
  }
  void OnTestStart(const ::testing::TestInfo&) override {
    cases() = 0;
    start_ = std::chrono::steady_clock::now();
  }
  void OnTestEnd(const ::testing::TestInfo& info) override {
    if (cases() == 0) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::cout << "petrsim props: " << info.test_suite_name() << "." << info.name() << ": " << cases() << " cases in "
              << seconds << " s = " << static_cast<uint64_t>(cases() / std::max(seconds, 1e-9)) << " cases/s\n";
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

inline void CountCase() { ++CaseRate::cases(); }

// Registers the listener once per test program (call from a static initializer).
inline bool RegisterCaseRate() {
  ::testing::UnitTest::GetInstance()->listeners().Append(new CaseRate);
  return true;
}

}  // namespace petrsim::props
