// The command line's progress bar (on stderr; see ProgressBar).
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>

namespace petrsim {

// A progress bar on stderr, only when stderr is a terminal and the run has taken a second.
class ProgressBar {
 public:
  explicit ProgressBar(uint64_t total) : total_(total), start_(Clock::now()), tty_(isatty(2) != 0) {}
  ~ProgressBar() {
    if (shown_) std::fputs("\r\033[K", stderr);
  }
  // Sweeps: runs done of total.
  void Count(uint64_t done, uint64_t total) {
    if (!tty_) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    if (elapsed < 1.0) return;
    shown_ = true;
    std::fprintf(stderr, "\r%llu/%llu runs, wall %.1f s", static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(total), elapsed);
    std::fflush(stderr);
  }
  void Update(int64_t now_ns, uint64_t iterations) {
    if (!tty_) return;
    const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
    if (elapsed < 1.0) return;
    shown_ = true;
    const double fraction = total_ > 0 ? static_cast<double>(iterations) / total_ : 0.0;
    const int filled = static_cast<int>(fraction * 30);
    std::fprintf(stderr, "\r[%.*s%*s] iteration %llu/%llu, virtual %.0f s, wall %.1f s", filled,
                 "##############################", 30 - filled, "", static_cast<unsigned long long>(iterations),
                 static_cast<unsigned long long>(total_), now_ns / 1e9, elapsed);
    std::fflush(stderr);
  }

 private:
  using Clock = std::chrono::steady_clock;
  uint64_t total_;
  Clock::time_point start_;
  bool tty_;
  bool shown_ = false;
};

}  // namespace petrsim
