// Reading a recorded job; see recording.h.
#include "trace/recording.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "base/assert.h"
#include "base/error.h"
#include "scenario/scenario_validation.h"
#include "trace/reader.h"
#include "trace/trace_event.h"

namespace petrsim {
namespace {

// The recording as the backend saw it: sample order and worker results by (rank, batch, slot).
class RecordedSource final : public ReplaySource {
 public:
  RecordedSource(const Recording& job, bool use_samples, bool use_loads)
      : job_(job), use_samples_(use_samples), use_loads_(use_loads) {}
  std::optional<int64_t> SampleIndex(uint32_t rank, uint64_t batch, uint32_t slot) const override {
    if (!use_samples_) return std::nullopt;
    const auto it = job_.sample_index.find({rank, batch, slot});
    if (it == job_.sample_index.end()) return std::nullopt;
    return it->second;
  }
  const RecordedLoad* Load(uint32_t rank, uint64_t batch, uint32_t slot) const override {
    if (!use_loads_) return nullptr;
    const auto it = job_.loads.find({rank, batch, slot});
    return it == job_.loads.end() ? nullptr : &it->second;
  }

 private:
  const Recording& job_;
  bool use_samples_, use_loads_;
};

}  // namespace

std::unique_ptr<ReplaySource> MakeRecordedSource(const Recording& recording, bool use_samples, bool use_loads) {
  return std::make_unique<RecordedSource>(recording, use_samples, use_loads);
}

namespace {

// Rank 0's header: the scenario to replay, validated, and the world.
void ReadFirstHeader(const std::string& path, const TraceHeader& header, Recording& job) {
  if (!header.has_scenario()) {
    throw ScenarioError(fmt::format("{}: the header holds no scenario to replay", path));
  }
  job.scenario = header.scenario();
  ValidateScenario(job.scenario, path + " (the scenario in its header)");
  job.scenario_path = header.scenario_path();
  job.backend = header.backend();
  job.world_size = header.world_size();
  if (job.world_size == 0 || job.world_size > (1u << 20)) {
    throw ScenarioError(fmt::format("{}: world_size {} is not in [1, 2^20]", path, job.world_size));
  }
  job.iterations_done.assign(job.world_size, 0);
}

// What one event of rank `r` adds: the sampler's index of a slot, the worker's load of it, an
// iteration done, a death.
void AddEvent(const TraceEvent& event, uint32_t r, Recording& job) {
  // A probe's DataLoader other than the first (a validation loader): its batches are not the training loop's.
  if (event.loader() != 0) return;
  const Recording::Key key{r, event.iteration(), event.slot()};
  switch (event.kind()) {
    case TraceEventKind::sampler_draw:
      job.sample_index[key] = event.index();
      break;
    case TraceEventKind::load: {
      job.sample_index.try_emplace(key, event.index());
      RecordedLoad load;
      load.final_index = event.final_index();
      load.attempts = event.attempts();
      if (!event.completed()) {
        load.livelock = true;  // still in the getitem when the recording ended
      } else {
        load.duration_ns = event.end_ns() - event.start_ns();
        load.error = !event.text().empty();  // a finished load with a message failed
      }
      job.loads[key] = load;
      break;
    }
    case TraceEventKind::livelock: {
      job.sample_index.try_emplace(key, event.index());
      RecordedLoad load;
      load.final_index = event.final_index();
      load.livelock = true;
      job.loads.try_emplace(key, load);  // the pending load slice, recorded at the end, says more
      break;
    }
    case TraceEventKind::iteration:
      // Every rank read has a count: the loop stops at rank 0's world size.
      PETRSIM_ASSERT(r < job.iterations_done.size());
      job.iterations_done[r] = std::max(job.iterations_done[r], event.iteration() + 1);
      break;
    case TraceEventKind::rank_died:
      job.rank_died = true;
      break;
    default:
      break;
  }
}

}  // namespace

Recording ReadRecording(const std::string& directory) {
  Recording job;
  job.directory = directory;
  std::error_code error;
  if (!std::filesystem::is_directory(directory, error)) {
    throw ScenarioError(fmt::format("{}: not a directory of rank_<r>.pbtrace files", directory));
  }
  const std::string first_path = RankTracePath(directory, 0);
  if (!std::filesystem::exists(first_path, error)) {
    throw ScenarioError(
        fmt::format("{}: no rank_0.pbtrace: replay needs petrsim traces (Flight Recorder "
                    "dumps hold no sample order to replay; use `petrsim diagnose`)",
                    directory));
  }
  for (uint32_t r = 0;; ++r) {
    const std::string path = RankTracePath(directory, r);
    if (r > 0 && r >= job.world_size) break;
    if (!std::filesystem::exists(path, error)) {
      job.partial.push_back(path + ": missing");
      continue;
    }
    std::string cut;
    const RankTrace trace = ReadRankTrace(path, &cut);
    if (!cut.empty()) job.partial.push_back(cut);
    if (r == 0) ReadFirstHeader(path, trace.header, job);
    if (trace.header.rank() != r || trace.header.world_size() != job.world_size) {
      throw ScenarioError(fmt::format("{}: the header says rank {} of {}, the file name and rank_0 say rank {} of {}",
                                      path, trace.header.rank(), trace.header.world_size(), r, job.world_size));
    }
    job.files.push_back(path);
    for (const TraceEvent& event : trace.events) AddEvent(event, r, job);
  }
  return job;
}

}  // namespace petrsim
