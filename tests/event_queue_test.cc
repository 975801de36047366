// The event queue's order: (time, insertion sequence), checked against a sorted reference.
#include "sim/event_queue.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <vector>

#include "data/random_streams.h"
#include "sim/engine.h"

namespace petrsim::sim {
namespace {

TEST(EventQueueTest, EqualTimesPopInInsertionOrder) {
  EventQueue queue;
  queue.Schedule(5, 0, 1, 0);
  queue.Schedule(3, 0, 2, 0);
  queue.Schedule(5, 0, 3, 0);
  queue.Schedule(3, 0, 4, 0);
  queue.Schedule(5, 0, 5, 0);
  std::vector<uint32_t> actors;
  while (!queue.empty()) actors.push_back(queue.Pop().actor);
  EXPECT_EQ(actors, (std::vector<uint32_t>{2, 4, 1, 3, 5}));
}

TEST(EventQueueTest, MatchesASortedReferenceUnderInterleavedPushAndPop) {
  EventQueue queue;
  Rng rng(42);
  std::vector<std::tuple<int64_t, uint64_t>> reference;  // (time, sequence)
  uint64_t sequence = 0;
  int64_t now = 0;
  for (int round = 0; round < 20000; ++round) {
    const int pushes = static_cast<int>(rng.Below(3));
    for (int p = 0; p < pushes; ++p) {
      // Few distinct times, so ties are common.
      const int64_t time = now + static_cast<int64_t>(rng.Below(8));
      queue.Schedule(time, 0, 0, sequence);
      reference.emplace_back(time, sequence);
      ++sequence;
    }
    if (!reference.empty() && rng.Below(2) == 0) {
      const auto best = std::min_element(reference.begin(), reference.end());
      const Event event = queue.Pop();
      EXPECT_EQ(event.time_ns, std::get<0>(*best));
      EXPECT_EQ(event.payload, std::get<1>(*best));
      EXPECT_EQ(event.sequence, std::get<1>(*best));
      now = event.time_ns;
      reference.erase(best);
    }
    ASSERT_EQ(queue.size(), reference.size());
  }
}

TEST(EngineTest, StopsAtEachLimitWithItsReason) {
  Engine engine;
  int handled = 0;
  auto reschedule = [&](const Event& e) {
    ++handled;
    engine.Schedule(e.time_ns + 10, 0, 0, 0);
    return true;
  };
  engine.Schedule(0, 0, 0, 0);
  EngineLimits limits;
  limits.events_max = 100;
  EXPECT_EQ(engine.Run(reschedule, limits), StopReason::kEventsLimit);
  EXPECT_EQ(handled, 100);
  EXPECT_EQ(engine.processed(), 100u);

  Engine timed;
  timed.Schedule(0, 0, 0, 0);
  limits.events_max = 1'000'000;
  limits.time_max_ns = 55;
  int timed_handled = 0;
  EXPECT_EQ(timed.Run(
                [&](const Event& e) {
                  ++timed_handled;
                  timed.Schedule(e.time_ns + 10, 0, 0, 0);
                  return true;
                },
                limits),
            StopReason::kTimeLimit);
  EXPECT_EQ(timed_handled, 6);  // times 0, 10, ..., 50
  EXPECT_EQ(timed.now_ns(), 50);

  Engine stopping;
  stopping.Schedule(7, 0, 0, 0);
  stopping.Schedule(9, 0, 0, 0);
  EXPECT_EQ(stopping.Run([](const Event&) { return false; }, EngineLimits{}), StopReason::kHandlerStopped);
  EXPECT_EQ(stopping.now_ns(), 7);
  Engine empty;
  EXPECT_EQ(empty.Run([](const Event&) { return true; }, EngineLimits{}), StopReason::kQueueEmpty);
}

TEST(EngineTest, TraceHashDependsOnOrderAndContent) {
  auto run = [](std::vector<std::tuple<int64_t, uint32_t>> events) {
    Engine engine;
    for (const auto& [time, actor] : events) engine.Schedule(time, 1, actor, 0);
    engine.Run([](const Event&) { return true; }, EngineLimits{});
    return engine.trace_hash();
  };
  EXPECT_EQ(run({{1, 1}, {2, 2}}), run({{2, 2}, {1, 1}}));  // same processed order
  EXPECT_NE(run({{1, 1}, {1, 2}}), run({{1, 2}, {1, 1}}));  // ties in another order
  EXPECT_NE(run({{1, 1}, {2, 2}}), run({{1, 1}, {3, 2}}));
}

}  // namespace
}  // namespace petrsim::sim
