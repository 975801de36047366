// The terminal progress line; see progress_line.h.
#include "base/progress_line.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

namespace petrsim {

std::string ProgressDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0 || seconds > 1e9) return "?";
  const auto whole = static_cast<uint64_t>(seconds);
  if (whole >= 3600) return fmt::format("{}:{:02}:{:02}", whole / 3600, whole / 60 % 60, whole % 60);
  return fmt::format("{}:{:02}", whole / 60, whole % 60);
}

std::string ProgressText(uint64_t done, uint64_t total, double elapsed_s, std::string_view unit,
                         std::string_view extra) {
  const bool bytes = unit == "bytes";
  const auto amount = [&](uint64_t n) {
    return bytes ? fmt::format("{:.1f}", static_cast<double>(n) / 1e6) : fmt::to_string(n);
  };
  const std::string_view shown_unit = bytes ? std::string_view("MB") : unit;
  std::string out;
  if (total == 0) {
    out = fmt::format("{} {}  elapsed {}", amount(done), shown_unit, ProgressDuration(elapsed_s));
  } else {
    constexpr int kWidth = 20;
    const uint64_t capped = std::min(done, total);
    const double fraction = static_cast<double>(capped) / static_cast<double>(total);
    const int filled = std::clamp(static_cast<int>(fraction * kWidth), 0, kWidth);
    const std::string eta =
        capped == 0 ? std::string("?")
                    : ProgressDuration(elapsed_s * static_cast<double>(total - capped) / static_cast<double>(capped));
    out = fmt::format("[{}{}]  {}/{} {}  {}%  elapsed {}  ETA {}", std::string(filled, '#'),
                      std::string(kWidth - filled, '-'), amount(capped), amount(total), shown_unit,
                      static_cast<int>(fraction * 100), ProgressDuration(elapsed_s), eta);
  }
  if (!extra.empty()) {
    out += "  ";
    out += extra;
  }
  return out;
}

bool StderrIsTerminal() { return ::isatty(2) != 0; }

void ProgressLine::Draw(uint64_t done, uint64_t total, double elapsed_s, std::string_view unit,
                        std::string_view extra) {
  if (!enabled_ || elapsed_s < kDelaySeconds) return;
  if (shown_ && elapsed_s - drawn_at_s_ < kRedrawSeconds) return;
  drawn_at_s_ = elapsed_s;
  shown_ = true;
  // Erase to the end of the line: a shorter text must not leave the old one's tail.
  const std::string text = ProgressText(done, total, elapsed_s, unit, extra);
  std::fputc('\r', out_);
  std::fwrite(text.data(), 1, text.size(), out_);
  std::fputs("\033[K", out_);
  std::fflush(out_);
}

void ProgressLine::Clear() {
  if (!shown_) return;
  shown_ = false;
  std::fputs("\r\033[K", out_);
  std::fflush(out_);
}

}  // namespace petrsim
