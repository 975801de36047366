// The assembled scaled-down StreamPETR (real/streampetr_model.h): shapes, the memory filled after
// a frame, and that it learns: on one rendered frame its detection loss (all layers, matched
// with the Hungarian matcher) falls by more than half in 120 CPU steps.
#include "real/streampetr_model.h"

#include <gtest/gtest.h>

#include <iostream>
#include <numeric>
#include <vector>

#include "real/geometry.h"
#include "real/losses.h"
#include "real/renderer.h"

namespace petrsim::real {
namespace {

struct Batch {
  torch::Tensor images, img2lidar, labels, targets;
};

Batch RenderedBatch(const ModelConfig& config) {
  const auto rig = SurroundRig(static_cast<int>(config.image_width), static_cast<int>(config.image_height));
  const RenderedFrame frame = SceneFrame(5, 0, 4, {0, 8, 3, 0});
  const auto pixels = Render(rig, frame.boxes);
  Batch batch;
  batch.images = torch::tensor(std::vector<float>(pixels.begin(), pixels.end()))
                     .view({1, 6, 3, config.image_height, config.image_width});
  std::vector<double> inverses;
  for (const Camera& camera : rig) {
    const Mat4 m = Inverse(camera.Lidar2Img());
    inverses.insert(inverses.end(), m.m.begin(), m.m.end());
  }
  batch.img2lidar = torch::tensor(inverses, torch::kFloat64).view({1, 6, 4, 4});
  std::vector<int64_t> labels;
  std::vector<std::array<double, 7>> boxes;
  for (const RenderBox& b : frame.boxes) {
    labels.push_back(b.cls);
    boxes.push_back({b.x, b.y, b.z, b.w, b.l, b.h, b.yaw});
  }
  batch.labels = torch::tensor(labels, torch::kInt64);
  batch.targets = BoxTargets(boxes, config.range);
  return batch;
}

TEST(StreamPetrModel, ShapesAndMemory) {
  torch::manual_seed(0);
  const ModelConfig config;
  StreamPetr model(config);
  const Batch batch = RenderedBatch(config);
  StreamingMemory memory(1, config.memory_len, config.channels);
  const auto prediction = model(batch.images, batch.img2lidar, memory, torch::zeros({1, kMotionDims}));
  ASSERT_EQ(prediction.logits.size(), static_cast<size_t>(config.decoder_layers));
  EXPECT_EQ(prediction.logits[0].sizes(), torch::IntArrayRef({1, config.queries, config.classes}));
  EXPECT_EQ(prediction.boxes[1].sizes(), torch::IntArrayRef({1, config.queries, kBoxTerms}));
  EXPECT_EQ(memory.valid().sum().item<int64_t>(), config.topk);
  // The centres are inside the normalised range.
  const auto centres = prediction.boxes[1].narrow(2, 0, 3);
  EXPECT_TRUE((centres >= 0).all().item<bool>() && (centres <= 1).all().item<bool>());
}

TEST(StreamPetrModel, LearnsARenderedFrame) {
  torch::manual_seed(1);
  const ModelConfig config;
  StreamPetr model(config);
  const Batch batch = RenderedBatch(config);
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(2e-3).weight_decay(0.01));
  const auto weights = torch::tensor({1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.2, 0.2}, torch::kFloat32);
  const double avg_factor = static_cast<double>(batch.labels.size(0));
  std::vector<double> losses;
  for (int step = 0; step < 120; ++step) {
    StreamingMemory memory(1, config.memory_len, config.channels);  // one frame, fresh memory
    const auto prediction = model(batch.images, batch.img2lidar, memory, torch::zeros({1, kMotionDims}));
    torch::Tensor loss = torch::zeros({});
    for (size_t layer = 0; layer < prediction.logits.size(); ++layer) {
      const LayerLoss l = DetectionLoss(prediction.logits[layer][0], prediction.boxes[layer][0], batch.labels,
                                        batch.targets, weights, avg_factor);
      loss = loss + l.classification + l.regression;
    }
    optimizer.zero_grad();
    loss.backward();
    optimizer.step();
    losses.push_back(loss.item<double>());
  }
  // The first step's loss (before any update) against the mean of the last 10: one step's value
  // alone is a draw from the optimiser's bounce.
  const double first = losses.front();
  const double last = std::accumulate(losses.end() - 10, losses.end(), 0.0) / 10;
  std::cout << "loss: first step " << first << ", mean of the last 10 steps " << last << " (ratio " << last / first
            << ")\n";
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
}

}  // namespace
}  // namespace petrsim::real
