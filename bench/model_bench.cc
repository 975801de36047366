// Speed of the model layer (issue 2 goals): scenario load + dataset build, sampler streams,
// and the whole pre-flight in-process. Whole-process timing of `petrsim check` is
// bench/check_process.sh. Run: build/bench/model_bench
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>

#include "check/preflight.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "scenario/scenario_loader.h"

namespace petrsim {
namespace {

const std::string& SeedScenarioText() {
  static const std::string text = [] {
    std::ifstream file(std::string(PETRSIM_SOURCE_DIR) + "/scenarios/streampetr_trainval_hang.pbtxt");
    std::ostringstream out;
    out << file.rdbuf();
    return out.str();
  }();
  return text;
}

// Parse + validate + dataset build of the seed scenario (34,149 frames, synthetic boxes).
void BM_LoadAndBuildSeedScenario(benchmark::State& state) {
  int64_t frames = 0;
  for (auto _ : state) {
    const Scenario scenario = LoadScenario(SeedScenarioText(), "seed");
    const Dataset dataset = BuildDataset(scenario, "seed");
    frames = dataset.size();
    benchmark::DoNotOptimize(dataset.frames().data());
  }
  state.counters["frames"] = static_cast<double>(frames);
}
BENCHMARK(BM_LoadAndBuildSeedScenario)->Unit(benchmark::kMillisecond);

// The whole `check` analysis in-process (load, build, graph, first hit).
void BM_CheckSeedScenario(benchmark::State& state) {
  for (auto _ : state) {
    const Scenario scenario = LoadScenario(SeedScenarioText(), "seed");
    const Dataset dataset = BuildDataset(scenario, "seed");
    const CheckReport report = RunPreflight(scenario, dataset);
    benchmark::DoNotOptimize(report.first_hit);
  }
}
BENCHMARK(BM_CheckSeedScenario)->Unit(benchmark::kMillisecond);

// Index stream generation of all 8 ranks x 2 slots, rank after rank, in blocks of
// `block` iterations. Items = indices generated.
template <Sampler::Kind kKind>
void BM_SamplerStream(benchmark::State& state) {
  Scenario scenario = LoadScenario(SeedScenarioText(), "seed");
  scenario.mutable_sampler()->set_kind(kKind);
  scenario.mutable_job()->clear_iterations_per_epoch();
  const Dataset dataset = BuildDataset(scenario, "seed");
  const uint32_t world = scenario.job().world_size();
  const uint32_t batch = scenario.job().samples_per_gpu();
  const uint64_t block = 1024;
  // Ranks share the job-wide state and advance together, as in the simulator.
  const SamplerFactory factory(scenario, dataset);
  std::vector<std::unique_ptr<RankSampler>> samplers;
  for (uint32_t r = 0; r < world; ++r) samplers.push_back(factory.ForRank(r));
  std::vector<SlotDraw> draws(block * batch);
  int64_t indices = 0;
  for (auto _ : state) {
    for (auto& sampler : samplers) {
      sampler->NextBatches(draws);
      benchmark::DoNotOptimize(draws.data());
      indices += static_cast<int64_t>(draws.size());
    }
  }
  state.SetItemsProcessed(indices);
}
BENCHMARK(BM_SamplerStream<Sampler::infinite_group_each_sample_in_batch>)
    ->Name("BM_SamplerStream/infinite_group_each_sample_in_batch");
BENCHMARK(BM_SamplerStream<Sampler::distributed_group>)->Name("BM_SamplerStream/distributed_group");
BENCHMARK(BM_SamplerStream<Sampler::distributed>)->Name("BM_SamplerStream/distributed");

}  // namespace
}  // namespace petrsim

BENCHMARK_MAIN();
