// `petrsim export`; see export_command.h.
#include "cli/export_command.h"

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "trace/perfetto_writer.h"
#include "trace/reader.h"
#include "trace/trace_event.h"

namespace petrsim {

int RunExport(const std::string& trace_dir, const std::string& perfetto) {
  ExportFlags flags;
  flags.trace_dir = trace_dir;
  flags.perfetto = perfetto;
  return RunExport(flags);
}

namespace {

// Where the recording ends, for --perfetto-last: the latest end of any event. The timeline's
// writer takes a slice that ends before it starts for its own error (an assertion): from a file,
// it is corrupt input, said here, before anything is written.
int64_t RecordingEnd(const std::string& trace_dir, const std::vector<RankTrace>& traces) {
  int64_t end_ns = 0;
  for (const RankTrace& trace : traces) {
    for (const TraceEvent& event : trace.events) {
      if (HasTraceKind(event.kind()) && event.end_ns() < event.start_ns()) {
        throw ScenarioError(fmt::format("{}: rank {}: a {} event ends (end_ns {}) before it starts (start_ns {})",
                                        trace_dir, trace.header.rank(), TraceEventKind_Name(event.kind()),
                                        event.end_ns(), event.start_ns()));
      }
      end_ns = std::max<int64_t>(end_ns, event.end_ns());
    }
  }
  return end_ns;
}

}  // namespace

int RunExport(const ExportFlags& flags) {
  const std::string& trace_dir = flags.trace_dir;
  const std::string& perfetto = flags.perfetto;
  if (perfetto.empty()) throw ScenarioError("export: nothing to write: give --perfetto FILE");
  // A bad window is bad input before anything is read.
  MakePerfettoWindow(flags.perfetto_flags, 0);
  std::error_code error;
  if (!std::filesystem::is_directory(trace_dir, error)) {
    throw ScenarioError(fmt::format("{}: not a directory of rank_<r>.pbtrace files", trace_dir));
  }
  // Read every rank first, so a bad file leaves no timeline behind.
  std::vector<RankTrace> traces;
  std::vector<std::string> partial;
  {
    std::string cut;
    traces.push_back(ReadRankTrace(RankTracePath(trace_dir, 0), &cut));
    if (!cut.empty()) partial.push_back(cut);
  }
  const TraceHeader header = traces.front().header;
  const uint32_t world = header.world_size();
  if (world == 0 || world > (1u << 20)) {
    throw ScenarioError(fmt::format("{}: world_size {} is not in [1, 2^20]", RankTracePath(trace_dir, 0), world));
  }
  for (uint32_t r = 1; r < world; ++r) {
    const std::string path = RankTracePath(trace_dir, r);
    if (!std::filesystem::exists(path, error)) {
      partial.push_back(fmt::format("{}: missing", path));
      continue;
    }
    std::string cut;
    traces.push_back(ReadRankTrace(path, &cut));
    if (!cut.empty()) partial.push_back(cut);
    if (traces.back().header.rank() != r) {
      throw ScenarioError(fmt::format("{}: the header says rank {}", path, traces.back().header.rank()));
    }
  }
  const int64_t end_ns = RecordingEnd(trace_dir, traces);
  PerfettoWriter writer(perfetto, flags.perfetto_flags.records_max, MakePerfettoWindow(flags.perfetto_flags, end_ns));
  for (const RankTrace& trace : traces) {
    for (const TraceEvent& event : trace.events) {
      if (!HasTraceKind(event.kind())) continue;  // the writer's truncated, the probe's ddp_layout
      writer.Record(ToTraceRecord(event, trace.header.rank()));
    }
  }
  const uint64_t events = writer.records_written();
  writer.Finish({{"source", trace_dir},
                 {"backend", header.backend()},
                 {"clock", header.clock()},
                 {"world_size", world},
                 {"scenario", header.scenario_path()},
                 {"partial", partial}});
  if (const auto& cut = writer.truncated_at()) {
    const auto notice = PerfettoTruncationNotice(
        perfetto, writer, fmt::format("{:.3f} s of the recording's clock", static_cast<double>(cut->at_ns) / 1e9));
    std::cerr << *notice << "\n";
  }
  std::cout << fmt::format("petrsim export: {} events of {} ranks from {} written to {}\n", events, traces.size(),
                           trace_dir, perfetto);
  for (const std::string& note : partial) std::cout << "  partial: " << note << "\n";
  return 0;
}

CLI::App* AddExportCommand(CLI::App& app, ExportFlags& flags) {
  auto* export_command = app.add_subcommand("export",
                                            "Write the timeline of recorded per-rank traces (rank_<r>.pbtrace) for "
                                            "ui.perfetto.dev or chrome://tracing.");
  export_command->add_option("trace_dir", flags.trace_dir, "directory of rank_<r>.pbtrace files")->required();
  export_command->add_option("--perfetto", flags.perfetto, "the Chrome/Perfetto trace-event JSON to write")->required();
  AddPerfettoOptions(*export_command, flags.perfetto_flags, "recorded");
  return export_command;
}

}  // namespace petrsim
