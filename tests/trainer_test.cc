// The real backend's training loop (real/trainer.h) on 2 ranks as threads over c10d Gloo and a
// TCPStore on loopback: the ranks stay in sync (equal parameter hashes) and the loss halves over
// 300 iterations; with an all-empty group and in_group, the sampler watchdog stops the rank
// `check` names with the livelock in user terms, long before the collective timeout; and the
// real run issues the same collectives and trains on the same samples as the simulator's run of
// the same scenario (sim/real parity), with the scenario's sizes (the default) and the model's.
#include "real/trainer.h"

#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <numeric>
#include <thread>
#include <tuple>

#include "check/preflight.h"
#include "plan/iteration_plan.h"
#include "plan/rank_program.h"
#include "scenario/scenario_loader.h"
#include "sim/simulator.h"
#include "trace/directory_writer.h"
#include "trace/reader.h"
#include "trace/trace_event.h"

namespace petrsim::real {
namespace {

struct TrainRun {
  std::vector<TrainResult> results;
  std::vector<std::exception_ptr> errors;
  double seconds = 0;
};

TrainRun TrainTwoRanks(const Scenario& scenario, uint64_t iterations, int64_t timeout_ms, PlanSizes sizes,
                       const std::string& trace_dir = "", ModelConfig model = {}) {
  const Dataset dataset = BuildDataset(scenario, "scenario");
  c10d::TCPStoreOptions server;
  server.port = 0;
  server.isServer = true;
  server.numWorkers = 2;
  server.waitWorkers = false;
  server.timeout = std::chrono::milliseconds(timeout_ms);
  auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", server);
  TrainRun run;
  run.results.resize(2);
  run.errors.resize(2);
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> ranks;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        TrainOptions options;
        options.rank = rank;
        options.world_size = 2;
        options.master_port = store->getPort();
        options.serve_store = false;
        options.iterations = iterations;
        options.timeout_ms = timeout_ms;
        options.model = model;
        options.plan_sizes = sizes;
        if (!trace_dir.empty()) options.trace_path = RankTracePath(trace_dir, rank);
        run.results[rank] = TrainRank(scenario, dataset, options);
      } catch (...) {
        run.errors[rank] = std::current_exception();
      }
    });
  }
  for (auto& thread : ranks) thread.join();
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

// The training check: a small synthetic scenario, 2 ranks, 300 CPU iterations: the loss mmdet
// logs (the all-reduced mean over the ranks, i.e. per GT box of the global batch) falls to less
// than half (mean of the first 20 vs the last 20 iterations) and the ranks' parameters stay
// identical. With the reference's optimiser (AdamW, warmup, cosine annealing, gradients clipped
// to 35) at lr 1e-3 the ratio measured 0.24-0.27 on the default, AVX2 and AVX-512 kernels for
// this seed and 0.24-0.40 over seeds 0-4; ctest also runs this test with ATEN_CPU_CAPABILITY
// forced (tests/CMakeLists.txt), so a result that depends on the kernels shows up anywhere.
// Before: a constant lr 3e-3 without clipping, judged on rank 0's own loss (normalised by the
// global mean box count, so it swings with the local share of boxes), gave 0.40, 0.52, 0.55 and
// 0.68 on four kernel paths: a bounce around a plateau near half, not learning.
TEST(Trainer, TwoRanksStayInSyncAndTheLossHalvesIn300Iterations) {
  torch::set_num_threads(1);
  const Scenario scenario = LoadScenarioFile(PETRSIM_SOURCE_DIR "/tests/data/real/train_small.pbtxt");
  ModelConfig model;
  model.channels = 64;
  model.ffn_channels = 128;
  // The plan rewritten for the small model: 300 iterations of the scenario-sized plan would
  // all-reduce 37 M padded elements each, which this check does not need.
  const TrainRun run = TrainTwoRanks(scenario, 300, 60000, PlanSizes::kModel, "", model);
  for (const auto& error : run.errors) {
    if (error) std::rethrow_exception(error);
  }
  EXPECT_EQ(run.results[0].parameters_hash, run.results[1].parameters_hash);
  // Both ranks log the same all-reduced value, and stepped with the schedule's rates.
  EXPECT_EQ(run.results[0].logged_losses, run.results[1].logged_losses);
  ASSERT_EQ(run.results[0].learning_rates.size(), 300u);
  for (uint64_t i = 0; i < 300; ++i) {
    EXPECT_EQ(run.results[0].learning_rates[i], LearningRateAt(TrainOptions{}, i, 300)) << i;
  }
  const auto& losses = run.results[0].logged_losses;
  ASSERT_EQ(losses.size(), 300u);
  const double first = std::accumulate(losses.begin(), losses.begin() + 20, 0.0) / 20;
  const double last = std::accumulate(losses.end() - 20, losses.end(), 0.0) / 20;
  const char* capability = std::getenv("ATEN_CPU_CAPABILITY");
  std::cout << "loss: mean of the first 20 iterations " << first << ", of the last 20 " << last << " (ratio "
            << last / first << "; ATEN_CPU_CAPABILITY=" << (capability ? capability : "unset") << "; " << run.seconds
            << " s for 300 iterations on 2 ranks; " << MakeRealJob(scenario, model, PlanSizes::kModel).parameters
            << " parameters)\n";
  EXPECT_LT(last, 0.5 * first) << "first 20: " << first << ", last 20: " << last;
}

// The schedule is mmcv's CosineAnnealingLrUpdaterHook with a linear warmup, as StreamPETR's
// configs set it (warmup_ratio 1/3, min_lr_ratio 1e-3), computed by hand here.
TEST(Trainer, TheLearningRateWarmsUpLinearlyThenFollowsTheCosine) {
  TrainOptions options;
  options.learning_rate = 1e-3;
  options.warmup_iterations = 10;
  const auto cosine = [](double progress) { return 1e-6 + 0.5 * (1e-3 - 1e-6) * (1 + std::cos(M_PI * progress)); };
  EXPECT_NEAR(LearningRateAt(options, 0, 100), cosine(0) / 3, 1e-15);
  EXPECT_NEAR(LearningRateAt(options, 5, 100), cosine(0.05) * (1 - 0.5 * (2.0 / 3)), 1e-15);
  EXPECT_NEAR(LearningRateAt(options, 10, 100), cosine(0.1), 1e-15);
  EXPECT_NEAR(LearningRateAt(options, 50, 100), cosine(0.5), 1e-15);
  EXPECT_NEAR(LearningRateAt(options, 99, 100), cosine(0.99), 1e-15);
  for (uint64_t i = 1; i < 100; ++i) {
    if (i < 10) {
      EXPECT_GT(LearningRateAt(options, i, 100), LearningRateAt(options, i - 1, 100)) << i;
    }
    if (i > 10) {
      EXPECT_LT(LearningRateAt(options, i, 100), LearningRateAt(options, i - 1, 100)) << i;
    }
  }
  options.warmup_iterations = 0;
  EXPECT_NEAR(LearningRateAt(options, 0, 100), 1e-3, 1e-15);
}

// What a trace says a rank did, in the terms both backends share.
struct RankStory {
  std::map<std::pair<std::string, uint64_t>, std::tuple<int, uint64_t, int, std::string, uint64_t>> collectives;
  std::map<std::pair<uint64_t, uint32_t>, std::pair<int64_t, int64_t>> draws;  // (batch, slot) -> index, group
  std::map<std::pair<uint64_t, uint32_t>, std::tuple<int64_t, int64_t, int32_t>> loads;  // -> index, final, worker
};

RankStory ReadStory(const std::string& path, uint64_t iterations) {
  RankStory story;
  for (const TraceEvent& e : ReadRankTrace(path).events) {
    if (e.kind() == TraceEventKind::collective) {
      EXPECT_TRUE(e.completed()) << path << ": " << e.ShortDebugString();
      story.collectives[{e.process_group(), e.seq()}] = {e.op(), e.numel(), e.dtype(), e.text(), e.iteration()};
    } else if (e.kind() == TraceEventKind::sampler_draw && e.iteration() < iterations) {
      story.draws[{e.iteration(), e.slot()}] = {e.index(), e.group()};
    } else if (e.kind() == TraceEventKind::load && e.iteration() < iterations) {
      story.loads[{e.iteration(), e.slot()}] = {e.index(), e.final_index(), e.worker()};
    }
  }
  return story;
}

// Sim/real parity with the model-sized plan (--plan-sizes model): `global` on the tiny scenario
// (2 DataLoader workers, resampling as the frames with no GT require): every rank's collectives
// (process group, sequence number, op, size, dtype, plan step, iteration) and its samples (the
// sampler's index per batch and slot, the index each getitem finally returned, the worker that
// loaded it) are the simulator's for the scenario the real job runs (RealJob::scenario, the plan
// rewritten for the real model). The model is wide enough for its gradients to span two DDP
// buckets (the plan's first bucket holds 1 MiB).
TEST(Trainer, TheRealRunIssuesTheSimulatorsCollectivesOnTheSimulatorsSamples) {
  torch::set_num_threads(1);
  Scenario scenario = LoadScenarioFile(PETRSIM_SOURCE_DIR "/scenarios/tiny.pbtxt");
  scenario.mutable_comm()->set_backend(Comm::gloo);  // the tiny scenario's default, NCCL, is not built here
  scenario.mutable_resample()->set_policy(Resample::global);
  const uint64_t iterations = 12;
  scenario.mutable_job()->set_iterations(iterations);
  const std::string dir = testing::TempDir() + "/petrsim_parity";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/real");
  ModelConfig model;
  model.channels = 80;
  const TrainRun run = TrainTwoRanks(scenario, iterations, 60000, PlanSizes::kModel, dir + "/real", model);
  for (const auto& error : run.errors) {
    if (error) std::rethrow_exception(error);
  }
  EXPECT_EQ(run.results[0].gradient_buckets, 2u);
  EXPECT_EQ(run.results[0].parameters_hash, run.results[1].parameters_hash);
  const RealJob job = MakeRealJob(scenario, model, PlanSizes::kModel);
  const Dataset dataset = BuildDataset(job.scenario, "tiny");
  {
    TraceDirectoryWriter writer(dir + "/sim", job.scenario, "", 2, "sim", "test");
    sim::SimOptions options;
    options.trace = &writer;
    const sim::SimResult result = sim::Simulate(job.scenario, dataset, options);
    ASSERT_EQ(result.outcome, Outcome::kCompleted);
    writer.Finish();
  }
  uint64_t resampled = 0;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    const RankStory real = ReadStory(RankTracePath(dir + "/real", rank), iterations);
    const RankStory simulated = ReadStory(RankTracePath(dir + "/sim", rank), iterations);
    EXPECT_EQ(real.collectives.size(), ListCollectives(ExpandPlan(job.scenario), rank, iterations).size())
        << "rank " << rank;
    EXPECT_EQ(real.collectives, simulated.collectives) << "rank " << rank;
    EXPECT_EQ(real.draws.size(), iterations) << "rank " << rank;
    EXPECT_EQ(real.draws, simulated.draws) << "rank " << rank;
    EXPECT_EQ(real.loads.size(), iterations) << "rank " << rank;
    EXPECT_EQ(real.loads, simulated.loads) << "rank " << rank;
    for (const auto& [key, load] : real.loads) resampled += std::get<0>(load) != std::get<1>(load);
  }
  EXPECT_GT(resampled, 0u) << "the comparison should cover getitems that resampled";
}

// The default, --plan-sizes scenario: the real run issues the scenario's plan as the simulator
// runs it, unchanged (the StreamPETR plan with its reference DDP model: a 38.7 M-float module
// state broadcast at construction, 37.2 M gradient elements in 7 buckets per iteration), so its
// collectives (sequence number, op, numel, dtype, plan step, iteration) are those of the
// simulator's run of the scenario as given, over iterations 0 (the construction-order buckets),
// 1 (the rebuild), 2 and 3 (the steady layout). The real gradients are packed into the buckets
// and padded with zeros, which changes nothing: both ranks end with the parameters a
// model-sized run of the same iterations ends with.
TEST(Trainer, TheScenarioSizedRunIssuesTheCollectivesTheSimulatorIssuesOnTheScenarioAsGiven) {
  torch::set_num_threads(1);
  Scenario scenario = LoadScenarioFile(PETRSIM_SOURCE_DIR "/scenarios/tiny.pbtxt");
  scenario.mutable_comm()->set_backend(Comm::gloo);
  scenario.mutable_resample()->set_policy(Resample::global);
  const uint64_t iterations = 4;
  scenario.mutable_job()->set_iterations(iterations);
  const RealJob job = MakeRealJob(scenario, ModelConfig{}, PlanSizes::kScenario);
  EXPECT_EQ(job.scenario.SerializeAsString(), scenario.SerializeAsString()) << "the plan is the scenario's, unchanged";
  const ExpandedPlan plan = ExpandPlan(scenario);
  uint64_t bucket_elements = 0, broadcast = 0;
  for (const Collective& c : plan.per_iteration) {
    if (c.name().starts_with("DDP gradient bucket")) bucket_elements += c.numel();
  }
  for (const Collective& c : plan.startup) {
    if (c.name() == "DDP __init__: module state broadcast 0 (float32)") broadcast = c.numel();
  }
  EXPECT_GT(bucket_elements, 37'000'000u);
  EXPECT_EQ(broadcast, 38'659'125u);
  EXPECT_LT(job.parameters, bucket_elements / 10) << "the real model is the small one, padded";

  const std::string dir = testing::TempDir() + "/petrsim_parity_scenario";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/real");
  const TrainRun run = TrainTwoRanks(scenario, iterations, 60000, PlanSizes::kScenario, dir + "/real");
  for (const auto& error : run.errors) {
    if (error) std::rethrow_exception(error);
  }
  EXPECT_EQ(run.results[0].parameters_hash, run.results[1].parameters_hash);
  const TrainRun model_sized = TrainTwoRanks(scenario, iterations, 60000, PlanSizes::kModel);
  for (const auto& error : model_sized.errors) {
    if (error) std::rethrow_exception(error);
  }
  EXPECT_EQ(run.results[0].parameters_hash, model_sized.results[0].parameters_hash)
      << "the padding must not change what the ranks learn";
  EXPECT_EQ(run.results[0].logged_losses, model_sized.results[0].logged_losses);

  const Dataset dataset = BuildDataset(scenario, "tiny");
  {
    TraceDirectoryWriter writer(dir + "/sim", scenario, "", 2, "sim", "test");
    sim::SimOptions options;
    options.trace = &writer;
    const sim::SimResult result = sim::Simulate(scenario, dataset, options);
    ASSERT_EQ(result.outcome, Outcome::kCompleted);
    writer.Finish();
  }
  for (uint32_t rank = 0; rank < 2; ++rank) {
    const RankStory real = ReadStory(RankTracePath(dir + "/real", rank), iterations);
    const RankStory simulated = ReadStory(RankTracePath(dir + "/sim", rank), iterations);
    EXPECT_EQ(real.collectives.size(), ListCollectives(plan, rank, iterations).size()) << "rank " << rank;
    EXPECT_EQ(real.collectives, simulated.collectives) << "rank " << rank;
    uint64_t padded = 0;  // the scenario's sizes, as issued: the buckets of every iteration and the broadcast
    for (const auto& [key, collective] : real.collectives) {
      if (std::get<3>(collective).starts_with("DDP gradient bucket")) padded += std::get<1>(collective);
    }
    EXPECT_GE(padded, iterations * 37'000'000u) << "rank " << rank;
    EXPECT_EQ(real.draws, simulated.draws) << "rank " << rank;
    EXPECT_EQ(real.loads, simulated.loads) << "rank " << rank;
  }
}

// With the scenario's sizes a plan too small for the real model is refused, saying so and
// naming the option that runs the model-sized plan instead.
TEST(Trainer, AScenarioPlanSmallerThanTheRealModelIsRefused) {
  Scenario scenario = LoadScenarioFile(PETRSIM_SOURCE_DIR "/scenarios/tiny.pbtxt");
  DdpTensor* tensor = scenario.mutable_plan()->mutable_ddp()->add_tensors();
  tensor->set_name("weight");
  tensor->add_shape(1000);
  try {
    MakeRealJob(scenario, ModelConfig{}, PlanSizes::kScenario);
    FAIL() << "a plan whose buckets hold 1000 elements was accepted";
  } catch (const ScenarioError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("DDP gradient buckets of iteration 0 hold 1000 elements, fewer than the"), std::string::npos)
        << message;
    EXPECT_NE(message.find("--plan-sizes model"), std::string::npos) << message;
  }
  EXPECT_EQ(MakeRealJob(scenario, ModelConfig{}, PlanSizes::kModel).plan_sizes, PlanSizes::kModel);
  EXPECT_EQ(ParsePlanSizes("scenario"), PlanSizes::kScenario);
  EXPECT_EQ(ParsePlanSizes("model"), PlanSizes::kModel);
  EXPECT_FALSE(ParsePlanSizes("models").has_value());
}

TEST(Trainer, TheSamplerWatchdogStopsTheRankCheckNames) {
  torch::set_num_threads(1);
  Scenario scenario = LoadScenarioFile(PETRSIM_SOURCE_DIR "/scenarios/tiny.pbtxt");  // in_group, scene c
  scenario.mutable_comm()->set_backend(Comm::gloo);
  const Dataset dataset = BuildDataset(scenario, "tiny");
  const CheckReport check = RunPreflight(scenario, dataset);
  ASSERT_TRUE(check.first_hit.has_value());
  // The sizes do not matter here (train_cli checks the hang's sequence number at the scenario's).
  const TrainRun run = TrainTwoRanks(scenario, scenario.job().iterations(), 5000, PlanSizes::kModel);
  const uint32_t stuck = check.first_hit->rank;
  ASSERT_TRUE(run.errors[stuck]);
  try {
    std::rethrow_exception(run.errors[stuck]);
  } catch (const SampleLivelockError& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("rank " + std::to_string(stuck)), std::string::npos) << message;
    EXPECT_NE(message.find("batch " + std::to_string(check.first_hit->iteration)), std::string::npos) << message;
    EXPECT_NE(message.find("scene 'c'"), std::string::npos) << message;
    EXPECT_NE(message.find("worker " + std::to_string(check.first_hit->worker) + ":"), std::string::npos) << message;
  } catch (const std::exception& error) {
    FAIL() << "the stuck rank failed otherwise: " << error.what();
  }
  // The other rank is left waiting in its collective until the (short) timeout.
  EXPECT_TRUE(run.errors[1 - stuck]);
  EXPECT_LT(run.seconds, 30.0);
}

}  // namespace
}  // namespace petrsim::real
