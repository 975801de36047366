// The streaming memory (real/memory.h): the ego-motion transform composes (two steps equal the
// composed motion), a broken stream clears its slot only, and the top-k queries go to the front.
#include "real/memory.h"

#include <gtest/gtest.h>

#include "real/geometry.h"

namespace petrsim::real {
namespace {

torch::Tensor ToTensor(const Mat4& m) {
  return torch::tensor(std::vector<double>(m.m.begin(), m.m.end()), torch::kFloat64).view({4, 4});
}

StreamingMemory Filled(int64_t batch) {
  StreamingMemory memory(batch, 6, 4, torch::kFloat64);
  const auto embeddings = torch::arange(batch * 3 * 4, torch::kFloat64).view({batch, 3, 4});
  const auto points = torch::arange(batch * 3 * 3, torch::kFloat64).view({batch, 3, 3});
  const auto scores = torch::tensor({0.1, 0.9, 0.5}, torch::kFloat64).repeat({batch, 1});
  memory.PostUpdate(embeddings, points, scores, 2);
  return memory;
}

TEST(StreamingMemory, TwoEgoStepsEqualTheComposedMotion) {
  const Mat4 pose0 = RigidZ(0.1, 10, 5, 0), pose1 = RigidZ(0.25, 14, 6, 0.1), pose2 = RigidZ(0.5, 18, 9, 0.2);
  const auto a = ToTensor(EgoMotion(pose0, pose1)).unsqueeze(0);
  const auto b = ToTensor(EgoMotion(pose1, pose2)).unsqueeze(0);
  const auto ab = ToTensor(EgoMotion(pose0, pose2)).unsqueeze(0);
  const auto yes = torch::ones({1}, torch::kBool);
  const auto dt = torch::full({1}, 0.5, torch::kFloat64);
  StreamingMemory two = Filled(1), one = Filled(1);
  two.PreUpdate(a, yes, dt);
  two.PreUpdate(b, yes, dt);
  one.PreUpdate(ab, yes, dt * 2);
  EXPECT_TRUE(torch::allclose(two.reference_points(), one.reference_points(), 1e-9, 1e-9));
  EXPECT_TRUE(torch::allclose(two.age(), one.age()));
  // A world-fixed point stays put: carried into frame 2's ego frame, it is the same world point.
  const auto in0 = Filled(1).reference_points()[0][0];
  const auto in2 = two.reference_points()[0][0];
  const auto world0 = torch::matmul(ToTensor(pose0), torch::cat({in0, torch::ones({1}, torch::kFloat64)}));
  const auto world2 = torch::matmul(ToTensor(pose2), torch::cat({in2, torch::ones({1}, torch::kFloat64)}));
  EXPECT_TRUE(torch::allclose(world0, world2, 1e-9, 1e-9));
}

TEST(StreamingMemory, ABrokenStreamClearsItsSlotOnly) {
  StreamingMemory memory = Filled(2);
  const auto identity = torch::eye(4, torch::kFloat64).unsqueeze(0).repeat({2, 1, 1});
  const auto before = memory.embeddings().clone();
  memory.PreUpdate(identity, torch::tensor({true, false}), torch::full({2}, 0.5, torch::kFloat64));
  EXPECT_TRUE(torch::equal(memory.embeddings()[0], before[0]));
  EXPECT_EQ(memory.embeddings()[1].abs().sum().item<double>(), 0.0);
  EXPECT_EQ(memory.reference_points()[1].abs().sum().item<double>(), 0.0);
  EXPECT_FALSE(memory.valid()[1].any().item<bool>());
  EXPECT_EQ(memory.valid()[0].sum().item<int64_t>(), 2);
}

TEST(StreamingMemory, TheTopKGoToTheFrontAndTheOldestFallOff) {
  StreamingMemory memory = Filled(1);  // pushed queries 1 (score 0.9), 2 (0.5)
  EXPECT_TRUE(torch::equal(memory.embeddings()[0][0], torch::arange(4, 8, torch::kFloat64)));
  EXPECT_TRUE(torch::equal(memory.embeddings()[0][1], torch::arange(8, 12, torch::kFloat64)));
  for (int i = 0; i < 3; ++i) {
    memory.PostUpdate(torch::full({1, 3, 4}, 100.0 + i, torch::kFloat64), torch::zeros({1, 3, 3}, torch::kFloat64),
                      torch::tensor({{0.3, 0.2, 0.1}}, torch::kFloat64), 2);
  }
  // 2 + 3 x 2 = 8 pushed into 6 places: the first push is gone, the newest is first.
  EXPECT_EQ(memory.embeddings()[0][0][0].item<double>(), 102.0);
  EXPECT_EQ(memory.embeddings()[0][5][0].item<double>(), 100.0);
  EXPECT_TRUE(memory.valid().all().item<bool>());
  EXPECT_EQ(memory.age()[0][0].item<double>(), 0.0);
}

}  // namespace
}  // namespace petrsim::real
