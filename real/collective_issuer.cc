// The real trainer's collective issue; see collective_issuer.h.
#include "real/collective_issuer.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "base/assert.h"
#include "formats/torch_logs/watchdog_lines.h"
#include "scenario/outcome.h"
#include "scenario/torch_version.h"
#include "trace/rank_writer.h"

namespace petrsim::real {
namespace {

// A group's entry of a per-group seq map; 0 when it has none.
uint64_t SeqOf(const std::map<std::string, uint64_t>& seqs, const std::string& group_name) {
  const auto it = seqs.find(group_name);
  return it == seqs.end() ? uint64_t{0} : it->second;
}

}  // namespace

CollectiveIssuer::CollectiveIssuer(comm::Backend& comm, JobControl& control, RankRecorder& recorder,
                                   const TrainOptions& options, std::chrono::milliseconds timeout,
                                   const Scenario& scenario, std::vector<std::string> process_groups)
    : comm_(comm),
      control_(control),
      recorder_(recorder),
      options_(options),
      timeout_ms_(timeout.count()),
      scenario_(scenario),
      process_groups_(std::move(process_groups)) {
  PETRSIM_ASSERT(options_.rank < options_.world_size);
}

CollectiveIssuer::Issued CollectiveIssuer::Launch(const Collective& step, uint64_t iteration,
                                                  const std::vector<double>& input, Done done,
                                                  comm::IssueOptions options) {
  Issued issued;
  issued.step = &step;
  issued.seq = ++seqs_[step.process_group()];
  // A new seq of its group: past every seq of the group already completed.
  PETRSIM_ASSERT(issued.seq > SeqOf(completed_, step.process_group()));
  issued.iteration = iteration;
  issued.done = std::move(done);
  control_.Update([&](Progress& p) {
    p.iteration = iteration;
    p.seqs[step.process_group()] = issued.seq;
    p.doing = fmt::format("in {} '{}'", OpTypeName(step.op()), step.name());
  });
  issued.start_ns = recorder_.Now();
  ++issued_;
  recorder_.OpenCollective(step, issued.seq, iteration, issued.start_ns);
  try {
    issued.work = comm_.Issue(step, input, options);
  } catch (const comm::CommError& error) {
    Fail(issued, error.what(), error.kind() == comm::CommError::Kind::kTimeout);
  } catch (const std::exception& error) {
    Fail(issued, error.what(), false);
  }
  PETRSIM_ASSERT(issued.work != nullptr);
  return issued;
}

void CollectiveIssuer::Complete(Issued& issued) {
  // Only a launched collective completes: its seq was issued on its group.
  PETRSIM_ASSERT(issued.work != nullptr);
  PETRSIM_ASSERT(issued.seq >= 1);
  PETRSIM_ASSERT(issued.seq <= SeqOf(seqs_, issued.step->process_group()));
  try {
    control_.Waiting(true);
    issued.work->Wait();
    control_.Waiting(false);
  } catch (const comm::CommError& error) {
    Fail(issued, error.what(), error.kind() == comm::CommError::Kind::kTimeout);
  } catch (const std::exception& error) {
    Fail(issued, error.what(), false);
  }
  recorder_.CloseCollective(*issued.step, issued.seq);
  uint64_t& completed = completed_[issued.step->process_group()];
  completed = std::max(completed, issued.seq);
  // A completed seq never exceeds the issued seq of its group.
  PETRSIM_ASSERT(completed <= SeqOf(seqs_, issued.step->process_group()));
  if (!issued.done.take) return;
  if (issued.done.elements == std::numeric_limits<uint64_t>::max()) {
    issued.done.take(issued.work->Result());
  } else {
    issued.done.take(issued.work->ResultHead(issued.done.elements));
  }
}

void CollectiveIssuer::FillJobLog(const Issued& issued, CollectiveError& error) const {
  const Collective& step = *issued.step;
  const Comm::Backend backend = options_.watchdog_lines_backend.value_or(scenario_.comm().backend());
  const TorchVersion version = ScenarioTorchVersion(scenario_);
  CollectiveTimeout timeout;
  timeout.backend = backend;
  timeout.version = version;
  timeout.rank = options_.rank;
  const auto group = std::find(process_groups_.begin(), process_groups_.end(), step.process_group());
  timeout.process_group_index = static_cast<uint32_t>(group - process_groups_.begin());
  timeout.process_group = step.process_group();
  timeout.seq = issued.seq;
  timeout.op = step.op();
  timeout.numel = NumelOfWork(step, options_.world_size);
  timeout.timeout_ms = static_cast<uint64_t>(timeout_ms_);
  timeout.ran_for_ms = static_cast<uint64_t>(std::max<int64_t>(0, recorder_.Now() - issued.start_ns) / 1'000'000);
  timeout.last_enqueued_seq = SeqOf(seqs_, step.process_group());
  timeout.last_completed_seq = SeqOf(completed_, step.process_group());
  // The rank's wall clock, in its time zone, as c10's logger prints it.
  timeout.timestamp = LogTimestampOfLocalTime(std::chrono::system_clock::now());
  error.job_log = CollectiveTimeoutLines(timeout);
  const char* name = backend == Comm::nccl ? "NCCL" : "Gloo";
  const bool ran_nccl = comm_.backend_name() == "nccl";
  const std::string ran_on = ran_nccl == (backend == Comm::nccl)
                                 ? std::string()
                                 : fmt::format("; this run's process groups are {}", ran_nccl ? "NCCL" : "Gloo");
  error.job_log_heading =
      fmt::format("{} log (what PyTorch {} would print for this timeout{}):", name, version.ToString(), ran_on);
  error.job_log_note = CollectiveTimeoutNote(backend, version);
}

void CollectiveIssuer::Fail(const Issued& issued, const std::string& error, bool timed_out) {
  if (const auto reason = control_.StoppedByAnother()) {
    control_.Acknowledge();
    const std::string why = "stopped by another rank: " + *reason;
    recorder_.Finish(TraceKind::kWatchdog, issued.iteration, "", why + " (exit 1)");
    throw JobStoppedError(why);
  }
  const Collective& step = *issued.step;
  const double waited_s = static_cast<double>(recorder_.Now() - issued.start_ns) / 1e9;
  std::string missing;
  const auto read = control_.ReadAll();
  const std::vector<std::optional<Progress>> all =
      read.value_or(std::vector<std::optional<Progress>>(options_.world_size));
  if (!read) missing = "; the TCPStore (served by rank 0) is unreachable, so rank 0 is gone";
  for (uint32_t r = 0; r < options_.world_size && read; ++r) {
    if (r == options_.rank) continue;
    if (!all[r]) {
      missing += fmt::format("; rank {} published no progress", r);
      continue;
    }
    const Progress& p = *all[r];
    const auto it = p.seqs.find(step.process_group());
    const uint64_t at = it == p.seqs.end() ? 0 : it->second;
    if (at >= issued.seq) continue;
    missing += fmt::format("; rank {} never arrived: last heard {:.1f} s before, at seq {} (iteration {}), {}", r,
                           static_cast<double>(UnixMs() - p.unix_ms) / 1e3, at, p.iteration, p.doing);
  }
  if (missing.empty()) missing = "; every other rank had issued it";
  const std::string first_line = error.substr(0, error.find('\n'));
  const std::string report = fmt::format(
      "collective watchdog: rank {}: {} '{}' ({} seq {}, iteration {}) failed after {:.1f} s (timeout {} ms): {}{}",
      options_.rank, OpTypeName(step.op()), step.name(), step.process_group(), issued.seq, issued.iteration, waited_s,
      timeout_ms_, first_line, missing);
  CollectiveError failure(report);
  if (timed_out) FillJobLog(issued, failure);
  control_.Stop(report);
  recorder_.Finish(TraceKind::kWatchdog, issued.iteration, report, "stopped by the collective watchdog (exit 1)");
  throw failure;
}

}  // namespace petrsim::real
