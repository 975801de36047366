// The command line's progress bar (on stderr; see ProgressBar).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "base/progress_line.h"

namespace petrsim {

// A progress bar with an ETA on stderr (base/progress_line.h draws it): only when stderr is a
// terminal and --quiet is not given, from one second into the command on. `unit` names what is
// counted ("runs", "iterations", "bytes"). Erased when it goes.
class ProgressBar {
 public:
  ProgressBar(std::string unit, bool quiet)
      : unit_(std::move(unit)), start_(Clock::now()), line_(stderr, !quiet && StderrIsTerminal()) {}

  // `done` of `total` (0: not known); `extra` follows the ETA (e.g. the virtual time).
  void Update(uint64_t done, uint64_t total, std::string_view extra = {}) {
    if (!line_.enabled()) return;
    line_.Draw(done, total, std::chrono::duration<double>(Clock::now() - start_).count(), unit_, extra);
  }
  void Clear() { line_.Clear(); }
  // Erases the line and counts the elapsed time (and the ETA) from now: a second pass.
  void Restart() {
    line_.Clear();
    start_ = Clock::now();
  }
  bool enabled() const { return line_.enabled(); }

 private:
  using Clock = std::chrono::steady_clock;
  std::string unit_;
  Clock::time_point start_;
  ProgressLine line_;
};

}  // namespace petrsim
