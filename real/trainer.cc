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

#include "model/data_loader.h"
#include "model/iteration_plan.h"
#include "model/numpy_random.h"
#include "model/outcome.h"
#include "model/resample_policy.h"
#include "model/sampler.h"
#include "model/sampler_watchdog.h"
#include "real/batch_loader.h"
#include "real/geometry.h"
#include "real/job_control.h"
#include "real/losses.h"
#include "real/rank_comm.h"
#include "real/rank_recorder.h"
#include "real/renderer.h"
#include "real/threaded_loader.h"
#include "trace/rank_writer.h"

namespace petrsim::real {
namespace {

bool StartsWith(const std::string& text, std::string_view prefix) { return text.rfind(prefix, 0) == 0; }

// LibTorch's default generator is one per process: ranks that are threads of one process
// (tests) build their models one at a time, so each rank's initial parameters are those of a
// process of its own.
std::mutex& ModelInitMutex() {
  static std::mutex mutex;
  return mutex;
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

RealJob MakeRealJob(const Scenario& scenario, const ModelConfig& model) {
  RealJob job;
  job.scenario = scenario;
  job.model = model;
  if (!scenario.plan().has_custom()) {
    job.model.decoder_layers = scenario.plan().streampetr().decoder_layers();
  }
  std::lock_guard<std::mutex> lock(ModelInitMutex());
  StreamPetr counted(job.model);
  for (const auto& p : counted->parameters()) job.parameters += static_cast<uint64_t>(p.numel());
  if (!scenario.plan().has_custom()) {
    job.scenario.mutable_plan()->mutable_streampetr()->set_parameters(job.parameters);
  }
  return job;
}

TrainResult TrainRank(const Scenario& input_scenario, const Dataset& dataset, const TrainOptions& options) {
  const RealJob job = MakeRealJob(input_scenario, options.model);
  const Scenario& scenario = job.scenario;
  const ExpandedPlan plan = ExpandPlan(scenario.plan());
  const int64_t timeout_ms =
      options.timeout_ms > 0 ? options.timeout_ms : static_cast<int64_t>(scenario.comm().timeout_ms());
  const auto timeout = std::chrono::milliseconds(timeout_ms);
  const uint32_t rank = options.rank;
  const uint32_t batch_size = scenario.job().samples_per_gpu();

  // The trace: steady-clock nanoseconds since the rank started; records come from the main
  // thread and the loader's workers.
  RankRecorder recorder(scenario, options);
  std::atomic<uint64_t> current_iteration{0};

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
  auto store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
  JobControl control(options, timeout, kill_at_ns, [&](const std::string& reason) {
    std::cerr << "petrsim_train: rank " << rank << " stops: " << reason << "\n";
    recorder.Finish(TraceKind::kWatchdog, current_iteration, "", "stopped by another rank (exit 1): " + reason);
    std::cerr.flush();
    std::cout.flush();
    std::_Exit(1);
  });
  std::vector<std::string> process_group_names;
  for (const auto* list : {&plan.startup, &plan.per_iteration}) {
    for (const Collective& c : *list) process_group_names.push_back(c.process_group());
  }
  for (const auto& p : plan.periodic) process_group_names.push_back(p.collective().process_group());
  RankComm comm(store, rank, options.world_size, timeout, scenario.comm().backend(), options.local_rank,
                options.master_addr, process_group_names);

  std::unique_lock<std::mutex> init_lock(ModelInitMutex());
  torch::manual_seed(static_cast<uint64_t>(scenario.job().seed()));
  StreamPetr model(job.model);
  init_lock.unlock();
  const auto params = model->parameters();
  torch::optim::AdamW optimizer(params, torch::optim::AdamWOptions(options.learning_rate).weight_decay(0.01));

  // Collectives: issued with the rank's progress published, recorded from issue to completion.
  // A failure (a peer gone, the timeout) is the collective watchdog's: the rank says which
  // ranks never arrived at that sequence number and what they were doing, stops the job and
  // fails; or, when another rank stopped the job first, says so and fails.
  TrainResult result;
  std::map<std::string, uint64_t> seqs;
  struct Issued {
    const Collective* step = nullptr;
    uint64_t seq = 0;
    uint64_t iteration = 0;
    int64_t start_ns = 0;
    RankComm::Pending pending;
    std::function<void(const at::Tensor&)> done;
  };
  const auto fail = [&](const Issued& issued, const std::string& error) {
    if (const auto reason = control.StoppedByAnother()) {
      control.Acknowledge();
      const std::string why = "stopped by another rank: " + *reason;
      recorder.Finish(TraceKind::kWatchdog, issued.iteration, "", why + " (exit 1)");
      throw JobStoppedError(why);
    }
    const Collective& step = *issued.step;
    const double waited_s = static_cast<double>(recorder.Now() - issued.start_ns) / 1e9;
    std::string missing;
    const auto read = control.ReadAll();
    const std::vector<std::optional<Progress>> all =
        read.value_or(std::vector<std::optional<Progress>>(options.world_size));
    if (!read) missing = "; the TCPStore (served by rank 0) is unreachable, so rank 0 is gone";
    for (uint32_t r = 0; r < options.world_size && read; ++r) {
      if (r == rank) continue;
      if (!all[r]) {
        missing += fmt::format("; rank {} published no progress", r);
        continue;
      }
      const Progress& p = *all[r];
      const auto it = p.seqs.find(step.process_group());
      const uint64_t at = it == p.seqs.end() ? 0 : it->second;
      if (at >= issued.seq) continue;
      missing += fmt::format("; rank {} never arrived: last heard {:.1f} s before, at seq {} (iteration {}), {}", r,
                             static_cast<double>(UnixMs() - p.unix_ms) / 1e3, at, p.iteration, p.doing);
    }
    if (missing.empty()) missing = "; every other rank had issued it";
    const std::string first_line = error.substr(0, error.find('\n'));
    const std::string report = fmt::format(
        "collective watchdog: rank {}: {} '{}' ({} seq {}, iteration {}) failed after {:.1f} s (timeout {} ms): {}{}",
        rank, OpTypeName(step.op()), step.name(), step.process_group(), issued.seq, issued.iteration, waited_s,
        timeout_ms, first_line, missing);
    control.Stop(report);
    recorder.Finish(TraceKind::kWatchdog, issued.iteration, report, "stopped by the collective watchdog (exit 1)");
    throw CollectiveError(report);
  };
  const auto launch = [&](const Collective& step, uint64_t iteration, const at::Tensor& input,
                          std::function<void(const at::Tensor&)> done) {
    Issued issued;
    issued.step = &step;
    issued.seq = ++seqs[step.process_group()];
    issued.iteration = iteration;
    issued.done = std::move(done);
    control.Update([&](Progress& p) {
      p.iteration = iteration;
      p.seqs[step.process_group()] = issued.seq;
      p.doing = fmt::format("in {} '{}'", OpTypeName(step.op()), step.name());
    });
    issued.start_ns = recorder.Now();
    ++result.collectives;
    recorder.OpenCollective(step, issued.seq, iteration, issued.start_ns);
    try {
      issued.pending = comm.Launch(step, input);
    } catch (const std::exception& error) {
      fail(issued, error.what());
    }
    return issued;
  };
  const auto complete = [&](Issued& issued) {
    try {
      control.Waiting(true);
      issued.pending.Wait();
      control.Waiting(false);
    } catch (const std::exception& error) {
      fail(issued, error.what());
    }
    recorder.CloseCollective(*issued.step, issued.seq);
    if (issued.done) issued.done(issued.pending.result());
  };
  const auto zeros = [](const Collective& step) {
    return torch::zeros({static_cast<int64_t>(std::max<uint64_t>(1, step.numel()))}, TorchDtype(step.dtype()));
  };

  // Startup: the seed broadcasts, then DDP's: every rank takes rank 0's parameters.
  for (const Collective& step : plan.startup) {
    at::Tensor input;
    std::function<void(const at::Tensor&)> done;
    if (StartsWith(step.name(), "sync_random_seed")) {
      input = torch::full({1}, static_cast<int64_t>(scenario.job().seed()), TorchDtype(step.dtype()));
    } else if (step.name() == "DDP parameter broadcast") {
      std::vector<torch::Tensor> flat;
      for (const auto& p : params) flat.push_back(p.detach().flatten());
      input = torch::cat(flat);
      done = [&](const at::Tensor& all) {
        torch::NoGradGuard no_grad;
        int64_t at = 0;
        for (auto& p : params) {
          p.copy_(all.narrow(0, at, p.numel()).view_as(p).to(p.dtype()));
          at += p.numel();
        }
      };
    } else {
      input = zeros(step);
    }
    Issued issued = launch(step, 0, input, done);
    complete(issued);
  }

  // Where each gradient bucket starts in the flattened gradients (reverse parameter order).
  std::map<const Collective*, int64_t> bucket_offset;
  int64_t bucket_elements = 0;
  int64_t loss_terms = 0;
  for (const Collective& step : plan.per_iteration) {
    if (StartsWith(step.name(), "DDP gradient bucket")) {
      bucket_offset[&step] = bucket_elements;
      bucket_elements += static_cast<int64_t>(step.numel());
    }
    loss_terms += StartsWith(step.name(), "_parse_losses: loss term");
  }
  result.gradient_buckets = bucket_offset.size();
  int64_t parameter_elements = 0;
  for (const auto& p : params) parameter_elements += p.numel();
  if (bucket_offset.empty() && options.world_size > 1 && rank == 0) {
    std::cerr << "petrsim_train: note: the plan has no 'DDP gradient bucket' step, so the ranks' gradients are "
                 "not synchronised\n";
  }

  // The data: rendered from the scenario's frames.
  const DataLoaderShape shape = MakeDataLoaderShape(scenario, dataset);
  const auto rig = SurroundRig(static_cast<int>(job.model.image_width), static_cast<int>(job.model.image_height));
  std::vector<double> inverses;
  for (const Camera& camera : rig) {
    const Mat4 m = Inverse(camera.Lidar2Img());
    inverses.insert(inverses.end(), m.m.begin(), m.m.end());
  }
  const auto img2lidar = torch::tensor(inverses, torch::kFloat64).view({1, 6, 4, 4}).repeat({batch_size, 1, 1, 1});
  const auto weights = torch::tensor({1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.2, 0.2}, torch::kFloat32);
  StreamingMemory memory(batch_size, job.model.memory_len, job.model.channels);
  std::vector<Mat4> last_pose(batch_size, Mat4::Identity());

  BatchLoader loading(scenario, dataset, options, shape, rig, recorder);

  std::unique_ptr<ThreadedLoader<LoadedBatch>> loader;
  std::vector<Issued> in_flight;  // non-blocking collectives of this iteration
  int64_t first_iteration_end_ns = 0;
  for (uint64_t iteration = 0; iteration < options.iterations; ++iteration) {
    current_iteration = iteration;
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
    const int64_t iteration_start = recorder.Now();
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
    if (const auto it = straggle_ns.find(iteration); it != straggle_ns.end()) {
      control.Update([&](Progress& p) { p.doing = fmt::format("straggling (a fault) in iteration {}", iteration); });
      std::this_thread::sleep_for(std::chrono::nanoseconds(it->second));
    }
    control.Update([&](Progress& p) { p.doing = fmt::format("computing iteration {}", iteration); });

    std::vector<torch::Tensor> images, labels, targets;
    std::vector<int64_t> prev_exists(batch_size, 0);
    std::vector<double> motions;  // per slot a 4 x 4: the ego motion, or the identity where the stream broke
    for (uint32_t slot = 0; slot < batch_size; ++slot) {
      const LoadedSlot& s = batch->slots[slot];
      const int64_t pixels = 6 * 3 * job.model.image_height * job.model.image_width;
      images.push_back(s.pixels.empty() ? torch::zeros({pixels})
                                        : torch::tensor(std::vector<float>(s.pixels.begin(), s.pixels.end())));
      images.back() = images.back().view({6, 3, job.model.image_height, job.model.image_width});
      labels.push_back(torch::tensor(s.labels, torch::kInt64));
      targets.push_back(s.boxes.empty() ? torch::zeros({0, kBoxTerms}) : BoxTargets(s.boxes, job.model.range));
      const bool frame_prev = s.final_index >= 0 && dataset.frame(s.final_index).prev_exists;
      prev_exists[slot] = frame_prev && s.final_index == s.draw.index;
      const Mat4 motion = prev_exists[slot] ? EgoMotion(last_pose[slot], s.ego2global) : Mat4::Identity();
      last_pose[slot] = s.ego2global;
      motions.insert(motions.end(), motion.m.begin(), motion.m.end());
    }
    // The memory enters the frame: carried by the ego motion, or cleared where the stream broke;
    // the model sees the motion as its top 3 rows and the time step.
    const auto dt = torch::full({batch_size}, 0.5);
    const auto matrices = torch::tensor(motions, torch::kFloat64).view({batch_size, 4, 4}).to(torch::kFloat32);
    memory.PreUpdate(matrices, torch::tensor(prev_exists).to(torch::kBool), dt);
    const auto motion_vector = torch::cat({matrices.narrow(1, 0, 3).flatten(1), dt.unsqueeze(1)}, 1);
    const auto prediction = model(torch::stack(images), img2lidar, memory, motion_vector);
    int64_t positives = 0;
    for (const auto& l : labels) positives += l.size(0);

    // The plan, step by step; the losses when a step first needs them, the backward pass when
    // the first gradient bucket does.
    std::optional<double> avg_factor;
    std::vector<torch::Tensor> layer_terms;  // per layer: classification, regression
    torch::Tensor total;
    torch::Tensor flat_grads;
    const auto losses = [&] {
      if (total.defined()) return;
      const double factor = avg_factor.value_or(std::max<double>(1.0, static_cast<double>(positives)));
      total = torch::zeros({});
      for (size_t layer = 0; layer < prediction.logits.size(); ++layer) {
        torch::Tensor cls = torch::zeros({}), reg = torch::zeros({});
        for (uint32_t slot = 0; slot < batch_size; ++slot) {
          const LayerLoss l = DetectionLoss(prediction.logits[layer][slot], prediction.boxes[layer][slot], labels[slot],
                                            targets[slot], weights, factor);
          cls = cls + l.classification;
          reg = reg + l.regression;
        }
        layer_terms.push_back(cls);
        layer_terms.push_back(reg);
        total = total + cls + reg;
      }
    };
    const auto backward = [&] {
      if (flat_grads.defined()) return;
      losses();
      optimizer.zero_grad();
      total.backward();
      std::vector<torch::Tensor> grads;
      for (auto it = params.rbegin(); it != params.rend(); ++it) {
        grads.push_back(it->grad().defined() ? it->grad().flatten() : torch::zeros({it->numel()}));
      }
      if (bucket_elements > parameter_elements) grads.push_back(torch::zeros({bucket_elements - parameter_elements}));
      flat_grads = torch::cat(grads);
    };
    int64_t term = 0;
    std::optional<double> logged;
    for (const Collective& step : plan.per_iteration) {
      if (step.only_when_local_batch_has_gt() && positives == 0) continue;
      at::Tensor input;
      std::function<void(const at::Tensor&)> done;
      const std::string& name = step.name();
      if (StartsWith(name, "reduce_mean(num_total_pos)")) {
        input = torch::full({1}, static_cast<double>(positives) / options.world_size, TorchDtype(step.dtype()));
        if (!avg_factor) {
          done = [&](const at::Tensor& sum) { avg_factor = std::max(1.0, sum.to(torch::kFloat64).item<double>()); };
        }
      } else if (name == "_parse_losses: len(log_vars)") {
        input = torch::full({1}, loss_terms, TorchDtype(step.dtype()));
      } else if (StartsWith(name, "_parse_losses: loss term")) {
        losses();
        input = term < static_cast<int64_t>(layer_terms.size()) ? layer_terms[term].detach().reshape({1})
                                                                : torch::zeros({1});
        ++term;
      } else if (name == "_parse_losses: total loss") {
        losses();
        input = total.detach().reshape({1});
        done = [&logged, world = options.world_size](const at::Tensor& sum) {
          logged = sum.to(torch::kFloat64).item<double>() / world;
        };
      } else if (const auto it = bucket_offset.find(&step); it != bucket_offset.end()) {
        backward();
        const int64_t offset = it->second;
        const int64_t numel = static_cast<int64_t>(step.numel());
        input = flat_grads.narrow(0, offset, numel);
        done = [&flat_grads, offset, numel](const at::Tensor& reduced) {
          flat_grads.narrow(0, offset, numel).copy_(reduced);
        };
      } else {
        input = zeros(step);
      }
      Issued issued = launch(step, iteration, input, std::move(done));
      if (step.blocking()) {
        complete(issued);
      } else {
        in_flight.push_back(std::move(issued));
      }
    }
    backward();
    for (Issued& issued : in_flight) complete(issued);
    in_flight.clear();
    if (!bucket_offset.empty()) {
      // DDP: the summed gradients, averaged, back into each parameter's .grad.
      flat_grads.div_(static_cast<double>(options.world_size));
      int64_t at = 0;
      for (auto it = params.rbegin(); it != params.rend(); ++it) {
        if (it->grad().defined()) it->grad().copy_(flat_grads.narrow(0, at, it->numel()).view_as(*it));
        at += it->numel();
      }
    }
    if (options.grad_clip_norm > 0) torch::nn::utils::clip_grad_norm_(params, options.grad_clip_norm, 2.0);
    const double lr = LearningRateAt(options, iteration, options.iterations);
    for (auto& group : optimizer.param_groups()) static_cast<torch::optim::AdamWOptions&>(group.options()).lr(lr);
    optimizer.step();
    result.losses.push_back(total.item<double>());
    result.logged_losses.push_back(logged.value_or(result.losses.back()));
    result.learning_rates.push_back(lr);
    for (const PeriodicCollective& periodic : plan.periodic) {
      if ((iteration + 1) % periodic.every_iterations() != 0) continue;
      const Collective& step = periodic.collective();
      // mmcv's logger reduces the peak memory (MiB) to rank 0 with MAX.
      at::Tensor input = zeros(step);
      if (StartsWith(step.name(), "logger reduce")) {
        rusage usage{};
        ::getrusage(RUSAGE_SELF, &usage);
        input.fill_(static_cast<double>(usage.ru_maxrss / 1024));
      }
      Issued issued = launch(step, iteration, input, nullptr);
      complete(issued);
    }
    TraceRecord r;
    r.kind = TraceKind::kIteration;
    r.start_ns = iteration_start;
    r.end_ns = recorder.Now();
    if (iteration == 0) first_iteration_end_ns = r.end_ns;
    if (iteration > 0) result.step_ms = static_cast<double>(r.end_ns - first_iteration_end_ns) / 1e6 / iteration;
    r.iteration = iteration;
    recorder.Record(r);
  }
  loader.reset();
  result.parameters_hash = HashParameters(*model);
  control.Update([&](Progress& p) { p.doing = "finished its iterations"; });
  recorder.Finish(TraceKind::kWatchdog, options.iterations, "", "finished its iterations (exit 0)");
  return result;
}

}  // namespace petrsim::real
