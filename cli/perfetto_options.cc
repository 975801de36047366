// The timeline's options; see perfetto_options.h.
#include "cli/perfetto_options.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string_view>

#include "base/error.h"

namespace petrsim {
namespace {

// Far beyond any run (a week is 604,800 s), and 1e9 s in nanoseconds fits int64_t.
constexpr double kLastSecondsMax = 1e9;

bool ParseWhole(std::string_view text, uint64_t& value) {
  if (text.empty() || text.front() < '0' || text.front() > '9') return false;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

}  // namespace

void AddPerfettoOptions(CLI::App& command, PerfettoFlags& flags, const char* clock) {
  command.add_option("--perfetto-iterations", flags.iterations,
                     "with --perfetto: write only iterations A..B (inclusive), e.g. --perfetto-iterations 100-200");
  command.add_option("--perfetto-last", flags.last,
                     fmt::format("with --perfetto: write only the last SECONDS ({} seconds) before the end of the run, "
                                 "e.g. --perfetto-last 60",
                                 clock));
  command
      .add_option("--perfetto-records-max", flags.records_max,
                  "with --perfetto: write at most this many records (default 5,000,000); a timeline cut there is "
                  "said on stderr, with the iteration it stops in")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 40));
}

std::pair<uint64_t, uint64_t> ParsePerfettoIterations(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return ScenarioError(fmt::format(
        "--perfetto-iterations: expected A-B, the first and last iteration to write, whole numbers with A <= B "
        "(e.g. 100-200), got '{}'{}",
        text, why));
  };
  const size_t dash = text.find('-');
  uint64_t first = 0, last = 0;
  if (dash == std::string::npos || !ParseWhole(std::string_view(text).substr(0, dash), first) ||
      !ParseWhole(std::string_view(text).substr(dash + 1), last)) {
    throw bad("");
  }
  if (first > last) throw bad(fmt::format(" ({} > {})", first, last));
  return {first, last};
}

int64_t ParsePerfettoLast(const std::string& text) {
  double seconds = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || !std::isfinite(seconds) ||
      seconds <= 0 || seconds > kLastSecondsMax) {
    throw ScenarioError(
        fmt::format("--perfetto-last: expected a number of seconds > 0 and <= {:.0f} (the end of the run minus that is "
                    "where the timeline starts, e.g. 60 or 2.5), got '{}'",
                    kLastSecondsMax, text));
  }
  return static_cast<int64_t>(std::llround(seconds * 1e9));
}

PerfettoWindow MakePerfettoWindow(const PerfettoFlags& flags, int64_t end_ns) {
  // One window: the iterations and the seconds would each cut what the other keeps.
  if (!flags.iterations.empty() && !flags.last.empty()) {
    throw ScenarioError(
        fmt::format("--perfetto-iterations {} and --perfetto-last {}: expected one window, found two; "
                    "give one of them",
                    flags.iterations, flags.last));
  }
  PerfettoWindow window;
  if (!flags.iterations.empty()) {
    const auto [first, last] = ParsePerfettoIterations(flags.iterations);
    window.first_iteration = first;
    window.last_iteration = last;
  }
  if (!flags.last.empty()) window.from_ns = std::max<int64_t>(0, end_ns - ParsePerfettoLast(flags.last));
  return window;
}

std::optional<std::string> PerfettoTruncationNotice(const std::string& path, const PerfettoWriter& writer,
                                                    const std::string& time) {
  if (!writer.truncated_at()) return std::nullopt;
  const uint64_t iteration = writer.truncated_at()->iteration;
  return fmt::format(
      "petrsim: --perfetto: {} stops in iteration {}, at {}: its limit of {} records was reached and {} later "
      "records were not written; for a complete timeline of a part of the run, give a window: "
      "--perfetto-iterations A-B (e.g. {}-{}) or --perfetto-last SECONDS (or raise --perfetto-records-max)",
      path, iteration, time, writer.records_max(), writer.records_truncated(), iteration, iteration + 100);
}

}  // namespace petrsim
