// The simulator against what the rest of petrsim predicts (check's first hit, sample's stream,
// the plan's sequence numbers), against hand-computed timelines, and under every fault kind.
#include "sim/simulator.h"

#include <gtest/gtest.h>

#include <optional>

#include "check/preflight.h"
#include "data/sample_stream.h"
#include "plan/iteration_plan.h"
#include "scenario/scenario_override.h"
#include "scenario/scenario_validation.h"
#include "tests/scenario_text.h"

namespace petrsim::sim {
namespace {

using petrsim::testing::ScenarioFromText;
using petrsim::testing::ShippedScenario;

SimResult Simulated(const Scenario& scenario) {
  const Dataset dataset = BuildDataset(scenario, "test");
  return Simulate(scenario, dataset, SimOptions{});
}

Scenario WithOverrides(Scenario scenario, const std::vector<std::string>& sets) {
  ApplyOverrides(scenario, sets);
  ValidateScenario(scenario, "test");
  return scenario;
}

TEST(SimulatorTest, SameScenarioTwiceGivesTheSameRun) {
  const Scenario scenario = ShippedScenario("streampetr_trainval_hang.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "test");
  const SimResult a = Simulate(scenario, dataset, SimOptions{});
  const SimResult b = Simulate(scenario, dataset, SimOptions{});
  // 4 ranks, 40 iterations and the watchdogs (3403 events): a run with every kind of event.
  EXPECT_GT(a.events, 3000u);
  EXPECT_EQ(a.trace_hash, b.trace_hash);
  EXPECT_EQ(a.events, b.events);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.nccl_log, b.nccl_log);
  // Another petrsim seed moves the jitter, so the trace differs, but not the hang's place.
  const Scenario reseeded = WithOverrides(scenario, {"seed=2"});
  const SimResult c = Simulate(reseeded, BuildDataset(reseeded, "test"), SimOptions{});
  EXPECT_NE(a.trace_hash, c.trace_hash);
  ASSERT_TRUE(a.collective.has_value());
  ASSERT_TRUE(c.collective.has_value());
  EXPECT_EQ(a.collective->seq, c.collective->seq);
  EXPECT_EQ(a.stuck_ranks, c.stuck_ranks);
}

// Waking a collective's blocked ranks from one event must give exactly the run that one wake
// event per rank gives: every time, sequence number, count and line of the result.
void ExpectSameRun(const SimResult& a, const SimResult& b) {
  EXPECT_EQ(a.outcome, b.outcome);
  EXPECT_EQ(a.cause, b.cause);
  EXPECT_EQ(a.end_ns, b.end_ns);
  EXPECT_EQ(a.last_iteration_end_ns, b.last_iteration_end_ns);
  EXPECT_EQ(a.iterations_completed, b.iterations_completed);
  EXPECT_EQ(a.stuck_ranks, b.stuck_ranks);
  EXPECT_EQ(a.waiting_ranks, b.waiting_ranks);
  EXPECT_EQ(a.blocked_at_ns, b.blocked_at_ns);
  EXPECT_EQ(a.first_watchdog_ns, b.first_watchdog_ns);
  EXPECT_EQ(a.nccl_log, b.nccl_log);
  EXPECT_EQ(a.collective.has_value(), b.collective.has_value());
  if (a.collective && b.collective) {
    EXPECT_EQ(a.collective->seq, b.collective->seq);
  }
  EXPECT_EQ(a.desync.has_value(), b.desync.has_value());
  if (a.desync && b.desync) {
    EXPECT_EQ(a.desync->seq, b.desync->seq);
    EXPECT_EQ(a.desync->first_rank, b.desync->first_rank);
    EXPECT_EQ(a.desync->other_rank, b.desync->other_rank);
  }
  EXPECT_EQ(a.samples, b.samples);
  EXPECT_EQ(a.resample_attempts, b.resample_attempts);
  EXPECT_EQ(a.stream_breaks, b.stream_breaks);
  ASSERT_EQ(a.ranks.size(), b.ranks.size());
  for (size_t r = 0; r < a.ranks.size(); ++r) {
    EXPECT_EQ(a.ranks[r].iterations_completed, b.ranks[r].iterations_completed) << r;
    EXPECT_EQ(a.ranks[r].data_wait_ns, b.ranks[r].data_wait_ns) << r;
    EXPECT_EQ(a.ranks[r].collective_wait_ns, b.ranks[r].collective_wait_ns) << r;
    EXPECT_EQ(a.ranks[r].compute_ns, b.ranks[r].compute_ns) << r;
    EXPECT_EQ(a.ranks[r].collectives, b.ranks[r].collectives) << r;
    EXPECT_EQ(a.ranks[r].state, b.ranks[r].state) << r;
    EXPECT_EQ(a.ranks[r].died_ns, b.ranks[r].died_ns) << r;
  }
}

// Runs that two ways of simulating must agree on: the seed and the global fix, with a rank
// dying, a straggler, uneven batches, ranks skipping conditional collectives, and tiny.
std::vector<Scenario> SameRunScenarios() {
  const Scenario seed = ShippedScenario("streampetr_trainval_hang.pbtxt");
  const Scenario global = ShippedScenario("streampetr_trainval_hang_global.pbtxt");
  return {
      seed,
      WithOverrides(global, {"job.epochs=1"}),
      WithOverrides(global, {"job.epochs=1", "faults[0].dead_rank.rank=3", "faults[0].dead_rank.at_ns=10000000000"}),
      WithOverrides(global, {"job.epochs=1", "faults[0].straggler.rank=2", "faults[0].straggler.iteration=10",
                             "faults[0].straggler.delay_ns=2000000000000"}),
      WithOverrides(global, {"job.epochs=1", "sampler.kind=distributed_group", "faults[0].uneven_batches.rank=3"}),
      WithOverrides(seed, {"plan.streampetr.old_code_skips_dn_without_gt=true", "filters.filter_empty_gt=false",
                           "job.samples_per_gpu=1"}),
      ShippedScenario("tiny.pbtxt"),
  };
}

TEST(SimulatorTest, OneWakeEventPerCollectiveEqualsOnePerRank) {
  for (const Scenario& scenario : SameRunScenarios()) {
    SCOPED_TRACE(scenario.ShortDebugString().substr(0, 200));
    const Dataset dataset = BuildDataset(scenario, "test");
    SimOptions each;
    each.wake_each_rank = true;
    const SimResult batched = Simulate(scenario, dataset, SimOptions{});
    const SimResult per_rank = Simulate(scenario, dataset, each);
    ExpectSameRun(batched, per_rank);
    EXPECT_LT(batched.events, per_rank.events);
  }
}

// Chains of blocking collectives completed as one (SimOptions::fuse_collective_chains) give the
// same run, with faults that fall inside and outside the chains, jitter, a rank that skips the
// conditional ones, and an uneven sampler.
TEST(SimulatorTest, FusedCollectiveChainsGiveTheSameRun) {
  const Scenario global = ShippedScenario("streampetr_trainval_hang_global.pbtxt");
  std::vector<Scenario> scenarios = SameRunScenarios();
  // A worker dying (its rank raises at its next return) and jitter with a slow rank too.
  scenarios.push_back(
      WithOverrides(global, {"job.epochs=1", "faults[0].dead_worker.rank=1", "faults[0].dead_worker.worker=0",
                             "faults[0].dead_worker.at_ns=20000000000"}));
  scenarios.push_back(WithOverrides(global, {"job.epochs=1", "cost.jitter_fraction=0.2", "faults[0].slow_rank.rank=1",
                                             "faults[0].slow_rank.factor=3"}));
  // A synthetic scenario (generated): a desync ends the run as a chain completes, one rank not yet returned from it
  // (its state names the chain's last collective): props/sim_props found it.
  scenarios.push_back(LoadScenarioFile(std::string(PETRSIM_SOURCE_DIR) +
                                       "/tests/data/sim/synthetic_fused_chain_desync_at_its_end.pbtxt"));
  for (const Scenario& scenario : scenarios) {
    SCOPED_TRACE(scenario.ShortDebugString().substr(0, 200));
    const Dataset dataset = BuildDataset(scenario, "test");
    SimOptions fused;
    fused.fuse_collective_chains = true;
    for (const uint64_t run_seed : {0, 7}) {
      SimOptions plain;
      plain.run_seed = fused.run_seed = run_seed;
      const SimResult one_by_one = Simulate(scenario, dataset, plain);
      const SimResult chained = Simulate(scenario, dataset, fused);
      ExpectSameRun(one_by_one, chained);
      EXPECT_LE(chained.events, one_by_one.events);
    }
  }
  // The StreamPETR plan's 44 loss all-reduces an iteration are one chain: a run of many
  // iterations needs far fewer events.
  const Scenario epoch = WithOverrides(global, {"job.epochs=1"});
  const Dataset dataset = BuildDataset(epoch, "test");
  SimOptions fused;
  fused.fuse_collective_chains = true;
  const uint64_t chained = Simulate(epoch, dataset, fused).events;
  const uint64_t one_by_one = Simulate(epoch, dataset, SimOptions{}).events;
  EXPECT_LT(chained * 2, one_by_one) << chained << " vs " << one_by_one;
}

TEST(SimulatorTest, SeedScenarioHangsWhereCheckAndSamplePredict) {
  const Scenario scenario = ShippedScenario("streampetr_trainval_hang.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "test");
  const SimResult result = Simulate(scenario, dataset, SimOptions{});
  const CheckReport check = RunPreflight(scenario, dataset);
  ASSERT_TRUE(check.first_hit.has_value());

  EXPECT_EQ(result.outcome, Outcome::kHang);
  EXPECT_EQ(result.cause, Cause::kSamplerLivelock);
  ASSERT_TRUE(result.stuck.has_value());
  const StuckGetitem& stuck = *result.stuck;
  EXPECT_EQ(stuck.rank, check.first_hit->rank);
  EXPECT_EQ(static_cast<uint32_t>(stuck.worker), check.first_hit->worker);
  EXPECT_EQ(stuck.batch, check.first_hit->iteration);
  EXPECT_EQ(stuck.slot, check.first_hit->slot);
  EXPECT_EQ(stuck.group, check.first_hit->group);
  EXPECT_EQ(stuck.index, check.first_hit->index);
  EXPECT_TRUE(stuck.proven);
  EXPECT_EQ(stuck.scene_name, "val-0110");
  // Rank 1, the one rank the seed job's real log shows printing no timeout, at iteration 40.
  EXPECT_EQ(stuck.rank, 1u);
  EXPECT_EQ(stuck.batch, 40u);

  // `petrsim sample` for that rank: its first livelock row is the same batch, worker and slot.
  std::optional<SampleRow> livelock;
  SampleStreamOptions options;
  options.ranks = {stuck.rank};
  options.iterations = stuck.batch + 16;
  GenerateSampleStream(scenario, dataset, options, [&](const SampleRow& row) {
    if (!livelock && row.status == SampleStatus::kLivelock) livelock = row;
  });
  ASSERT_TRUE(livelock.has_value());
  EXPECT_EQ(livelock->iteration, stuck.batch);
  EXPECT_EQ(livelock->worker, static_cast<uint32_t>(stuck.worker));
  EXPECT_EQ(livelock->slot, stuck.slot);
  EXPECT_EQ(livelock->index, stuck.index);

  // The others wait in the first collective of that iteration, at the plan's sequence number.
  EXPECT_EQ(result.stuck_ranks, std::vector<uint32_t>{stuck.rank});
  EXPECT_EQ(result.waiting_ranks.size(), scenario.job().world_size() - 1);
  EXPECT_EQ(result.iterations_completed, stuck.batch);
  ASSERT_TRUE(result.collective.has_value());
  const ExpandedPlan plan = ExpandPlan(scenario);
  EXPECT_EQ(result.collective->seq, CollectivesBefore(plan, "default_pg", stuck.batch) + 1);
  // 5 startup collectives (2 seed broadcasts, DDP 1.9's shape check and 2 state broadcasts), 51
  // in iteration 0 (44 + 7 buckets), 53 in iteration 1 (the rebuild's 2 more), 51 in each later
  // one, and a logger reduce every 50 iterations (none before iteration 40):
  // 5 + 40 * 51 + 2 + 1 = 2048.
  EXPECT_EQ(result.collective->seq, 2048u);
  EXPECT_EQ(result.collective->iteration, stuck.batch);
  EXPECT_EQ(result.collective->step, "reduce_mean(num_total_pos), decoder layer 0");
  EXPECT_EQ(OpTypeName(result.collective->op), "ALLREDUCE");

  // Every waiting rank prints the watchdog line of the seed job's PyTorch, 1.9 (no SeqNum); the
  // stuck one prints nothing.
  ASSERT_EQ(result.nccl_log.size(), result.waiting_ranks.size());
  for (const std::string& line : result.nccl_log) {
    EXPECT_NE(line.find("] Watchdog caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, "
                        "Timeout(ms)=1800000) ran for "),
              std::string::npos)
        << line;
    EXPECT_EQ(line.find("[Rank " + std::to_string(stuck.rank) + "]"), std::string::npos);
  }
  EXPECT_EQ(result.nccl_log.front().rfind("[E ProcessGroupNCCL.cpp:566] [Rank 0] Watchdog caught", 0), 0u);
  // Then each rank's follow-up and terminate lines: 4 lines a rank in 1.9.
  ASSERT_EQ(result.job_log.size(), 4 * result.waiting_ranks.size());
  EXPECT_EQ(result.job_log[1].rfind("[E ProcessGroupNCCL.cpp:325] Some NCCL operations have failed", 0), 0u);
  EXPECT_EQ(result.job_log[2], "terminate called after throwing an instance of 'std::runtime_error'");
  EXPECT_TRUE(result.job_log_note.empty());
  EXPECT_EQ(result.collective->python_frame.rfind("mmdet/core/utils/dist_utils.py, in reduce_mean", 0), 0u);
  // The watchdog polls every 10 s: it fires at the first poll after blocked + 30 min.
  EXPECT_GT(result.first_watchdog_ns, result.blocked_at_ns + 1'800'000'000'000LL);
  EXPECT_LE(result.first_watchdog_ns, result.blocked_at_ns + 1'810'000'000'000LL);
  EXPECT_EQ(result.first_watchdog_ns % 10'000'000'000LL, 0);
}

TEST(SimulatorTest, EachFixScenarioCompletesTheFullJob) {
  for (const char* name : {"streampetr_trainval_hang_global.pbtxt", "streampetr_trainval_hang_drop_empty_groups.pbtxt",
                           "streampetr_trainval_hang_keep_empty.pbtxt"}) {
    const SimResult result = Simulated(ShippedScenario(name));
    EXPECT_EQ(result.outcome, Outcome::kCompleted) << name;
    EXPECT_EQ(result.iterations_completed, 42192u) << name;
    EXPECT_EQ(result.job_iterations, 42192u) << name;
    EXPECT_TRUE(result.nccl_log.empty()) << name;
    EXPECT_EQ(result.samples, 42192u * 4 * 2) << name;  // 4 ranks x 2 samples an iteration
  }
}

TEST(SimulatorTest, TheRunSeedNeverChangesWhichRanksAHangBlames) {
  // Two collectives are incomplete at the end, each missing a rank that skipped a conditional
  // one; which opened first depends on the jitter, the blamed rank must not.
  const Scenario scenario = ShippedScenario("regressions/jitter_does_not_change_the_blamed_rank.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "test");
  for (uint64_t run_seed = 0; run_seed < 40; ++run_seed) {
    SimOptions options;
    options.run_seed = run_seed;
    const SimResult result = Simulate(scenario, dataset, options);
    EXPECT_EQ(result.outcome, Outcome::kHang) << "run seed " << run_seed;
    EXPECT_EQ(result.cause, Cause::kConditionalCollective) << "run seed " << run_seed;
    EXPECT_EQ(result.stuck_ranks, std::vector<uint32_t>{7}) << "run seed " << run_seed;
  }
}

// Two ranks, one sample each, no workers, no jitter, one allreduce per iteration: every time
// below is computed by hand from the cost model.
constexpr const char* kClockwork = R"(
  dataset { subdatasets { name: "d" explicit {
    scenes { name: "a" gt_counts: [1, 1, 1, 1] }
    scenes { name: "b" gt_counts: [1, 1, 1, 1] } } } }
  grouping { seq_split_num: 2 }
  resample { policy: in_group }
  job { world_size: 2 samples_per_gpu: 1 workers_per_gpu: 0 iterations: 2 }
  plan { custom { per_iteration { name: "ar" op: allreduce numel: 1000 dtype: float32 } } }
  cost { sample_load_ns: 100 step_compute_ns: 3000 jitter_fraction: 0
         collective_latency_ns: 10 bandwidth_bytes_per_s: 1000000000 }
)";

TEST(SimulatorTest, TimesFollowTheCostModelExactly) {
  const SimResult result = Simulated(ScenarioFromText(kClockwork));
  // Per iteration: load 100 (main process), forward 1000, allreduce 2*(n-1)*10 latency +
  // 2*(n-1)/n * 4000 bytes at 1 GB/s = 4020, backward 2000: 7120 ns.
  EXPECT_EQ(result.outcome, Outcome::kCompleted);
  EXPECT_EQ(result.end_ns, 2 * 7120);
  EXPECT_EQ(result.last_iteration_end_ns, 2 * 7120);
  for (const RankStats& rank : result.ranks) {
    EXPECT_EQ(rank.iterations_completed, 2u);
    EXPECT_EQ(rank.data_wait_ns, 200);
    EXPECT_EQ(rank.collective_wait_ns, 2 * 4020);
    EXPECT_EQ(rank.compute_ns, 2 * 3000);
    EXPECT_EQ(rank.collectives, 2u);
    EXPECT_EQ(rank.samples, 2u);
  }
}

TEST(SimulatorTest, ASlowRankMakesTheOthersWaitInCollectives) {
  const Scenario base = ScenarioFromText(kClockwork);
  const SimResult slow = Simulated(WithOverrides(base, {"faults[0].slow_rank.rank=1", "faults[0].slow_rank.factor=2"}));
  EXPECT_EQ(slow.outcome, Outcome::kCompleted);
  // Rank 1 loads in 200 and computes 6000; rank 0 waits for it in the allreduce: for its longer
  // load and forward in iteration 0, and in iteration 1 also for its longer backward before.
  EXPECT_EQ(slow.ranks[1].compute_ns, 2 * 6000);
  EXPECT_EQ(slow.ranks[1].collective_wait_ns, 2 * 4020);
  EXPECT_EQ(slow.ranks[0].collective_wait_ns, (4020 + 1100) + (4020 + 1100 + 2000));
  EXPECT_EQ(slow.end_ns, 2 * (200 + 2000 + 4020 + 4000));
}

TEST(SimulatorTest, WatchdogLinesFollowTheTorchRelease) {
  // The same hang printed by three releases: 1.9 without SeqNum, 2.1 with NumelIn/NumelOut and
  // its watchdog thread's exception, 2.4 with the global rank and the time before each line.
  const Scenario tiny = ShippedScenario("tiny.pbtxt");
  const SimResult v19 = Simulated(WithOverrides(tiny, {"comm.torch_version=1.9.0"}));
  const SimResult v21 = Simulated(WithOverrides(tiny, {"comm.torch_version=2.1"}));
  const SimResult v24 = Simulated(WithOverrides(tiny, {"comm.torch_version=2.4.1+cu121"}));
  ASSERT_EQ(v19.nccl_log.size(), 1u);
  ASSERT_EQ(v21.nccl_log.size(), 1u);
  ASSERT_EQ(v24.nccl_log.size(), 1u);
  // (the releases' DDP issues different collectives before it, so the sequence numbers differ)
  EXPECT_EQ(v19.nccl_log[0].rfind("[E ProcessGroupNCCL.cpp:566] [Rank 0] Watchdog caught collective operation "
                                  "timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for ",
                                  0),
            0u);
  EXPECT_EQ(v21.nccl_log[0].rfind("[E ProcessGroupNCCL.cpp:475] [Rank 0] Watchdog caught collective operation "
                                  "timeout: WorkNCCL(SeqNum=" +
                                      std::to_string(v21.collective->seq) +
                                      ", OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for ",
                                  0),
            0u);
  EXPECT_EQ(v24.nccl_log[0].rfind("[rank0]:[E", 0), 0u);
  EXPECT_NE(v24.nccl_log[0].find(" ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught collective operation timeout: "
                                 "WorkNCCL(SeqNum=" +
                                 std::to_string(v24.collective->seq) +
                                 ", OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=1800000) ran for "),
            std::string::npos);
  EXPECT_EQ(v19.job_log.size(), 4u);
  EXPECT_GT(v21.job_log.size(), 4u);
  // A release whose line numbers are not known says so.
  const SimResult v111 = Simulated(WithOverrides(tiny, {"comm.torch_version=1.11"}));
  EXPECT_NE(v111.job_log_note.find("line numbers are not known"), std::string::npos) << v111.job_log_note;
  EXPECT_TRUE(v19.job_log_note.empty());
}

TEST(SimulatorTest, WatchdogLineAndTimeFollowTheBackend) {
  const Scenario tiny = WithOverrides(ShippedScenario("tiny.pbtxt"), {"comm.torch_version=2.0"});
  const SimResult polled = Simulated(tiny);
  ASSERT_EQ(polled.outcome, Outcome::kHang);
  ASSERT_EQ(polled.nccl_log.size(), 1u);
  const RankStats& waiting = polled.ranks[polled.waiting_ranks.at(0)];
  EXPECT_EQ(waiting.watchdog_fires_ns, polled.first_watchdog_ns);
  EXPECT_EQ(polled.nccl_log[0],
            "[E ProcessGroupNCCL.cpp:828] [Rank 0] Watchdog caught collective operation timeout: "
            "WorkNCCL(SeqNum=" +
                std::to_string(polled.collective->seq) + ", OpType=ALLREDUCE, Timeout(ms)=1800000) ran for " +
                std::to_string((waiting.watchdog_fires_ns - waiting.blocked_since_ns) / 1000000) +
                " milliseconds before timing out.");

  const SimResult exact = Simulated(WithOverrides(tiny, {"comm.watchdog_poll_ms=0", "comm.timeout_ms=600000"}));
  const RankStats& rank0 = exact.ranks[0];
  EXPECT_EQ(rank0.watchdog_fires_ns, rank0.blocked_since_ns + 600'000'000'000LL);
  EXPECT_NE(exact.nccl_log.at(0).find("Timeout(ms)=600000) ran for 600000 milliseconds"), std::string::npos);

  const SimResult gloo = Simulated(WithOverrides(tiny, {"comm.backend=gloo"}));
  ASSERT_EQ(gloo.nccl_log.size(), 1u);
  EXPECT_NE(gloo.nccl_log[0].find("Timed out waiting 1800000ms for recv operation to complete"), std::string::npos);
  EXPECT_EQ(gloo.ranks[0].watchdog_fires_ns, gloo.ranks[0].blocked_since_ns + 1'800'000'000'000LL);
}

Scenario GlobalSeed(const std::vector<std::string>& sets) {
  std::vector<std::string> all = {"job.epochs=1"};
  all.insert(all.end(), sets.begin(), sets.end());
  return WithOverrides(ShippedScenario("streampetr_trainval_hang_global.pbtxt"), all);
}

TEST(SimulatorTest, DeadRankLeavesTheOthersWaiting) {
  // One dead rank among many: the seed scenario's 4 ranks made 8.
  const SimResult result = Simulated(
      GlobalSeed({"job.world_size=8", "faults[0].dead_rank.rank=3", "faults[0].dead_rank.at_ns=10000000000"}));
  EXPECT_EQ(result.outcome, Outcome::kRankDied);
  EXPECT_EQ(result.cause, Cause::kRankDied);
  EXPECT_EQ(result.stuck_ranks, std::vector<uint32_t>{3});
  EXPECT_EQ(result.ranks[3].died_ns, 10'000'000'000LL);
  EXPECT_EQ(result.nccl_log.size(), 7u);  // each of the 7 others' watchdog line
}

TEST(SimulatorTest, DeadWorkerMakesItsRankRaise) {
  const SimResult result = Simulated(GlobalSeed(
      {"faults[0].dead_worker.rank=2", "faults[0].dead_worker.worker=1", "faults[0].dead_worker.at_ns=10000000000"}));
  EXPECT_EQ(result.outcome, Outcome::kRankDied);
  EXPECT_EQ(result.cause, Cause::kWorkerDied);
  EXPECT_EQ(result.stuck_ranks, std::vector<uint32_t>{2});
  EXPECT_GE(result.ranks[2].died_ns, 10'000'000'000LL);
  EXPECT_NE(result.ranks[2].died_why.find("DataLoader worker 1 exited unexpectedly"), std::string::npos);
}

TEST(SimulatorTest, StragglerBeyondTheTimeoutHangsAndBelowItDoesNot) {
  const SimResult late = Simulated(GlobalSeed({"faults[0].straggler.rank=2", "faults[0].straggler.iteration=10",
                                               "faults[0].straggler.delay_ns=2000000000000"}));
  EXPECT_EQ(late.outcome, Outcome::kHang);
  EXPECT_EQ(late.cause, Cause::kStragglerTimeout);
  EXPECT_EQ(late.stuck_ranks, std::vector<uint32_t>{2});
  EXPECT_EQ(late.collective->iteration, 10u);
  EXPECT_EQ(late.iterations_completed, 10u);

  const SimResult ok =
      Simulated(GlobalSeed({"job.iterations_per_epoch=40", "faults[0].straggler.rank=2",
                            "faults[0].straggler.iteration=10", "faults[0].straggler.delay_ns=1000000000000"}));
  EXPECT_EQ(ok.outcome, Outcome::kCompleted);
  EXPECT_GT(ok.ranks[0].collective_wait_ns, 1'000'000'000'000LL);
}

TEST(SimulatorTest, UnevenBatchesLeaveTheOthersInTheLastIteration) {
  const SimResult result =
      Simulated(GlobalSeed({"faults[0].uneven_batches.rank=3", "faults[0].uneven_batches.batches_fewer=1"}));
  EXPECT_EQ(result.outcome, Outcome::kHang);
  EXPECT_EQ(result.cause, Cause::kUnevenBatches);
  EXPECT_EQ(result.stuck_ranks, std::vector<uint32_t>{3});
  // One epoch of 1758 iterations (job.iterations_per_epoch); rank 3 has one batch fewer.
  EXPECT_EQ(result.ranks[3].iterations_completed, 1757u);
  EXPECT_EQ(result.collective->iteration, 1757u);
}

TEST(SimulatorTest, OldCodeSkippingDenoisingCollectivesDesyncs) {
  const SimResult result = Simulated(WithOverrides(
      ShippedScenario("streampetr_trainval_hang.pbtxt"),
      {"plan.streampetr.old_code_skips_dn_without_gt=true", "filters.filter_empty_gt=false", "job.samples_per_gpu=1"}));
  EXPECT_EQ(result.outcome, Outcome::kDesync);
  EXPECT_EQ(result.cause, Cause::kConditionalCollective);
  ASSERT_TRUE(result.desync.has_value());
  // The skipping rank's len(log_vars) (int64) meets the others' denoising reduce_mean (float32).
  const Desync& d = *result.desync;
  const bool one_is_len =
      d.first.step == "_parse_losses: len(log_vars)" || d.other.step == "_parse_losses: len(log_vars)";
  EXPECT_TRUE(one_is_len) << d.first.step << " / " << d.other.step;
  EXPECT_NE(d.first.dtype, d.other.dtype);
  uint64_t skipped = 0;
  for (const RankStats& rank : result.ranks) skipped += rank.collectives_skipped;
  EXPECT_GT(skipped, 0u);
  // Without the old code the same job does not desync there.
  const SimResult fixed = Simulated(WithOverrides(
      ShippedScenario("streampetr_trainval_hang.pbtxt"),
      {"filters.filter_empty_gt=false", "job.samples_per_gpu=1", "job.epochs=1", "job.iterations_per_epoch=400"}));
  EXPECT_EQ(fixed.outcome, Outcome::kCompleted);
}

TEST(SimulatorTest, BoundedPolicyErrorKillsTheRank) {
  const SimResult result = Simulated(WithOverrides(ShippedScenario("streampetr_trainval_hang.pbtxt"),
                                                   {"resample.policy=bounded", "resample.attempts_max=50"}));
  EXPECT_EQ(result.outcome, Outcome::kRankDied);
  EXPECT_EQ(result.cause, Cause::kDatasetError);
  // The rank whose worker first draws the empty pool (check's first hit: rank 1, iteration 40)
  // raises there instead of spinning.
  EXPECT_EQ(result.stuck_ranks, std::vector<uint32_t>{1});
  EXPECT_EQ(result.ranks[1].iterations_completed, 40u);
}

TEST(SimulatorTest, LimitsStopTheRunWithoutJudgingTheJob) {
  const Scenario scenario = ShippedScenario("streampetr_trainval_hang_global.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "test");
  SimOptions options;
  options.events_max = 5000;
  const SimResult result = Simulate(scenario, dataset, options);
  EXPECT_EQ(result.outcome, Outcome::kLimitReached);
  EXPECT_EQ(result.events, 5000u);
  EXPECT_NE(result.limit_note.find("5000 events"), std::string::npos);
}

}  // namespace
}  // namespace petrsim::sim

namespace petrsim::sim {
namespace {

// Over many training seeds of the tiny scenario, whenever the job hangs on a livelock, the
// simulator blames the very batch `check` predicts: the first the sampler draws from a pool.
TEST(SimulatorTest, StuckWorkerIsCheckFirstHitForEverySeed) {
  int hangs = 0;
  for (uint32_t seed = 0; seed < 40; ++seed) {
    const Scenario scenario =
        WithOverrides(ShippedScenario("tiny.pbtxt"), {"job.iterations=200", "job.seed=" + std::to_string(seed)});
    const Dataset dataset = BuildDataset(scenario, "test");
    const CheckReport check = RunPreflight(scenario, dataset);
    const SimResult result = Simulate(scenario, dataset, SimOptions{});
    if (!check.first_hit) {
      EXPECT_EQ(result.outcome, Outcome::kCompleted) << "seed " << seed;
      continue;
    }
    ++hangs;
    ASSERT_EQ(result.cause, Cause::kSamplerLivelock) << "seed " << seed;
    ASSERT_TRUE(result.stuck.has_value()) << "seed " << seed;
    EXPECT_EQ(result.stuck->rank, check.first_hit->rank) << "seed " << seed;
    EXPECT_EQ(static_cast<uint32_t>(result.stuck->worker), check.first_hit->worker) << "seed " << seed;
    EXPECT_EQ(result.stuck->batch, check.first_hit->iteration) << "seed " << seed;
    EXPECT_EQ(result.stuck->group, check.first_hit->group) << "seed " << seed;
    EXPECT_EQ(result.iterations_completed, check.first_hit->iteration) << "seed " << seed;
  }
  EXPECT_GT(hangs, 10);
}

// Without workers the main process's numpy RNG is seeded once, not at every epoch: the resample
// draws are those `petrsim sample` replays.
TEST(SimulatorTest, MainProcessLoaderKeepsItsRngAcrossEpochs) {
  const Scenario scenario = WithOverrides(
      ShippedScenario("tiny.pbtxt"),
      {"sampler.kind=distributed_group", "job.workers_per_gpu=0", "job.epochs=6", "resample.policy=global"});
  const Dataset dataset = BuildDataset(scenario, "test");
  const SimResult result = Simulate(scenario, dataset, SimOptions{});
  ASSERT_EQ(result.outcome, Outcome::kCompleted);
  uint64_t attempts = 0;
  GenerateSampleStream(scenario, dataset, SampleStreamOptions{}, [&](const SampleRow& row) {
    if (row.attempts > 0) attempts += row.attempts - 1;
  });
  EXPECT_GT(attempts, 0u);
  EXPECT_EQ(result.resample_attempts, attempts);
}

// A non-blocking collective left incomplete while its rank computes on is watched too.
TEST(SimulatorTest, WatchdogWatchesNonBlockingWork) {
  const SimResult result = Simulated(
      WithOverrides(ScenarioFromText(kClockwork),
                    {"plan.custom.per_iteration[0].blocking=false", "comm.timeout_ms=1000", "comm.watchdog_poll_ms=0",
                     "faults[0].slow_rank.rank=1", "faults[0].slow_rank.factor=1000000"}));
  EXPECT_EQ(result.outcome, Outcome::kHang);
  EXPECT_EQ(result.cause, Cause::kStragglerTimeout);
  EXPECT_EQ(result.stuck_ranks, std::vector<uint32_t>{1});
  ASSERT_EQ(result.nccl_log.size(), 1u);
  EXPECT_NE(result.nccl_log[0].find("[Rank 0]"), std::string::npos);
}

// A custom plan with nothing of its own: DDP's collectives are the only ones (issue 29). Rank 1
// dies in iteration 0; rank 0 waits for the first gradient bucket at the end of its backward
// (seq 4: DDP's construction issued 3 on 1.13).
TEST(SimulatorTest, APlanOfDdpCollectivesAloneWaitsInAGradientBucket) {
  const SimResult result =
      Simulated(WithOverrides(ScenarioFromText(R"(
    dataset { subdatasets { name: "d" explicit {
      scenes { name: "a" gt_counts: [1, 1, 1, 1] }
      scenes { name: "b" gt_counts: [1, 1, 1, 1] } } } }
    grouping { seq_split_num: 2 }
    comm { torch_version: "1.13" }
    job { world_size: 2 samples_per_gpu: 1 workers_per_gpu: 0 iterations: 4 }
    plan { custom {} ddp { tensors { name: "w" shape: [8, 8] } tensors { name: "b" shape: [8] }
                           broadcast_buffers: false } }
  )"),
                              {"faults[0].dead_rank.rank=1", "faults[0].dead_rank.at_ns=500000000"}));
  EXPECT_EQ(result.outcome, Outcome::kRankDied);
  EXPECT_EQ(result.stuck_ranks, std::vector<uint32_t>{1});
  ASSERT_TRUE(result.collective.has_value());
  EXPECT_EQ(result.collective->step, "DDP gradient bucket 0");
  EXPECT_EQ(result.collective->seq, 4u);
  EXPECT_EQ(result.collective->iteration, 0u);
}

TEST(SimulatorTest, EmptyDataLoaderKillsItsRank) {
  const SimResult result = Simulated(
      WithOverrides(ShippedScenario("tiny.pbtxt"), {"sampler.kind=distributed_group", "faults[0].uneven_batches.rank=1",
                                                    "faults[0].uneven_batches.batches_fewer=100"}));
  EXPECT_EQ(result.outcome, Outcome::kRankDied);
  EXPECT_EQ(result.cause, Cause::kUnevenBatches);
  EXPECT_EQ(result.stuck_ranks, std::vector<uint32_t>{1});
}

TEST(SimulatorTest, OneRankThatSpinsHangsWithoutAWatchdog) {
  const SimResult result =
      Simulated(WithOverrides(ShippedScenario("tiny.pbtxt"), {"job.world_size=1", "job.iterations=50"}));
  EXPECT_EQ(result.outcome, Outcome::kHang);
  EXPECT_EQ(result.cause, Cause::kSamplerLivelock);
  EXPECT_EQ(result.stuck_ranks, std::vector<uint32_t>{0});
  EXPECT_TRUE(result.stuck.has_value());
  EXPECT_TRUE(result.nccl_log.empty());
}

TEST(SimulatorTest, HugeValidatedDurationsSaturateInsteadOfWrapping) {
  const SimResult result = Simulated(WithOverrides(
      ScenarioFromText(kClockwork),
      {"cost.step_compute_ns=1000000000000000", "faults[0].slow_rank.rank=1", "faults[0].slow_rank.factor=1000000"}));
  // Rank 1 computes for ~32 years; rank 0 waits in the allreduce until its watchdog fires.
  EXPECT_EQ(result.outcome, Outcome::kHang);
  EXPECT_EQ(result.cause, Cause::kStragglerTimeout);
  EXPECT_EQ(result.stuck_ranks, std::vector<uint32_t>{1});
  EXPECT_EQ(result.waiting_ranks, std::vector<uint32_t>{0});
}

TEST(SimulatorTest, ASlowWorkerBeyondTheTimeoutIsAStraggler) {
  const SimResult result = Simulated(WithOverrides(
      ShippedScenario("tiny.pbtxt"), {"resample.policy=global", "faults[0].slow_worker.rank=1",
                                      "faults[0].slow_worker.worker=0", "faults[0].slow_worker.factor=100000"}));
  EXPECT_EQ(result.outcome, Outcome::kHang);
  EXPECT_EQ(result.cause, Cause::kStragglerTimeout);
  EXPECT_EQ(result.stuck_ranks, std::vector<uint32_t>{1});
}

}  // namespace
}  // namespace petrsim::sim
