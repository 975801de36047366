// `sample`'s stream against tests/golden/sample_streams.json: the same data path played by
// scripts/gen_sample_golden.py with the real torch.randperm and numpy's global np.random.
#include "data/sample_stream.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "data/dataset.h"
#include "scenario/scenario_validation.h"

namespace petrsim {
namespace {

Scenario ScenarioOf(const nlohmann::json& c) {
  Scenario scenario;
  for (const auto& sub : c.at("subdatasets")) {
    auto* data = scenario.mutable_dataset()->add_subdatasets()->mutable_explicit_();
    for (const auto& scene : sub) {
      auto* out = data->add_scenes();
      for (const auto& gt : scene) out->add_gt_counts(gt.get<uint32_t>());
    }
  }
  scenario.mutable_grouping()->set_seq_split_num(c.at("seq_split_num"));
  Resample::Policy policy = Resample::in_group;
  EXPECT_TRUE(Resample::Policy_Parse(c.at("policy").get<std::string>(), &policy));
  scenario.mutable_resample()->set_policy(policy);
  scenario.mutable_resample()->set_pipeline_draws_per_attempt(
      2 * c.at("uniforms_per_attempt").get<uint32_t>());  // np.random.uniform: two draws
  // "reference": StreamPETR's train pipeline (petrsim's default); otherwise none, no GridMask.
  if (c.value("pipeline", "") != "reference") scenario.mutable_pipeline()->mutable_grid_mask()->set_use(false);
  auto* job = scenario.mutable_job();
  job->set_world_size(c.at("world_size"));
  job->set_samples_per_gpu(c.at("samples_per_gpu"));
  job->set_workers_per_gpu(c.at("workers_per_gpu"));
  if (job->workers_per_gpu() > 0) job->set_prefetch_factor(c.at("prefetch_factor"));
  job->set_seed(c.at("seed"));
  job->set_iterations(c.at("iterations"));
  EXPECT_TRUE(FindScenarioViolations(scenario).empty());
  return scenario;
}

TEST(SampleStreamTest, MatchesThePythonDataPathRowForRow) {
  std::ifstream file(std::string(PETRSIM_SOURCE_DIR) + "/tests/golden/sample_streams.json");
  const auto golden = nlohmann::json::parse(file);
  ASSERT_GE(golden.at("cases").size(), 3u);
  for (const auto& c : golden.at("cases")) {
    SCOPED_TRACE(c.at("name").get<std::string>());
    const Scenario scenario = ScenarioOf(c);
    const Dataset dataset = BuildDataset(scenario, "golden");
    std::vector<SampleRow> rows;
    GenerateSampleStream(scenario, dataset, {}, [&](const SampleRow& row) { rows.push_back(row); });
    const auto& expected = c.at("rows");
    ASSERT_EQ(rows.size(), expected.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      const auto& e = expected[i];
      SCOPED_TRACE("row " + std::to_string(i));
      EXPECT_EQ(rows[i].iteration, e.at("iteration").get<uint64_t>());
      EXPECT_EQ(rows[i].rank, e.at("rank").get<uint32_t>());
      EXPECT_EQ(rows[i].slot, e.at("slot").get<uint32_t>());
      EXPECT_EQ(rows[i].worker, e.at("worker").get<uint32_t>());
      EXPECT_EQ(rows[i].index, e.at("index").get<int64_t>());
      EXPECT_EQ(rows[i].group, e.at("group").get<int64_t>());
      EXPECT_EQ(SampleStatusName(rows[i].status), e.at("status").get<std::string>());
      EXPECT_EQ(rows[i].consumed, e.at("consumed").get<bool>());
      if (rows[i].status != SampleStatus::kBlocked) {
        EXPECT_EQ(rows[i].final_index, e.at("final_index").get<int64_t>());
        EXPECT_EQ(rows[i].attempts, e.at("attempts").get<uint64_t>());
      }
    }
  }
}

}  // namespace
}  // namespace petrsim

namespace petrsim {
namespace {

TEST(SampleStreamTest, EpochSamplersRestartAndReseedWorkersEachEpoch) {
  // 6 frames, W=1, B=2: 3 batches per epoch. Workers: 0 1 0 | 0 1 0 | ... (a new DataLoader
  // iterator per epoch), and each epoch's worker RNGs start from worker_init_fn's seed again.
  Scenario scenario;
  auto* scene = scenario.mutable_dataset()->add_subdatasets()->mutable_explicit_()->add_scenes();
  for (const uint32_t gt : {1u, 0u, 1u, 1u, 0u, 1u}) scene->add_gt_counts(gt);
  scenario.mutable_grouping()->set_seq_mode(false);
  scenario.mutable_sampler()->set_kind(Sampler::distributed);
  scenario.mutable_job()->set_world_size(1);
  scenario.mutable_job()->set_samples_per_gpu(2);
  scenario.mutable_job()->set_workers_per_gpu(2);
  scenario.mutable_job()->set_iterations(9);
  ASSERT_TRUE(FindScenarioViolations(scenario).empty());
  const Dataset dataset = BuildDataset(scenario, "t");
  std::vector<SampleRow> rows;
  GenerateSampleStream(scenario, dataset, {}, [&](const SampleRow& row) { rows.push_back(row); });
  ASSERT_EQ(rows.size(), 18u);
  const std::vector<uint32_t> workers = {0, 1, 0, 0, 1, 0, 0, 1, 0};
  for (size_t i = 0; i < rows.size(); ++i) EXPECT_EQ(rows[i].worker, workers[i / 2]) << i;
  // Replay epoch 1's first batch by hand: worker 0 freshly seeded with 2 * 0 + 0 + 0.
  NumpyRandomState fresh(WorkerNumpySeed(2, 0, 0, 0));
  const auto policy = MakeResamplePolicy(scenario, dataset);
  for (size_t i = 6; i < 8; ++i) {
    const GetItemResult expected = GetItem(dataset, *policy, rows[i].index, fresh, PipelineDraws(scenario));
    EXPECT_EQ(rows[i].final_index, expected.index);
    EXPECT_EQ(rows[i].attempts, expected.attempts);
  }
}

}  // namespace
}  // namespace petrsim
