// `petrsim import probe-trace` (importers/probe_trace_import.h): a probe trace written here event
// by event becomes plan.ddp; bad input (not a directory, no rank files, no DDP layout, ranks that
// recorded different models, a --into that does not load) is a ScenarioError naming the file, what
// was expected and what was found, and RunProbeTraceImport writes nothing then.
#include "importers/probe_trace_import.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "base/error.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "proto/trace.pb.h"
#include "trace/trace_event.h"

namespace petrsim {
namespace {

namespace fs = std::filesystem;

class ProbeTraceImportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("probe_trace_import_test_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "traces");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string traces() const { return (dir_ / "traces").string(); }

  static DdpLayout Construction(uint32_t out_features) {
    DdpLayout layout;
    layout.set_process_group("default_pg");
    layout.set_bucket_cap_bytes(1048576 / 4);
    layout.set_first_bucket_bytes(1048576);
    layout.set_broadcast_buffers(false);
    layout.set_module_class("Net");
    layout.set_path("hook");
    layout.set_world_size(2);
    DdpTensor* w = layout.add_tensors();
    w->set_name("fc.weight");
    w->add_shape(out_features);
    w->add_shape(16);
    DdpTensor* b = layout.add_tensors();
    b->set_name("fc.bias");
    b->add_shape(out_features);
    DdpTensor* frozen = layout.add_tensors();
    frozen->set_name("emb.weight");
    frozen->add_shape(4);
    frozen->set_requires_grad(false);
    DdpTensor* buffer = layout.add_tensors();
    buffer->set_name("steps");
    buffer->set_kind(DdpTensor::buffer);
    buffer->set_dtype(Collective::int64);
    return layout;
  }

  // rank_<rank>.pbtrace: a header (torch 1.13.1 in the build id), then the events.
  void WriteRank(uint32_t rank, const std::vector<TraceEvent>& events, uint32_t world = 2) {
    TraceHeader header;
    header.set_format_version(kTraceFormatVersion);
    header.set_rank(rank);
    header.set_world_size(world);
    header.set_backend("gloo");
    header.set_build_id("petrsim_probe 0.1.0 (torch 1.13.1+cu117)");
    header.set_clock("steady");
    std::string bytes;
    const auto put = [&](const google::protobuf::Message& m) {
      const std::string body = m.SerializeAsString();
      AppendVarint(bytes, body.size());
      bytes += body;
    };
    put(header);
    for (const TraceEvent& e : events) put(e);
    std::ofstream(RankTracePath(traces(), rank), std::ios::binary) << bytes;
  }

  static TraceEvent LayoutEvent(const DdpLayout& layout) {
    TraceEvent event;
    event.set_kind(TraceEventKind::ddp_layout);
    *event.mutable_ddp_layout() = layout;
    return event;
  }

  static TraceEvent ReadyEvent(std::initializer_list<uint32_t> order) {
    DdpLayout layout;
    layout.set_ready_order_recorded(true);
    for (const uint32_t k : order) layout.add_grad_ready_order(k);
    return LayoutEvent(layout);
  }

  // The error ImportProbeTrace throws (its message), or "" if none.
  std::string ImportError(const std::string& directory, const std::string& into = "") {
    try {
      ImportProbeTrace(directory, into);
    } catch (const ScenarioError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

TEST_F(ProbeTraceImportTest, RecordedLayoutBecomesPlanDdp) {
  for (uint32_t r = 0; r < 2; ++r) WriteRank(r, {LayoutEvent(Construction(8)), ReadyEvent({0, 1})});
  const ProbeTraceImport result = ImportProbeTrace(traces(), "");
  const Scenario& s = result.scenario;
  ASSERT_TRUE(s.plan().has_ddp());
  const DdpModel& ddp = s.plan().ddp();
  ASSERT_EQ(ddp.tensors_size(), 4);
  EXPECT_EQ(ddp.tensors(0).name(), "fc.weight");
  EXPECT_FALSE(ddp.tensors(2).requires_grad());
  EXPECT_EQ(ddp.tensors(3).kind(), DdpTensor::buffer);
  EXPECT_DOUBLE_EQ(ddp.bucket_cap_mb(), 0.25);
  EXPECT_FALSE(ddp.has_first_bucket_mb());  // 1 MiB, the default
  EXPECT_FALSE(ddp.broadcast_buffers());
  EXPECT_FALSE(ddp.find_unused_parameters());
  EXPECT_EQ(ddp.process_group(), "default_pg");
  ASSERT_EQ(ddp.grad_ready_order_size(), 2);
  EXPECT_EQ(ddp.grad_ready_order(0), 0u);
  EXPECT_EQ(s.comm().torch_version(), "1.13");
  EXPECT_EQ(s.job().world_size(), 2u);
  EXPECT_TRUE(s.plan().has_custom());
  EXPECT_EQ(s.plan().custom().per_iteration_size(), 0);
}

TEST_F(ProbeTraceImportTest, IntoKeepsTheScenarioAndSetsPlanDdp) {
  for (uint32_t r = 0; r < 2; ++r) WriteRank(r, {LayoutEvent(Construction(8))});
  const std::string into = (dir_ / "job.pbtxt").string();
  std::ofstream(into) << "name: \"mine\"\n"
                         "dataset { subdatasets { name: \"d\" explicit { scenes { gt_counts: [1, 0, 1, 1] } } } }\n"
                         "job { world_size: 8 samples_per_gpu: 1 workers_per_gpu: 0 }\n"
                         "plan { custom { per_iteration { name: \"x\" op: allreduce numel: 3 } } }\n";
  const ProbeTraceImport result = ImportProbeTrace(traces(), into);
  EXPECT_EQ(result.scenario.name(), "mine");
  EXPECT_EQ(result.scenario.plan().custom().per_iteration_size(), 1);
  EXPECT_EQ(result.scenario.plan().ddp().tensors_size(), 4);
  EXPECT_EQ(result.scenario.job().world_size(), 2u);  // what the trace ran
  EXPECT_EQ(result.scenario.plan().ddp().grad_ready_order_size(), 0);
}

// Every rank gets groups: `petrsim check` and the simulator build the sampler of what the import
// writes (InfiniteGroupEachSampleInBatchSampler asserts groups_num >= world_size * samples_per_gpu).
TEST_F(ProbeTraceImportTest, PlaceholderDatasetFeedsEveryRank) {
  for (const uint32_t world : {1u, 2u, 3u, 8u}) {
    fs::remove_all(traces());
    fs::create_directories(traces());
    for (uint32_t r = 0; r < world; ++r) WriteRank(r, {LayoutEvent(Construction(8)), ReadyEvent({0, 1})}, world);
    const ProbeTraceImport result = ImportProbeTrace(traces(), "");
    const Scenario& s = result.scenario;
    EXPECT_EQ(s.job().world_size(), world);
    const Dataset dataset = BuildDataset(s, "imported");
    EXPECT_GE(dataset.groups_num(), int64_t{world} * s.job().samples_per_gpu()) << world;
    EXPECT_NO_THROW(CheckSamplerConstructible(s, dataset, "imported")) << world;
  }
}

// --into: the trace's world size replaces the scenario's; a sampler that cannot be built then is
// an error naming both files.
TEST_F(ProbeTraceImportTest, IntoWhoseSamplerFailsWithTheTracesWorldSize) {
  for (uint32_t r = 0; r < 4; ++r) WriteRank(r, {LayoutEvent(Construction(8))}, 4);
  const std::string into = (dir_ / "small.pbtxt").string();
  std::ofstream(into) << "name: \"small\"\n"
                         "dataset { subdatasets { name: \"d\" explicit { scenes { gt_counts: [1, 1, 1, 1] } } } }\n"
                         "job { world_size: 1 samples_per_gpu: 2 workers_per_gpu: 0 }\n";
  const std::string error = ImportError(traces(), into);
  EXPECT_NE(error.find("small.pbtxt"), std::string::npos) << error;
  EXPECT_NE(error.find("rank_0.pbtrace"), std::string::npos) << error;
  EXPECT_NE(error.find("replaced its job.world_size 1"), std::string::npos) << error;
  EXPECT_NE(error.find("groups_num >= world_size * samples_per_gpu, got 2 < 4 * 2"), std::string::npos) << error;
}

TEST_F(ProbeTraceImportTest, BadReadyOrderNamesTheTraceAndTheField) {
  for (uint32_t r = 0; r < 2; ++r) WriteRank(r, {LayoutEvent(Construction(8)), ReadyEvent({1, 1})});
  const std::string error = ImportError(traces());
  EXPECT_NE(error.find("rank_0.pbtrace: the layout of DDP 0 is not one petrsim can plan: "
                       "ddp_layout.grad_ready_order[1]:"),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find("plan.ddp"), std::string::npos) << error;
}

TEST_F(ProbeTraceImportTest, ZeroSizeTensorIsUnsupported) {
  DdpLayout layout = Construction(8);
  layout.mutable_tensors(1)->set_shape(0, 0);
  for (uint32_t r = 0; r < 2; ++r) WriteRank(r, {LayoutEvent(layout)});
  const std::string error = ImportError(traces());
  EXPECT_NE(error.find("rank_0.pbtrace: ddp_layout.tensors[1]: parameter fc.bias [0] float32 has no elements"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("unsupported"), std::string::npos) << error;
}

TEST_F(ProbeTraceImportTest, RankZeroMissing) {
  WriteRank(1, {LayoutEvent(Construction(8))});
  WriteRank(2, {LayoutEvent(Construction(8))});
  const std::string error = ImportError(traces());
  EXPECT_NE(error.find("rank_0.pbtrace: expected rank 0's trace"), std::string::npos) << error;
  EXPECT_NE(error.find("rank(s) 1, 2"), std::string::npos) << error;
}

TEST_F(ProbeTraceImportTest, CutShortRankFileSaysSo) {
  TraceEvent collective;
  collective.set_kind(TraceEventKind::collective);
  collective.set_seq(1);
  WriteRank(0, {collective, LayoutEvent(Construction(8))});
  WriteRank(1, {LayoutEvent(Construction(8))});
  // Cut rank 0 inside its layout event.
  const fs::path path = RankTracePath(traces(), 0);
  fs::resize_file(path, fs::file_size(path) - 20);
  const std::string error = ImportError(traces());
  EXPECT_NE(error.find("found none in 1 event(s); the file is cut short: "), std::string::npos) << error;
}

TEST_F(ProbeTraceImportTest, NotesOnCollectivesHooksAndRebuiltBuckets) {
  DdpLayout layout = Construction(8);
  layout.clear_module_class();
  DdpLayout hook;
  hook.set_comm_hook("fp16_compress_hook");
  DdpLayout rebuilt;
  rebuilt.set_rebuilt(true);
  rebuilt.add_buckets()->set_numel(136);  // fc.weight and fc.bias in one bucket, as the plan has them
  TraceEvent own;
  own.set_kind(TraceEventKind::collective);
  own.set_seq(1);
  own.set_text("all_reduce");
  for (uint32_t r = 0; r < 2; ++r) {
    WriteRank(r, {own, LayoutEvent(layout), LayoutEvent(hook), ReadyEvent({1, 0}), LayoutEvent(rebuilt)});
  }
  ProbeTraceImport result = ImportProbeTrace(traces(), "");
  std::string text;
  for (const std::string& line : result.summary) text += line + "\n";
  EXPECT_NE(text.find("plan.ddp: DDP 0 ("), std::string::npos) << text;
  EXPECT_EQ(text.find(" of  ("), std::string::npos) << text;
  EXPECT_NE(text.find("recorded no DDP collective on 'default_pg' (1 collective(s)"), std::string::npos) << text;
  EXPECT_EQ(result.scenario.plan().custom().startup_size(), 0);
  EXPECT_NE(text.find("communication hook on DDP 0 (fp16_compress_hook): the plan's gradient buckets assume DDP's "
                      "default allreduce"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("rebuilt buckets: 1 (136 elements), as"), std::string::npos) << text;

  rebuilt.mutable_buckets(0)->set_numel(100);
  for (uint32_t r = 0; r < 2; ++r) WriteRank(r, {LayoutEvent(layout), ReadyEvent({1, 0}), LayoutEvent(rebuilt)});
  result = ImportProbeTrace(traces(), "");
  text.clear();
  for (const std::string& line : result.summary) text += line + "\n";
  EXPECT_NE(text.find("recorded (1: 100 elements) differ from plan.ddp's under torch 1.13 (1: 136 elements)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("communication hook"), std::string::npos) << text;
}

TEST_F(ProbeTraceImportTest, NotADirectory) {
  const std::string file = (dir_ / "file.txt").string();
  std::ofstream(file) << "x";
  const std::string error = ImportError(file);
  EXPECT_NE(error.find(file), std::string::npos) << error;
  EXPECT_NE(error.find("expected a probe trace directory"), std::string::npos) << error;
  EXPECT_NE(error.find("a regular file"), std::string::npos) << error;
  const std::string missing = ImportError((dir_ / "nowhere").string());
  EXPECT_NE(missing.find("found nothing"), std::string::npos) << missing;
}

TEST_F(ProbeTraceImportTest, NoRankFiles) {
  std::ofstream(dir_ / "traces" / "notes.txt") << "x";
  const std::string error = ImportError(traces());
  EXPECT_NE(error.find(traces()), std::string::npos) << error;
  EXPECT_NE(error.find("expected rank_<r>.pbtrace files"), std::string::npos) << error;
  EXPECT_NE(error.find("found none"), std::string::npos) << error;
}

TEST_F(ProbeTraceImportTest, NoDdpLayout) {
  TraceEvent collective;
  collective.set_kind(TraceEventKind::collective);
  collective.set_seq(1);
  TraceEvent stall;
  stall.set_kind(TraceEventKind::stall);
  WriteRank(0, {collective, stall});
  WriteRank(1, {collective});
  const std::string error = ImportError(traces());
  EXPECT_NE(error.find("rank_0.pbtrace"), std::string::npos) << error;
  EXPECT_NE(error.find("expected a ddp_layout event"), std::string::npos) << error;
  EXPECT_NE(error.find("found none in 2 event(s):"), std::string::npos) << error;
}

TEST_F(ProbeTraceImportTest, DifferentModelsOnTheRanks) {
  WriteRank(0, {LayoutEvent(Construction(8))});
  WriteRank(1, {LayoutEvent(Construction(9))});
  const std::string error = ImportError(traces());
  EXPECT_NE(error.find("rank_1.pbtrace"), std::string::npos) << error;
  EXPECT_NE(error.find("another model"), std::string::npos) << error;
  EXPECT_NE(error.find("tensors[0] is parameter fc.weight [9, 16] float32, against parameter fc.weight [8, 16]"),
            std::string::npos)
      << error;
}

TEST_F(ProbeTraceImportTest, LayoutMissingOnOneRank) {
  WriteRank(0, {LayoutEvent(Construction(8))});
  WriteRank(1, {});
  const std::string error = ImportError(traces());
  EXPECT_NE(error.find("rank_1.pbtrace: expected the ddp_layout of DDP 0"), std::string::npos) << error;
}

TEST_F(ProbeTraceImportTest, BadIntoAndNothingWritten) {
  for (uint32_t r = 0; r < 2; ++r) WriteRank(r, {LayoutEvent(Construction(8))});
  const std::string into = (dir_ / "broken.pbtxt").string();
  std::ofstream(into) << "name: \"unterminated\n";
  EXPECT_NE(ImportError(traces(), into).find("broken.pbtxt"), std::string::npos);
  ProbeTraceImportFlags flags;
  flags.trace_dir = traces();
  flags.into = into;
  flags.output = (dir_ / "out.pbtxt").string();
  EXPECT_THROW(RunProbeTraceImport(flags, stdout), ScenarioError);
  EXPECT_FALSE(fs::exists(flags.output));
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().string().find(flags.output + ".tmp"), std::string::npos) << entry.path();
  }
}

TEST_F(ProbeTraceImportTest, WritesTheScenario) {
  for (uint32_t r = 0; r < 2; ++r) WriteRank(r, {LayoutEvent(Construction(8)), ReadyEvent({1, 0})});
  ProbeTraceImportFlags flags;
  flags.trace_dir = traces();
  flags.output = (dir_ / "out.pbtxt").string();
  std::FILE* sink = std::tmpfile();
  EXPECT_EQ(RunProbeTraceImport(flags, sink), 0);
  std::fclose(sink);
  std::ifstream in(flags.output);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("grad_ready_order"), std::string::npos) << text;
  EXPECT_NE(text.find("fc.weight"), std::string::npos) << text;
}

// Issue 33, point 5: -o never names --into, a rank's trace, or a file that is not an import's output; the file is
// left as it was. The scenario written first may be written again.
TEST_F(ProbeTraceImportTest, TheOutputNeverOverwritesAnInputOrAFileNotAnImports) {
  for (uint32_t r = 0; r < 2; ++r) WriteRank(r, {LayoutEvent(Construction(8)), ReadyEvent({1, 0})});
  const auto read = [](const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const auto run = [&](const std::string& output, const std::string& into) {
    ProbeTraceImportFlags flags;
    flags.trace_dir = traces();
    flags.output = output;
    flags.into = into;
    std::FILE* sink = std::tmpfile();
    try {
      RunProbeTraceImport(flags, sink);
    } catch (const ScenarioError& error) {
      std::fclose(sink);
      return std::string(error.what());
    }
    std::fclose(sink);
    return std::string();
  };
  const std::string first = (dir_ / "first.pbtxt").string();
  ASSERT_EQ(run(first, ""), "");
  EXPECT_EQ(run(first, ""), "");  // its own output
  const std::string before = read(first);
  EXPECT_NE(run(first, first).find("is the input"), std::string::npos);
  EXPECT_EQ(read(first), before);
  const std::string rank0 = RankTracePath(traces(), 0), trace = read(rank0);
  EXPECT_NE(run(rank0, "").find("exists and is not a scenario petrsim import wrote"), std::string::npos);
  EXPECT_EQ(read(rank0), trace);
  const std::string notes = (dir_ / "notes.txt").string();
  std::ofstream(notes) << "notes\n";
  EXPECT_NE(run(notes, "").find("exists and is not a scenario petrsim import wrote"), std::string::npos);
  EXPECT_EQ(read(notes), "notes\n");
}

}  // namespace
}  // namespace petrsim
