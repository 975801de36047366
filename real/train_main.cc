// petrsim_train: the real backend's trainer as a program (the only executable that links
// LibTorch). One rank per process, with torchrun's conventions (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT) so that torchrun-style launchers and Slurm can start it; or `--nproc N` starts N
// local ranks itself, collects their exit codes and reports, and stops the others when one rank
// fails (as torchrun's agent does).
//   petrsim_train SCENARIO [--nproc N] [--iterations K] [--timeout-ms T] [--set field=value ...]
//                 [--trace DIR [--trace-ring N]]   (rank_<r>.pbtrace files for `petrsim diagnose`)
//                 [--replay TRACE_DIR [--replay-samples-only]] [--plan-sizes scenario|model] [--quiet]
// --plan-sizes: the collectives' sizes. scenario (the default): the scenario's plan as the
// simulator runs it (same collectives, sizes, sequence numbers; the real gradients packed into the
// plan's DDP buckets, padded). model: the StreamPETR plan rewritten for the real, small model.
// --replay re-runs a recorded job (petrsim's traces of a simulated or real run): its sample order
// and getitem results drive the ranks (`petrsim replay TRACE_DIR --against real` runs this);
// the scenario is the recording's unless SCENARIO is given, and --nproc defaults to its ranks.
// The collective timeout is the scenario's comm.timeout_ms unless --timeout-ms is given.
// Exit: 0 every rank finished; 1 a rank failed (the sampler watchdog's livelock, a collective
// error or timeout, a rank killed); 2 bad input.
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "base/error.h"
#include "base/progress_line.h"
#include "data/dataset.h"
#include "real/c10d_backend.h"
#include "real/termination.h"
#include "real/trainer.h"
#include "scenario/scenario_loader.h"
#include "scenario/scenario_override.h"
#include "scenario/scenario_validation.h"
#include "trace/rank_writer.h"
#include "trace/recording.h"
#include "trace/trace_event.h"

namespace {

// Limits of the command line (bad input beyond them exits 2).
constexpr uint32_t kRanksMax = 1024;                              // local ranks or WORLD_SIZE
constexpr uint64_t kIterationsMax = 1'000'000'000'000ULL;         // far beyond any job
constexpr int64_t kTimeoutMsMax = int64_t{7} * 24 * 3600 * 1000;  // a week
constexpr uint64_t kTraceRingMax = uint64_t{1} << 32;

// An environment variable of the launcher as a whole decimal number in [min, max].
uint64_t EnvNumber(const char* name, const char* text, uint64_t min, uint64_t max) {
  uint64_t value = 0;
  const char* end = text + std::strlen(text);
  const auto [at, error] = std::from_chars(text, end, value);
  if (*text == '\0' || error != std::errc() || at != end || value < min || value > max) {
    throw petrsim::ScenarioError(
        fmt::format("the environment variable {}={}: expected a whole number "
                    "in [{}, {}]",
                    name, text, min, max));
  }
  return value;
}

uint16_t FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof(address);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
    throw petrsim::ScenarioError("petrsim_train: cannot find a free port on 127.0.0.1");
  }
  const uint16_t port = ntohs(address.sin_port);
  ::close(fd);
  return port;
}

// Rank 0's progress bar with an ETA (base/progress_line.h): on stderr when it is a terminal,
// unless --quiet. In a job of local ranks they share the terminal; rank 0 speaks for them.
class TrainProgress {
 public:
  explicit TrainProgress(bool enabled) : start_(Clock::now()), line_(stderr, enabled) {}
  bool enabled() const { return line_.enabled(); }
  void Show(uint64_t done, uint64_t total) {
    line_.Draw(done, total, std::chrono::duration<double>(Clock::now() - start_).count(), "iterations");
  }
  void Clear() { line_.Clear(); }

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start_;
  petrsim::ProgressLine line_;
};

int RunRank(const petrsim::Scenario& scenario, const petrsim::Dataset& dataset, petrsim::real::TrainOptions options,
            bool quiet) {
  try {
    // Destroyed (the line erased) before a failure below is reported.
    TrainProgress bar(options.rank == 0 && !quiet && petrsim::StderrIsTerminal());
    if (bar.enabled()) options.on_iteration = [&bar](uint64_t done, uint64_t total) { bar.Show(done, total); };
    const auto result = petrsim::real::TrainRank(scenario, dataset, options);
    bar.Clear();
    const auto& logged = result.logged_losses;  // as mmdet logs it: the mean over the ranks
    // One iteration's loss moves with its batch; the means of the first and last quarter (at most 10 iterations
    // each) show the trend.
    const size_t window = std::clamp<size_t>(logged.size() / 4, 1, 10);
    const auto mean = [&](size_t begin) {
      double sum = 0;
      for (size_t i = begin; i < begin + window; ++i) sum += logged[i];
      return sum / static_cast<double>(window);
    };
    std::cout << "rank " << options.rank << ": " << logged.size() << " iterations, loss ";
    if (logged.empty()) {
      std::cout << "-";
    } else {
      std::cout << mean(0) << " -> " << mean(logged.size() - window) << " (means of the first and last " << window
                << " iteration(s); first " << logged.front() << ", last " << logged.back() << ")";
    }
    std::cout << ", parameters hash " << std::hex << result.parameters_hash << std::dec << ", " << result.step_ms
              << " ms per iteration after the first\n";
    return 0;
  } catch (const petrsim::ScenarioError& error) {
    std::cerr << "petrsim_train: rank " << options.rank << ": error: " << error.what() << "\n";
    return 2;
  } catch (const petrsim::real::SampleLivelockError& error) {
    std::cerr << "petrsim_train: sampler watchdog: " << error.what() << "\n";
    return 1;
  } catch (const petrsim::real::CollectiveError& error) {
    std::cerr << "petrsim_train: " << error.what() << "\n";
    if (!error.job_log.empty()) {
      std::cerr << "petrsim_train: rank " << options.rank << ": " << error.job_log_heading << "\n";
      for (const std::string& line : error.job_log) std::cerr << "  " << line << "\n";
      if (!error.job_log_note.empty()) std::cerr << "  (" << error.job_log_note << ")\n";
    }
    return 1;
  } catch (const petrsim::real::JobStoppedError& error) {
    std::cerr << "petrsim_train: rank " << options.rank << " " << error.what() << "\n";
    return 1;
  } catch (const std::exception& error) {
    std::cerr << "petrsim_train: rank " << options.rank << ": " << error.what() << "\n";
    return 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string path;
  uint32_t nproc = 0;
  petrsim::real::TrainOptions options;
  options.own_process = true;
  std::vector<std::string> sets;
  std::string trace_dir, replay_dir;
  bool replay_samples_only = false;
  // Every number is parsed whole, within its range (CLI11 refuses "5x", "-1" for an unsigned
  // and values that overflow); bad input exits 2.
  CLI::App app{
      "petrsim_train: trains the real LibTorch StreamPETR on the scenario's data, sampler and iteration "
      "plan (also: petrsim train SCENARIO [options])"};
  app.add_option("scenario", path, "the scenario (.pbtxt, .pb, .json); optional with --replay");
  app.add_option("--nproc", nproc,
                 "start N local ranks (must equal job.world_size); without it, run one rank under a launcher that "
                 "sets RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (LOCAL_RANK)")
      ->check(CLI::Range(uint32_t{1}, kRanksMax));
  auto* iterations = app.add_option("--iterations", options.iterations, "iterations (default: job.iterations, else 10)")
                         ->check(CLI::Range(uint64_t{1}, kIterationsMax));
  app.add_option("--timeout-ms", options.timeout_ms, "collective timeout (default: comm.timeout_ms)")
      ->check(CLI::Range(int64_t{1}, kTimeoutMsMax));
  app.add_option("--set", sets, "change the scenario: field=value (repeatable)");
  auto* trace =
      app.add_option("--trace", trace_dir, "record rank_<r>.pbtrace files for `petrsim diagnose` to this directory");
  app.add_option("--trace-ring", options.trace_ring, "with --trace: keep only the last N events of each rank")
      ->check(CLI::Range(uint64_t{1}, kTraceRingMax))
      ->needs(trace);
  std::string backend;
  app.add_option("--backend", backend,
                 "the process groups' backend, replacing comm.backend: gloo (CPU) or nccl (GPU; needs a build with "
                 "PETRSIM_WITH_NCCL and a GPU). A backend this build or machine cannot run is an error, never a "
                 "fallback")
      ->check(CLI::IsMember({"gloo", "nccl"}));
  std::string plan_sizes = "scenario";
  app.add_option("--plan-sizes", plan_sizes,
                 "the sizes of the job's collectives: scenario (default): the scenario's plan as the simulator runs "
                 "it, the same collectives, sizes and sequence numbers (the real model's gradients packed into the "
                 "plan's DDP buckets, padded with zeros; a plan too small for the model is an error); model: the "
                 "StreamPETR plan rewritten for the real, small model (DDP's collectives those of its tensors: a "
                 "faster step, but sequence numbers that differ from the simulator's on this scenario)")
      ->check(CLI::IsMember({"scenario", "model"}));
  auto* replay_option = app.add_option("--replay", replay_dir,
                                       "re-run a recorded job's sample order and getitem results (a trace directory)");
  app.add_flag("--replay-samples-only", replay_samples_only, "with --replay: replay the sample order only")
      ->needs(replay_option);
  bool quiet = false;
  app.add_flag("--quiet", quiet,
               "no progress bar on stderr (rank 0 draws one, with an ETA, when stderr is a terminal)");
  app.footer(
      "Exit: 0 every rank finished; 1 a rank failed (sampler watchdog, collective watchdog, killed); 2 bad input.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : 2;
  }
  const bool iterations_given = iterations->count() > 0;
  try {
    std::optional<petrsim::Recording> recorded;
    std::unique_ptr<petrsim::ReplaySource> replay;
    if (!replay_dir.empty()) {
      recorded = petrsim::ReadRecording(replay_dir);
      replay = petrsim::MakeRecordedSource(*recorded, true, !replay_samples_only);
      options.replay = replay.get();
      if (nproc == 0 && std::getenv("RANK") == nullptr) nproc = recorded->world_size;
    }
    if (path.empty() && !recorded) {
      throw petrsim::ScenarioError("give a SCENARIO, or --replay TRACE_DIR (petrsim_train --help)");
    }
    petrsim::Scenario scenario = path.empty() ? recorded->scenario : petrsim::LoadScenarioFile(path);
    if (path.empty()) path = replay_dir + " (the recorded scenario)";
    if (!sets.empty()) {
      petrsim::ApplyOverrides(scenario, sets);
      petrsim::ValidateScenario(scenario, path + " (after --set)");
    }
    options.plan_sizes = *petrsim::real::ParsePlanSizes(plan_sizes);
    if (!backend.empty()) {
      // A collective timeout still prints what the scenario's backend would (the simulator's lines).
      options.watchdog_lines_backend = scenario.comm().backend();
      scenario.mutable_comm()->set_backend(backend == "nccl" ? petrsim::Comm::nccl : petrsim::Comm::gloo);
    }
    if (const auto why = petrsim::real::BackendUnavailable(scenario.comm().backend())) {
      throw petrsim::ScenarioError(path + ": " + *why);
    }
    const petrsim::Dataset dataset = petrsim::BuildDataset(scenario, path);
    if (!iterations_given) options.iterations = scenario.job().has_iterations() ? scenario.job().iterations() : 10;
    if (!trace_dir.empty()) {
      std::error_code error;
      std::filesystem::create_directories(trace_dir, error);
      if (error) throw petrsim::ScenarioError(trace_dir + ": cannot create the trace directory: " + error.message());
    }
    const auto trace_path = [&](uint32_t rank) {
      return trace_dir.empty() ? std::string() : petrsim::RankTracePath(trace_dir, rank);
    };
    if (nproc == 0) {  // one rank of a job started by a launcher
      const char* rank = std::getenv("RANK");
      const char* world = std::getenv("WORLD_SIZE");
      const char* addr = std::getenv("MASTER_ADDR");
      const char* port = std::getenv("MASTER_PORT");
      if (rank == nullptr || world == nullptr || port == nullptr) {
        throw petrsim::ScenarioError(
            "petrsim_train: give --nproc N, or run under a launcher that sets RANK, "
            "WORLD_SIZE, MASTER_ADDR and MASTER_PORT");
      }
      options.world_size = static_cast<uint32_t>(EnvNumber("WORLD_SIZE", world, 1, kRanksMax));
      options.rank = static_cast<uint32_t>(EnvNumber("RANK", rank, 0, options.world_size - 1));
      if (addr != nullptr) options.master_addr = addr;
      options.master_port = static_cast<uint16_t>(EnvNumber("MASTER_PORT", port, 1, 65535));
      if (const char* local = std::getenv("LOCAL_RANK")) {
        options.local_rank = static_cast<int32_t>(EnvNumber("LOCAL_RANK", local, 0, kRanksMax - 1));
      }
      options.trace_path = trace_path(options.rank);
      if (options.world_size != scenario.job().world_size()) {
        std::cerr << "petrsim_train: note: WORLD_SIZE " << options.world_size << " differs from the scenario's "
                  << scenario.job().world_size() << "; the sampler shards for job.world_size\n";
      }
      return RunRank(scenario, dataset, options, quiet);
    }
    if (nproc != scenario.job().world_size()) {
      throw petrsim::ScenarioError(path + ": --nproc " + std::to_string(nproc) + " but job.world_size is " +
                                   std::to_string(scenario.job().world_size()));
    }
    options.world_size = nproc;
    options.master_port = FreePort();
    // The launcher takes SIGTERM, SIGINT and SIGHUP itself (below) and passes them on; the ranks
    // inherit the mask, which their own watcher expects, and die with the launcher
    // (PR_SET_PDEATHSIG: a launcher killed with SIGKILL leaves no rank training on).
    petrsim::real::BlockTerminationSignals();
    const pid_t launcher = ::getpid();
    struct Child {
      uint32_t rank = 0;
      std::chrono::steady_clock::time_point started;
    };
    std::map<pid_t, Child> children;
    for (uint32_t r = 0; r < nproc; ++r) {
      const auto started = std::chrono::steady_clock::now();
      const pid_t pid = ::fork();
      if (pid < 0) throw petrsim::ScenarioError("petrsim_train: fork failed");
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != launcher) ::_exit(1);  // the launcher died before prctl took effect
        options.rank = r;
        options.local_rank = static_cast<int32_t>(r);
        options.trace_path = trace_path(r);
        const int code = RunRank(scenario, dataset, options, quiet);
        std::cout.flush();  // _exit does not flush stdio
        std::cerr.flush();
        ::_exit(code);
      }
      children[pid] = Child{r, started};
    }
    // When a rank fails, the others stop on their own (the job's stop goes through the store, a
    // collective with a dead peer fails): they get a grace period to write their traces and
    // report, then SIGTERM (they record their last words and die of it), then SIGKILL. A
    // signal to the launcher is passed on at once, with the same bounded wait before SIGKILL.
    int exit_code = 0;
    int forwarded = 0;  // the signal the launcher got and passed on; 0: none
    const auto grace = std::chrono::milliseconds(10000);
    const auto kill_grace = std::chrono::milliseconds(5000);
    constexpr auto kNever = std::chrono::steady_clock::time_point::max();
    auto term_at = kNever, kill_at = kNever;  // when to send SIGTERM, SIGKILL to the ranks left
    const auto signal_all = [&](int signo) {
      for (const auto& [pid, child] : children) ::kill(pid, signo);
    };
    const sigset_t termination = petrsim::real::TerminationSignals();
    // What the launcher writes into a rank's trace carries the scenario the ranks ran, as theirs
    // do (with --plan-sizes model the plan rewritten for the real model): made once, when first
    // needed, after every fork (it builds the model).
    std::optional<petrsim::Scenario> effective;
    const auto effective_scenario = [&]() -> const petrsim::Scenario& {
      if (!effective) {
        try {
          effective = petrsim::real::MakeRealJob(scenario, options.model, options.plan_sizes).scenario;
        } catch (const std::exception&) {
          effective = scenario;  // a plan the ranks refused: they ran nothing of it
        }
      }
      return *effective;
    };
    while (!children.empty()) {
      const timespec tick{0, 20'000'000};
      siginfo_t info{};
      const int signo = ::sigtimedwait(&termination, &info, &tick);
      if (signo > 0 && forwarded == 0) {
        forwarded = signo;
        std::cerr << "petrsim_train: got " << petrsim::real::SignalName(signo) << ": passing it to the ranks\n";
        signal_all(signo);
        kill_at = std::chrono::steady_clock::now() + kill_grace;
      }
      const auto now = std::chrono::steady_clock::now();
      if (now >= term_at) {
        std::cerr << "petrsim_train: stopping the ranks still running after " << grace.count() << " ms\n";
        signal_all(SIGTERM);
        term_at = kNever;
        kill_at = now + kill_grace;
      }
      if (now >= kill_at) {
        std::cerr << "petrsim_train: killing the ranks still running " << kill_grace.count() << " ms after SIGTERM\n";
        signal_all(SIGKILL);
        kill_at = kNever;
      }
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid < 0) break;
      if (pid == 0) continue;
      const Child child = children[pid];
      children.erase(pid);
      const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
      if (ok) continue;
      const int killed_by = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      std::cerr << "petrsim_train: rank " << child.rank << " "
                << (killed_by != 0 ? "was killed by " + petrsim::real::SignalName(killed_by)
                                   : "exited with status " + std::to_string(WEXITSTATUS(status)))
                << "\n";
      // A rank records its own end, except one a signal ends without a word (SIGKILL, a
      // crash): the launcher writes what it saw into that rank's trace.
      const bool recorded_itself = killed_by == 0 || petrsim::real::IsTerminationSignal(killed_by);
      if (!recorded_itself && !trace_dir.empty()) {
        const int64_t at_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - child.started).count();
        // TraceRecord's texts are views: the strings live here.
        const std::string name = petrsim::real::SignalName(killed_by);
        const std::string why =
            fmt::format("killed by {} (the launcher saw its process {} end {:.1f} s after it started)", name, pid,
                        static_cast<double>(at_ns) / 1e9);
        const std::string how = "killed by " + name;
        petrsim::TraceRecord died;
        died.kind = petrsim::TraceKind::kRankDied;
        died.rank = child.rank;
        died.start_ns = died.end_ns = at_ns;
        died.text = why;
        petrsim::TraceRecord exit = died;
        exit.kind = petrsim::TraceKind::kProcessExit;
        exit.text = how;
        try {
          petrsim::AppendToRankTrace(trace_path(child.rank), effective_scenario(), child.rank, nproc,
                                     petrsim::Comm::Backend_Name(scenario.comm().backend()), {died, exit});
        } catch (const std::exception& error) {
          std::cerr << "petrsim_train: " << error.what() << "\n";
        }
      }
      if (forwarded == 0 && term_at == kNever && kill_at == kNever) term_at = now + grace;
      // Bad input a rank finds (e.g. a plan too small for the real model) is the job's bad input,
      // unless another rank failed otherwise.
      const bool bad_input = WIFEXITED(status) && WEXITSTATUS(status) == 2;
      exit_code = bad_input && exit_code != 1 ? 2 : 1;
    }
    if (forwarded != 0) petrsim::real::DieOfSignal(forwarded);
    return exit_code;
  } catch (const petrsim::ScenarioError& error) {
    std::cerr << "petrsim_train: error: " << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "petrsim_train: error: " << error.what() << "\n";
    return 2;
  }
}
