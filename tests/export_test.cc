// `petrsim export`: the timeline drawn from recorded traces equals the one the simulator draws
// of the same run directly (the same events; only their order in the file may differ).
#include "cli/export_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/dataset.h"
#include "sim/simulator.h"
#include "tests/scenario_text.h"
#include "trace/directory_writer.h"
#include "trace/perfetto_writer.h"

namespace petrsim {
namespace {

namespace fs = std::filesystem;

// Sends every record to two sinks.
class Tee final : public TraceSink {
 public:
  Tee(TraceSink& a, TraceSink& b) : a_(a), b_(b) {}
  void Record(const TraceRecord& record) override {
    a_.Record(record);
    b_.Record(record);
  }

 private:
  TraceSink& a_;
  TraceSink& b_;
};

std::vector<std::string> SortedEvents(const std::string& path) {
  std::ifstream in(path);
  const nlohmann::json json = nlohmann::json::parse(in);
  std::vector<std::string> events;
  for (const auto& event : json.at("traceEvents")) events.push_back(event.dump());
  std::sort(events.begin(), events.end());
  return events;
}

TEST(Export, TheTimelineOfATraceEqualsTheSimulatorsOwn) {
  const fs::path root = fs::temp_directory_path() / ("petrsim_export_" + std::to_string(::getpid()));
  fs::remove_all(root);
  fs::create_directories(root);
  const Scenario scenario = testing::ShippedScenario("streampetr_trainval_hang.pbtxt");
  const Dataset dataset = BuildDataset(scenario, "scenario");
  const std::string direct = (root / "direct.json").string();
  const std::string trace_dir = (root / "trace").string();
  {
    PerfettoWriter perfetto(direct);
    TraceDirectoryWriter trace(trace_dir, scenario, "streampetr_trainval_hang.pbtxt", scenario.job().world_size(),
                               "sim", "test");
    Tee tee(perfetto, trace);
    sim::SimOptions options;
    options.trace = &tee;
    sim::Simulate(scenario, dataset, options);
    perfetto.Finish(nullptr);
    trace.Finish();
  }
  const std::string exported = (root / "exported.json").string();
  EXPECT_EQ(RunExport(trace_dir, exported), 0);
  const auto a = SortedEvents(direct);
  const auto b = SortedEvents(exported);
  EXPECT_GT(a.size(), 1000u);
  EXPECT_EQ(a, b);

  // A directory without traces: an error, and no file.
  const std::string nothing = (root / "nothing.json").string();
  fs::create_directories(root / "empty");
  EXPECT_THROW(RunExport((root / "empty").string(), nothing), ScenarioError);
  EXPECT_THROW(RunExport((root / "absent").string(), nothing), ScenarioError);
  EXPECT_FALSE(fs::exists(nothing));
  fs::remove_all(root);
}

TEST(Export, RefusesAnEventThatEndsBeforeItStartsAndWritesNothing) {
  const fs::path root = fs::temp_directory_path() / ("petrsim_export_bad_" + std::to_string(::getpid()));
  fs::remove_all(root);
  const Scenario scenario = testing::ShippedScenario("tiny.pbtxt");
  const std::string trace_dir = (root / "trace").string();
  {
    TraceDirectoryWriter trace(trace_dir, scenario, "tiny.pbtxt", scenario.job().world_size(), "sim", "test");
    TraceRecord record;
    record.kind = TraceKind::kCompute;
    record.rank = 0;
    record.start_ns = 100;
    record.end_ns = 50;  // a corrupt file's: the timeline writer would take it for its own bug
    trace.Record(record);
    trace.Finish();
  }
  const std::string out = (root / "timeline.json").string();
  try {
    RunExport(trace_dir, out);
    ADD_FAILURE() << "exported a trace whose event ends before it starts";
  } catch (const ScenarioError& error) {
    const std::string what = error.what();
    EXPECT_NE(what.find(trace_dir), std::string::npos) << what;
    EXPECT_NE(what.find("rank 0"), std::string::npos) << what;
    EXPECT_NE(what.find("end_ns 50"), std::string::npos) << what;
    EXPECT_NE(what.find("start_ns 100"), std::string::npos) << what;
  }
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(root);
}

}  // namespace
}  // namespace petrsim
