// The backbone and decoder layer (real/streampetr_modules.h): shapes, stride 16, invalid memory
// entries have no influence, the image tokens are a set (permuting them with their positions
// changes nothing), and every parameter gets a gradient.
#include "real/streampetr_modules.h"

#include <gtest/gtest.h>

namespace petrsim::real {
namespace {

TEST(StreamPetrModules, TheBackboneGivesAStride16Map) {
  torch::manual_seed(0);
  Backbone backbone(32);
  const auto features = backbone(torch::randn({12, 3, 64, 96}));
  EXPECT_EQ(features.sizes(), torch::IntArrayRef({12, 32, 4, 6}));
}

struct Inputs {
  torch::Tensor query, query_pos, memory, memory_pos, valid, tokens, tokens_pos;
};

Inputs MakeInputs() {
  torch::manual_seed(1);
  Inputs in;
  in.query = torch::randn({2, 5, 16});
  in.query_pos = torch::randn({2, 5, 16});
  in.memory = torch::randn({2, 4, 16});
  in.memory_pos = torch::randn({2, 4, 16});
  in.valid = torch::tensor({true, true, false, false}).repeat({2, 1});
  in.tokens = torch::randn({2, 7, 16});
  in.tokens_pos = torch::randn({2, 7, 16});
  return in;
}

TEST(StreamPetrModules, InvalidMemoryHasNoInfluence) {
  torch::manual_seed(2);
  DecoderLayer layer(16, 4, 32);
  layer->eval();
  const Inputs in = MakeInputs();
  const auto out = layer(in.query, in.query_pos, in.memory, in.memory_pos, in.valid, in.tokens, in.tokens_pos);
  EXPECT_EQ(out.sizes(), torch::IntArrayRef({2, 5, 16}));
  auto changed = in.memory.clone();
  changed.narrow(1, 2, 2).fill_(1000);  // the invalid entries
  const auto same = layer(in.query, in.query_pos, changed, in.memory_pos, in.valid, in.tokens, in.tokens_pos);
  EXPECT_TRUE(torch::allclose(out, same, 1e-5, 1e-5));
  auto valid_changed = in.memory.clone();
  valid_changed.narrow(1, 0, 1).fill_(1000);  // a valid entry: it must matter
  const auto differs = layer(in.query, in.query_pos, valid_changed, in.memory_pos, in.valid, in.tokens, in.tokens_pos);
  EXPECT_FALSE(torch::allclose(out, differs, 1e-3, 1e-3));
}

TEST(StreamPetrModules, ImageTokensAreASetAndEveryParameterLearns) {
  torch::manual_seed(3);
  DecoderLayer layer(16, 4, 32);
  const Inputs in = MakeInputs();
  const auto order = torch::randperm(7);
  layer->eval();
  const auto a = layer(in.query, in.query_pos, in.memory, in.memory_pos, in.valid, in.tokens, in.tokens_pos);
  const auto b = layer(in.query, in.query_pos, in.memory, in.memory_pos, in.valid, in.tokens.index_select(1, order),
                       in.tokens_pos.index_select(1, order));
  EXPECT_TRUE(torch::allclose(a, b, 1e-5, 1e-5));
  layer->train();
  layer(in.query, in.query_pos, in.memory, in.memory_pos, in.valid, in.tokens, in.tokens_pos).pow(2).sum().backward();
  for (const auto& p : layer->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0) << p.key();
  }
}

}  // namespace
}  // namespace petrsim::real
