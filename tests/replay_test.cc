// `petrsim replay --against sim` (replay/replay.h): a recorded hang replays to the same stuck
// rank, collective and iteration; the recording, not the scenario, drives the replay (a
// scenario whose sampler seed was changed still replays the recorded samples); what-if
// changes the outcome; a recording that the replay does not match is reported as such.
#include "replay/replay.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "base/error.h"
#include "data/dataset.h"
#include "sim/simulator.h"
#include "tests/scenario_text.h"
#include "trace/directory_writer.h"

namespace petrsim {
namespace {

namespace fs = std::filesystem;

class ReplayTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string((fs::temp_directory_path() / ("petrsim_replay_" + std::to_string(::getpid()))).string());
    fs::remove_all(*dir_);
    const Scenario scenario = testing::ShippedScenario("streampetr_trainval_hang.pbtxt");
    const Dataset dataset = BuildDataset(scenario, "scenario");
    TraceDirectoryWriter writer(*dir_, scenario, "streampetr_trainval_hang.pbtxt", scenario.job().world_size(), "sim",
                                "test");
    sim::SimOptions options;
    options.trace = &writer;
    result_ = new sim::SimResult(sim::Simulate(scenario, dataset, options));
    writer.Finish();
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete result_;
  }
  static std::string* dir_;
  static sim::SimResult* result_;
};
std::string* ReplayTest::dir_ = nullptr;
sim::SimResult* ReplayTest::result_ = nullptr;

TEST_F(ReplayTest, TheRecordedOutcomeIsReadFromTheTraces) {
  const RecordedJob job = LoadRecordedJob(*dir_);
  EXPECT_EQ(job.world_size, 4u);  // the seed scenario's job.world_size
  EXPECT_EQ(job.backend, "sim");
  EXPECT_EQ(job.recorded.outcome, "hang");
  EXPECT_EQ(job.recorded.stuck_ranks, result_->stuck_ranks);
  ASSERT_TRUE(result_->collective.has_value());
  EXPECT_EQ(job.recorded.seq, result_->collective->seq);
  EXPECT_EQ(job.recorded.iteration, result_->collective->iteration);
  EXPECT_EQ(job.recorded.iterations_completed, result_->iterations_completed);
  EXPECT_FALSE(job.sample_index.empty());
  EXPECT_FALSE(job.loads.empty());
}

TEST_F(ReplayTest, AnExactReplayReproducesTheHang) {
  const RecordedJob job = LoadRecordedJob(*dir_);
  SimReplayBackend backend;
  const ReplayReport report = Replay(job, backend, {});
  EXPECT_TRUE(report.reproduced) << FormatReplay(job, report);
  EXPECT_TRUE(report.used_samples);
  EXPECT_TRUE(report.used_loads);
  EXPECT_EQ(report.replayed.cause, "sampler_livelock");
  EXPECT_NE(FormatReplay(job, report).find("reproduced: the replay ends as the recording does"), std::string::npos);
  // A probe's traces hold the scenario but no file path: the header names the scenario, never "scenario )".
  RecordedJob probe_job = job;
  probe_job.scenario_path.clear();
  probe_job.scenario.set_name("user job");
  const std::string header = FormatReplay(probe_job, report);
  EXPECT_NE(header.find("scenario 'user job', recorded in the traces)"), std::string::npos) << header;
}

// The recording drives: with another sampler seed in the scenario, the scenario alone would
// sample other frames (and not hang there); the replay still plays the recorded ones.
TEST_F(ReplayTest, TheRecordingNotTheScenarioDrivesTheReplay) {
  RecordedJob job = LoadRecordedJob(*dir_);
  job.scenario.mutable_job()->set_seed(job.scenario.job().seed() + 12345);
  SimReplayBackend backend;
  const ReplayOutcome driven = backend.Run(job, job.scenario, true, true);
  EXPECT_EQ(driven.outcome, "hang");
  EXPECT_EQ(driven.stuck_ranks, result_->stuck_ranks);
  EXPECT_EQ(driven.seq, result_->collective->seq);
  const ReplayOutcome alone = backend.Run(job, job.scenario, false, false);
  EXPECT_FALSE(alone.outcome == driven.outcome && alone.seq == driven.seq && alone.stuck_ranks == driven.stuck_ranks)
      << "the changed seed should change the job when nothing drives it";
}

TEST_F(ReplayTest, WhatIfAGlobalPolicyTheJobCompletes) {
  const RecordedJob job = LoadRecordedJob(*dir_);
  SimReplayBackend backend;
  const ReplayReport report = Replay(job, backend, {"resample.policy=global"});
  EXPECT_FALSE(report.reproduced);
  EXPECT_TRUE(report.used_samples);
  EXPECT_FALSE(report.used_loads);
  EXPECT_EQ(report.replayed.outcome, "completed");
  EXPECT_NE(FormatReplay(job, report).find("what-if: the outcome changes"), std::string::npos);
}

TEST_F(ReplayTest, WhatIfTheDatasetChangesTheRecordedIndicesAreNotUsed) {
  const RecordedJob job = LoadRecordedJob(*dir_);
  SimReplayBackend backend;
  const ReplayReport report = Replay(job, backend, {"resample.policy=drop_empty_groups"});
  EXPECT_FALSE(report.used_samples);
  EXPECT_NE(report.samples_note.find("another dataset"), std::string::npos) << report.samples_note;
  EXPECT_EQ(report.replayed.outcome, "completed");
}

TEST_F(ReplayTest, AReplayThatEndsElsewhereIsNotReproduced) {
  RecordedJob job = LoadRecordedJob(*dir_);
  job.recorded.seq += 1;  // as if the recording had stopped one collective later
  SimReplayBackend backend;
  const ReplayReport report = Replay(job, backend, {});
  EXPECT_FALSE(report.reproduced);
  ASSERT_EQ(report.differences.size(), 1u);
  EXPECT_NE(report.differences[0].find("stuck collective"), std::string::npos) << report.differences[0];
}

TEST(Replay, BadInputIsNamed) {
  EXPECT_THROW(LoadRecordedJob("/nonexistent-dir"), ScenarioError);
  const fs::path empty = fs::temp_directory_path() / ("petrsim_replay_empty_" + std::to_string(::getpid()));
  fs::create_directories(empty);
  try {
    LoadRecordedJob(empty.string());
    FAIL();
  } catch (const ScenarioError& error) {
    EXPECT_NE(std::string(error.what()).find("no rank_0.pbtrace"), std::string::npos) << error.what();
  }
  fs::remove_all(empty);
}

}  // namespace
}  // namespace petrsim
