// The Backend seam on the simulated network (sim/sim_backend.h), in virtual time: what
// tests/backend_test.cc asks of the threaded implementations (a work completes only once every
// member issued it, a poll sees a pending work, a callback runs once and on a failure), here with
// the times the simulator gives: one duration after the last arrival, members blocked in one
// collective returned in arrival order, a rank's wait for its async works ended by the last one.
#include "sim/sim_backend.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <vector>

namespace petrsim::sim {
namespace {

using comm::CommError;
using comm::IssueOptions;
using comm::Work;

constexpr uint32_t kWorld = 3;
constexpr int64_t kDuration = 1000;
constexpr SimEventKinds kKinds{/*collective_done=*/1, /*rank_wake=*/2, /*work_done=*/3};
constexpr uint32_t kTestAction = 0;  // an event of the test's own: actor indexes actions_

Collective Call(Collective::Op op, uint64_t numel, const std::string& group = "default_pg") {
  Collective c;
  c.set_op(op);
  c.set_numel(numel);
  c.set_process_group(group);
  return c;
}

// Three simulated ranks on one network, with the plan's collectives resolved, and an event loop
// that runs the test's actions at given virtual times.
class SimBackendTest : public ::testing::Test {
 protected:
  SimBackendTest() {
    plan_ = {Call(Collective::allreduce, 4), Call(Collective::broadcast, 4), Call(Collective::allreduce, 8, "other")};
    const uint32_t world_group = net_.AddGroup();
    const uint32_t other_group = net_.AddGroup();
    for (const Collective& c : plan_) {
      PlanStep step;
      step.collective = &c;
      step.pg = c.process_group() == "other" ? other_group : world_group;
      step.duration_ns = kDuration;
      step.numel_in = step.numel_out = c.numel();
      steps_.push_back(step);
    }
    index_.AddList(plan_, steps_);
    for (uint32_t r = 0; r < kWorld; ++r)
      backends_.push_back(std::make_unique<SimBackend>(net_, index_, r, iteration_));
  }

  // Runs `action` at virtual time `at_ns`.
  void At(int64_t at_ns, std::function<void()> action) {
    actions_.push_back(std::move(action));
    engine_.Schedule(at_ns, kTestAction, static_cast<uint32_t>(actions_.size() - 1), 0);
  }
  // Runs every event up to and including `until_ns`.
  void RunUntil(int64_t until_ns) {
    EngineLimits limits;
    limits.time_max_ns = until_ns;
    engine_.Run(
        [&](const Event& event) {
          switch (event.kind) {
            case kTestAction:
              actions_[event.actor]();
              break;
            case kKinds.collective_done:
              net_.OnCollectiveDone(event.actor, event.payload);
              break;
            case kKinds.rank_wake:
              EXPECT_TRUE(net_.OnRankWake(event.actor)) << "no rank-wake of the test's own";
              break;
            case kKinds.work_done:
              net_.OnWorkDone(event.actor, event.payload);
              break;
          }
          return true;
        },
        limits);
  }
  std::unique_ptr<Work> Issue(uint32_t rank, size_t step, bool async_op = true) {
    return backends_[rank]->Issue(plan_[step], {}, IssueOptions{.async_op = async_op});
  }
  int64_t now() const { return engine_.now_ns(); }

  Engine engine_;
  SimNet net_{engine_, kWorld, kKinds, /*wake_each_rank=*/false};
  std::vector<Collective> plan_;
  std::vector<PlanStep> steps_;
  StepIndex index_;
  uint64_t iteration_ = 0;
  std::vector<std::unique_ptr<SimBackend>> backends_;
  std::vector<std::function<void()>> actions_;
};

TEST_F(SimBackendTest, AWorkCompletesOneDurationAfterItsLastMemberArrived) {
  std::vector<std::unique_ptr<Work>> works(kWorld);
  std::vector<int64_t> called_at;
  At(0, [&] {
    works[0] = Issue(0, 0);
    EXPECT_FALSE(works[0]->IsCompleted());
    EXPECT_FALSE(works[0]->WaitFor(0));
    EXPECT_FALSE(works[0]->WaitFor(20)) << "virtual time does not pass inside a call";
    works[0]->OnCompletion([&] { called_at.push_back(now()); });
  });
  At(100, [&] { works[1] = Issue(1, 0); });
  At(250, [&] {
    works[2] = Issue(2, 0);
    // Every member is in: the completion time is known, but it has not come yet.
    EXPECT_FALSE(works[2]->IsCompleted());
    EXPECT_THROW(works[2]->Wait(), CommError) << "a pending work cannot be waited for in virtual time";
  });
  RunUntil(250 + kDuration - 1);
  EXPECT_TRUE(called_at.empty());
  for (const auto& work : works) EXPECT_FALSE(work->IsCompleted());
  RunUntil(250 + kDuration);
  EXPECT_EQ(called_at, (std::vector<int64_t>{250 + kDuration}));
  for (const auto& work : works) {
    EXPECT_TRUE(work->IsCompleted());
    EXPECT_TRUE(work->WaitFor(0));
    EXPECT_NO_THROW(work->Wait());
    // The simulator moves no values.
    EXPECT_THROW(work->Result(), CommError);
  }
  // On a work that is over, the callback runs at once.
  int at_once = 0;
  works[1]->OnCompletion([&] { ++at_once; });
  EXPECT_EQ(at_once, 1);
}

TEST_F(SimBackendTest, MembersBlockedInACollectiveReturnInArrivalOrderAtItsCompletion) {
  std::vector<std::unique_ptr<Work>> works(kWorld);
  std::vector<std::pair<uint32_t, int64_t>> returned;
  for (const uint32_t r : {1u, 2u, 0u}) {
    At(10 * (r == 1   ? 0
             : r == 2 ? 1
                      : 2),
       [&, r] {
         works[r] = Issue(r, 0, /*async_op=*/false);
         works[r]->OnCompletion([&, r] { returned.emplace_back(r, now()); });
       });
  }
  RunUntil(1'000'000);
  EXPECT_EQ(returned, (std::vector<std::pair<uint32_t, int64_t>>{{1, 1020}, {2, 1020}, {0, 1020}}));
  // Returned, each may issue again: its next collective on the group is seq 2.
  for (uint32_t r = 0; r < kWorld; ++r) {
    EXPECT_FALSE(net_.blocking(r));
    EXPECT_EQ(net_.next_seq(r, 0), 2u);
    EXPECT_EQ(net_.next_seq(r, 1), 1u) << "the other group keeps its own sequence";
  }
}

TEST_F(SimBackendTest, OnAllCompletedReturnsARankWhenItsLastAsyncWorkCompletes) {
  std::vector<std::unique_ptr<Work>> rank0;
  std::vector<int64_t> called_at;
  At(0, [&] {
    rank0.push_back(Issue(0, 0));
    rank0.push_back(Issue(0, 2));
    backends_[0]->OnAllCompleted(rank0, [&] { called_at.push_back(now()); });
  });
  At(100, [&] {
    for (const uint32_t r : {1u, 2u}) Issue(r, 2);
  });
  At(500, [&] {
    for (const uint32_t r : {1u, 2u}) Issue(r, 0);
  });
  RunUntil(1'000'000);
  // The group "other" completed at 1100, default_pg at 1500: the rank returns at the latter.
  EXPECT_EQ(called_at, (std::vector<int64_t>{500 + kDuration}));
  for (const auto& work : rank0) EXPECT_TRUE(work->IsCompleted());
  // All of them over: at once.
  int at_once = 0;
  backends_[0]->OnAllCompleted({}, [&] { ++at_once; });
  EXPECT_EQ(at_once, 1);
}

TEST_F(SimBackendTest, ADesyncFailsTheLaterArrivalWithAMismatch) {
  std::unique_ptr<Work> first;
  std::unique_ptr<Work> other;
  At(0, [&] { first = Issue(0, 0); });
  At(5, [&] {
    iteration_ = 7;
    other = Issue(1, 1);  // a broadcast where rank 0 issued an allreduce, at seq 1 of default_pg
  });
  RunUntil(1'000'000);
  EXPECT_FALSE(first->IsCompleted());
  EXPECT_TRUE(other->IsCompleted()) << "a failed work is over";
  try {
    other->WaitFor(0);
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& error) {
    EXPECT_EQ(error.kind(), CommError::Kind::kMismatch);
  }
  int calls = 0;
  other->OnCompletion([&] { ++calls; });
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(net_.mismatch().first_rank, 0u);
  EXPECT_EQ(net_.mismatch().first, &steps_[0]);
  EXPECT_EQ(net_.mismatch().issued.seq, 1u);
  EXPECT_EQ(net_.mismatch().issued.iteration, 7u);
}

TEST_F(SimBackendTest, ADeadMembersCollectiveNeverCompletes) {
  std::vector<std::unique_ptr<Work>> works(kWorld);
  int calls = 0;
  At(0, [&] {
    works[2] = Issue(2, 0);
    net_.RankDied(2);
  });
  At(10, [&] {
    for (const uint32_t r : {0u, 1u}) {
      works[r] = Issue(r, 0);
      works[r]->OnCompletion([&] { ++calls; });
    }
  });
  RunUntil(1'000'000'000);
  EXPECT_EQ(calls, 0);
  EXPECT_FALSE(works[0]->IsCompleted());
  EXPECT_FALSE(works[1]->IsCompleted());
  EXPECT_EQ(net_.collectives().OldestIncomplete(nullptr)->arrived, 2u);
}

TEST_F(SimBackendTest, ACollectiveOutsideThePlanIsRefused) {
  const Collective stranger = Call(Collective::allgather, 4);
  try {
    backends_[0]->Issue(stranger, {});
    ADD_FAILURE() << "no CommError";
  } catch (const CommError& error) {
    EXPECT_EQ(error.kind(), CommError::Kind::kBackend);
    EXPECT_NE(std::string(error.what()).find("allgather"), std::string::npos) << error.what();
  }
  EXPECT_EQ(backends_[0]->backend_name(), "simulated");
  EXPECT_EQ(backends_[2]->rank(), 2u);
  EXPECT_EQ(backends_[2]->world_size(), kWorld);
}

}  // namespace
}  // namespace petrsim::sim
