// The real backend's training loop (real/trainer.h) on 2 ranks as threads over c10d Gloo and a
// TCPStore on loopback: the ranks stay in sync (equal parameter hashes) and the loss falls; with
// an all-empty group and in_group, the sampler watchdog stops the rank `check` names with the
// livelock in user terms, long before the collective timeout.
#include "real/trainer.h"

#include <gtest/gtest.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <exception>
#include <numeric>
#include <thread>

#include "model/preflight.h"
#include "model/scenario_loader.h"

namespace petrsim::real {
namespace {

struct TrainRun {
  std::vector<TrainResult> results;
  std::vector<std::exception_ptr> errors;
  double seconds = 0;
};

TrainRun TrainTwoRanks(const Scenario& scenario, uint64_t iterations, int64_t timeout_ms) {
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
        options.bucket_mb = 0.05;  // several buckets for this small model
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

TEST(Trainer, TwoRanksStayInSyncAndLearn) {
  torch::set_num_threads(1);
  Scenario scenario = LoadScenarioFile(PETRSIM_SOURCE_DIR "/scenarios/tiny.pbtxt");
  scenario.mutable_resample()->set_policy(Resample::global);
  const TrainRun run = TrainTwoRanks(scenario, 60, 60000);
  for (const auto& error : run.errors) {
    if (error) std::rethrow_exception(error);
  }
  EXPECT_EQ(run.results[0].parameters_hash, run.results[1].parameters_hash);
  EXPECT_GT(run.results[0].gradient_buckets, 1u);
  const auto& losses = run.results[0].losses;
  ASSERT_EQ(losses.size(), 60u);
  const double first = std::accumulate(losses.begin(), losses.begin() + 10, 0.0) / 10;
  const double last = std::accumulate(losses.end() - 10, losses.end(), 0.0) / 10;
  EXPECT_LT(last, 0.8 * first) << "first 10: " << first << ", last 10: " << last;
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
