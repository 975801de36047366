// `petrsim sample` output: the rank list syntax and the JSON stream.
#include "cli/sample_command.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "base/error.h"
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

TEST(SampleFromTest, ParsesAnIterationOfTheJobOrNamesTheFlag) {
  EXPECT_EQ(ParseSampleFrom("0", 12), 0u);
  EXPECT_EQ(ParseSampleFrom("11", 12), 11u);
  for (const char* bad : {"", "x", "-1", "+3", "1.5", "3x", "12", "99999999999999999999"}) {
    SCOPED_TRACE(bad);
    try {
      ParseSampleFrom(bad, 12);
      FAIL() << "accepted";
    } catch (const ScenarioError& error) {
      EXPECT_EQ(std::string(error.what()).rfind("--from: ", 0), 0u) << error.what();
    }
  }
}

TEST(SampleFromTest, TheHeaderCountsTheRowsThatFollow) {
  EXPECT_EQ(SampleHeader(100, 150, 42192, {}, 8, 800), "iterations 100..149 of 42192, ranks 0-7: 800 rows");
  EXPECT_EQ(SampleHeader(0, 12, 12, {7}, 8, 1), "iterations 0..11 of 12, rank 7: 1 row");
  EXPECT_EQ(SampleHeader(0, 12, 12, {0, 3, 5, 6, 7}, 8, 60), "iterations 0..11 of 12, ranks 0,3,5-7: 60 rows");
  EXPECT_NE(SampleHeader(170, 200, 42192, {7}, 8, 0).find("0 rows (the stream ends before iteration 170"),
            std::string::npos);
}

TEST(WriteSampleStreamTest, FromSkipsTheEarlierIterationsOfTheSameStream) {
  const Scenario scenario = testing::ShippedScenario("tiny.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "tiny");
  const auto rows_of = [&](uint64_t from) {
    std::FILE* file = std::tmpfile();
    SampleStreamOptions options;
    WriteSampleStream(scenario, dataset, options, /*json=*/true, file, from);
    std::rewind(file);
    std::string text;
    char buffer[4096];
    for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0;) text.append(buffer, n);
    std::fclose(file);
    return nlohmann::json::parse(text);
  };
  const auto all = rows_of(0);
  const auto later = rows_of(3);
  nlohmann::json expected = nlohmann::json::array();
  for (const auto& row : all) {
    if (row["iteration"] >= 3) expected.push_back(row);
  }
  ASSERT_FALSE(expected.empty());
  EXPECT_EQ(later, expected);
}

}  // namespace
}  // namespace petrsim
