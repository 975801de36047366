// The progress line long commands draw on a terminal (sweep, a long simulation, import, train):
// the text (ProgressText, pure) and the line that redraws it in place (ProgressLine). Both take
// the elapsed wall time from the caller, so base/ keeps no clock: cli/progress_bar.h and
// petrsim_train measure it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace petrsim {

// "[########------------]  120/300 iterations  40%  elapsed 0:12  ETA 0:18  virtual 88 s".
// The ETA is elapsed * (total - done) / done ("ETA ?" before anything is done). `unit` names
// what is counted ("runs", "iterations"); with unit "bytes" done and total are shown in MB.
// total 0 (not known yet): "120 runs  elapsed 0:12". `extra`, when not empty, is appended.
std::string ProgressText(uint64_t done, uint64_t total, double elapsed_s, std::string_view unit,
                         std::string_view extra = {});

// "0:07", "12:05", "1:02:03" (hours only when needed); negative or not finite: "?".
std::string ProgressDuration(double seconds);

// Whether standard error is a terminal (isatty(2)).
bool StderrIsTerminal();

// A progress line on `out` (stderr): drawn with '\r' in place, only when `enabled` (callers pass
// StderrIsTerminal() && !quiet), not before `kDelaySeconds` of elapsed time (short runs show
// nothing) and at most every `kRedrawSeconds`. Clear() (and the destructor) erase a line drawn.
class ProgressLine {
 public:
  static constexpr double kDelaySeconds = 1.0;
  static constexpr double kRedrawSeconds = 0.1;

  ProgressLine(std::FILE* out, bool enabled) : out_(out), enabled_(enabled) {}
  ~ProgressLine() { Clear(); }
  ProgressLine(const ProgressLine&) = delete;
  ProgressLine& operator=(const ProgressLine&) = delete;

  void Draw(uint64_t done, uint64_t total, double elapsed_s, std::string_view unit, std::string_view extra = {});
  void Clear();
  bool enabled() const { return enabled_; }
  bool shown() const { return shown_; }

 private:
  std::FILE* out_;
  bool enabled_;
  bool shown_ = false;
  double drawn_at_s_ = -1;
};

}  // namespace petrsim
