// The training loop of one rank; see trainer.h.
#include "real/trainer.h"

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <cstring>

#include "model/data_loader.h"
#include "model/numpy_random.h"
#include "model/resample_policy.h"
#include "model/sampler.h"
#include "real/geometry.h"
#include "real/losses.h"
#include "real/renderer.h"
#include "real/sampler_watchdog.h"
#include "replay/trace_io.h"

namespace petrsim::real {
namespace {

uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9e3779b97f4a7c15ULL + b + 0x632be59bd9b4e019ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

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

TrainResult TrainRank(const Scenario& scenario, const Dataset& dataset, const TrainOptions& options) {
  const auto timeout = std::chrono::milliseconds(options.timeout_ms);
  c10d::TCPStoreOptions store_options;
  store_options.port = options.master_port;
  store_options.isServer = options.serve_store && options.rank == 0;
  store_options.numWorkers = options.world_size;
  store_options.waitWorkers = false;
  store_options.timeout = timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
  auto pg_options = c10d::ProcessGroupGloo::Options::create(timeout);
  pg_options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(options.master_addr));
  c10d::ProcessGroupGloo group(store, static_cast<int>(options.rank), static_cast<int>(options.world_size),
                               pg_options);

  torch::manual_seed(static_cast<uint64_t>(scenario.job().seed()));
  StreamPetr model(options.model);
  // DDP's start: every rank takes rank 0's parameters.
  for (auto& p : model->parameters()) {
    std::vector<at::Tensor> tensors = {p.data()};
    group.broadcast(tensors)->wait();
  }
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(options.learning_rate).weight_decay(0.01));

  const uint32_t batch_size = scenario.job().samples_per_gpu();
  // The DataLoader worker each batch belongs to (the loading itself is in this thread for now).
  const DataLoaderShape loader = MakeDataLoaderShape(scenario, dataset);
  auto sampler = MakeRankSampler(scenario, dataset, options.rank);
  const auto policy = MakeResamplePolicy(scenario, dataset);
  NumpyRandomState rng(scenario.job().seed() + options.rank);
  const auto rig = SurroundRig(static_cast<int>(options.model.image_width), static_cast<int>(options.model.image_height));
  std::vector<double> inverses;
  for (const Camera& camera : rig) {
    const Mat4 m = Inverse(camera.Lidar2Img());
    inverses.insert(inverses.end(), m.m.begin(), m.m.end());
  }
  const auto img2lidar = torch::tensor(inverses, torch::kFloat64).view({1, 6, 4, 4}).repeat({batch_size, 1, 1, 1});
  const auto weights = torch::tensor({1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.2, 0.2}, torch::kFloat32);
  StreamingMemory memory(batch_size, options.model.memory_len, options.model.channels);
  std::vector<Mat4> last_pose(batch_size, Mat4::Identity());

  // Gradient buckets: parameters in reverse order (DDP's), cut at bucket_mb.
  std::vector<std::vector<torch::Tensor>> buckets(1);
  {
    const auto params = model->parameters();
    double bytes = 0;
    for (auto it = params.rbegin(); it != params.rend(); ++it) {
      const double size = static_cast<double>(it->numel()) * 4;
      if (bytes > 0 && bytes + size > options.bucket_mb * 1024 * 1024) {
        buckets.emplace_back();
        bytes = 0;
      }
      buckets.back().push_back(*it);
      bytes += size;
    }
  }

  // The trace: steady-clock nanoseconds since the rank started.
  std::unique_ptr<RankTraceWriter> trace;
  if (!options.trace_path.empty()) {
    trace = std::make_unique<RankTraceWriter>(options.trace_path, scenario, "", options.rank, options.world_size,
                                              "gloo", "petrsim_train",
                                              options.trace_ring > 0 ? RankTraceWriter::Mode::kRing
                                                                     : RankTraceWriter::Mode::kStream,
                                              options.trace_ring);
    if (options.trace_ring > 0) RankTraceWriter::InstallSignalDump(trace.get());
  }
  const auto t0 = std::chrono::steady_clock::now();
  const auto now = [&] {
    return static_cast<int64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
  };
  const auto record = [&](TraceRecord r) {
    if (trace) {
      r.rank = options.rank;
      trace->Record(r);
    }
  };
  uint64_t seq = 0;  // c10d's sequence number on the world group
  // An all-reduce, recorded from issue to completion; when it fails (a peer is gone), recorded
  // as pending and the trace is finished before the error goes on.
  const auto allreduce = [&](std::vector<at::Tensor>& tensors, uint64_t iteration, const std::string& step) {
    TraceRecord r;
    r.kind = TraceKind::kCollective;
    r.worker = kMainProcess;
    r.iteration = iteration;
    r.process_group = "default_pg";
    r.seq = ++seq;
    r.op = Collective::allreduce;
    r.numel = static_cast<uint64_t>(tensors[0].numel());
    r.text = step;
    r.start_ns = now();
    try {
      group.allreduce(tensors)->wait();
    } catch (const std::exception& error) {
      r.end_ns = std::max(now(), r.start_ns);
      r.completed = false;
      record(r);
      TraceRecord died;
      died.kind = TraceKind::kRankDied;
      died.start_ns = died.end_ns = r.end_ns;
      died.iteration = iteration;
      const std::string why = error.what();
      died.text = why;
      record(died);
      if (trace) trace->Finish();
      throw;
    }
    r.end_ns = now();
    r.started_ns = r.start_ns;
    record(r);
  };

  TrainResult result;
  result.gradient_buckets = buckets.size();
  std::vector<SlotDraw> draws(batch_size);
  for (uint64_t iteration = 0; iteration < options.iterations; ++iteration) {
    const int64_t iteration_start = now();
    sampler->NextBatches(draws);
    for (uint32_t slot = 0; slot < batch_size; ++slot) {
      TraceRecord r;
      r.kind = TraceKind::kSamplerDraw;
      r.start_ns = r.end_ns = iteration_start;
      r.iteration = iteration;
      r.slot = slot;
      r.index = draws[slot].index;
      r.group = draws[slot].group;
      record(r);
    }
    std::vector<torch::Tensor> images, labels, targets;
    std::vector<int64_t> prev_exists(batch_size, 0);
    std::vector<double> motions;  // per slot a 4 x 4: the ego motion, or the identity where the stream broke
    for (uint32_t slot = 0; slot < batch_size; ++slot) {
      const int32_t worker = loader.workers == 0 ? -1 : static_cast<int32_t>(loader.WorkerOf(iteration));
      const int64_t load_start = now();
      const WatchedItem item = WatchedGetItem(dataset, *policy, draws[slot].index, rng,
                                              scenario.resample().pipeline_draws_per_attempt(), options.rank,
                                              worker, iteration, slot);
      if (item.livelock) {
        const std::string report = item.livelock->Describe();
        TraceRecord r;
        r.kind = TraceKind::kLivelock;
        r.worker = worker;
        r.start_ns = r.end_ns = now();
        r.iteration = iteration;
        r.slot = slot;
        r.index = draws[slot].index;
        r.final_index = item.result.index;
        r.attempts = item.result.attempts;
        r.text = report;
        record(r);
        TraceRecord exit;
        exit.kind = TraceKind::kProcessExit;
        exit.start_ns = exit.end_ns = r.end_ns;
        exit.iteration = iteration;
        exit.text = "stopped by the sampler watchdog (exit 1)";
        record(exit);
        if (trace) trace->Finish();
        throw SampleLivelockError(report);
      }
      {
        TraceRecord r;
        r.kind = TraceKind::kLoad;
        r.worker = worker;
        r.start_ns = load_start;
        r.end_ns = now();
        r.iteration = iteration;
        r.slot = slot;
        r.index = draws[slot].index;
        r.final_index = item.result.index;
        r.attempts = item.result.attempts;
        record(r);
      }
      const int64_t index = item.result.index;
      const FrameInfo& frame = dataset.frame(index);
      const uint32_t boxes = std::min<uint32_t>(frame.gt_count, options.boxes_max);
      const RenderedFrame rendered = SceneFrame(Mix(scenario.job().seed(), frame.scene), frame.frame_in_scene, boxes);
      const auto pixels = Render(rig, rendered.boxes);
      images.push_back(torch::tensor(std::vector<float>(pixels.begin(), pixels.end()))
                           .view({6, 3, options.model.image_height, options.model.image_width}));
      std::vector<int64_t> slot_labels;
      std::vector<std::array<double, 7>> slot_boxes;
      for (const RenderBox& b : rendered.boxes) {
        slot_labels.push_back(b.cls);
        slot_boxes.push_back({b.x, b.y, b.z, b.w, b.l, b.h, b.yaw});
      }
      labels.push_back(torch::tensor(slot_labels, torch::kInt64));
      targets.push_back(slot_boxes.empty() ? torch::zeros({0, kBoxTerms}) : BoxTargets(slot_boxes, options.model.range));
      prev_exists[slot] = frame.prev_exists && item.result.index == draws[slot].index;
      const Mat4 motion = prev_exists[slot] ? EgoMotion(last_pose[slot], rendered.ego2global) : Mat4::Identity();
      last_pose[slot] = rendered.ego2global;
      motions.insert(motions.end(), motion.m.begin(), motion.m.end());
    }
    // The memory enters the frame: carried by the ego motion, or cleared where the stream broke;
    // the model sees the motion as its top 3 rows and the time step.
    const auto dt = torch::full({batch_size}, 0.5);
    const auto matrices = torch::tensor(motions, torch::kFloat64).view({batch_size, 4, 4}).to(torch::kFloat32);
    memory.PreUpdate(matrices, torch::tensor(prev_exists).to(torch::kBool), dt);
    const auto motion_vector = torch::cat({matrices.narrow(1, 0, 3).flatten(1), dt.unsqueeze(1)}, 1);
    const auto prediction = model(torch::stack(images), img2lidar, memory, motion_vector);
    // num_total_pos: the GT boxes of the local batch, reduce_mean over the ranks, clamped at 1.
    int64_t positives = 0;
    for (const auto& l : labels) positives += l.size(0);
    std::vector<at::Tensor> count = {torch::full({1}, static_cast<float>(positives))};
    allreduce(count, iteration, "reduce_mean(num_total_pos)");
    const double avg_factor = std::max(1.0, static_cast<double>(count[0].item<float>()) / options.world_size);
    torch::Tensor loss = torch::zeros({});
    for (size_t layer = 0; layer < prediction.logits.size(); ++layer) {
      for (uint32_t slot = 0; slot < batch_size; ++slot) {
        const LayerLoss l = DetectionLoss(prediction.logits[layer][slot], prediction.boxes[layer][slot],
                                          labels[slot], targets[slot], weights, avg_factor);
        loss = loss + l.classification + l.regression;
      }
    }
    optimizer.zero_grad();
    loss.backward();
    // DDP: each bucket flattened, all-reduced (sum) and averaged.
      for (size_t b = 0; b < buckets.size(); ++b) {
      const auto& bucket = buckets[b];
      std::vector<torch::Tensor> grads;
      for (const auto& p : bucket) grads.push_back(p.grad().defined() ? p.grad().flatten() : torch::zeros({p.numel()}));
      std::vector<at::Tensor> flat = {torch::cat(grads)};
      allreduce(flat, iteration, "DDP gradient bucket " + std::to_string(b));
      flat[0].div_(static_cast<double>(options.world_size));
      int64_t at = 0;
      for (const auto& p : bucket) {
        if (p.grad().defined()) p.grad().copy_(flat[0].narrow(0, at, p.numel()).view_as(p));
        at += p.numel();
      }
    }
    optimizer.step();
    result.losses.push_back(loss.item<double>());
    TraceRecord r;
    r.kind = TraceKind::kIteration;
    r.start_ns = iteration_start;
    r.end_ns = now();
    r.iteration = iteration;
    record(r);
  }
  result.parameters_hash = HashParameters(*model);
  if (trace) {
    TraceRecord exit;
    exit.kind = TraceKind::kProcessExit;
    exit.start_ns = exit.end_ns = now();
    exit.iteration = options.iterations;
    exit.text = "finished its iterations (exit 0)";
    record(exit);
    trace->Finish();
  }
  return result;
}

}  // namespace petrsim::real
