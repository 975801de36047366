// The training loop of one rank; see trainer.h.
#include "real/trainer.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <numbers>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "data/data_loader.h"
#include "data/numpy_random.h"
#include "data/resample_policy.h"
#include "data/sampler.h"
#include "data/sampler_watchdog.h"
#include "plan/iteration_plan.h"
#include "plan/rank_program.h"
#include "real/batch_loader.h"
#include "real/c10d_backend.h"
#include "real/collective_issuer.h"
#include "real/geometry.h"
#include "real/job_control.h"
#include "real/losses.h"
#include "real/rank_recorder.h"
#include "real/renderer.h"
#include "real/termination.h"
#include "real/threaded_loader.h"
#include "real/training_step.h"
#include "scenario/outcome.h"
#include "trace/rank_writer.h"

namespace petrsim::real {
namespace {

// What a periodic collective carries: mmcv's logger reduces the peak memory (MiB) to rank 0
// with MAX; anything else carries zeros.
std::vector<double> PeriodicInput(const Collective& step) {
  if (!step.name().starts_with("logger reduce")) return {};
  rusage usage{};
  ::getrusage(RUSAGE_SELF, &usage);
  return std::vector<double>(step.numel(), static_cast<double>(usage.ru_maxrss / 1024));
}

}  // namespace

double LearningRateAt(const TrainOptions& options, uint64_t iteration, uint64_t iterations) {
  // mmcv: the cosine runs over the whole run (progress = iteration / max_iters) from the base
  // rate to min_lr_ratio x it; during the warmup the rate is that one times
  // 1 - (1 - iteration / warmup_iters) (1 - warmup_ratio).
  const double base = options.learning_rate, target = base * options.min_lr_ratio;
  const double progress = iterations == 0 ? 0.0 : static_cast<double>(iteration) / static_cast<double>(iterations);
  const double regular = target + 0.5 * (base - target) * (1 + std::cos(std::numbers::pi * progress));
  if (iteration >= options.warmup_iterations) return regular;
  const double k = (1 - static_cast<double>(iteration) / static_cast<double>(options.warmup_iterations)) *
                   (1 - options.warmup_ratio);
  return regular * (1 - k);
}

uint64_t HashParameters(torch::nn::Module& module) {
  uint64_t hash = 1469598103934665603ULL;
  for (const auto& p : module.parameters()) {
    const auto t = p.detach().contiguous().to(torch::kCPU);
    const auto* bytes = static_cast<const uint8_t*>(t.data_ptr());
    for (int64_t i = 0; i < t.numel() * static_cast<int64_t>(t.element_size()); ++i) {
      hash = (hash ^ bytes[i]) * 1099511628211ULL;
    }
  }
  return hash;
}

namespace {

// The module as DDP sees it: its tensors in state_dict() order (each module's parameters, then
// its buffers, modules in pre-order), as mmdet3d wraps it (broadcast_buffers=False).
DdpModel DescribeForDdp(torch::nn::Module& module) {
  DdpModel ddp;
  ddp.set_broadcast_buffers(false);
  for (const auto& item : module.named_modules()) {
    const auto add = [&](const std::string& name, const torch::Tensor& t, DdpTensor::Kind kind) {
      DdpTensor* tensor = ddp.add_tensors();
      tensor->set_name(item.key().empty() ? name : item.key() + "." + name);
      tensor->set_kind(kind);
      for (const int64_t size : t.sizes()) tensor->add_shape(static_cast<uint64_t>(size));
      tensor->set_dtype(PlanDtype(t.scalar_type()));
      if (kind == DdpTensor::parameter && !t.requires_grad()) tensor->set_requires_grad(false);
    };
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) {
      add(p.key(), p.value(), DdpTensor::parameter);
    }
    for (const auto& b : item.value()->named_buffers(/*recurse=*/false)) add(b.key(), b.value(), DdpTensor::buffer);
  }
  return ddp;
}

}  // namespace

std::optional<PlanSizes> ParsePlanSizes(std::string_view text) {
  if (text == "scenario") return PlanSizes::kScenario;
  if (text == "model") return PlanSizes::kModel;
  return std::nullopt;
}

namespace {

// With the scenario's sizes the real model must fit the plan: every distinct iteration's gradient
// buckets, and DDP's float32 module state broadcast, hold at least its parameters.
void CheckModelFitsPlan(const Scenario& scenario, uint64_t parameters) {
  const ExpandedPlan plan = ExpandPlan(scenario);
  const auto refuse = [&](const std::string& what, uint64_t holds) {
    throw ScenarioError(fmt::format(
        "--plan-sizes scenario: the plan's {} hold {} elements, fewer than the {} parameters of the real model "
        "(the scaled-down StreamPETR), so its gradients or parameters would not all be synchronised; describe a "
        "model at least that large in plan.ddp, or run with --plan-sizes model (the plan rewritten for the real "
        "model)",
        what, holds, parameters));
  };
  for (uint64_t i = 0; i <= plan.leading.size(); ++i) {
    uint64_t elements = 0, buckets = 0;
    for (const Collective& step : plan.Iteration(i)) {
      if (!step.name().starts_with("DDP gradient bucket")) continue;
      elements += step.numel();
      ++buckets;
    }
    if (buckets > 0 && elements < parameters) {
      refuse(fmt::format("DDP gradient buckets of {}", i < plan.leading.size() ? fmt::format("iteration {}", i)
                                                                               : std::string("every later iteration")),
             elements);
    }
  }
  for (const Collective& step : plan.startup) {
    if (step.name().starts_with("DDP __init__: module state broadcast 0") && step.dtype() == Collective::float32 &&
        step.numel() < parameters) {
      refuse("'" + step.name() + "'", step.numel());
    }
  }
}

}  // namespace

RealJob MakeRealJob(const Scenario& scenario, const ModelConfig& model, PlanSizes sizes) {
  RealJob job;
  job.scenario = scenario;
  job.model = model;
  job.plan_sizes = sizes;
  if (!scenario.plan().has_custom()) {
    job.model.decoder_layers = scenario.plan().streampetr().decoder_layers();
  }
  {
    std::lock_guard<std::mutex> lock(ModelInitMutex());
    StreamPetr counted(job.model);
    for (const auto& p : counted->parameters()) job.parameters += static_cast<uint64_t>(p.numel());
    if (sizes == PlanSizes::kModel && !scenario.plan().has_custom()) {
      // The StreamPETR plan's DDP collectives for the model this backend trains.
      *job.scenario.mutable_plan()->mutable_ddp() = DescribeForDdp(*counted);
    }
  }
  if (sizes == PlanSizes::kScenario) CheckModelFitsPlan(job.scenario, job.parameters);
  return job;
}

TrainResult TrainRank(const Scenario& input_scenario, const Dataset& dataset, const TrainOptions& options) {
  const RealJob job = MakeRealJob(input_scenario, options.model, options.plan_sizes);
  const Scenario& scenario = job.scenario;
  const ExpandedPlan plan = ExpandPlan(scenario);
  const int64_t timeout_ms =
      options.timeout_ms > 0 ? options.timeout_ms : static_cast<int64_t>(scenario.comm().timeout_ms());
  const auto timeout = std::chrono::milliseconds(timeout_ms);
  const uint32_t rank = options.rank;

  // A rank that is its own process takes SIGTERM, SIGINT and SIGHUP on a watcher thread (below):
  // blocked here, before any thread starts, so that every thread inherits the mask.
  if (options.own_process) BlockTerminationSignals();
  // The trace: steady-clock nanoseconds since the rank started; records come from the main
  // thread and the loader's workers.
  RankRecorder recorder(scenario, options);
  std::atomic<uint64_t> current_iteration{0};

  // Stopped from outside (a time limit, the launcher, Ctrl-C), from here on, even while the
  // store is still connecting: the trace gets the collectives in flight and what the rank was
  // doing (once JobControl publishes it), then the process dies of the signal. The watcher
  // holds `progress_source.mutex` from the signal to its death, so the guard below that clears
  // the source before JobControl goes can never leave it a dangling pointer.
  struct ProgressSource {
    std::mutex mutex;
    JobControl* control = nullptr;
  } progress_source;
  std::optional<TerminationWatcher> termination;
  if (options.own_process) {
    termination.emplace([&](int signo) {
      progress_source.mutex.lock();  // never unlocked: the process dies of the signal next
      const Progress progress = progress_source.control != nullptr ? progress_source.control->Snapshot() : Progress{};
      const std::string name = SignalName(signo);
      const std::string why = fmt::format("terminated by {} from outside in iteration {}, while {}", name,
                                          progress.iteration, progress.doing.empty() ? "starting" : progress.doing);
      std::cerr << "petrsim_train: rank " << rank << " " << why << "\n";
      try {
        recorder.Finish(TraceKind::kRankDied, progress.iteration, why, "killed by " + name);
      } catch (const std::exception& error) {
        std::cerr << "petrsim_train: rank " << rank << ": " << error.what() << "\n";
      }
      std::cerr.flush();
      std::cout.flush();
    });
  }

  // Faults: dead_rank is a real SIGKILL (own_process), a straggler sleeps; the others are the
  // simulator's only.
  int64_t kill_at_ns = -1;
  std::map<uint64_t, int64_t> straggle_ns;
  for (const Fault& fault : scenario.faults()) {
    if (fault.has_dead_rank() && fault.dead_rank().rank() == rank) {
      kill_at_ns = static_cast<int64_t>(fault.dead_rank().at_ns());
    } else if (fault.has_straggler() && fault.straggler().rank() == rank) {
      straggle_ns[fault.straggler().iteration()] += static_cast<int64_t>(fault.straggler().delay_ns());
    } else if (rank == 0 && !fault.has_dead_rank() && !fault.has_straggler()) {
      std::cerr << "petrsim_train: note: the fault " << fault.ShortDebugString()
                << " is the simulator's only; the real run ignores it\n";
    }
  }

  c10d::TCPStoreOptions store_options;
  store_options.port = options.master_port;
  store_options.isServer = options.serve_store && rank == 0;
  store_options.numWorkers = options.world_size;
  store_options.waitWorkers = false;
  store_options.timeout = timeout;
  c10::intrusive_ptr<c10d::TCPStore> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
  } catch (const std::exception& error) {
    // The port rank 0 serves the store on is taken: the command line (MASTER_PORT) is at fault.
    if (store_options.isServer &&
        std::string_view(error.what()).find("ddress already in use") != std::string_view::npos) {
      throw ScenarioError(
          fmt::format("MASTER_PORT={}: the port is already in use on this host, so rank 0 cannot serve "
                      "the TCPStore there; choose a free port",
                      options.master_port));
    }
    throw;
  }
  JobControl control(options, timeout, kill_at_ns, [&](const std::string& reason) {
    std::cerr << "petrsim_train: rank " << rank << " stops: " << reason << "\n";
    recorder.Finish(TraceKind::kWatchdog, current_iteration, "", "stopped by another rank (exit 1): " + reason);
    std::cerr.flush();
    std::cout.flush();
    std::_Exit(1);
  });
  {
    std::lock_guard<std::mutex> lock(progress_source.mutex);
    progress_source.control = &control;
  }
  struct ClearProgressSource {
    ProgressSource& source;
    ~ClearProgressSource() {
      std::lock_guard<std::mutex> lock(source.mutex);
      source.control = nullptr;
    }
  } clear_progress_source{progress_source};
  // The groups in the order the job creates them (their names in PyTorch's logs).
  const std::vector<std::string> process_group_names = ProcessGroupNames(plan);
  C10dBackend comm(store, rank, options.world_size, timeout, scenario.comm().backend(), options.local_rank,
                   options.master_addr, process_group_names);
  CollectiveIssuer issuer(comm, control, recorder, options, timeout, scenario, process_group_names);
  TrainingStep step(job, plan, options);

  TrainResult result;
  result.gradient_buckets = step.gradient_buckets();
  if (result.gradient_buckets == 0 && options.world_size > 1 && rank == 0) {
    std::cerr << "petrsim_train: note: the plan has no 'DDP gradient bucket' step, so the ranks' gradients are "
                 "not synchronised\n";
  }

  // The data: rendered from the scenario's frames by DataLoader worker threads, a new set per
  // epoch.
  const DataLoaderShape shape = MakeDataLoaderShape(scenario, dataset);
  const auto rig = SurroundRig(static_cast<int>(job.model.image_width), static_cast<int>(job.model.image_height));
  BatchLoader loading(scenario, dataset, options, shape, rig, recorder);
  std::unique_ptr<ThreadedLoader<LoadedBatch>> loader;
  int64_t iteration_start = 0, first_iteration_end_ns = 0;
  const auto next_batch = [&](uint64_t iteration) {
    if (!loader || shape.RestartsAt(iteration)) {
      loader.reset();
      loading.StartEpoch(iteration);
      const uint64_t epoch_batches = shape.batches_per_epoch == 0
                                         ? options.iterations - iteration
                                         : std::min(shape.batches_per_epoch, options.iterations - iteration);
      loader = std::make_unique<ThreadedLoader<LoadedBatch>>(
          shape.workers, scenario.job().prefetch_factor(), epoch_batches,
          [&loading](int32_t worker, uint64_t in_epoch) { return loading.Load(worker, in_epoch); });
    }
    iteration_start = recorder.Now();
    control.Update([&](Progress& p) {
      p.iteration = iteration;
      p.doing = shape.workers == 0 ? fmt::format("loading batch {} itself", iteration)
                                   : fmt::format("waiting for batch {} from DataLoader worker {}", iteration,
                                                 shape.WorkerOf(iteration));
    });
    std::optional<LoadedBatch> batch;
    try {
      control.Waiting(true);
      while (!(batch = loader->Next(std::chrono::milliseconds(100)))) {
        if (const auto reason = control.StoppedByAnother()) {
          control.Acknowledge();
          recorder.Finish(TraceKind::kWatchdog, iteration, "", "stopped by another rank (exit 1): " + *reason);
          throw JobStoppedError("stopped by another rank: " + *reason);
        }
      }
    } catch (const SampleLivelockError& error) {
      control.Stop(std::string("sampler watchdog: ") + error.what());
      recorder.Finish(TraceKind::kWatchdog, iteration, "", "stopped by the sampler watchdog (exit 1)");
      throw;
    }
    control.Waiting(false);
    return std::move(*batch);
  };

  // The plan, walked as the simulator walks it (plan/rank_program.h).
  std::vector<CollectiveIssuer::Issued> in_flight;  // the iteration's non-blocking collectives
  for (RankProgram program(plan, rank, options.iterations); program.current().kind != RankProgram::Kind::kDone;
       program.Next()) {
    const RankProgram::Step& at = program.current();
    const uint64_t iteration = at.iteration;
    switch (at.kind) {
      case RankProgram::Kind::kCollective: {
        if (at.skipped) break;
        const Collective& collective = *at.collective;
        CollectiveIssuer::Done done;
        std::vector<double> input;
        switch (at.section) {
          case RankProgram::Section::kStartup:
            input = step.StartupInput(collective, &done);
            break;
          case RankProgram::Section::kPerIteration:
            input = step.Input(collective, &done);
            break;
          case RankProgram::Section::kPeriodic:
            input = PeriodicInput(collective);
            break;
        }
        CollectiveIssuer::Issued issued = issuer.Launch(collective, iteration, input, std::move(done));
        if (at.wait_at_once) {
          issuer.Complete(issued);
        } else {
          in_flight.push_back(std::move(issued));
        }
        break;
      }
      case RankProgram::Kind::kLoadBatch: {
        current_iteration = iteration;
        const LoadedBatch batch = next_batch(iteration);
        if (const auto it = straggle_ns.find(iteration); it != straggle_ns.end()) {
          control.Update(
              [&](Progress& p) { p.doing = fmt::format("straggling (a fault) in iteration {}", iteration); });
          std::this_thread::sleep_for(std::chrono::nanoseconds(it->second));
        }
        control.Update([&](Progress& p) { p.doing = fmt::format("computing iteration {}", iteration); });
        step.Forward(batch, dataset);
        program.SetLocalBatchHasGt(step.positives() > 0);
        break;
      }
      case RankProgram::Kind::kWaitOutstanding: {
        step.Backward();
        for (CollectiveIssuer::Issued& issued : in_flight) issuer.Complete(issued);
        in_flight.clear();
        const TrainingStep::Figures figures = step.Finish(iteration);
        result.losses.push_back(figures.loss);
        result.logged_losses.push_back(figures.logged_loss);
        result.learning_rates.push_back(figures.learning_rate);
        break;
      }
      case RankProgram::Kind::kCheckpoint:
        break;  // the real run saves no checkpoint (the simulator models its time)
      case RankProgram::Kind::kEndIteration: {
        TraceRecord r;
        r.kind = TraceKind::kIteration;
        r.start_ns = iteration_start;
        r.end_ns = recorder.Now();
        if (iteration == 0) first_iteration_end_ns = r.end_ns;
        if (iteration > 0) {
          result.step_ms = static_cast<double>(r.end_ns - first_iteration_end_ns) / 1e6 / iteration;
        }
        r.iteration = iteration;
        recorder.Record(r);
        if (options.on_iteration) options.on_iteration(iteration + 1, options.iterations);
        break;
      }
      case RankProgram::Kind::kDone:
        break;
    }
  }
  loader.reset();
  result.collectives = issuer.issued();
  result.parameters_hash = step.ParametersHash();
  control.Update([&](Progress& p) { p.doing = "finished its iterations"; });
  recorder.Finish(TraceKind::kWatchdog, options.iterations, "", "finished its iterations (exit 0)");
  return result;
}

}  // namespace petrsim::real
