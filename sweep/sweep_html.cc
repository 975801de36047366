// Sweeps, the page of `--html` (sweep.h): per combination the hang probability with its 95%
// Wilson score interval, the time-to-hang distribution (an ECDF) and the stream breaks of every
// run (a strip plot), with the summary table; one self-contained XHTML file (base/html_page.h).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/html_page.h"
#include "sweep/sweep_internal.h"

namespace petrsim::sweep_internal {
namespace {

// Bounds on the page's size (STYLE 7): rows of the per-combination plots, ECDF series and their
// steps, and dots per combination in the strip plot. The table lists every combination.
constexpr uint64_t kPlotCombinationsMax = 200;
constexpr size_t kEcdfSeriesMax = 8;
constexpr size_t kEcdfStepsMax = 1000;
constexpr uint64_t kStripDotsMax = 500;

constexpr double kPlotWidth = 760;
constexpr double kRowHeight = 22;
constexpr double kTopMargin = 12;
constexpr double kBottomMargin = 44;

double Seconds(int64_t ns) { return static_cast<double>(ns) * 1e-9; }

uint64_t PlottedCombinations(const SweepIdentity& identity) {
  return std::min(identity.Combinations(), kPlotCombinationsMax);
}

// The left margin of the per-combination plots: wide enough for the longest label.
double LabelWidth(const SweepIdentity& identity) {
  size_t longest = 0;
  for (uint64_t c = 0; c < PlottedCombinations(identity); ++c) {
    longest = std::max(longest, identity.Describe(c).size());
  }
  return std::clamp(static_cast<double>(longest) * 6.2 + 12, 80.0, 320.0);
}

std::string PlotCapNote(const SweepIdentity& identity) {
  if (identity.Combinations() <= kPlotCombinationsMax) return "";
  return fmt::format(" The plots show the first {} of the {} combinations; the table lists all.", kPlotCombinationsMax,
                     identity.Combinations());
}

std::string HangProbabilityPlot(const SweepIdentity& identity, const std::vector<CombinationSummary>& summaries) {
  const uint64_t rows = PlottedCombinations(identity);
  const double left = LabelWidth(identity);
  const double bottom = kTopMargin + kRowHeight * static_cast<double>(rows);
  SvgCanvas svg(kPlotWidth, bottom + kBottomMargin, "hang probability per combination with 95% Wilson intervals",
                "plot hang-probability");
  const LinearScale x{0, 1, left + 10, kPlotWidth - 20};
  svg.XAxis(x, bottom, kTopMargin, 11, 1, "hang probability (runs not completed / runs)");
  for (uint64_t c = 0; c < rows; ++c) {
    const CombinationSummary& summary = summaries[c];
    const double y = kTopMargin + kRowHeight * (static_cast<double>(c) + 0.5);
    const ProportionInterval interval = WilsonInterval(summary.not_completed, summary.runs);
    const std::string tooltip =
        fmt::format("{}: {}/{} runs not completed, p = {}, 95% Wilson interval [{}, {}]", identity.Describe(c),
                    summary.not_completed, summary.runs, HtmlNumber(summary.HangProbability(), 3),
                    HtmlNumber(interval.low, 3), HtmlNumber(interval.high, 3));
    svg.Text(left - 6, y + 4, identity.Describe(c), "end");
    svg.Line(x(interval.low), y, x(interval.high), y, "interval", tooltip);
    svg.Line(x(interval.low), y - 5, x(interval.low), y + 5, "interval");
    svg.Line(x(interval.high), y - 5, x(interval.high), y + 5, "interval");
    svg.Circle(x(summary.HangProbability()), y, 4, "estimate", tooltip);
  }
  return svg.Finish();
}

// The ECDF's steps (seconds, fraction of all the combination's runs hung by then), thinned to at
// most kEcdfStepsMax by nearest rank.
std::vector<std::pair<double, double>> EcdfSteps(const CombinationSummary& summary) {
  std::vector<std::pair<double, double>> steps;
  const size_t n = summary.times_to_hang.size();
  const size_t count = std::min(n, kEcdfStepsMax);
  for (size_t j = 1; j <= count; ++j) {
    const size_t k = (j * n + count - 1) / count;  // 1-based rank of the j-th step kept
    steps.emplace_back(Seconds(summary.times_to_hang[k - 1]),
                       static_cast<double>(k) / static_cast<double>(summary.runs));
  }
  return steps;
}

// The combinations whose time to hang is drawn: the first kEcdfSeriesMax with one.
std::vector<uint64_t> EcdfSeries(const SweepIdentity& identity, const std::vector<CombinationSummary>& summaries) {
  std::vector<uint64_t> series;
  for (uint64_t c = 0; c < identity.Combinations() && series.size() < kEcdfSeriesMax; ++c) {
    if (!summaries[c].times_to_hang.empty()) series.push_back(c);
  }
  return series;
}

std::string TimeToHangPlot(const SweepIdentity& identity, const std::vector<CombinationSummary>& summaries,
                           const std::vector<uint64_t>& series) {
  double time_max = 0;
  for (const uint64_t c : series) time_max = std::max(time_max, Seconds(summaries[c].times_to_hang.back()));
  const double left = 70, bottom = 262, top = kTopMargin + 24;
  SvgCanvas svg(kPlotWidth, bottom + kBottomMargin, "time to hang, cumulative per combination", "plot time-to-hang");
  const LinearScale x{0, time_max > 0 ? time_max * 1.05 : 1, left, kPlotWidth - 20};
  const LinearScale y{0, 1, bottom, top};
  svg.XAxis(x, bottom, top, 9, time_max * 1.05 >= 10 ? 0 : 2, "time to hang (virtual seconds)");
  svg.YAxis(y, left, kPlotWidth - 20, 6, 1, "fraction of the combination's runs hung");
  for (size_t s = 0; s < series.size(); ++s) {
    const CombinationSummary& summary = summaries[series[s]];
    std::vector<double> points = {x(0), y(0)};
    double fraction = 0;
    for (const auto& [seconds, reached] : EcdfSteps(summary)) {
      points.insert(points.end(), {x(seconds), y(fraction), x(seconds), y(reached)});
      fraction = reached;
    }
    points.insert(points.end(), {x.pixel_max, y(fraction)});
    const std::string tooltip =
        fmt::format("{}: {} of {} runs hung; median {} s, p90 {} s", identity.Describe(series[s]),
                    summary.times_to_hang.size(), summary.runs, HtmlNumber(Seconds(*summary.time_to_hang_median), 3),
                    HtmlNumber(Seconds(*summary.time_to_hang_p90), 3));
    svg.Polyline(points, fmt::format("ecdf series{}", s), tooltip);
    const double legend_y = top + 14 + 16 * static_cast<double>(s);
    svg.Line(left + 10, legend_y - 4, left + 34, legend_y - 4, fmt::format("ecdf series{}", s));
    svg.Text(left + 40, legend_y, identity.Describe(series[s]));
  }
  return svg.Finish();
}

std::string TimeToHangSection(const SweepIdentity& identity, const std::vector<CombinationSummary>& summaries) {
  std::string out = "<h2>Time to hang</h2>\n";
  const std::vector<uint64_t> series = EcdfSeries(identity, summaries);
  if (series.empty()) return out + "<p class=\"legend\">No run hung: there is no time to hang to show.</p>\n";
  out += TimeToHangPlot(identity, summaries, series);
  out += fmt::format(
      "<p class=\"legend\">Empirical cumulative distribution, one line per combination: the fraction of the "
      "combination's runs (all of them, so each line ends at its hang probability) whose time to hang (when the "
      "waiting ranks blocked, virtual time) is at most x.{}{}</p>\n",
      series.size() == kEcdfSeriesMax ? fmt::format(" At most {} combinations are drawn.", kEcdfSeriesMax) : "",
      std::any_of(series.begin(), series.end(),
                  [&](uint64_t c) { return summaries[c].times_to_hang.size() > kEcdfStepsMax; })
          ? fmt::format(" Lines of more than {} runs are drawn through {} nearest-rank quantiles.", kEcdfStepsMax,
                        kEcdfStepsMax)
          : "");
  return out;
}

std::string StreamBreaksPlot(const SweepIdentity& identity, const std::vector<CombinationSummary>& summaries,
                             const std::vector<RunRecord>& records) {
  const uint64_t rows = PlottedCombinations(identity);
  const double left = LabelWidth(identity);
  const double row_height = kRowHeight * 1.5;
  const double bottom = kTopMargin + row_height * static_cast<double>(rows);
  uint64_t breaks_max = 0;
  for (uint64_t run = 0; run < rows * identity.seeds; ++run)
    breaks_max = std::max(breaks_max, records[run].stream_breaks);
  SvgCanvas svg(kPlotWidth, bottom + kBottomMargin, "stream breaks per run", "plot stream-breaks");
  const LinearScale x{0, static_cast<double>(std::max<uint64_t>(breaks_max, 1)) * 1.05, left + 10, kPlotWidth - 20};
  svg.XAxis(x, bottom, kTopMargin, 11, 0, "stream breaks in the run");
  for (uint64_t c = 0; c < rows; ++c) {
    const double middle = kTopMargin + row_height * (static_cast<double>(c) + 0.5);
    svg.Text(left - 6, middle + 4, identity.Describe(c), "end");
    const uint64_t dots = std::min<uint64_t>(identity.seeds, kStripDotsMax);
    for (uint64_t i = 0; i < dots; ++i) {
      const RunRecord& record = records[c * identity.seeds + i];
      // Spread vertically by seed index (no randomness: the page is the same for the same sweep).
      const double jitter = (static_cast<double>((i * 7) % 11) / 10.0 - 0.5) * row_height * 0.6;
      svg.Circle(x(static_cast<double>(record.stream_breaks)), middle + jitter, 3, "dot",
                 fmt::format("run {} (seed index {}, job.seed {}): {} stream breaks, {}", record.run, record.seed_index,
                             record.job_seed, record.stream_breaks, record.outcome));
    }
    const double mean = x(summaries[c].mean_stream_breaks);
    svg.Line(mean, middle - row_height * 0.4, mean, middle + row_height * 0.4, "mean",
             fmt::format("{}: mean {} stream breaks per run", identity.Describe(c),
                         HtmlNumber(summaries[c].mean_stream_breaks, 2)));
  }
  return svg.Finish();
}

std::string Cell(const std::string& text, const char* css_class) {
  return fmt::format("<td class=\"{}\">{}</td>", css_class, HtmlEscape(text));
}

std::string OptionalSeconds(const std::optional<int64_t>& ns) { return ns ? HtmlNumber(Seconds(*ns), 3) : "-"; }

std::string SummaryRow(const SweepIdentity& identity, const CombinationSummary& summary, uint64_t c) {
  std::string row = fmt::format("<tr class=\"combination\" data-combination=\"{}\">", c);
  for (const std::string& value : identity.Values(c)) row += Cell(value, "value");
  const ProportionInterval interval = WilsonInterval(summary.not_completed, summary.runs);
  row += Cell(std::to_string(summary.runs), "number runs");
  row += Cell(std::to_string(summary.not_completed), "number not-completed");
  row += Cell(HtmlNumber(summary.HangProbability(), 3), "number hang-p");
  row += Cell(HtmlNumber(interval.low, 3), "number wilson-low");
  row += Cell(HtmlNumber(interval.high, 3), "number wilson-high");
  row += Cell(OptionalSeconds(summary.time_to_hang_median), "number hang-median");
  row += Cell(OptionalSeconds(summary.time_to_hang_p90), "number hang-p90");
  row += Cell(summary.mean_iterations_per_s ? HtmlNumber(*summary.mean_iterations_per_s, 3) : "-",
              "number iterations-per-s");
  row += Cell(HtmlNumber(summary.mean_stream_breaks, 2), "number mean-breaks");
  std::string outcomes;
  for (size_t o = 0; o < OutcomeNames().size(); ++o) {
    if (summary.outcome_counts[o] == 0) continue;
    outcomes += fmt::format("{}{} {}", outcomes.empty() ? "" : ", ", OutcomeNames()[o], summary.outcome_counts[o]);
  }
  return row + Cell(outcomes, "outcomes") + "</tr>\n";
}

std::string SummaryTable(const SweepIdentity& identity, const std::vector<CombinationSummary>& summaries) {
  std::string out = "<table class=\"summary\">\n<thead><tr>";
  for (const SweepAxis& axis : identity.vary) out += "<th>" + HtmlEscape(axis.path) + "</th>";
  out +=
      "<th>runs</th><th>not completed</th><th>hang p</th><th>95% low</th><th>95% high</th>"
      "<th>time to hang median (s)</th><th>p90 (s)</th><th>it/s</th><th>breaks/run</th><th>outcomes</th>"
      "</tr></thead>\n<tbody>\n";
  for (uint64_t c = 0; c < summaries.size(); ++c) out += SummaryRow(identity, summaries[c], c);
  return out + "</tbody>\n</table>\n";
}

std::string Header(const SweepIdentity& identity) {
  std::string out =
      fmt::format("<h1>petrsim sweep of {}</h1>\n<p class=\"identity\">", HtmlEscape(identity.scenario_path));
  out += fmt::format("{} combination{} x {} seed{} = {} runs (scenario FNV-1a 64 {})", identity.Combinations(),
                     identity.Combinations() == 1 ? "" : "s", identity.seeds, identity.seeds == 1 ? "" : "s",
                     identity.Runs(), HtmlEscape(identity.scenario_hash));
  for (const SweepAxis& axis : identity.vary) {
    out += "<br/>--vary " + HtmlEscape(axis.path + "=" + fmt::format("{}", fmt::join(axis.values, ",")));
  }
  for (const std::string& set : identity.sets) out += "<br/>--set " + HtmlEscape(set);
  out += fmt::format(
      "<br/>run i of a combination: job.seed = (job.seed + i) mod 2^31, run seed (cost jitter) = {} + i, "
      "i = 0..{}</p>\n",
      identity.seed_base ? std::to_string(*identity.seed_base) : "0", identity.seeds - 1);
  return out;
}

}  // namespace

ProportionInterval WilsonInterval(uint64_t successes, uint64_t trials, double z) {
  if (trials == 0) return {0, 1};
  const double n = static_cast<double>(trials);
  const double p = static_cast<double>(successes) / n;
  const double z2 = z * z;
  const double centre = (p + z2 / (2 * n)) / (1 + z2 / n);
  const double half = z / (1 + z2 / n) * std::sqrt(p * (1 - p) / n + z2 / (4 * n * n));
  return {std::max(0.0, centre - half), std::min(1.0, centre + half)};
}

std::string SweepHtml(const SweepIdentity& identity, const std::vector<RunRecord>& records) {
  const std::vector<CombinationSummary> summaries = Summaries(identity, records);
  std::string body = Header(identity);
  body += "<h2>Hang probability per combination</h2>\n" + HangProbabilityPlot(identity, summaries);
  body += fmt::format(
      "<p class=\"legend\">Dot: the hang probability, the runs that did not complete (hang, desync, rank_died or "
      "limit_reached) over the runs of the combination. Bar: its 95% confidence interval, the Wilson score interval "
      "(z = 1.96), which stays inside [0, 1] and is not empty at 0 or 1 hangs.{}</p>\n",
      PlotCapNote(identity));
  body += SummaryTable(identity, summaries);
  body += TimeToHangSection(identity, summaries);
  body += "<h2>Stream breaks per run</h2>\n" + StreamBreaksPlot(identity, summaries, records);
  body += fmt::format(
      "<p class=\"legend\">One dot per run (spread vertically only to be seen), at its number of stream breaks; the "
      "red tick is the combination's mean per run.{}{}</p>\n",
      identity.seeds > kStripDotsMax ? fmt::format(" The first {} seeds of each combination are drawn.", kStripDotsMax)
                                     : "",
      PlotCapNote(identity));
  return HtmlPage("petrsim sweep of " + identity.scenario_path, body);
}

}  // namespace petrsim::sweep_internal
