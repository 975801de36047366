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

#include "base/assert.h"
#include "data/data_loader.h"
#include "data/numpy_random.h"
#include "data/resample_policy.h"
#include "data/sampler.h"
#include "data/sampler_watchdog.h"
#include "plan/iteration_plan.h"
#include "plan/rank_program.h"
#include "real/batch_loader.h"
#include "real/c10d_backend.h"
#include "real/c10d_rendezvous_store.h"
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
#include "scenario/torch_version.h"
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

namespace {

// Where the termination watcher reads what the rank was doing. The watcher holds `mutex` from
// the signal to its death, so the guard that clears `control` before JobControl goes can never
// leave it a dangling pointer.
struct ProgressSource {
  std::mutex mutex;
  JobControl* control = nullptr;
};

struct ClearProgressSource {
  ProgressSource& source;
  ~ClearProgressSource() {
    std::lock_guard<std::mutex> lock(source.mutex);
    source.control = nullptr;
  }
};

// Stopped from outside (a time limit, the launcher, Ctrl-C), from here on, even while the store
// is still connecting: the trace gets the collectives in flight and what the rank was doing (once
// JobControl publishes it), then the process dies of the signal.
void WatchTermination(std::optional<TerminationWatcher>& termination, ProgressSource& progress_source,
                      RankRecorder& recorder, uint32_t rank) {
  termination.emplace([&progress_source, &recorder, rank](int signo) {
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

// The rank's faults: dead_rank is a real SIGKILL (own_process), a straggler sleeps; the others
// are the simulator's only.
struct RankFaults {
  int64_t kill_at_ns = -1;
  std::map<uint64_t, int64_t> straggle_ns;  // per iteration
};

RankFaults ReadFaults(const Scenario& scenario, uint32_t rank) {
  RankFaults faults;
  for (const Fault& fault : scenario.faults()) {
    if (fault.has_dead_rank() && fault.dead_rank().rank() == rank) {
      faults.kill_at_ns = static_cast<int64_t>(fault.dead_rank().at_ns());
    } else if (fault.has_straggler() && fault.straggler().rank() == rank) {
      faults.straggle_ns[fault.straggler().iteration()] += static_cast<int64_t>(fault.straggler().delay_ns());
    } else if (rank == 0 && !fault.has_dead_rank() && !fault.has_straggler()) {
      std::cerr << "petrsim_train: note: the fault " << fault.ShortDebugString()
                << " is the simulator's only; the real run ignores it\n";
    }
  }
  return faults;
}

// The job's TCPStore: rank 0 serves it (unless options.serve_store is off), the others connect.
c10::intrusive_ptr<c10d::TCPStore> ConnectStore(const TrainOptions& options, std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions store_options;
  store_options.port = options.master_port;
  store_options.isServer = options.serve_store && options.rank == 0;
  store_options.numWorkers = options.world_size;
  store_options.waitWorkers = false;
  store_options.timeout = timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
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
}

// The data: rendered from the scenario's frames by DataLoader worker threads, a new set per
// epoch.
class BatchFeed {
 public:
  BatchFeed(const RealJob& job, const Dataset& dataset, const TrainOptions& options, JobControl& control,
            RankRecorder& recorder)
      : scenario_(job.scenario),
        options_(options),
        control_(control),
        recorder_(recorder),
        shape_(MakeDataLoaderShape(job.scenario, dataset)),
        rig_(SurroundRig(static_cast<int>(job.model.image_width), static_cast<int>(job.model.image_height))),
        loading_(job.scenario, dataset, options, shape_, rig_, recorder) {}

  // Batch `iteration`, once a worker has it (a new set of workers when an epoch starts).
  LoadedBatch Next(uint64_t iteration) {
    if (!loader_ || shape_.RestartsAt(iteration)) StartEpoch(iteration);
    iteration_start_ = recorder_.Now();
    control_.Update([&](Progress& p) {
      p.iteration = iteration;
      p.doing = shape_.workers == 0 ? fmt::format("loading batch {} itself", iteration)
                                    : fmt::format("waiting for batch {} from DataLoader worker {}", iteration,
                                                  shape_.WorkerOf(iteration));
    });
    std::optional<LoadedBatch> batch;
    try {
      control_.Waiting(true);
      while (!(batch = loader_->Next(std::chrono::milliseconds(100)))) {
        if (const auto reason = control_.StoppedByAnother()) {
          control_.Acknowledge();
          recorder_.Finish(TraceKind::kWatchdog, iteration, "", "stopped by another rank (exit 1): " + *reason);
          throw JobStoppedError("stopped by another rank: " + *reason);
        }
      }
    } catch (const SampleLivelockError& error) {
      control_.Stop(std::string("sampler watchdog: ") + error.what());
      recorder_.Finish(TraceKind::kWatchdog, iteration, "", "stopped by the sampler watchdog (exit 1)");
      throw;
    }
    control_.Waiting(false);
    return std::move(*batch);
  }

  // When the last batch was asked for (the iteration's start on the trace).
  int64_t iteration_start() const { return iteration_start_; }
  void Stop() { loader_.reset(); }

 private:
  void StartEpoch(uint64_t iteration) {
    loader_.reset();
    loading_.StartEpoch(iteration);
    const uint64_t epoch_batches = shape_.batches_per_epoch == 0
                                       ? options_.iterations - iteration
                                       : std::min(shape_.batches_per_epoch, options_.iterations - iteration);
    loader_ = std::make_unique<ThreadedLoader<LoadedBatch>>(
        shape_.workers, scenario_.job().prefetch_factor(), epoch_batches,
        [this](int32_t worker, uint64_t in_epoch) { return loading_.Load(worker, in_epoch); });
  }

  const Scenario& scenario_;
  const TrainOptions& options_;
  JobControl& control_;
  RankRecorder& recorder_;
  const DataLoaderShape shape_;
  const std::vector<Camera> rig_;
  BatchLoader loading_;
  std::unique_ptr<ThreadedLoader<LoadedBatch>> loader_;
  int64_t iteration_start_ = 0;
};

// The plan, walked as the simulator walks it (plan/rank_program.h): one handler per step kind.
// The counters check that the kinds arrive in the order the program defines.
class RankLoop {
 public:
  RankLoop(const Dataset& dataset, const TrainOptions& options, const RankFaults& faults, JobControl& control,
           RankRecorder& recorder, CollectiveIssuer& issuer, TrainingStep& step, BatchFeed& feed,
           std::atomic<uint64_t>& current_iteration, TrainResult& result)
      : dataset_(dataset),
        options_(options),
        faults_(faults),
        control_(control),
        recorder_(recorder),
        issuer_(issuer),
        step_(step),
        feed_(feed),
        current_iteration_(current_iteration),
        result_(result) {}

  void Run(const ExpandedPlan& plan) {
    for (RankProgram program(plan, options_.rank, options_.iterations);
         program.current().kind != RankProgram::Kind::kDone; program.Next()) {
      const RankProgram::Step& at = program.current();
      switch (at.kind) {
        case RankProgram::Kind::kCollective:
          OnCollective(at);
          break;
        case RankProgram::Kind::kLoadBatch:
          OnLoadBatch(program, at.iteration);
          break;
        case RankProgram::Kind::kWaitOutstanding:
          OnWaitOutstanding(at.iteration);
          break;
        case RankProgram::Kind::kCheckpoint:
          break;  // the real run saves no checkpoint (the simulator models its time)
        case RankProgram::Kind::kEndIteration:
          OnEndIteration(at.iteration);
          break;
        case RankProgram::Kind::kDone:
          break;
      }
    }
    PETRSIM_ASSERT(ended_ == options_.iterations);
  }

 private:
  void OnCollective(const RankProgram::Step& at) {
    // Startup collectives come before the first batch; per-iteration ones between the batch and
    // the wait; periodic ones after the wait.
    if (at.section == RankProgram::Section::kStartup) PETRSIM_ASSERT(loaded_ == 0);
    if (at.section != RankProgram::Section::kStartup) PETRSIM_ASSERT(loaded_ == at.iteration + 1);
    if (at.section == RankProgram::Section::kPerIteration) PETRSIM_ASSERT(waited_ == at.iteration);
    if (at.section == RankProgram::Section::kPeriodic) PETRSIM_ASSERT(waited_ == at.iteration + 1);
    if (at.skipped) return;
    const Collective& collective = *at.collective;
    CollectiveIssuer::Done done;
    std::vector<double> input;
    switch (at.section) {
      case RankProgram::Section::kStartup:
        input = step_.StartupInput(collective, &done);
        break;
      case RankProgram::Section::kPerIteration:
        input = step_.Input(collective, &done);
        break;
      case RankProgram::Section::kPeriodic:
        input = PeriodicInput(collective);
        break;
    }
    CollectiveIssuer::Issued issued = issuer_.Launch(collective, at.iteration, input, std::move(done),
                                                     comm::IssueOptions{.async_op = !at.wait_at_once});
    if (at.wait_at_once) {
      issuer_.Complete(issued);
    } else {
      in_flight_.push_back(std::move(issued));
    }
  }

  void OnLoadBatch(RankProgram& program, uint64_t iteration) {
    PETRSIM_ASSERT(iteration == loaded_);
    PETRSIM_ASSERT(iteration == ended_);
    ++loaded_;
    current_iteration_ = iteration;
    const LoadedBatch batch = feed_.Next(iteration);
    if (const auto it = faults_.straggle_ns.find(iteration); it != faults_.straggle_ns.end()) {
      control_.Update([&](Progress& p) { p.doing = fmt::format("straggling (a fault) in iteration {}", iteration); });
      std::this_thread::sleep_for(std::chrono::nanoseconds(it->second));
    }
    control_.Update([&](Progress& p) { p.doing = fmt::format("computing iteration {}", iteration); });
    step_.Forward(batch, dataset_);
    program.SetLocalBatchHasGt(step_.positives() > 0);
  }

  void OnWaitOutstanding(uint64_t iteration) {
    PETRSIM_ASSERT(loaded_ == iteration + 1);
    PETRSIM_ASSERT(waited_ == iteration);
    ++waited_;
    step_.Backward();
    for (CollectiveIssuer::Issued& issued : in_flight_) issuer_.Complete(issued);
    in_flight_.clear();
    const TrainingStep::Figures figures = step_.Finish(iteration);
    result_.losses.push_back(figures.loss);
    result_.logged_losses.push_back(figures.logged_loss);
    result_.learning_rates.push_back(figures.learning_rate);
  }

  void OnEndIteration(uint64_t iteration) {
    PETRSIM_ASSERT(waited_ == iteration + 1);
    PETRSIM_ASSERT(ended_ == iteration);
    ++ended_;
    TraceRecord r;
    r.kind = TraceKind::kIteration;
    r.start_ns = feed_.iteration_start();
    r.end_ns = recorder_.Now();
    if (iteration == 0) first_iteration_end_ns_ = r.end_ns;
    if (iteration > 0) {
      result_.step_ms = static_cast<double>(r.end_ns - first_iteration_end_ns_) / 1e6 / iteration;
    }
    r.iteration = iteration;
    recorder_.Record(r);
    if (options_.on_iteration) options_.on_iteration(iteration + 1, options_.iterations);
  }

  const Dataset& dataset_;
  const TrainOptions& options_;
  const RankFaults& faults_;
  JobControl& control_;
  RankRecorder& recorder_;
  CollectiveIssuer& issuer_;
  TrainingStep& step_;
  BatchFeed& feed_;
  std::atomic<uint64_t>& current_iteration_;
  TrainResult& result_;
  std::vector<CollectiveIssuer::Issued> in_flight_;  // the non-blocking collectives not yet waited for
  int64_t first_iteration_end_ns_ = 0;
  // Steps seen so far: batches taken, waits for the non-blocking collectives, iterations ended.
  uint64_t loaded_ = 0;
  uint64_t waited_ = 0;
  uint64_t ended_ = 0;
};

// The rank's process groups: NCCL on the CUDA toolkit's NCCL (real/nccl_backend.h) where the
// build has it and not c10d's ProcessGroupNCCL (PETRSIM_WITH_NCCL); else c10d's Gloo or NCCL.
std::unique_ptr<comm::Backend> ConnectBackend(const c10::intrusive_ptr<c10d::TCPStore>& store,
                                              const TrainOptions& options, std::chrono::milliseconds timeout,
                                              const Scenario& scenario, const std::vector<std::string>& groups) {
#if defined(PETRSIM_WITH_NCCL_DIRECT) && !defined(PETRSIM_WITH_NCCL)
  if (scenario.comm().backend() == Comm::nccl) {
    C10dRendezvousStore rendezvous(store);
    NcclOptions nccl;
    nccl.rank = options.rank;
    nccl.world_size = options.world_size;
    nccl.device = options.local_rank;
    nccl.timeout = timeout;
    nccl.process_group_names = groups;
    nccl.version = ScenarioTorchVersion(scenario);
    // No watchdog_lines: the collective issuer prints the release's lines from the failed wait.
    return std::make_unique<NcclBackend>(rendezvous, std::move(nccl));
  }
#endif
  return std::make_unique<C10dBackend>(store, options.rank, options.world_size, timeout, scenario.comm().backend(),
                                       options.local_rank, options.master_addr, groups);
}

}  // namespace

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
  ProgressSource progress_source;
  std::optional<TerminationWatcher> termination;
  if (options.own_process) WatchTermination(termination, progress_source, recorder, rank);
  const RankFaults faults = ReadFaults(scenario, rank);
  c10::intrusive_ptr<c10d::TCPStore> store = ConnectStore(options, timeout);
  JobControl control(options, timeout, faults.kill_at_ns, [&](const std::string& reason) {
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
  ClearProgressSource clear_progress_source{progress_source};
  // The groups in the order the job creates them (their names in PyTorch's logs).
  const std::vector<std::string> process_group_names = ProcessGroupNames(plan);
  const std::unique_ptr<comm::Backend> comm = ConnectBackend(store, options, timeout, scenario, process_group_names);
  CollectiveIssuer issuer(*comm, control, recorder, options, timeout, scenario, process_group_names);
  TrainingStep step(job, plan, options);

  TrainResult result;
  result.gradient_buckets = step.gradient_buckets();
  if (result.gradient_buckets == 0 && options.world_size > 1 && rank == 0) {
    std::cerr << "petrsim_train: note: the plan has no 'DDP gradient bucket' step, so the ranks' gradients are "
                 "not synchronised\n";
  }
  BatchFeed feed(job, dataset, options, control, recorder);
  RankLoop loop(dataset, options, faults, control, recorder, issuer, step, feed, current_iteration, result);
  loop.Run(plan);
  feed.Stop();
  result.collectives = issuer.issued();
  result.parameters_hash = step.ParametersHash();
  control.Update([&](Progress& p) { p.doing = "finished its iterations"; });
  recorder.Finish(TraceKind::kWatchdog, options.iterations, "", "finished its iterations (exit 0)");
  return result;
}

}  // namespace petrsim::real
