// The progress line of long commands (base/progress_line.h): its text (bar, counts, percent,
// elapsed time and ETA = elapsed * (total - done) / done), and when it is drawn: only when
// enabled, from one second on, at most every 0.1 s, erased by Clear().
#include "base/progress_line.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <utility>

namespace petrsim {
namespace {

TEST(ProgressTextTest, BarCountsPercentElapsedAndEta) {
  // A quarter done in 10 s: 30 s to go.
  EXPECT_EQ(ProgressText(25, 100, 10.0, "runs"), "[#####---------------]  25/100 runs  25%  elapsed 0:10  ETA 0:30");
  EXPECT_EQ(ProgressText(120, 300, 12.0, "iterations", "virtual 88 s"),
            "[########------------]  120/300 iterations  40%  elapsed 0:12  ETA 0:18  virtual 88 s");
  // Done: a full bar, nothing to go.
  EXPECT_EQ(ProgressText(7, 7, 65.0, "runs"), "[####################]  7/7 runs  100%  elapsed 1:05  ETA 0:00");
}

TEST(ProgressTextTest, EtaUnknownBeforeAnythingIsDone) {
  EXPECT_EQ(ProgressText(0, 50, 3.0, "runs"), "[--------------------]  0/50 runs  0%  elapsed 0:03  ETA ?");
}

TEST(ProgressTextTest, HoursOnlyWhenNeeded) {
  // 1 of 3 in 3723 s (1:02:03): 7446 s (2:04:06) to go.
  EXPECT_EQ(ProgressText(1, 3, 3723.0, "iterations"),
            "[######--------------]  1/3 iterations  33%  elapsed 1:02:03  ETA 2:04:06");
  EXPECT_EQ(ProgressDuration(59.9), "0:59");
  EXPECT_EQ(ProgressDuration(-1), "?");
}

TEST(ProgressTextTest, UnknownTotalAndBytes) {
  EXPECT_EQ(ProgressText(12, 0, 2.5, "runs"), "12 runs  elapsed 0:02");
  EXPECT_EQ(ProgressText(250'000'000, 1'000'000'000, 1.0, "bytes", "read"),
            "[#####---------------]  250.0/1000.0 MB  25%  elapsed 0:01  ETA 0:03  read");
  // More done than the total (a file that grew): capped, not past 100%.
  EXPECT_EQ(ProgressText(12, 10, 4.0, "runs"), "[####################]  10/10 runs  100%  elapsed 0:04  ETA 0:00");
}

std::string Drawn(std::FILE* file) {
  std::fflush(file);
  std::rewind(file);
  std::string text;
  char buffer[4096];
  for (size_t n; (n = std::fread(buffer, 1, sizeof(buffer), file)) > 0;) text.append(buffer, n);
  return text;
}

TEST(ProgressLineTest, DrawnFromOneSecondOnAtMostEveryTenthAndErased) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressLine line(file, /*enabled=*/true);
    line.Draw(1, 4, 0.5, "runs");  // before one second: nothing
    EXPECT_FALSE(line.shown());
    line.Draw(2, 4, 1.0, "runs");
    EXPECT_TRUE(line.shown());
    line.Draw(3, 4, 1.05, "runs");  // within 0.1 s of the last: not redrawn
    line.Draw(3, 4, 1.2, "runs");
  }  // erased
  const std::string text = Drawn(file);
  std::fclose(file);
  std::string expected;
  for (const auto& [done, elapsed] : {std::pair<uint64_t, double>{2, 1.0}, {3, 1.2}}) {
    expected.append("\r").append(ProgressText(done, 4, elapsed, "runs")).append("\033[K");
  }
  expected.append("\r\033[K");
  EXPECT_EQ(text, expected);
}

TEST(ProgressLineTest, DisabledDrawsNothing) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  {
    ProgressLine line(file, /*enabled=*/false);
    line.Draw(2, 4, 5.0, "runs");
    EXPECT_FALSE(line.shown());
  }
  EXPECT_EQ(Drawn(file), "");
  std::fclose(file);
}

}  // namespace
}  // namespace petrsim
