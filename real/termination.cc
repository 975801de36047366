// A rank stopped from outside; see termination.h.
#include "real/termination.h"

#include <signal.h>
#include <string.h>

#include <cerrno>
#include <ctime>

namespace petrsim::real {
sigset_t TerminationSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  return set;
}

bool IsTerminationSignal(int signo) { return signo == SIGTERM || signo == SIGINT || signo == SIGHUP; }

void BlockTerminationSignals() {
  const sigset_t set = TerminationSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

std::string SignalName(int signo) {
  const char* abbrev = sigabbrev_np(signo);
  return abbrev != nullptr ? std::string("SIG") + abbrev : "signal " + std::to_string(signo);
}

void DieOfSignal(int signo) {
  struct sigaction action {};
  action.sa_handler = SIG_DFL;
  sigemptyset(&action.sa_mask);
  ::sigaction(signo, &action, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, signo);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  ::raise(signo);
  ::_exit(128 + signo);  // not reached: the signal's default action ends the process
}

TerminationWatcher::TerminationWatcher(std::function<void(int)> on_signal) : on_signal_(std::move(on_signal)) {
  thread_ = std::thread([this] {
    const sigset_t set = TerminationSignals();
    const timespec tick{0, 100'000'000};  // looks at quit_ every 100 ms
    while (!quit_.load()) {
      siginfo_t info{};
      const int signo = ::sigtimedwait(&set, &info, &tick);
      if (signo < 0) continue;  // EAGAIN (the tick) or EINTR
      on_signal_(signo);
      DieOfSignal(signo);
    }
  });
}

TerminationWatcher::~TerminationWatcher() {
  quit_ = true;
  thread_.join();
}

}  // namespace petrsim::real
