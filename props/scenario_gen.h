// Scenario generators for the property suite (rapidcheck). Small explicit datasets (GT counts
// per frame) with empty frames, half-scenes, scenes and sub-datasets switched on at random,
// every resample policy, small job shapes and small custom plans, so that a simulated case
// costs well under a millisecond. rapidcheck shrinks towards fewer, smaller parts.
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
#include <string>

#include <google/protobuf/text_format.h>

#include "model/dataset.h"
#include "model/error.h"
#include "model/scenario_validation.h"

namespace petrsim::props {

// A small explicit scenario: 1-2 sub-datasets of 1-10 scenes of 2-9 frames, GT counts mostly
// non-zero with empty runs, and a job shape the infinite sampler accepts.
inline rc::Gen<Scenario> GenScenario() {
  return rc::gen::exec([] {
    Scenario scenario;
    const int subdatasets = *rc::gen::inRange(1, 3);
    for (int s = 0; s < subdatasets; ++s) {
      auto* sub = scenario.mutable_dataset()->add_subdatasets();
      std::string name = "s";  // (not "s" + to_string: GCC 12 warns falsely, -Wrestrict)
      name += std::to_string(s);
      sub->set_name(name);
      const int scenes = *rc::gen::inRange(1, 11);
      for (int i = 0; i < scenes; ++i) {
        auto* scene = sub->mutable_explicit_()->add_scenes();
        const int frames = *rc::gen::inRange(2, 10);
        const bool empty_scene = *rc::gen::weightedElement<bool>({{1, true}, {4, false}});
        const bool empty_half = *rc::gen::weightedElement<bool>({{1, true}, {5, false}});
        for (int f = 0; f < frames; ++f) {
          const bool in_empty_half = empty_half && f >= frames / 2;
          const uint32_t gt = empty_scene || in_empty_half
                                  ? 0
                                  : *rc::gen::weightedElement<uint32_t>({{1, 0}, {3, 1}, {1, 5}});
          scene->add_gt_counts(gt);
        }
      }
    }
    scenario.mutable_resample()->set_policy(*rc::gen::element(
        Resample::in_group, Resample::global, Resample::next_valid_in_group,
        Resample::drop_empty_groups, Resample::keep_empty, Resample::in_subdataset));
    if (scenario.resample().policy() == Resample::keep_empty) {
      scenario.mutable_filters()->set_filter_empty_gt(false);
    }
    scenario.mutable_job()->set_world_size(*rc::gen::inRange(1, 4));
    scenario.mutable_job()->set_samples_per_gpu(*rc::gen::inRange(1, 3));
    scenario.mutable_job()->set_workers_per_gpu(*rc::gen::inRange(0, 4));
    if (scenario.job().workers_per_gpu() > 0) {  // torch rejects prefetch_factor without workers
      scenario.mutable_job()->set_prefetch_factor(*rc::gen::inRange(1, 4));
    }
    scenario.mutable_job()->set_iterations(*rc::gen::inRange(1, 60));
    scenario.mutable_job()->set_seed(*rc::gen::inRange(0, 1000));
    return scenario;
  });
}

// A small custom plan: 1-4 collectives per iteration (some non-blocking), at most one periodic.
inline rc::Gen<IterationPlan> GenPlan() {
  return rc::gen::exec([] {
    IterationPlan plan;
    auto* custom = plan.mutable_custom();
    const int steps = *rc::gen::inRange(1, 5);
    for (int i = 0; i < steps; ++i) {
      auto* c = custom->add_per_iteration();
      c->set_name("step " + std::to_string(i));
      c->set_op(*rc::gen::element(Collective::allreduce, Collective::broadcast,
                                  Collective::allgather));
      c->set_numel(*rc::gen::inRange<uint64_t>(1, 1000));
      c->set_blocking(*rc::gen::weightedElement<bool>({{3, true}, {1, false}}));
    }
    if (*rc::gen::weightedElement<bool>({{1, true}, {2, false}})) {
      auto* p = custom->add_periodic();
      p->mutable_collective()->set_name("periodic");
      p->set_every_iterations(*rc::gen::inRange<uint32_t>(1, 10));
    }
    return plan;
  });
}

// Builds the dataset, or nothing for a case to discard (invalid, or drop_empty_groups left
// nothing to train on).
inline std::optional<Dataset> TryBuild(const Scenario& scenario) {
  if (!FindScenarioViolations(scenario).empty()) return std::nullopt;
  try {
    return BuildDataset(scenario, "generated");
  } catch (const ScenarioError&) {
    return std::nullopt;
  }
}

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
    std::cerr << "petrsim props: counterexample of " << property_ << " written to "
              << std::filesystem::absolute(path).string() << "\n";
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
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    std::cout << "petrsim props: " << info.test_suite_name() << "." << info.name() << ": "
              << cases() << " cases in " << seconds << " s = "
              << static_cast<uint64_t>(cases() / std::max(seconds, 1e-9)) << " cases/s\n";
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
