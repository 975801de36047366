// petrsim_train: the real backend's trainer as a program (the only executable that links
// LibTorch). One rank per process, started by torchrun (RANK, WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT) or Slurm's srun (SLURM_PROCID, SLURM_NTASKS, the step's first node; see
// base/launch_env.h for which wins); or `--nproc N` starts N
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
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "base/error.h"
#include "base/launch_env.h"
#include "base/progress_line.h"
#include "data/dataset.h"
#include "data/sampler.h"
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

// The command line, parsed.
struct CommandLine {
  std::string path;
  uint32_t nproc = 0;
  petrsim::real::TrainOptions options;
  std::vector<std::string> sets;
  std::string trace_dir, replay_dir;
  bool replay_samples_only = false;
  std::string backend;
  std::string plan_sizes = "scenario";
  bool quiet = false;
  bool iterations_given = false;
};

// Parses the command line into `cl`. Returns the exit code when the program ends here (--help,
// bad input).
std::optional<int> ParseCommandLine(int argc, char** argv, CommandLine& cl) {
  cl.options.own_process = true;
  // Every number is parsed whole, within its range (CLI11 refuses "5x", "-1" for an unsigned
  // and values that overflow); bad input exits 2.
  CLI::App app{
      "petrsim_train: trains the real LibTorch StreamPETR on the scenario's data, sampler and iteration "
      "plan (also: petrsim train SCENARIO [options])"};
  app.add_option("scenario", cl.path, "the scenario (.pbtxt, .pb, .json); optional with --replay");
  app.add_option("--nproc", cl.nproc,
                 "start N local ranks (must equal job.world_size); without it, run one rank under a launcher: torchrun "
                 "(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, LOCAL_RANK) or srun (SLURM_PROCID, SLURM_NTASKS, "
                 "SLURM_LOCALID; the address the step's first node, the port MASTER_PORT or 15000 + SLURM_JOB_ID % "
                 "15000); torchrun's win when both are set")
      ->check(CLI::Range(uint32_t{1}, kRanksMax));
  auto* iterations =
      app.add_option("--iterations", cl.options.iterations, "iterations (default: job.iterations, else 10)")
          ->check(CLI::Range(uint64_t{1}, kIterationsMax));
  app.add_option("--timeout-ms", cl.options.timeout_ms, "collective timeout (default: comm.timeout_ms)")
      ->check(CLI::Range(int64_t{1}, kTimeoutMsMax));
  app.add_option("--set", cl.sets, "change the scenario: field=value (repeatable)");
  auto* trace =
      app.add_option("--trace", cl.trace_dir, "record rank_<r>.pbtrace files for `petrsim diagnose` to this directory");
  app.add_option("--trace-ring", cl.options.trace_ring, "with --trace: keep only the last N events of each rank")
      ->check(CLI::Range(uint64_t{1}, kTraceRingMax))
      ->needs(trace);
  app.add_option("--backend", cl.backend,
                 "the process groups' backend, replacing comm.backend: gloo (CPU) or nccl (GPU; needs a build that "
                 "found the CUDA toolkit's NCCL, or PETRSIM_WITH_NCCL, and a GPU). A backend this build or machine "
                 "cannot run is an error, never a fallback")
      ->check(CLI::IsMember({"gloo", "nccl"}));
  app.add_option("--plan-sizes", cl.plan_sizes,
                 "the sizes of the job's collectives: scenario (default): the scenario's plan as the simulator runs "
                 "it, the same collectives, sizes and sequence numbers (the real model's gradients packed into the "
                 "plan's DDP buckets, padded with zeros; a plan too small for the model is an error); model: the "
                 "StreamPETR plan rewritten for the real, small model (DDP's collectives those of its tensors: a "
                 "faster step, but sequence numbers that differ from the simulator's on this scenario)")
      ->check(CLI::IsMember({"scenario", "model"}));
  auto* replay_option = app.add_option("--replay", cl.replay_dir,
                                       "re-run a recorded job's sample order and getitem results (a trace directory)");
  app.add_flag("--replay-samples-only", cl.replay_samples_only, "with --replay: replay the sample order only")
      ->needs(replay_option);
  app.add_flag("--quiet", cl.quiet,
               "no progress bar on stderr (rank 0 draws one, with an ETA, when stderr is a terminal)");
  app.footer(
      "Exit: 0 every rank finished; 1 a rank failed (sampler watchdog, collective watchdog, killed); 2 bad input.");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);
    return code == 0 ? 0 : 2;
  }
  cl.iterations_given = iterations->count() > 0;
  return std::nullopt;
}

// The scenario to run: the file's, or the recording's with --replay; --set and --backend applied.
// `recorded` and `replay` hold the recording cl.options.replay points into.
petrsim::Scenario LoadJobScenario(CommandLine& cl, std::optional<petrsim::Recording>& recorded,
                                  std::unique_ptr<petrsim::ReplaySource>& replay) {
  if (!cl.replay_dir.empty()) {
    recorded = petrsim::ReadRecording(cl.replay_dir);
    replay = petrsim::MakeRecordedSource(*recorded, true, !cl.replay_samples_only);
    cl.options.replay = replay.get();
    if (cl.nproc == 0 && !petrsim::DetectLauncher(petrsim::ProcessEnv())) cl.nproc = recorded->world_size;
  }
  if (cl.path.empty() && !recorded) {
    throw petrsim::ScenarioError("give a SCENARIO, or --replay TRACE_DIR (petrsim_train --help)");
  }
  petrsim::Scenario scenario = cl.path.empty() ? recorded->scenario : petrsim::LoadScenarioFile(cl.path);
  if (cl.path.empty()) cl.path = cl.replay_dir + " (the recorded scenario)";
  if (!cl.sets.empty()) {
    petrsim::ApplyOverrides(scenario, cl.sets);
    petrsim::ValidateScenario(scenario, cl.path + " (after --set)");
  }
  cl.options.plan_sizes = *petrsim::real::ParsePlanSizes(cl.plan_sizes);
  if (!cl.backend.empty()) {
    // A collective timeout still prints what the scenario's backend would (the simulator's lines).
    cl.options.watchdog_lines_backend = scenario.comm().backend();
    scenario.mutable_comm()->set_backend(cl.backend == "nccl" ? petrsim::Comm::nccl : petrsim::Comm::gloo);
  }
  if (const auto why = petrsim::real::BackendUnavailable(scenario.comm().backend())) {
    throw petrsim::ScenarioError(cl.path + ": " + *why);
  }
  return scenario;
}

std::string TracePath(const std::string& trace_dir, uint32_t rank) {
  return trace_dir.empty() ? std::string() : petrsim::RankTracePath(trace_dir, rank);
}

// One rank of a job started by a launcher: torchrun's variables, or Slurm's in an srun step
// (base/launch_env.h).
int RunLaunchedRank(CommandLine& cl, const petrsim::Scenario& scenario, const petrsim::Dataset& dataset) {
  petrsim::real::TrainOptions& options = cl.options;
  const petrsim::EnvLookup env = petrsim::ProcessEnv();
  const std::optional<petrsim::LaunchEnv> launch = petrsim::ReadLaunchEnv(env, kRanksMax);
  if (!launch) throw petrsim::ScenarioError("petrsim_train: " + petrsim::NoLauncherMessage(env));
  options.world_size = launch->world_size;
  options.rank = launch->rank;
  if (!launch->master_addr.empty()) options.master_addr = launch->master_addr;
  options.master_port = launch->master_port;
  if (launch->local_rank) options.local_rank = static_cast<int32_t>(*launch->local_rank);
  options.trace_path = TracePath(cl.trace_dir, options.rank);
  if (options.world_size != scenario.job().world_size()) {
    std::cerr << "petrsim_train: note: WORLD_SIZE " << options.world_size << " differs from the scenario's "
              << scenario.job().world_size() << "; the sampler shards for job.world_size\n";
  }
  return RunRank(scenario, dataset, options, cl.quiet);
}

// `--nproc N`: the launcher of N local ranks. When a rank fails, the others stop on their own
// (the job's stop goes through the store, a collective with a dead peer fails): they get a grace
// period to write their traces and report, then SIGTERM (they record their last words and die
// of it), then SIGKILL. A signal to the launcher is passed on at once, with the same bounded
// wait before SIGKILL.
class Launcher {
 public:
  Launcher(CommandLine& cl, const petrsim::Scenario& scenario, const petrsim::Dataset& dataset)
      : cl_(cl), scenario_(scenario), dataset_(dataset) {}

  // Starts the ranks, waits for them all; returns the job's exit code.
  int Run() {
    cl_.options.world_size = cl_.nproc;
    cl_.options.master_port = FreePort();
    // The launcher takes SIGTERM, SIGINT and SIGHUP itself (below) and passes them on; the ranks
    // inherit the mask, which their own watcher expects, and die with the launcher
    // (PR_SET_PDEATHSIG: a launcher killed with SIGKILL leaves no rank training on).
    petrsim::real::BlockTerminationSignals();
    StartRanks();
    const sigset_t termination = petrsim::real::TerminationSignals();
    while (!children_.empty()) {
      const timespec tick{0, 20'000'000};
      siginfo_t info{};
      const int signo = ::sigtimedwait(&termination, &info, &tick);
      const auto now = Escalate(signo);
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid < 0) break;
      if (pid == 0) continue;
      OnRankExit(pid, status, now);
    }
    if (forwarded_ != 0) petrsim::real::DieOfSignal(forwarded_);
    return exit_code_;
  }

 private:
  using Clock = std::chrono::steady_clock;
  struct Child {
    uint32_t rank = 0;
    Clock::time_point started;
    std::string killed_how;  // set when the launcher SIGKILLs it: by whom, and whether it was stopped
  };
  static constexpr auto kNever = Clock::time_point::max();
  static constexpr auto kGrace = std::chrono::milliseconds(10000);
  static constexpr auto kKillGrace = std::chrono::milliseconds(5000);

  void StartRanks() {
    const pid_t launcher = ::getpid();
    for (uint32_t r = 0; r < cl_.nproc; ++r) {
      const auto started = Clock::now();
      const pid_t pid = ::fork();
      if (pid < 0) throw petrsim::ScenarioError("petrsim_train: fork failed");
      if (pid == 0) {
        ::prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (::getppid() != launcher) ::_exit(1);  // the launcher died before prctl took effect
        cl_.options.rank = r;
        cl_.options.local_rank = static_cast<int32_t>(r);
        cl_.options.trace_path = TracePath(cl_.trace_dir, r);
        const int code = RunRank(scenario_, dataset_, cl_.options, cl_.quiet);
        std::cout.flush();  // _exit does not flush stdio
        std::cerr.flush();
        ::_exit(code);
      }
      children_[pid] = Child{r, started};
    }
  }

  void SignalAll(int signo) {
    for (const auto& [pid, child] : children_) ::kill(pid, signo);
  }

  // SIGKILLs the ranks left, noting for each that the launcher did, and whether it was stopped (SIGSTOP, a
  // debugger: state T or t in /proc/PID/stat), which no SIGTERM ends.
  void KillLeft() {
    for (auto& [pid, child] : children_) {
      std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
      std::string line;
      std::getline(stat, line);
      const size_t paren = line.rfind(')');
      const char state = paren != std::string::npos && paren + 2 < line.size() ? line[paren + 2] : '?';
      child.killed_how =
          fmt::format("{}killed by SIGKILL from the launcher, {} ms after its {}",
                      state == 'T' || state == 't' ? "stopped (SIGSTOP or a debugger), then " : "", kKillGrace.count(),
                      petrsim::real::SignalName(forwarded_ != 0 ? forwarded_ : SIGTERM));
      ::kill(pid, SIGKILL);
    }
  }

  // Passes a signal the launcher got on, and sends SIGTERM, then SIGKILL, when their time has
  // come. Returns now.
  Clock::time_point Escalate(int signo) {
    if (signo > 0 && forwarded_ == 0) {
      forwarded_ = signo;
      std::cerr << "petrsim_train: got " << petrsim::real::SignalName(signo) << ": passing it to the ranks\n";
      SignalAll(signo);
      kill_at_ = Clock::now() + kKillGrace;
    }
    const auto now = Clock::now();
    if (now >= term_at_) {
      std::cerr << "petrsim_train: stopping the ranks still running after " << kGrace.count() << " ms\n";
      SignalAll(SIGTERM);
      term_at_ = kNever;
      kill_at_ = now + kKillGrace;
    }
    if (now >= kill_at_) {
      std::cerr << "petrsim_train: killing the ranks still running " << kKillGrace.count() << " ms after SIGTERM\n";
      KillLeft();
      kill_at_ = kNever;
    }
    return now;
  }

  void OnRankExit(pid_t pid, int status, Clock::time_point now) {
    const Child child = children_[pid];
    children_.erase(pid);
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (ok) return;
    const int killed_by = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    const std::string killed = killed_by == SIGKILL && !child.killed_how.empty()
                                   ? "was " + child.killed_how
                                   : "was killed by " + petrsim::real::SignalName(killed_by);
    std::cerr << "petrsim_train: rank " << child.rank << " "
              << (killed_by != 0 ? killed : "exited with status " + std::to_string(WEXITSTATUS(status))) << "\n";
    // A rank records its own end, except one a signal ends without a word (SIGKILL, a
    // crash): the launcher writes what it saw into that rank's trace.
    const bool recorded_itself = killed_by == 0 || petrsim::real::IsTerminationSignal(killed_by);
    if (!recorded_itself && !cl_.trace_dir.empty()) RecordKill(child, pid, killed_by, now);
    if (forwarded_ == 0 && term_at_ == kNever && kill_at_ == kNever) term_at_ = now + kGrace;
    // Bad input a rank finds (e.g. a plan too small for the real model) is the job's bad input,
    // unless another rank failed otherwise.
    const bool bad_input = WIFEXITED(status) && WEXITSTATUS(status) == 2;
    exit_code_ = bad_input && exit_code_ != 1 ? 2 : 1;
  }

  // Writes a rank's death by a signal that left it no word into its trace.
  void RecordKill(const Child& child, pid_t pid, int killed_by, Clock::time_point now) {
    const int64_t at_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now - child.started).count();
    // TraceRecord's texts are views: the strings live here.
    const std::string name = petrsim::real::SignalName(killed_by);
    const std::string how = killed_by == SIGKILL && !child.killed_how.empty() ? child.killed_how : "killed by " + name;
    const std::string why = fmt::format("{} (the launcher saw its process {} end {:.1f} s after it started)", how, pid,
                                        static_cast<double>(at_ns) / 1e9);
    petrsim::TraceRecord died;
    died.kind = petrsim::TraceKind::kRankDied;
    died.rank = child.rank;
    died.start_ns = died.end_ns = at_ns;
    died.text = why;
    petrsim::TraceRecord exit = died;
    exit.kind = petrsim::TraceKind::kProcessExit;
    exit.text = how;
    try {
      petrsim::AppendToRankTrace(TracePath(cl_.trace_dir, child.rank), EffectiveScenario(), child.rank, cl_.nproc,
                                 petrsim::Comm::Backend_Name(scenario_.comm().backend()), {died, exit});
    } catch (const std::exception& error) {
      std::cerr << "petrsim_train: " << error.what() << "\n";
    }
  }

  // What the launcher writes into a rank's trace carries the scenario the ranks ran, as theirs
  // do (with --plan-sizes model the plan rewritten for the real model): made once, when first
  // needed, after every fork (it builds the model).
  const petrsim::Scenario& EffectiveScenario() {
    if (!effective_) {
      try {
        effective_ = petrsim::real::MakeRealJob(scenario_, cl_.options.model, cl_.options.plan_sizes).scenario;
      } catch (const std::exception&) {
        effective_ = scenario_;  // a plan the ranks refused: they ran nothing of it
      }
    }
    return *effective_;
  }

  CommandLine& cl_;
  const petrsim::Scenario& scenario_;
  const petrsim::Dataset& dataset_;
  std::map<pid_t, Child> children_;
  int exit_code_ = 0;
  int forwarded_ = 0;                                      // the signal the launcher got and passed on; 0: none
  Clock::time_point term_at_ = kNever, kill_at_ = kNever;  // when to send SIGTERM, SIGKILL to the ranks left
  std::optional<petrsim::Scenario> effective_;
};

}  // namespace

int main(int argc, char** argv) {
  CommandLine cl;
  if (const auto code = ParseCommandLine(argc, argv, cl)) return *code;
  try {
    std::optional<petrsim::Recording> recorded;
    std::unique_ptr<petrsim::ReplaySource> replay;
    const petrsim::Scenario scenario = LoadJobScenario(cl, recorded, replay);
    const petrsim::Dataset dataset = petrsim::BuildDataset(scenario, cl.path);
    if (!cl.iterations_given) {
      cl.options.iterations = scenario.job().has_iterations() ? scenario.job().iterations() : 10;
    }
    if (!cl.trace_dir.empty()) {
      std::error_code error;
      std::filesystem::create_directories(cl.trace_dir, error);
      if (error) throw petrsim::ScenarioError(cl.trace_dir + ": cannot create the trace directory: " + error.message());
    }
    if (cl.nproc == 0) return RunLaunchedRank(cl, scenario, dataset);
    if (cl.nproc != scenario.job().world_size()) {
      throw petrsim::ScenarioError(cl.path + ": --nproc " + std::to_string(cl.nproc) + " but job.world_size is " +
                                   std::to_string(scenario.job().world_size()));
    }
    // What every rank would find wrong (a sampler the real job cannot build, a plan too small for
    // the model) is found here, once, before a rank is spawned (issue 33).
    petrsim::CheckSamplerConstructible(scenario, dataset, cl.path);
    petrsim::real::MakeRealJob(scenario, cl.options.model, cl.options.plan_sizes);
    Launcher launcher(cl, scenario, dataset);
    return launcher.Run();
  } catch (const petrsim::ScenarioError& error) {
    std::cerr << "petrsim_train: error: " << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "petrsim_train: error: " << error.what() << "\n";
    return 2;
  }
}
