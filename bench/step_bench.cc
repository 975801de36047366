// Speed of one training step of the real backend's StreamPETR (issue 6, "Speed"): the C++ side
// of the C++-vs-Python comparison (bench/step_python.py is the same architecture in Python
// PyTorch; bench/step_compare.sh runs both and prints the ratio).
//
// One step, as real/trainer.cc does it for one rank (no collectives: world size 1): memory
// PreUpdate by the ego motion, forward (images [B, 6, 3, H, W], img2lidar, motion vector),
// DetectionLoss per decoder layer and batch slot (Hungarian matching included), zero_grad,
// backward, AdamW step (lr 2e-3, weight decay 0.01), loss.item(). The model has the default
// ModelConfig sizes (real/streampetr_model.h); batch 2 (the scenarios' samples_per_gpu). The
// inputs are fixed and random (seeded), the GT boxes too (8 in slot 0, 5 in slot 1, ...).
//
// Usage: step_bench [--threads N] [--warmup W] [--steps S] [--reps R] [--batch B] [--dump DIR]
//   --threads 0 (the default) leaves LibTorch's own thread count alone.
//   Prints the ms per step of each repetition (S steps each, after W warm-up steps) and a line
//   "RESULT impl=cpp ... median_ms=..." with the median over the repetitions.
//   --dump DIR writes the initial parameters, buffers and inputs as raw little-endian files
//   (DIR/index.txt lists name, dtype, shape), runs 3 steps, writes their losses, and exits:
//   bench/step_python.py --check DIR loads them into its model and compares the losses.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "real/geometry.h"
#include "real/losses.h"
#include "real/memory.h"
#include "real/streampetr_model.h"

namespace petrsim::real {
namespace {

struct Inputs {
  torch::Tensor images, img2lidar, ego_motion, prev_exists, dt, motion_vector, code_weights;
  std::vector<torch::Tensor> labels, targets;  // per slot: [G] int64, [G, kBoxTerms]
};

Inputs MakeInputs(const ModelConfig& config, int64_t batch) {
  torch::manual_seed(1234);
  Inputs in;
  in.images = torch::rand({batch, 6, 3, config.image_height, config.image_width});
  // The trainer's cameras: the surround rig's inverse(lidar2img), the same for every slot.
  std::vector<double> inverses;
  for (const Camera& camera :
       SurroundRig(static_cast<int>(config.image_width), static_cast<int>(config.image_height))) {
    const Mat4 m = Inverse(camera.Lidar2Img());
    inverses.insert(inverses.end(), m.m.begin(), m.m.end());
  }
  in.img2lidar = torch::tensor(inverses, torch::kFloat64).view({1, 6, 4, 4}).repeat({batch, 1, 1, 1});
  // Ego motion of a car at 8 m/s turning slightly, 0.5 s per frame (previous ego frame -> now).
  const Mat4 motion = Inverse(RigidZ(0.03, 4.0, 0.1, 0.0));
  in.ego_motion = torch::tensor(std::vector<double>(motion.m.begin(), motion.m.end()), torch::kFloat64)
                      .view({1, 4, 4})
                      .repeat({batch, 1, 1})
                      .to(torch::kFloat32);
  in.prev_exists = torch::ones({batch}, torch::kBool);
  in.dt = torch::full({batch}, 0.5);
  in.motion_vector = torch::cat({in.ego_motion.narrow(1, 0, 3).flatten(1), in.dt.unsqueeze(1)}, 1);
  in.code_weights = torch::tensor({1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.2, 0.2}, torch::kFloat32);
  for (int64_t slot = 0; slot < batch; ++slot) {
    const int64_t boxes = slot % 2 == 0 ? 8 : 5;  // the trainer's boxes_max is 8
    in.labels.push_back(torch::randint(0, config.classes, {boxes}, torch::kInt64));
    const auto u = torch::rand({boxes, 7}, torch::kFloat64);
    std::vector<std::array<double, 7>> list;
    for (int64_t g = 0; g < boxes; ++g) {
      const auto r = [&](int64_t k) { return u[g][k].item<double>(); };
      list.push_back({-40 + 80 * r(0), -40 + 80 * r(1), -2 + 3 * r(2), 0.5 + 2.5 * r(3), 0.5 + 4.5 * r(4),
                      1.0 + 1.5 * r(5), -3.14159 + 6.28318 * r(6)});
    }
    in.targets.push_back(BoxTargets(list, config.range));
  }
  return in;
}

// One training step; returns the loss.
double Step(StreamPetr& model, torch::optim::AdamW& optimizer, StreamingMemory& memory, const Inputs& in) {
  memory.PreUpdate(in.ego_motion, in.prev_exists, in.dt);
  const auto prediction = model(in.images, in.img2lidar, memory, in.motion_vector);
  int64_t positives = 0;
  for (const auto& l : in.labels) positives += l.size(0);
  const double avg_factor = std::max(1.0, static_cast<double>(positives));  // world size 1
  torch::Tensor loss = torch::zeros({});
  for (size_t layer = 0; layer < prediction.logits.size(); ++layer) {
    for (size_t slot = 0; slot < in.labels.size(); ++slot) {
      const auto s = static_cast<int64_t>(slot);
      const LayerLoss l = DetectionLoss(prediction.logits[layer][s], prediction.boxes[layer][s], in.labels[slot],
                                        in.targets[slot], in.code_weights, avg_factor);
      loss = loss + l.classification + l.regression;
    }
  }
  optimizer.zero_grad();
  loss.backward();
  optimizer.step();
  return loss.item<double>();
}

void WriteTensor(const std::filesystem::path& dir, std::ofstream& index, const std::string& name, torch::Tensor t) {
  t = t.detach().contiguous();
  std::string dtype;
  if (t.scalar_type() == torch::kFloat32)
    dtype = "float32";
  else if (t.scalar_type() == torch::kFloat64)
    dtype = "float64";
  else if (t.scalar_type() == torch::kInt64)
    dtype = "int64";
  else if (t.scalar_type() == torch::kBool) {
    t = t.to(torch::kInt64);
    dtype = "bool";
  } else {
    throw std::runtime_error("WriteTensor: unexpected dtype for " + name);
  }
  std::ofstream file(dir / (name + ".bin"), std::ios::binary);
  file.write(static_cast<const char*>(t.data_ptr()), static_cast<std::streamsize>(t.numel() * t.element_size()));
  index << name << ' ' << dtype << ' ' << t.dim();
  for (const auto s : t.sizes()) index << ' ' << s;
  index << '\n';
}

int64_t ParameterCount(StreamPetr& model) {
  int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  return n;
}

int Main(int argc, char** argv) {
  int threads = 0, warmup = 5, steps = 20, reps = 5;
  int64_t batch = 2;
  std::string dump;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--threads")
      threads = std::stoi(value());
    else if (arg == "--warmup")
      warmup = std::stoi(value());
    else if (arg == "--steps")
      steps = std::stoi(value());
    else if (arg == "--reps")
      reps = std::stoi(value());
    else if (arg == "--batch")
      batch = std::stoll(value());
    else if (arg == "--dump")
      dump = value();
    else {
      std::cerr << "usage: step_bench [--threads N] [--warmup W] [--steps S] [--reps R] [--batch B] [--dump DIR]\n";
      return 2;
    }
  }
  if (threads > 0) torch::set_num_threads(threads);
  const ModelConfig config;  // the defaults
  const Inputs inputs = MakeInputs(config, batch);
  torch::manual_seed(0);
  StreamPetr model(config);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(2e-3).weight_decay(0.01));
  StreamingMemory memory(batch, config.memory_len, config.channels);
  const int64_t params = ParameterCount(model);

  if (!dump.empty()) {
    const std::filesystem::path dir(dump);
    std::filesystem::create_directories(dir);
    std::ofstream index(dir / "index.txt");
    for (const auto& p : model->named_parameters()) WriteTensor(dir, index, "param." + p.key(), p.value());
    for (const auto& b : model->named_buffers()) WriteTensor(dir, index, "buffer." + b.key(), b.value());
    WriteTensor(dir, index, "input.images", inputs.images);
    WriteTensor(dir, index, "input.img2lidar", inputs.img2lidar);
    WriteTensor(dir, index, "input.ego_motion", inputs.ego_motion);
    WriteTensor(dir, index, "input.prev_exists", inputs.prev_exists);
    WriteTensor(dir, index, "input.dt", inputs.dt);
    WriteTensor(dir, index, "input.motion_vector", inputs.motion_vector);
    WriteTensor(dir, index, "input.code_weights", inputs.code_weights);
    for (size_t s = 0; s < inputs.labels.size(); ++s) {
      WriteTensor(dir, index, "input.labels." + std::to_string(s), inputs.labels[s]);
      WriteTensor(dir, index, "input.targets." + std::to_string(s), inputs.targets[s]);
    }
    std::vector<double> losses;
    for (int i = 0; i < 3; ++i) losses.push_back(Step(model, optimizer, memory, inputs));
    WriteTensor(dir, index, "reference.losses", torch::tensor(losses, torch::kFloat64));
    std::printf("cpp dump: %s, params=%lld, losses", dump.c_str(), static_cast<long long>(params));
    for (const double l : losses) std::printf(" %.6f", l);
    std::printf("\n");
    return 0;
  }

  std::printf("cpp StreamPETR step: batch=%lld threads=%d (requested %d) params=%lld warmup=%d steps=%d reps=%d\n",
              static_cast<long long>(batch), torch::get_num_threads(), threads, static_cast<long long>(params), warmup,
              steps, reps);
  double loss = 0;
  for (int i = 0; i < warmup; ++i) loss = Step(model, optimizer, memory, inputs);
  std::vector<double> per_step;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) loss = Step(model, optimizer, memory, inputs);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    per_step.push_back(ms / steps);
    std::printf("cpp rep %d: %.3f ms/step (loss %.4f)\n", r, per_step.back(), loss);
    std::fflush(stdout);
  }
  std::vector<double> sorted = per_step;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted.size() % 2 == 1 ? sorted[sorted.size() / 2]
                                               : (sorted[sorted.size() / 2 - 1] + sorted[sorted.size() / 2]) / 2;
  std::printf("RESULT impl=cpp threads=%d params=%lld median_ms=%.3f min_ms=%.3f\n", torch::get_num_threads(),
              static_cast<long long>(params), median, sorted.front());
  return 0;
}

}  // namespace
}  // namespace petrsim::real

int main(int argc, char** argv) {
  try {
    return petrsim::real::Main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "step_bench: " << e.what() << "\n";
    return 1;
  }
}
