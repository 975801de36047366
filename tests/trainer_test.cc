// The real backend's training loop (real/trainer.h) on 2 ranks as threads over c10d Gloo and a
// TCPStore on loopback: the ranks stay in sync (equal parameter hashes) and the loss halves over
// 300 iterations; with an all-empty group and in_group, the sampler watchdog stops the rank
// `check` names with the livelock in user terms, long before the collective timeout; and the
// real run issues the same collectives and trains on the same samples as the simulator's run of
// the same scenario (sim/real parity).
#include "real/trainer.h"

#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <exception>
#include <filesystem>
#include <map>
#include <numeric>
#include <thread>
#include <tuple>

#include "model/preflight.h"
#include "model/scenario_loader.h"
#include "replay/trace_io.h"
#include "sim/simulator.h"

namespace petrsim::real {
namespace {

struct TrainRun {
  std::vector<TrainResult> results;
  std::vector<std::exception_ptr> errors;
  double seconds = 0;
};

TrainRun TrainTwoRanks(const Scenario& scenario, uint64_t iterations, int64_t timeout_ms,
                       const std::string& trace_dir = "", ModelConfig model = {}, double learning_rate = 2e-3) {
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
        options.learning_rate = learning_rate;
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

// The issue's training check: a small synthetic scenario, 2 ranks, 300 CPU iterations: the
// loss (mean of the first 20 vs the last 20 iterations) falls by at least half and the ranks'
// parameters stay identical. Learning rate 3e-3 (measured: 10.36 -> 4.10, ratio 0.40; with the
// default 2e-3 the ratio was 0.46; ranks as threads build their models one at a time, so the
// run is deterministic).
TEST(Trainer, TwoRanksStayInSyncAndTheLossHalvesIn300Iterations) {
  torch::set_num_threads(1);
  const Scenario scenario = LoadScenarioFile(PETRSIM_SOURCE_DIR "/tests/data/real/train_small.pbtxt");
  ModelConfig model;
  model.channels = 64;
  model.ffn_channels = 128;
  const TrainRun run = TrainTwoRanks(scenario, 300, 60000, "", model, 3e-3);
  for (const auto& error : run.errors) {
    if (error) std::rethrow_exception(error);
  }
  EXPECT_EQ(run.results[0].parameters_hash, run.results[1].parameters_hash);
  const auto& losses = run.results[0].losses;
  ASSERT_EQ(losses.size(), 300u);
  const double first = std::accumulate(losses.begin(), losses.begin() + 20, 0.0) / 20;
  const double last = std::accumulate(losses.end() - 20, losses.end(), 0.0) / 20;
  std::cout << "loss: mean of the first 20 iterations " << first << ", of the last 20 " << last << " ("
            << run.seconds << " s for 300 iterations on 2 ranks; " << MakeRealJob(scenario, model).parameters
            << " parameters)\n";
  EXPECT_LT(last, 0.5 * first) << "first 20: " << first << ", last 20: " << last;
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

// Sim/real parity: `global` on the tiny scenario (2 DataLoader workers, resampling as the
// frames with no GT require): every rank's collectives (process group, sequence number, op,
// size, dtype, plan step, iteration) and its samples (the sampler's index per batch and slot,
// the index each getitem finally returned, the worker that loaded it) are the simulator's for
// the scenario the real job runs. The model is wide enough for its gradients to span two DDP
// buckets (the plan's first bucket holds 1 MiB).
TEST(Trainer, TheRealRunIssuesTheSimulatorsCollectivesOnTheSimulatorsSamples) {
  torch::set_num_threads(1);
  Scenario scenario = LoadScenarioFile(PETRSIM_SOURCE_DIR "/scenarios/tiny.pbtxt");
  scenario.mutable_resample()->set_policy(Resample::global);
  const uint64_t iterations = 12;
  scenario.mutable_job()->set_iterations(iterations);
  const std::string dir = testing::TempDir() + "/petrsim_parity";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir + "/real");
  ModelConfig model;
  model.channels = 80;
  const TrainRun run = TrainTwoRanks(scenario, iterations, 60000, dir + "/real", model);
  for (const auto& error : run.errors) {
    if (error) std::rethrow_exception(error);
  }
  EXPECT_EQ(run.results[0].gradient_buckets, 2u);
  EXPECT_EQ(run.results[0].parameters_hash, run.results[1].parameters_hash);
  const RealJob job = MakeRealJob(scenario, model);
  const Dataset dataset = BuildDataset(job.scenario, "tiny");
  {
    TraceDirectoryWriter writer(dir + "/sim", job.scenario, "", 2, "sim", "test");
    sim::SimOptions options;
    options.trace = &writer;
    const sim::SimResult result = sim::Simulate(job.scenario, dataset, options);
    ASSERT_EQ(result.outcome, sim::Outcome::kCompleted);
    writer.Finish();
  }
  uint64_t resampled = 0;
  for (uint32_t rank = 0; rank < 2; ++rank) {
    const RankStory real = ReadStory(RankTracePath(dir + "/real", rank), iterations);
    const RankStory simulated = ReadStory(RankTracePath(dir + "/sim", rank), iterations);
    EXPECT_EQ(real.collectives.size(), 3 + iterations * 46) << "rank " << rank;
    EXPECT_EQ(real.collectives, simulated.collectives) << "rank " << rank;
    EXPECT_EQ(real.draws.size(), iterations) << "rank " << rank;
    EXPECT_EQ(real.draws, simulated.draws) << "rank " << rank;
    EXPECT_EQ(real.loads.size(), iterations) << "rank " << rank;
    EXPECT_EQ(real.loads, simulated.loads) << "rank " << rank;
    for (const auto& [key, load] : real.loads) resampled += std::get<0>(load) != std::get<1>(load);
  }
  EXPECT_GT(resampled, 0u) << "the comparison should cover getitems that resampled";
}

TEST(Trainer, TheSamplerWatchdogStopsTheRankCheckNames) {
  torch::set_num_threads(1);
  const Scenario scenario = LoadScenarioFile(PETRSIM_SOURCE_DIR "/scenarios/tiny.pbtxt");  // in_group, scene c
  const Dataset dataset = BuildDataset(scenario, "tiny");
  const CheckReport check = RunPreflight(scenario, dataset);
  ASSERT_TRUE(check.first_hit.has_value());
  const TrainRun run = TrainTwoRanks(scenario, scenario.job().iterations(), 5000);
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
