// The HTML/SVG pages of `--html` (base/html_page.h, sweep/sweep_html.cc, replay/diagnose_html.cc):
// escaping of hostile input, the Wilson interval against hand-computed values, and pages that an
// XML parser would accept (checked here by a small tag-balance reader).
#include "base/html_page.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "replay/diagnose.h"
#include "sweep/sweep_internal.h"

namespace petrsim {
namespace {

using sweep_internal::RunRecord;
using sweep_internal::SweepIdentity;

// "" when `page` is well-formed as far as tags and entities go: every start tag closed in order,
// every attribute value quoted, every '&' an XML entity or a numeric reference; else what is wrong.
std::string WellFormedProblem(const std::string& page) {
  std::vector<std::string> open;
  for (size_t i = 0; i < page.size(); ++i) {
    if (page[i] == '&') {
      static const std::regex entity("^&(amp|lt|gt|quot|apos|#[0-9]+);");
      if (!std::regex_search(page.substr(i, 8), entity)) return "a bare '&' at " + std::to_string(i);
      continue;
    }
    if (page[i] != '<') continue;
    const size_t end = page.find('>', i);
    if (end == std::string::npos) return "an unclosed tag at " + std::to_string(i);
    const std::string tag = page.substr(i + 1, end - i - 1);
    i = end;
    if (tag.rfind("!DOCTYPE", 0) == 0) continue;
    if (tag.find('<') != std::string::npos) return "'<' inside the tag <" + tag + ">";
    if (!tag.empty() && tag[0] == '/') {
      if (open.empty() || open.back() != tag.substr(1)) {
        return "</" + tag.substr(1) + "> closes <" + (open.empty() ? "" : open.back()) + ">";
      }
      open.pop_back();
      continue;
    }
    static const std::regex start(R"(^[a-zA-Z][a-zA-Z0-9-]*(\s+[a-zA-Z][a-zA-Z0-9:-]*="[^"<]*")*\s*/?$)");
    if (!std::regex_match(tag, start)) return "a malformed tag <" + tag + ">";
    if (tag.back() != '/') open.push_back(tag.substr(0, tag.find_first_of(" \t\n/")));
  }
  return open.empty() ? "" : "<" + open.back() + "> never closed";
}

size_t Count(const std::string& text, const std::string& what) {
  size_t count = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++count;
  return count;
}

TEST(HtmlEscapeTest, EscapesTheFiveXmlCharacters) {
  EXPECT_EQ(HtmlEscape("<script>alert(\"x\" & 'y')</script>"),
            "&lt;script&gt;alert(&quot;x&quot; &amp; &#39;y&#39;)&lt;/script&gt;");
  EXPECT_EQ(HtmlEscape("a&amp;b"), "a&amp;amp;b");  // escaped again: the input's text, not markup
}

TEST(HtmlEscapeTest, ReplacesWhatXmlForbidsAndKeepsUtf8) {
  EXPECT_EQ(HtmlEscape(std::string("a\x01"
                                   "b\tc",
                                   5)),
            "a\xEF\xBF\xBD"
            "b\tc");
  EXPECT_EQ(HtmlEscape("sc\xC3\xA8ne"), "sc\xC3\xA8ne");              // è stays
  EXPECT_EQ(HtmlEscape("x\xFFy\xC3"), "x\xEF\xBF\xBDy\xEF\xBF\xBD");  // invalid and cut-short UTF-8
}

TEST(HtmlPageTest, PageAndCanvasAreWellFormed) {
  SvgCanvas svg(100, 50, "<plot> & co");
  svg.Rect(1, 2, 3, 4, "bar", "tip <b>&</b>");
  svg.Text(5, 6, "x < y & \"z\"");
  svg.XAxis(LinearScale{0, 1, 10, 90}, 40, 5, 5, 1, "axis & title");
  const std::string page = HtmlPage("title <&>", svg.Finish());
  EXPECT_EQ(WellFormedProblem(page), "");
  EXPECT_NE(page.find("<title>tip &lt;b&gt;&amp;&lt;/b&gt;</title>"), std::string::npos);
  EXPECT_NE(page.find("aria-label=\"&lt;plot&gt; &amp; co\""), std::string::npos);
  // The checker itself refuses what an unescaped string would make.
  EXPECT_NE(WellFormedProblem("<p>a <script>b</p>"), "");
  EXPECT_NE(WellFormedProblem("<p>a & b</p>"), "");
}

TEST(HtmlPageTest, NiceTicksAndScale) {
  EXPECT_EQ(NiceTicks(0, 1, 11), (std::vector<double>{0, 0.1, 0.2, 0.30000000000000004, 0.4, 0.5, 0.6000000000000001,
                                                      0.7000000000000001, 0.8, 0.9, 1}));
  EXPECT_EQ(NiceTicks(0, 7.35, 11), (std::vector<double>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_DOUBLE_EQ((LinearScale{0, 10, 100, 200})(2.5), 125);
  EXPECT_DOUBLE_EQ((LinearScale{3, 3, 100, 200})(3), 150);
  EXPECT_EQ(HtmlNumber(-0.0001, 3), "0.000");
}

// Values from the Wilson score formula computed by hand (python3, z = 1.959963984540054), and the
// published 50/100 interval [0.4038, 0.5962].
TEST(WilsonIntervalTest, MatchesHandComputedValues) {
  struct Case {
    uint64_t k, n;
    double low, high;
  };
  for (const Case& c : {Case{0, 20, 0.0, 0.161125}, Case{20, 20, 0.838875, 1.0}, Case{7, 20, 0.181192, 0.567146},
                        Case{1, 3, 0.061492, 0.792340}, Case{50, 100, 0.403832, 0.596168}}) {
    const auto interval = sweep_internal::WilsonInterval(c.k, c.n);
    EXPECT_NEAR(interval.low, c.low, 1e-6) << c.k << "/" << c.n;
    EXPECT_NEAR(interval.high, c.high, 1e-6) << c.k << "/" << c.n;
  }
  const auto none = sweep_internal::WilsonInterval(0, 0);
  EXPECT_EQ(none.low, 0);
  EXPECT_EQ(none.high, 1);
}

SweepIdentity HostileIdentity() {
  SweepIdentity identity;
  identity.scenario_path = "scen<script>alert(1)</script>&.pbtxt";
  identity.scenario_hash = "0123456789abcdef";
  identity.vary = {SweepAxis{"job.name", {"<b>bold</b>", "a&b"}}};
  identity.sets = {"job.name=\"quoted\" & 'single'"};
  identity.seeds = 4;
  return identity;
}

// Combination 0: 3 of 4 runs hang (at 1, 2, 3 s); combination 1: none does.
std::vector<RunRecord> Records(const SweepIdentity& identity) {
  std::vector<RunRecord> records;
  for (uint64_t run = 0; run < identity.Runs(); ++run) {
    RunRecord record;
    record.run = run;
    record.combination = run / identity.seeds;
    record.seed_index = static_cast<uint32_t>(run % identity.seeds);
    const bool hang = record.combination == 0 && record.seed_index < 3;
    record.outcome = hang ? "hang" : "completed";
    record.cause = hang ? "sampler<livelock>" : "";
    if (hang) record.time_to_hang_ns = (record.seed_index + 1) * int64_t{1'000'000'000};
    record.stream_breaks = record.seed_index;
    record.iterations_completed = 4;
    record.last_iteration_end_ns = 2'000'000'000;
    records.push_back(record);
  }
  return records;
}

TEST(SweepHtmlTest, EscapesInputAndIsWellFormed) {
  const SweepIdentity identity = HostileIdentity();
  const std::string page = sweep_internal::SweepHtml(identity, Records(identity));
  EXPECT_EQ(WellFormedProblem(page), "");
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find("<b>"), std::string::npos);
  EXPECT_NE(page.find("scen&lt;script&gt;alert(1)&lt;/script&gt;&amp;.pbtxt"), std::string::npos);
  EXPECT_NE(page.find("<td class=\"value\">a&amp;b</td>"), std::string::npos);
  EXPECT_NE(page.find("--set job.name=&quot;quoted&quot; &amp; &#39;single&#39;"), std::string::npos);
}

TEST(SweepHtmlTest, ShowsTheIntervalsAndOnePlotEach) {
  const SweepIdentity identity = HostileIdentity();
  const std::string page = sweep_internal::SweepHtml(identity, Records(identity));
  // 3/4: Wilson [0.300642, 0.954414] (by hand); 0/4: [0, 0.489891].
  EXPECT_NE(page.find("<td class=\"number hang-p\">0.750</td><td class=\"number wilson-low\">0.301</td>"
                      "<td class=\"number wilson-high\">0.954</td>"),
            std::string::npos);
  EXPECT_NE(page.find("<td class=\"number hang-p\">0.000</td><td class=\"number wilson-low\">0.000</td>"
                      "<td class=\"number wilson-high\">0.490</td>"),
            std::string::npos);
  EXPECT_NE(page.find("Wilson score interval"), std::string::npos);
  EXPECT_EQ(Count(page, "<svg "), 3u);
  EXPECT_EQ(Count(page, "class=\"estimate\""), 2u);                // one dot per combination
  EXPECT_EQ(Count(page, "class=\"dot\""), 8u);                     // one per run
  EXPECT_EQ(Count(page, "<polyline class=\"ecdf series0\""), 1u);  // only combination 0 hangs
  EXPECT_EQ(Count(page, "<polyline"), 1u);
  EXPECT_NE(page.find("3 of 4 runs hung; median 2.000 s, p90 3.000 s"), std::string::npos);
}

TEST(DiagnosisHtmlTest, TimelineOfTheStuckCollective) {
  Recordings recordings;
  recordings.format = "petrsim";  // the simulator's virtual clock: times from 0
  recordings.world_size = 3;
  recordings.end_ns = 10'000'000'000;
  recordings.ranks.resize(3);
  CallRecord stuck_call;
  stuck_call.group = "pg<0>";
  stuck_call.seq = 7;
  stuck_call.op = "ALL&REDUCE";
  stuck_call.time_ns = 2'000'000'000;
  CallRecord earlier = stuck_call;
  earlier.seq = 6;
  earlier.completed = true;
  earlier.time_ns = 1'000'000'000;
  for (uint32_t r : {0u, 1u}) recordings.ranks[r].calls = {earlier, stuck_call};
  recordings.ranks[2].calls = {earlier};
  recordings.ranks[2].progress["pg<0>"].last_completed = 6;
  recordings.ranks[2].died = "killed by <SIGKILL>";
  recordings.ranks[2].died_ns = 1'500'000'000;
  Diagnosis diagnosis;
  diagnosis.format = "petrsim";
  diagnosis.world_size = 3;
  diagnosis.cause = "rank 2 died: killed by <SIGKILL>";
  StuckCollective stuck;
  stuck.group = "pg<0>";
  stuck.seq = 7;
  stuck.op = "ALL&REDUCE";
  stuck.missing_ranks = {2};
  stuck.waiting_ranks = {0, 1};
  stuck.time_ns = 2'000'000'000;
  diagnosis.stuck = {stuck};
  const std::string page = DiagnosisHtml(diagnosis, &recordings, "report <with> & marks");
  EXPECT_EQ(WellFormedProblem(page), "");
  EXPECT_EQ(Count(page, "<svg "), 1u);
  EXPECT_EQ(Count(page, "<rect class=\"stuck\""), 2u);  // ranks 0 and 1 wait in seq 7
  EXPECT_EQ(Count(page, "<rect class=\"call\""), 3u);   // seq 6 completed on every rank
  EXPECT_EQ(Count(page, "<rect class=\"missing\""), 1u);
  EXPECT_EQ(Count(page, "<line class=\"died\""), 1u);
  EXPECT_NE(page.find(">rank 2 missing (at 6)</text>"), std::string::npos);
  EXPECT_NE(page.find("<span class=\"missing-ranks\">2</span>"), std::string::npos);
  EXPECT_NE(page.find("rank 0: ALL&amp;REDUCE seq 7 on pg&lt;0&gt;, issued at 2.000 s, pending (the stuck collective)"),
            std::string::npos);
  EXPECT_NE(page.find("<pre class=\"report\">report &lt;with&gt; &amp; marks</pre>"), std::string::npos);
  EXPECT_EQ(page.find("<SIGKILL>"), std::string::npos);
}

}  // namespace
}  // namespace petrsim
