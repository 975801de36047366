// Speed of the simulator (issue 3 goals): the engine core (schedule + pop + dispatch of a
// trivial event with 10^4 pending, >= 15 M events/s) and the full model on the seed scenario
// (>= 5 M events/s). Whole-process figures (the 24-epoch job, 4,096 ranks, a 1,000-seed sweep)
// are bench/sim_process.sh. Run: build/bench/sim_bench
#include <benchmark/benchmark.h>

#include <queue>
#include <vector>

#include "data/dataset.h"
#include "data/random_streams.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_override.h"
#include "scenario/scenario_validation.h"
#include "sim/engine.h"
#include "sim/simulator.h"

namespace petrsim::sim {
namespace {

// 10^4 pending events; each dispatched event schedules one more at a random later time, so the
// queue stays at 10^4 and every iteration is one schedule, one pop and one dispatch. The same
// workload runs on the engine and on the binary-heap anchor below.
template <class EngineType>
void RunTrivialEvents(benchmark::State& state, EngineType& engine) {
  const auto pending = static_cast<uint64_t>(state.range(0));
  Rng rng(1);
  for (uint64_t i = 0; i < pending; ++i) {
    engine.Schedule(static_cast<int64_t>(rng.Below(1'000'000)), static_cast<uint32_t>(i % 4), static_cast<uint32_t>(i),
                    0);
  }
  uint64_t counters[4] = {0, 0, 0, 0};
  uint64_t delay_state = 12345;
  auto handler = [&](const Event& event) {
    ++counters[event.kind];  // the "dispatch": a switch-free table update
    delay_state = delay_state * 6364136223846793005ULL + 1442695040888963407ULL;
    engine.Schedule(event.time_ns + 1 + static_cast<int64_t>(delay_state >> 44), event.kind, event.actor, 0);
    return true;
  };
  const uint64_t batch = 1 << 16;
  for (auto _ : state) {
    EngineLimits limits;
    limits.events_max = engine.processed() + batch;
    engine.Run(handler, limits);
  }
  benchmark::DoNotOptimize(counters);
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * batch));
}

void BM_EngineCoreTrivialEvent(benchmark::State& state) {
  Engine engine(static_cast<uint64_t>(state.range(0)) + 16);
  RunTrivialEvents(state, engine);
  state.counters["pending"] = static_cast<double>(engine.queue().size());
}
BENCHMARK(BM_EngineCoreTrivialEvent)->Arg(10'000);

// The anchor for the engine core (issue 31): the same loop, the same Event, the same workload
// and the same per-event work (limit checks, clock, trace hash, handler) over a binary heap,
// std::priority_queue of Event ordered by (time_ns, sequence). bench/user_path.sh prints the
// ratio of the two.
class BinaryHeapEngine {
 public:
  explicit BinaryHeapEngine(size_t reserve) {
    std::vector<Event> storage;
    storage.reserve(reserve);
    queue_ = Queue(Later{}, std::move(storage));
  }

  uint64_t processed() const { return processed_; }
  size_t size() const { return queue_.size(); }

  void Schedule(int64_t time_ns, uint32_t kind, uint32_t actor, uint64_t payload) {
    PETRSIM_ASSERT(time_ns >= now_ns_);
    queue_.push(Event{time_ns, next_sequence_++, kind, actor, payload});
  }

  template <class Handler>
  StopReason Run(Handler&& handler, const EngineLimits& limits) {
    while (!queue_.empty()) {
      if (processed_ >= limits.events_max) return StopReason::kEventsLimit;
      const Event event = queue_.top();
      if (event.time_ns > limits.time_max_ns) return StopReason::kTimeLimit;
      queue_.pop();
      now_ns_ = event.time_ns;
      ++processed_;
      trace_hash_ = MixEvent(trace_hash_, event);
      if (!handler(event)) return StopReason::kHandlerStopped;
    }
    return StopReason::kQueueEmpty;
  }

 private:
  struct Later {  // the heap's "less": the later event, so the earliest is on top
    bool operator()(const Event& a, const Event& b) const {
      return a.time_ns != b.time_ns ? a.time_ns > b.time_ns : a.sequence > b.sequence;
    }
  };
  using Queue = std::priority_queue<Event, std::vector<Event>, Later>;

  Queue queue_;
  int64_t now_ns_ = 0;
  uint64_t processed_ = 0;
  uint64_t next_sequence_ = 0;
  uint64_t trace_hash_ = 0xCBF29CE484222325ULL;
};

void BM_BinaryHeapTrivialEvent(benchmark::State& state) {
  BinaryHeapEngine engine(static_cast<uint64_t>(state.range(0)) + 16);
  RunTrivialEvents(state, engine);
  state.counters["pending"] = static_cast<double>(engine.size());
}
BENCHMARK(BM_BinaryHeapTrivialEvent)->Arg(10'000);

Scenario Shipped(const std::string& name, const std::vector<std::string>& sets = {}) {
  Scenario scenario = LoadScenarioFile(std::string(PETRSIM_SOURCE_DIR) + "/scenarios/" + name);
  ApplyOverrides(scenario, sets);
  ValidateScenario(scenario, name);
  return scenario;
}

// The whole simulator on a scenario (dataset built once, outside the timing): events/s.
void RunModel(benchmark::State& state, const Scenario& scenario, bool wake_each_rank = false) {
  const Dataset dataset = BuildDataset(scenario, "bench");
  SimOptions options;
  options.wake_each_rank = wake_each_rank;
  uint64_t events = 0;
  for (auto _ : state) {
    const SimResult result = Simulate(scenario, dataset, options);
    events += result.events;
    benchmark::DoNotOptimize(result.trace_hash);
  }
  state.SetItemsProcessed(static_cast<int64_t>(events));
  state.counters["events_per_run"] = static_cast<double>(events) / static_cast<double>(state.iterations());
}

// The seed scenario to its hang (159 iterations of 8 ranks, then the watchdog).
void BM_FullModelSeedScenario(benchmark::State& state) {
  static const Scenario scenario = Shipped("streampetr_trainval_hang.pbtxt");
  RunModel(state, scenario);
}
BENCHMARK(BM_FullModelSeedScenario)->Unit(benchmark::kMillisecond);

// The same with one wake-up event per rank per completed collective (SimOptions::
// wake_each_rank): the same run in about 3.5 times as many, lighter events. The default mode
// is faster in wall time; this one is the finer-grained event count.
void BM_FullModelSeedScenarioWakeEachRank(benchmark::State& state) {
  static const Scenario scenario = Shipped("streampetr_trainval_hang.pbtxt");
  RunModel(state, scenario, true);
}
BENCHMARK(BM_FullModelSeedScenarioWakeEachRank)->Unit(benchmark::kMillisecond);

// One epoch (1,758 iterations, 8 ranks) of the global-policy fix.
void BM_FullModelGlobalOneEpoch(benchmark::State& state) {
  static const Scenario scenario = Shipped("streampetr_trainval_hang_global.pbtxt", {"job.epochs=1"});
  RunModel(state, scenario);
}
BENCHMARK(BM_FullModelGlobalOneEpoch)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace petrsim::sim

BENCHMARK_MAIN();
