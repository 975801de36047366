// Sweeps, the running of the runs (sweep.h): a sweep's runs on worker threads, seed-major, with
// a shared cache of built datasets, and each run's record from its simulation.
#include "sweep/sweep_internal.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <future>
#include <initializer_list>
#include <list>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "base/error.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "scenario/scenario_validation.h"
#include "sim/simulator.h"

namespace petrsim::sweep_internal {
namespace {

constexpr uint64_t kJobSeedModulus = uint64_t{1} << 31;

RunRecord RecordFromResult(const sim::SimResult& result) {
  RunRecord record;
  record.outcome = OutcomeName(result.outcome);
  record.cause = CauseName(result.cause);
  record.job_iterations = result.job_iterations;
  record.iterations_completed = result.iterations_completed;
  if (result.outcome == Outcome::kHang || result.outcome == Outcome::kDesync || result.outcome == Outcome::kRankDied) {
    if (result.blocked_at_ns >= 0) {
      record.time_to_hang_ns = result.blocked_at_ns;
    } else if (result.desync) {
      record.time_to_hang_ns = result.desync->at_ns;
    } else if (result.first_watchdog_ns >= 0) {
      record.time_to_hang_ns = result.first_watchdog_ns;
    } else {
      record.time_to_hang_ns = result.end_ns;
    }
  }
  record.end_ns = result.end_ns;
  record.last_iteration_end_ns = result.last_iteration_end_ns;
  record.stream_breaks = result.stream_breaks;
  record.events = result.events;
  return record;
}

// Shared by the workers: datasets by key, least recently used first out.
class DatasetCache {
 public:
  using Entry = std::shared_future<std::shared_ptr<const Dataset>>;

  std::shared_ptr<const Dataset> Get(const std::string& key, const Scenario& scenario,
                                     const std::string& display_name) {
    std::unique_lock lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end(); ++it) {
      if (it->first == key) {
        entries_.splice(entries_.begin(), entries_, it);
        const Entry entry = entries_.front().second;
        lock.unlock();
        return entry.get();  // waits while another worker builds it
      }
    }
    std::promise<std::shared_ptr<const Dataset>> promise;
    entries_.emplace_front(key, promise.get_future().share());
    if (entries_.size() > kDatasetCacheSize) entries_.pop_back();
    lock.unlock();
    try {
      auto dataset = std::make_shared<const Dataset>(BuildDataset(scenario, display_name));
      promise.set_value(dataset);
      return dataset;
    } catch (...) {
      promise.set_exception(std::current_exception());
      throw;
    }
  }

 private:
  std::mutex mutex_;
  std::list<std::pair<std::string, Entry>> entries_;
};

// What BuildDataset reads: the dataset, the filters, the grouping, the resample policy
// (drop_empty_groups) and, for synthetic data, the seed.
std::string DatasetKey(const Scenario& scenario) {
  std::string key;
  for (const google::protobuf::Message* part : std::initializer_list<const google::protobuf::Message*>{
           &scenario.dataset(), &scenario.filters(), &scenario.grouping(), &scenario.resample()}) {
    const std::string bytes = part->SerializeAsString();
    key += std::to_string(bytes.size()) + ":" + bytes;
  }
  const bool synthetic = std::any_of(scenario.dataset().subdatasets().begin(), scenario.dataset().subdatasets().end(),
                                     [](const SubDataset& sub) { return sub.source_case() == SubDataset::kSynthetic; });
  if (synthetic) key += "seed:" + std::to_string(scenario.seed());  // e.g. --vary seed=1,2
  return key;
}

RunRecord RunOne(const Scenario& base, const SweepIdentity& identity, uint64_t run, DatasetCache& cache) {
  const uint64_t c = run / identity.seeds;
  const uint32_t i = static_cast<uint32_t>(run % identity.seeds);
  Scenario scenario = CombinationScenario(base, identity, c);
  const uint64_t scenario_seed = identity.seed_base.value_or(0) + i;  // the run seed
  const uint32_t job_seed = static_cast<uint32_t>((uint64_t{scenario.job().seed()} + i) % kJobSeedModulus);
  scenario.mutable_job()->set_seed(job_seed);
  sim::SimOptions options;
  options.run_seed = scenario_seed;
  // The same runs in fewer events (sim/simulator.h); a run's `events` counts those.
  options.fuse_collective_chains = true;
  const std::string context =
      fmt::format("run {} ({}, seed index {}: run seed {}, job.seed {}): ", run,
                  identity.vary.empty() ? std::string("no --vary") : identity.Describe(c), i, scenario_seed, job_seed);
  try {
    ValidateScenario(scenario, identity.scenario_path);
    const std::shared_ptr<const Dataset> dataset = cache.Get(DatasetKey(scenario), scenario, identity.scenario_path);
    CheckSamplerConstructible(scenario, *dataset, identity.scenario_path);
    const sim::SimResult result = sim::Simulate(scenario, *dataset, options);
    RunRecord record = RecordFromResult(result);
    record.run = run;
    record.combination = c;
    record.seed_index = i;
    record.scenario_seed = scenario_seed;
    record.job_seed = job_seed;
    return record;
  } catch (const ScenarioError& error) {
    throw ScenarioError(context + error.what());
  }
}

}  // namespace

// Runs `runs` (global run indices, ascending) and returns their records in the same order.
std::vector<RunRecord> RunAll(const Scenario& base, const SweepIdentity& identity, const std::vector<uint64_t>& runs,
                              const SweepSpec& spec) {
  std::vector<RunRecord> records(runs.size());
  // Seed-major execution order: runs of one seed (that may share a dataset) run together.
  std::vector<size_t> order(runs.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return runs[a] % identity.seeds < runs[b] % identity.seeds; });

  DatasetCache cache;
  std::atomic<size_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex mutex;  // guards errors, done and the progress callback
  std::vector<std::pair<uint64_t, std::exception_ptr>> errors;
  uint64_t done = 0;
  auto work = [&] {
    while (!stop.load()) {
      const size_t k = next.fetch_add(1);
      if (k >= order.size()) break;
      const size_t slot = order[k];
      try {
        records[slot] = RunOne(base, identity, runs[slot], cache);
      } catch (...) {
        std::lock_guard lock(mutex);
        errors.emplace_back(runs[slot], std::current_exception());
        stop.store(true);
        continue;
      }
      std::lock_guard lock(mutex);
      ++done;
      if (spec.progress) spec.progress(done, runs.size());
    }
  };

  uint32_t jobs = spec.jobs;
  if (jobs == 0) jobs = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = std::min<size_t>(jobs, runs.size());
  if (threads <= 1) {
    work();
  } else {
    std::vector<std::thread> workers;
    workers.reserve(threads);
    try {
      for (size_t t = 0; t < threads; ++t) workers.emplace_back(work);
    } catch (...) {
      stop.store(true);
      for (std::thread& worker : workers) worker.join();
      throw;
    }
    for (std::thread& worker : workers) worker.join();
  }
  if (!errors.empty()) {
    // The failing run with the lowest index among those that ran.
    std::sort(errors.begin(), errors.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    std::rethrow_exception(errors.front().second);
  }
  return records;
}

}  // namespace petrsim::sweep_internal
