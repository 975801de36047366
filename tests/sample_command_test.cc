// `petrsim sample` output: the rank list syntax and the JSON stream.
#include "cli/sample_command.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "model/error.h"
#include "tests/scenario_text.h"

namespace petrsim {
namespace {

TEST(ParseRankListTest, ListsAndRanges) {
  EXPECT_EQ(ParseRankList("0,3,5-7", 8), (std::vector<uint32_t>{0, 3, 5, 6, 7}));
  EXPECT_EQ(ParseRankList("2", 3), (std::vector<uint32_t>{2}));
}

TEST(ParseRankListTest, RejectsBadInputWithTheOptionName) {
  for (const char* bad : {"", "a", "1,", "3-1", "8", "1-9", "-1"}) {
    SCOPED_TRACE(bad);
    try {
      ParseRankList(bad, 8);
      FAIL() << "accepted";
    } catch (const ScenarioError& error) {
      EXPECT_NE(std::string(error.what()).find("--ranks"), std::string::npos);
    }
  }
}

TEST(WriteSampleStreamTest, JsonRowsParseAndFollowTheSampler) {
  const Scenario scenario = testing::ShippedScenario("tiny.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "tiny");
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  SampleStreamOptions options;
  const uint64_t rows = WriteSampleStream(scenario, dataset, options, /*json=*/true, file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0;) text.append(buffer, n);
  std::fclose(file);
  const auto json = nlohmann::json::parse(text);
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), rows);
  for (const auto& row : json) {
    for (const char* key : {"iteration", "rank", "slot", "index", "group"}) {
      EXPECT_TRUE(row.contains(key)) << key;
    }
  }
  // Rank 1 hits its livelock at iteration 5 (see check_tiny): from then on nothing is
  // consumed, and the stream ends with the last prefetched batch, 5 + 2 * 2 - 1 = 8.
  uint64_t livelock_iteration = 0;
  uint64_t last_iteration = 0;
  for (const auto& row : json) {
    if (row["rank"] != 1) continue;
    if (row["status"] == "livelock" && livelock_iteration == 0) livelock_iteration = row["iteration"];
    last_iteration = row["iteration"];
    EXPECT_EQ(row["consumed"], livelock_iteration == 0) << row.dump();
  }
  EXPECT_EQ(livelock_iteration, 5u);
  EXPECT_EQ(last_iteration, 8u);
}

}  // namespace
}  // namespace petrsim
