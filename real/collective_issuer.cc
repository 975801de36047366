// The real trainer's collective issue; see collective_issuer.h.
#include "real/collective_issuer.h"

#include <fmt/format.h>

#include "model/outcome.h"
#include "trace/rank_writer.h"

namespace petrsim::real {

CollectiveIssuer::CollectiveIssuer(comm::Comm& comm, JobControl& control, RankRecorder& recorder,
                                   const TrainOptions& options, std::chrono::milliseconds timeout)
    : comm_(comm), control_(control), recorder_(recorder), options_(options), timeout_ms_(timeout.count()) {}

CollectiveIssuer::Issued CollectiveIssuer::Launch(const Collective& step, uint64_t iteration,
                                                  const std::vector<double>& input, Done done) {
  Issued issued;
  issued.step = &step;
  issued.seq = ++seqs_[step.process_group()];
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
    issued.work = comm_.Issue(step, input);
  } catch (const std::exception& error) {
    Fail(issued, error.what());
  }
  return issued;
}

void CollectiveIssuer::Complete(Issued& issued) {
  try {
    control_.Waiting(true);
    issued.work->Wait();
    control_.Waiting(false);
  } catch (const std::exception& error) {
    Fail(issued, error.what());
  }
  recorder_.CloseCollective(*issued.step, issued.seq);
  if (issued.done) issued.done(issued.work->Result());
}

void CollectiveIssuer::Fail(const Issued& issued, const std::string& error) {
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
  control_.Stop(report);
  recorder_.Finish(TraceKind::kWatchdog, issued.iteration, report, "stopped by the collective watchdog (exit 1)");
  throw CollectiveError(report);
}

}  // namespace petrsim::real
