// The simulated job set up: the plan resolved into steps, the ranks, workers and faults; see job_sim.h.
#include "sim/job_sim.h"

#include <algorithm>

#include "formats/torch_logs/watchdog_lines.h"
#include "plan/ddp_plan.h"

namespace petrsim::sim::internal {

int64_t JobSim::Jitter(Rng& rng, int64_t ns) const {
  if (jitter_ppm_ == 0 || ns == 0) return ns;
  const int64_t offset = static_cast<int64_t>(rng.Below(static_cast<uint64_t>(2 * jitter_ppm_ + 1))) - jitter_ppm_;
  return ScalePpm(ns, kPpm + offset);
}

uint32_t JobSim::ProcessGroupId(const std::string& name) {
  for (uint32_t i = 0; i < process_group_names_.size(); ++i) {
    if (process_group_names_[i] == name) return i;
  }
  process_group_names_.push_back(name);
  net_.AddGroup();
  return static_cast<uint32_t>(process_group_names_.size() - 1);
}

PlanStep JobSim::Resolve(const Collective& collective, int32_t nonblocking_ordinal) {
  PlanStep step;
  step.collective = &collective;
  step.pg = ProcessGroupId(collective.process_group());
  step.nonblocking_ordinal = nonblocking_ordinal;
  const uint64_t n = world_;
  const WorkNumel work_numel = NumelOfWork(collective, world_);
  const uint64_t numel = work_numel.in;
  step.numel_in = work_numel.in;
  step.numel_out = work_numel.out;
  // Ring model: latency per step plus bytes over the link bandwidth.
  const auto& cost = scenario_.cost();
  const uint64_t bytes = numel * DtypeBytes(collective.dtype());
  const auto transfer = [&](unsigned __int128 numerator, uint64_t denominator) {
    return static_cast<int64_t>(numerator * 1'000'000'000ULL /
                                (static_cast<unsigned __int128>(denominator) * cost.bandwidth_bytes_per_s()));
  };
  const int64_t latency = static_cast<int64_t>(cost.collective_latency_ns());
  if (n > 1) {
    switch (collective.op()) {
      case Collective::allreduce:
      case Collective::barrier:
        step.duration_ns = 2 * static_cast<int64_t>(n - 1) * latency +
                           transfer(static_cast<unsigned __int128>(2 * (n - 1)) * bytes, n);
        break;
      case Collective::broadcast:
      case Collective::reduce:
        step.duration_ns = static_cast<int64_t>(n - 1) * latency + transfer(bytes, 1);
        break;
      case Collective::allgather:
        step.duration_ns =
            static_cast<int64_t>(n - 1) * latency + transfer(static_cast<unsigned __int128>(n - 1) * bytes, 1);
        break;
      case Collective::reduce_scatter:
      case Collective::alltoall:
        step.duration_ns =
            static_cast<int64_t>(n - 1) * latency + transfer(static_cast<unsigned __int128>(n - 1) * bytes, n);
        break;
    }
  }
  return step;
}

void JobSim::Setup() {
  // A rank the network returns (from a collective it blocked in, or its wait for its works in
  // flight) goes on with its program.
  net_.SetWaker([](void* job, uint32_t rank) { static_cast<JobSim*>(job)->Resume(rank); }, this);
  const auto& cost = scenario_.cost();
  sample_load_ns_ = static_cast<int64_t>(cost.sample_load_ns());
  step_compute_ns_ = static_cast<int64_t>(cost.step_compute_ns());
  jitter_ppm_ = FactorPpm(cost.jitter_fraction());
  checkpoint_ns_ = static_cast<int64_t>(cost.checkpoint_ns());
  timeout_ns_ = static_cast<int64_t>(scenario_.comm().timeout_ms()) * 1'000'000;
  poll_ns_ = static_cast<int64_t>(scenario_.comm().watchdog_poll_ms()) * 1'000'000;
  nccl_ = scenario_.comm().backend() == Comm::nccl;
  torch_version_ = ScenarioTorchVersion(scenario_);
  watchdog_note_ = CollectiveTimeoutNote(scenario_.comm().backend(), torch_version_);
  pipeline_ = PipelineDraws(scenario_);
  ResolvePlan();
  SetupRanks();
  ApplyFaults();
}

// The plan's collectives resolved into PlanSteps, per section and phase.
void JobSim::ResolvePlan() {
  // The groups numbered as the job creates them (the names PyTorch's logs give them).
  for (const std::string& name : ProcessGroupNames(plan_)) ProcessGroupId(name);
  for (const auto& c : plan_.startup) startup_steps_.push_back(Resolve(c, -1));
  // One list per distinct iteration of the plan: the leading ones (DDP's first iterations),
  // then the steady one.
  for (size_t phase = 0; phase <= plan_.leading.size(); ++phase) {
    const auto& list = phase < plan_.leading.size() ? plan_.leading[phase] : plan_.per_iteration;
    iteration_steps_.emplace_back();
    nonblocking_steps_.push_back(0);
    for (const auto& c : list) {
      const int32_t ordinal = c.blocking() ? -1 : static_cast<int32_t>(nonblocking_steps_.back()++);
      iteration_steps_.back().push_back(Resolve(c, ordinal));
    }
  }
  for (const auto& p : plan_.periodic) {
    periodic_steps_.push_back(Resolve(p.collective(), -1));
  }
  ResolveChains();
}

// Each per-iteration step's chain: the blocking steps right after it on its group that no compute
// precedes (index > 0: the forward pass and a straggler's delay come before step 0 only).
void JobSim::ResolveChains() {
  chains_.assign(iteration_steps_.size(), {});
  for (size_t phase = 0; phase < iteration_steps_.size(); ++phase) {
    const std::vector<PlanStep>& steps = iteration_steps_[phase];
    std::vector<Chain>& chains = chains_[phase];
    chains.assign(steps.size(), Chain{});
    for (size_t i = steps.size(); i-- > 0;) {
      if (i + 1 >= steps.size()) continue;
      const PlanStep& next = steps[i + 1];
      const Collective& c = *next.collective;
      if (!c.blocking() || next.nonblocking_ordinal >= 0 || c.compute_before_ns() != 0 || next.pg != steps[i].pg) {
        continue;
      }
      chains[i].steps = 1 + chains[i + 1].steps;
      chains[i].duration_ns = SaturatingAdd(next.duration_ns, chains[i + 1].duration_ns);
      chains[i].conditional = c.only_when_local_batch_has_gt() || chains[i + 1].conditional;
    }
  }
}

// Every rank's state: its sampler, program, data loader ring, workers and random streams.
void JobSim::SetupRanks() {
  const auto& job = scenario_.job();
  const SamplerFactory samplers(scenario_, dataset_);
  const std::vector<uint64_t> epoch_batches = BatchesPerEpochByRank(scenario_, dataset_);
  const uint64_t natural =
      loader_.batches_per_epoch != 0 ? loader_.batches_per_epoch : IterationsPerEpoch(scenario_, dataset_);
  job_iterations_ = JobIterations(scenario_, dataset_);
  const uint64_t job_iterations = job_iterations_;
  const uint64_t epochs = job.has_epochs() ? job.epochs() : 1;
  stragglers_.assign(world_, {kNone, 0});
  ranks_.resize(world_);
  const uint64_t ring = std::max<uint64_t>(1, loader_.in_flight);
  const uint64_t streams_root =
      options_.run_seed == 0 ? scenario_.seed() : DeriveStreamSeed(scenario_.seed(), "run", options_.run_seed);
  for (uint32_t r = 0; r < world_; ++r) {
    RankState& rank = ranks_[r];
    rank.rank = r;
    rank.stats.rank = r;
    rank.sampler = samplers.ForRank(r);
    rank.draws.resize(batch_size_);
    rank.batches.resize(ring);
    rank.batch_draws.resize(ring * batch_size_);
    rank.batch_final.resize(ring * batch_size_);
    rank.batch_extra_loads.resize(ring);
    rank.last_fed.assign(batch_size_, -1);
    rank.workers.resize(std::max<uint32_t>(1, loader_.workers));
    for (uint32_t w = 0; w < rank.workers.size(); ++w) {
      rank.workers[w].jitter = Rng(DeriveStreamSeed(streams_root, "load_jitter", r, w));
    }
    rank.compute_jitter = Rng(DeriveStreamSeed(streams_root, "compute_jitter", r));
    rank.natural_epoch_batches = natural;
    rank.epoch_batches = epoch_batches[r];
    const uint64_t fewer = natural - epoch_batches[r];
    rank.iterations_total =
        job.has_iterations() ? job_iterations : job_iterations - std::min(job_iterations, epochs * fewer);
    rank.program.emplace(plan_, r, rank.iterations_total);
  }
}

// The scenario's faults: slow ranks and workers, stragglers, and the deaths as events.
void JobSim::ApplyFaults() {
  for (const Fault& fault : scenario_.faults()) {
    if (fault.has_dead_worker()) fault_times_.push_back(static_cast<int64_t>(fault.dead_worker().at_ns()));
    if (fault.has_dead_rank()) fault_times_.push_back(static_cast<int64_t>(fault.dead_rank().at_ns()));
  }
  std::sort(fault_times_.begin(), fault_times_.end());
  for (const Fault& fault : scenario_.faults()) {
    if (fault.has_slow_rank()) {
      ranks_[fault.slow_rank().rank()].slow_ppm = FactorPpm(fault.slow_rank().factor());
    } else if (fault.has_slow_worker()) {
      auto& workers = ranks_[fault.slow_worker().rank()].workers;
      const uint32_t w = fault.slow_worker().worker();
      if (w < workers.size()) workers[w].slow_ppm = FactorPpm(fault.slow_worker().factor());
    } else if (fault.has_dead_worker()) {
      engine_.Schedule(static_cast<int64_t>(fault.dead_worker().at_ns()), kWorkerDies, fault.dead_worker().rank(),
                       fault.dead_worker().worker());
    } else if (fault.has_dead_rank()) {
      engine_.Schedule(static_cast<int64_t>(fault.dead_rank().at_ns()), kRankDies, fault.dead_rank().rank(), 0);
    } else if (fault.has_straggler()) {
      stragglers_[fault.straggler().rank()] = {fault.straggler().iteration(),
                                               static_cast<int64_t>(fault.straggler().delay_ns())};
    }
  }
}

}  // namespace petrsim::sim::internal
