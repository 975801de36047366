// A rank stopped from outside: SIGTERM (Slurm's or torchrun's time limit, the launcher passing
// on its own), SIGINT (Ctrl-C) or SIGHUP. The signals are blocked in every thread of the rank
// and taken by one watcher thread (sigwait), which is not a signal handler: it may lock and
// allocate, so it records the rank's last words in its trace (the collectives still in flight,
// as pending, and what the rank was doing) before the process dies of the signal, as it would
// have without petrsim. A hung job killed at its time limit is then diagnosable from its traces.
#pragma once

#include <signal.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace petrsim::real {

// SIGTERM, SIGINT and SIGHUP: the signals a rank records its end on itself.
sigset_t TerminationSignals();
bool IsTerminationSignal(int signo);

// Blocks SIGTERM, SIGINT and SIGHUP in the calling thread; threads it creates afterwards inherit
// the mask. Call before the rank starts any thread.
void BlockTerminationSignals();

// "SIGTERM", "SIGKILL", ...; "signal N" for the others.
std::string SignalName(int signo);

// Restores the default action of `signo`, unblocks it and raises it: the process dies of it.
[[noreturn]] void DieOfSignal(int signo);

class TerminationWatcher {
 public:
  // Calls `on_signal(signo)` on the watcher thread when a blocked termination signal arrives;
  // then the process dies of the signal (DieOfSignal).
  explicit TerminationWatcher(std::function<void(int)> on_signal);
  ~TerminationWatcher();
  TerminationWatcher(const TerminationWatcher&) = delete;
  TerminationWatcher& operator=(const TerminationWatcher&) = delete;

 private:
  std::function<void(int)> on_signal_;
  std::atomic<bool> quit_{false};
  std::thread thread_;
};

}  // namespace petrsim::real
