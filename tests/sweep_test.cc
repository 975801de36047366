// `petrsim sweep` and `petrsim merge`: flag parsing, the combination order, determinism across
// --jobs, and shards merged back into the unsharded output byte for byte.
#include "sweep/sweep.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"

namespace petrsim {
namespace {

const std::string kTiny = std::string(PETRSIM_SOURCE_DIR) + "/scenarios/tiny.pbtxt";
const std::string kSeed = std::string(PETRSIM_SOURCE_DIR) + "/scenarios/streampetr_trainval_hang.pbtxt";

// What `write` writes to a FILE*.
std::string Capture(const std::function<void(std::FILE*)>& write) {
  std::FILE* file = std::tmpfile();
  EXPECT_NE(file, nullptr);
  write(file);
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, file)) > 0) text.append(buffer, n);
  std::fclose(file);
  return text;
}

std::string Sweep(const SweepSpec& spec) {
  return Capture([&](std::FILE* out) { EXPECT_EQ(RunSweep(spec, out), 0); });
}

std::string Merge(const std::vector<std::string>& paths, SweepFormat format, bool json_runs = false) {
  return Capture([&](std::FILE* out) { EXPECT_EQ(RunMerge(paths, format, json_runs, out), 0); });
}

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "sweep_test_" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

// A small sweep of the tiny scenario: 2 x 2 combinations x 3 seeds.
SweepSpec TinySpec() {
  SweepSpec spec;
  spec.scenario_path = kTiny;
  spec.vary = {ParseVary("job.workers_per_gpu=1,2"), ParseVary("resample.policy=in_group,global")};
  spec.seeds = 3;
  spec.jobs = 1;
  return spec;
}

// The message of the ScenarioError `action` throws ("" when it throws none).
std::string ErrorOf(const std::function<void()>& action) {
  try {
    action();
  } catch (const ScenarioError& error) {
    return error.what();
  }
  return "";
}

TEST(ParseVaryTest, PathAndValuesInOrder) {
  const SweepAxis axis = ParseVary("job.world_size=8,16,32");
  EXPECT_EQ(axis.path, "job.world_size");
  EXPECT_EQ(axis.values, (std::vector<std::string>{"8", "16", "32"}));
  EXPECT_EQ(ParseVary("name=a=b").values, (std::vector<std::string>{"a=b"}));
}

TEST(ParseVaryTest, RejectsMalformedFlagsNamingThem) {
  for (const char* bad : {"job.world_size", "job.world_size=", "=8,16", "job.world_size=8,,16", "job.world_size=8,",
                          "job.world_size=8,8"}) {
    SCOPED_TRACE(bad);
    const std::string message = ErrorOf([&] { ParseVary(bad); });
    EXPECT_NE(message.find(std::string("--vary ") + bad), std::string::npos) << message;
  }
  EXPECT_NE(ErrorOf([] { ParseVary("job.world_size"); }).find("no '='"), std::string::npos);
  EXPECT_NE(ErrorOf([] { ParseVary("job.world_size="); }).find("no values"), std::string::npos);
}

TEST(ParseShardTest, OneBasedKOfN) {
  EXPECT_EQ(ParseShard("1/3"), (SweepShard{1, 3}));
  EXPECT_EQ(ParseShard("3/3"), (SweepShard{3, 3}));
  EXPECT_EQ(ParseShard("1/1"), (SweepShard{1, 1}));
  for (const char* bad : {"0/3", "4/3", "1/0", "0/0", "junk", "1", "1/", "/3", "1/3x", "-1/3", "+1/3", " 1/3", "1/3/3",
                          "99999999999/99999999999"}) {
    SCOPED_TRACE(bad);
    const std::string message = ErrorOf([&] { ParseShard(bad); });
    EXPECT_NE(message.find("--shard"), std::string::npos) << message;
    EXPECT_NE(message.find(bad), std::string::npos) << message;
  }
}

TEST(RunSweepTest, BadVaryValuesAreReportedBeforeAnyOutput) {
  struct Case {
    const char* vary;
    const char* expected;
  };
  for (const Case& test : {Case{"job.wrold_size=1,2", "--vary job.wrold_size=1,2: value '1'"},
                           Case{"job.world_size=2,abc", "--vary job.world_size=2,abc: value 'abc'"},
                           Case{"job.world_size=0,2", "--vary job.world_size=0"},
                           Case{"resample.policy=in_group,sideways", "value 'sideways'"}}) {
    SCOPED_TRACE(test.vary);
    SweepSpec spec = TinySpec();
    spec.vary = {ParseVary(test.vary)};
    std::string message;
    const std::string output = Capture([&](std::FILE* out) { message = ErrorOf([&] { RunSweep(spec, out); }); });
    EXPECT_NE(message.find(test.expected), std::string::npos) << message;
    EXPECT_EQ(output, "");
  }
  // Valid alone, but tiny has 8 sampler groups: the job's sampler assertion fails every run.
  SweepSpec spec = TinySpec();
  spec.vary = {ParseVary("job.world_size=2,64")};
  spec.jobs = 2;
  std::string message;
  const std::string output = Capture([&](std::FILE* out) { message = ErrorOf([&] { RunSweep(spec, out); }); });
  EXPECT_NE(message.find("run 3 (job.world_size=64, seed index 0: run seed 0, job.seed 0): " + kTiny +
                         ": job.world_size * job.samples_per_gpu"),
            std::string::npos)
      << message;
  EXPECT_EQ(output, "");

  spec = TinySpec();
  spec.seeds = 0;
  EXPECT_NE(ErrorOf([&] { Sweep(spec); }).find("--seeds"), std::string::npos);
  spec = TinySpec();
  spec.vary.push_back(ParseVary("job.workers_per_gpu=3"));
  EXPECT_NE(ErrorOf([&] { Sweep(spec); }).find("varied twice"), std::string::npos);
  spec = TinySpec();
  spec.scenario_path = "no/such/file.pbtxt";
  EXPECT_NE(ErrorOf([&] { Sweep(spec); }).find("no/such/file.pbtxt: cannot open"), std::string::npos);
  spec = TinySpec();
  spec.sets = {"job.samples_per_gpu=x"};
  EXPECT_NE(ErrorOf([&] { Sweep(spec); }).find("--set job.samples_per_gpu=x"), std::string::npos);
}

TEST(RunSweepTest, CombinationsAreTheProductWithTheLastAxisFastest) {
  SweepSpec spec = TinySpec();
  spec.format = SweepFormat::kJson;
  spec.json_runs = true;
  spec.seed_base = 40;
  const nlohmann::json document = nlohmann::json::parse(Sweep(spec));
  EXPECT_EQ(document["sweep"]["combinations"], 4);
  EXPECT_EQ(document["sweep"]["runs"], 12);
  const auto& combinations = document["combinations"];
  ASSERT_EQ(combinations.size(), 4u);
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"1", "in_group"}, {"1", "global"}, {"2", "in_group"}, {"2", "global"}};
  for (size_t c = 0; c < 4; ++c) {
    SCOPED_TRACE(c);
    const auto& combination = combinations[c];
    EXPECT_EQ(combination["values"]["job.workers_per_gpu"], expected[c].first);
    EXPECT_EQ(combination["values"]["resample.policy"], expected[c].second);
    EXPECT_EQ(combination["run_count"], 3);
    ASSERT_EQ(combination["runs"].size(), 3u);
    uint64_t outcomes = 0;
    for (const auto& [name, count] : combination["outcomes"].items()) {
      outcomes += count.get<uint64_t>();
    }
    EXPECT_EQ(outcomes, 3u);
    for (uint32_t i = 0; i < 3; ++i) {
      const auto& run = combination["runs"][i];
      EXPECT_EQ(run["run"], c * 3 + i);
      EXPECT_EQ(run["seed_index"], i);
      EXPECT_EQ(run["run_seed"], 40 + i);  // --seed-base 40
      EXPECT_EQ(run["job_seed"], i);       // tiny's job.seed is 0
      if (run["outcome"] == "completed") {
        EXPECT_TRUE(run["time_to_hang_ns"].is_null());
        EXPECT_EQ(run["iterations_completed"], 12);
      } else {
        EXPECT_TRUE(run["time_to_hang_ns"].is_number_integer());
      }
    }
  }
  // The global policy never livelocks; tiny's in_group trap does for some seed, for both
  // worker counts.
  EXPECT_EQ(combinations[1]["not_completed"], 0);
  EXPECT_EQ(combinations[3]["not_completed"], 0);
}

TEST(RunSweepTest, SeedsDifferPerRun) {
  SweepSpec spec = TinySpec();
  spec.vary.clear();
  spec.seeds = 4;
  spec.format = SweepFormat::kJson;
  spec.json_runs = true;
  const nlohmann::json document = nlohmann::json::parse(Sweep(spec));
  const auto& runs = document["combinations"][0]["runs"];
  ASSERT_EQ(runs.size(), 4u);
  for (uint32_t i = 0; i < 4; ++i) {
    EXPECT_EQ(runs[i]["run_seed"], i);  // run seeds from 0 without --seed-base
    EXPECT_EQ(runs[i]["job_seed"], i);
  }
}

TEST(RunSweepTest, OutputDoesNotDependOnJobs) {
  for (const SweepFormat format : {SweepFormat::kTable, SweepFormat::kJson, SweepFormat::kCsv}) {
    SweepSpec spec = TinySpec();
    spec.seeds = 5;
    spec.format = format;
    spec.json_runs = true;
    spec.jobs = 1;
    const std::string one = Sweep(spec);
    spec.jobs = 2;
    EXPECT_EQ(Sweep(spec), one);
    spec.jobs = 7;
    EXPECT_EQ(Sweep(spec), one);
  }
}

TEST(RunSweepTest, ProgressCountsEveryRun) {
  SweepSpec spec = TinySpec();
  spec.jobs = 3;
  std::vector<uint64_t> done;
  spec.progress = [&](uint64_t d, uint64_t total) {
    EXPECT_EQ(total, 12u);
    done.push_back(d);
  };
  Sweep(spec);
  ASSERT_EQ(done.size(), 12u);
  for (uint64_t k = 0; k < 12; ++k) EXPECT_EQ(done[k], k + 1);
}

TEST(RunSweepTest, TableAndCsvShape) {
  SweepSpec spec = TinySpec();
  const std::string table = Sweep(spec);
  EXPECT_NE(table.find("sweep of " + kTiny + ": 4 combinations x 3 seeds = 12 runs"), std::string::npos) << table;
  EXPECT_NE(table.find("job.workers_per_gpu  resample.policy  runs"), std::string::npos) << table;
  spec.format = SweepFormat::kCsv;
  const std::string csv = Sweep(spec);
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "job.workers_per_gpu,resample.policy,runs,not_completed,hang_probability,completed,"
            "hang,desync,rank_died,limit_reached,time_to_hang_runs,time_to_hang_median_s,"
            "time_to_hang_p90_s,mean_iterations_per_s,mean_stream_breaks");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 5);
  EXPECT_EQ(csv.find("1,global,3,0,0.000000,3,0,0,0,0,0,,,"), csv.find("\n1,global") + 1);
}

TEST(MergeTest, OneShardMergesToTheUnshardedOutput) {
  for (const SweepFormat format : {SweepFormat::kTable, SweepFormat::kJson, SweepFormat::kCsv}) {
    for (const bool json_runs : {false, true}) {
      SweepSpec spec = TinySpec();
      spec.format = format;
      spec.json_runs = json_runs;
      const std::string unsharded = Sweep(spec);
      spec.format = SweepFormat::kJson;
      spec.shard = ParseShard("1/1");
      const std::string shard = WriteTemp("only.json", Sweep(spec));
      EXPECT_EQ(Merge({shard}, format, json_runs), unsharded);
    }
  }
}

TEST(MergeTest, ThreeShardsInAnyOrderMergeToTheUnshardedOutput) {
  SweepSpec spec = TinySpec();
  spec.seeds = 2;  // 8 runs: shards of 3, 3 and 2
  spec.format = SweepFormat::kJson;
  spec.json_runs = true;
  spec.jobs = 2;
  const std::string unsharded = Sweep(spec);
  std::vector<std::string> paths;
  for (uint32_t k = 1; k <= 3; ++k) {
    spec.shard = SweepShard{k, 3};
    const std::string text = Sweep(spec);
    EXPECT_EQ(nlohmann::json::parse(text)["runs"].size(), k == 3 ? 2u : 3u);
    paths.push_back(WriteTemp("three_" + std::to_string(k) + ".json", text));
  }
  EXPECT_EQ(Merge({paths[2], paths[0], paths[1]}, SweepFormat::kJson, true), unsharded);
}

TEST(MergeTest, RejectsShardsOfDifferentSweepsMissingOrTwice) {
  SweepSpec spec = TinySpec();
  spec.seeds = 2;
  spec.shard = SweepShard{1, 2};
  const std::string first = WriteTemp("a1.json", Sweep(spec));
  spec.shard = SweepShard{2, 2};
  const std::string second = WriteTemp("a2.json", Sweep(spec));
  spec.seeds = 3;
  const std::string other_seeds = WriteTemp("b2.json", Sweep(spec));
  spec.seeds = 2;
  spec.vary.pop_back();
  const std::string other_vary = WriteTemp("c2.json", Sweep(spec));
  spec = TinySpec();
  spec.seeds = 2;
  spec.shard = SweepShard{2, 3};
  const std::string other_count = WriteTemp("d2.json", Sweep(spec));
  const std::string not_shard = WriteTemp("plain.json", "{\"combinations\": []}");
  const std::string not_json = WriteTemp("junk.json", "junk");

  auto merge_error = [](const std::vector<std::string>& paths) {
    return ErrorOf([&] { Merge(paths, SweepFormat::kTable); });
  };
  EXPECT_EQ(merge_error({first, second}), "");
  std::string message = merge_error({first, other_seeds});
  EXPECT_NE(message.find(other_seeds + ": from a different sweep than " + first), std::string::npos) << message;
  EXPECT_NE(message.find("seeds"), std::string::npos) << message;
  message = merge_error({first, other_vary});
  EXPECT_NE(message.find(other_vary + ": from a different sweep"), std::string::npos) << message;
  EXPECT_NE(message.find("vary"), std::string::npos) << message;
  message = merge_error({first, other_count});
  EXPECT_NE(message.find(other_count + ": shard 2/3"), std::string::npos) << message;
  message = merge_error({first});
  EXPECT_NE(message.find("shard 2/2"), std::string::npos) << message;
  EXPECT_NE(message.find("missing"), std::string::npos) << message;
  message = merge_error({first, second, second});
  EXPECT_NE(message.find(second + ": shard 2/2 given twice"), std::string::npos) << message;
  message = merge_error({first, first});
  EXPECT_NE(message.find(first + ": shard 1/2 given twice"), std::string::npos) << message;
  message = merge_error({not_shard});
  EXPECT_NE(message.find(not_shard + ": not a shard file"), std::string::npos) << message;
  message = merge_error({not_json});
  EXPECT_NE(message.find(not_json + ": not a JSON shard file"), std::string::npos) << message;
  message = merge_error({first, "no/such/shard.json"});
  EXPECT_NE(message.find("no/such/shard.json: cannot open"), std::string::npos) << message;

  // A shard whose runs were tampered with.
  std::ifstream in(first);
  nlohmann::ordered_json document = nlohmann::ordered_json::parse(in);
  document["runs"].erase(document["runs"].begin());
  const std::string short_shard = WriteTemp("short.json", document.dump());
  message = merge_error({short_shard, second});
  EXPECT_NE(message.find(short_shard + ": runs"), std::string::npos) << message;
}

TEST(RunSweepTest, SeedScenarioFewSeeds) {
  SweepSpec spec;
  spec.scenario_path = kSeed;
  spec.vary = {ParseVary("resample.policy=in_group,global")};
  spec.seeds = 2;
  spec.jobs = 2;
  spec.format = SweepFormat::kJson;
  spec.json_runs = true;
  const nlohmann::json document = nlohmann::json::parse(Sweep(spec));
  const auto& combinations = document["combinations"];
  ASSERT_EQ(combinations.size(), 2u);
  // global never livelocks.
  EXPECT_EQ(combinations[1]["outcomes"]["hang"], 0);
  for (const auto& combination : combinations) {
    for (const auto& run : combination["runs"]) {
      EXPECT_GT(run["events"].get<uint64_t>(), 0u);
      if (run["outcome"] == "hang") {
        EXPECT_EQ(run["cause"], "sampler_livelock");
        EXPECT_GT(run["time_to_hang_ns"].get<int64_t>(), 0);
      }
    }
  }
}

// --vary job.seed with --seeds N: run i adds i to job.seed, so values less than N apart share
// job seeds. The warning names the pair and the seeds they share; spaced values get none.
TEST(JobSeedOverlapTest, NamesTheFirstOverlapAndTheSharedSeeds) {
  SweepSpec spec;
  spec.vary = {ParseVary("job.seed=0,1,2")};
  spec.seeds = 4;
  const auto warning = JobSeedOverlap(spec);
  ASSERT_TRUE(warning);
  EXPECT_NE(warning->find("--vary job.seed=0,1,2 with --seeds 4"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("job.seed=0 and job.seed=1 both run job seeds 1..3"), std::string::npos) << *warning;
  EXPECT_NE(warning->find("e.g. --vary job.seed=0,4,8"), std::string::npos) << *warning;
  // One seed in common; the values in any order.
  spec.vary = {ParseVary("job.seed=9,5")};
  spec.seeds = 5;
  ASSERT_TRUE(JobSeedOverlap(spec));
  EXPECT_NE(JobSeedOverlap(spec)->find("job.seed=5 and job.seed=9 both run job seed 9:"), std::string::npos)
      << *JobSeedOverlap(spec);
}

TEST(JobSeedOverlapTest, NoneForDisjointSeedsOneSeedOrAnotherAxis) {
  SweepSpec spec;
  spec.vary = {ParseVary("job.seed=0,4,8")};
  spec.seeds = 4;
  EXPECT_FALSE(JobSeedOverlap(spec));
  spec.vary = {ParseVary("job.seed=0,1,2")};
  spec.seeds = 1;
  EXPECT_FALSE(JobSeedOverlap(spec));
  spec.vary = {ParseVary("seed=0,1,2")};  // petrsim's own seed: the run seeds do not add to it
  spec.seeds = 4;
  EXPECT_FALSE(JobSeedOverlap(spec));
}

}  // namespace
}  // namespace petrsim
