// `sample`'s stream against tests/golden/sample_streams.json: the same data path played by
// scripts/gen_sample_golden.py with the real torch.randperm and numpy's global np.random.
#include "model/sample_stream.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "model/dataset.h"
#include "model/scenario_validation.h"

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
  auto* job = scenario.mutable_job();
  job->set_world_size(c.at("world_size"));
  job->set_samples_per_gpu(c.at("samples_per_gpu"));
  job->set_workers_per_gpu(c.at("workers_per_gpu"));
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
      if (rows[i].status != SampleStatus::kBlocked) {
        EXPECT_EQ(rows[i].final_index, e.at("final_index").get<int64_t>());
        EXPECT_EQ(rows[i].attempts, e.at("attempts").get<uint64_t>());
      }
    }
  }
}

}  // namespace
}  // namespace petrsim
