// `petrsim diagnose --html`, the page (diagnose.h): per root stuck collective a per-rank timeline
// around it (the ranks that wait in it and since when, the ranks missing from it and what the
// recordings hold of them: their pending calls, spinning getitems, stalls, death), the table of
// stuck collectives, and the text report; one self-contained XHTML file (base/html_page.h).
// Only what the recordings and the diagnosis hold is drawn.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "base/html_page.h"
#include "replay/diagnose.h"
#include "replay/diagnose_internal.h"

namespace petrsim {
namespace {

using diagnose_internal::RankList;
using diagnose_internal::Shape;

// Bounds on the page (STYLE 7): timelines drawn, rows per timeline, calls per rank either side
// of the stuck one.
constexpr size_t kTimelinesMax = 4;
constexpr size_t kTimelineRanksMax = 64;
constexpr int64_t kCallsAround = 8;

constexpr double kWidth = 860, kLeft = 180, kRight = 20, kTop = 12, kRowHeight = 26, kBottom = 60;

// Seconds from the recordings' origin.
// The view runs from first_ns to view_end_ns: the end of the recordings, or, where that lies far
// beyond the last thing that starts (a watchdog 30 minutes on), a little after that start, with
// the marks still open then cut at the right edge.
struct TimeAxis {
  int64_t origin_ns = 0, first_ns = 0, end_ns = 0, view_end_ns = 0;
  bool Clipped() const { return view_end_ns < end_ns; }
  double Seconds(int64_t ns) const { return static_cast<double>(ns - origin_ns) * 1e-9; }
};

std::vector<uint32_t> TimelineRanks(const StuckCollective& stuck) {
  std::set<uint32_t> ranks(stuck.missing_ranks.begin(), stuck.missing_ranks.end());
  ranks.insert(stuck.waiting_ranks.begin(), stuck.waiting_ranks.end());
  std::vector<uint32_t> rows(ranks.begin(), ranks.end());
  if (rows.size() > kTimelineRanksMax) rows.resize(kTimelineRanksMax);
  return rows;
}

bool Contains(const std::vector<uint32_t>& ranks, uint32_t rank) {
  return std::find(ranks.begin(), ranks.end(), rank) != ranks.end();
}

// The calls of `rank` drawn: on the stuck collective's group, within kCallsAround of its sequence number.
std::vector<const CallRecord*> CallsAround(const RankRecording& rank, const StuckCollective& stuck) {
  std::vector<const CallRecord*> calls;
  for (const CallRecord& call : rank.calls) {
    if (call.group == stuck.group && call.seq >= stuck.seq - kCallsAround && call.seq <= stuck.seq + kCallsAround) {
      calls.push_back(&call);
    }
  }
  return calls;
}

// The span the timeline shows: from the earliest thing drawn to the end of the recordings.
TimeAxis TimelineSpan(const StuckCollective& stuck, const Recordings* recordings, const std::vector<uint32_t>& rows) {
  TimeAxis axis;
  axis.first_ns = stuck.time_ns;
  axis.end_ns = stuck.time_ns;
  axis.view_end_ns = stuck.time_ns;
  if (recordings == nullptr) return axis;
  axis.origin_ns = recordings->origin_ns;
  axis.end_ns = std::max(recordings->end_ns, stuck.time_ns);
  int64_t last_start_ns = stuck.time_ns;
  const auto note = [&](int64_t ns) {
    axis.first_ns = std::min(axis.first_ns, ns);
    last_start_ns = std::max(last_start_ns, ns);
  };
  for (const uint32_t r : rows) {
    if (r >= recordings->ranks.size()) continue;
    const RankRecording& rank = recordings->ranks[r];
    for (const CallRecord* call : CallsAround(rank, stuck)) note(call->time_ns);
    for (const StuckGetitem& spin : rank.spins) note(spin.since_ns);
    for (const WorkerStall& stall : rank.stalls) note(stall.since_ns);
    if (rank.died) note(rank.died_ns);
  }
  axis.end_ns = std::max(axis.end_ns, last_start_ns);  // dumps say no end: the last call issued
  const int64_t span_ns = std::max<int64_t>(last_start_ns - axis.first_ns, 1'000'000);
  axis.view_end_ns = std::min(axis.end_ns, last_start_ns + span_ns / 2);
  if (axis.end_ns - last_start_ns <= span_ns) axis.view_end_ns = axis.end_ns;
  // Dumps stamp calls with the wall clock (seconds since 1970 mean nothing here): from the first call drawn.
  if (axis.origin_ns == 0 && recordings->format != "petrsim") axis.origin_ns = axis.first_ns;
  return axis;
}

std::string CallTooltip(uint32_t r, const CallRecord& call, const StuckCollective& stuck, const TimeAxis& axis) {
  std::string where;
  if (call.iteration) where = fmt::format(", iteration {}, {}", *call.iteration, call.step);
  return fmt::format("rank {}: {} seq {} on {}{}, issued at {} s, {}{}", r, call.op, call.seq, call.group, where,
                     HtmlNumber(axis.Seconds(call.time_ns), 3), call.completed ? "completed" : "pending",
                     call.seq == stuck.seq ? " (the stuck collective)" : "");
}

// What the recordings hold of rank `r` near the stuck collective, drawn in its row.
void DrawRecordedRank(SvgCanvas& svg, const LinearScale& x, double y, uint32_t r, const RankRecording& rank,
                      const StuckCollective& stuck, const TimeAxis& axis) {
  // The stuck call as a bar to the end of the view, then every other call as a tick where it was
  // issued (the pending ones after it would otherwise hide it): completed blue, pending orange.
  const std::vector<const CallRecord*> calls = CallsAround(rank, stuck);
  for (const CallRecord* call : calls) {
    if (call->seq != stuck.seq || call->completed) continue;
    const double start = x(axis.Seconds(call->time_ns));
    svg.Rect(start, y + 4, x.pixel_max - start, kRowHeight - 8, "stuck", CallTooltip(r, *call, stuck, axis));
  }
  for (const CallRecord* call : calls) {
    if (call->seq == stuck.seq && !call->completed) continue;
    const double start = x(axis.Seconds(call->time_ns));
    svg.Rect(start - 1, y + 2, 3, kRowHeight - 4, call->completed ? "call" : "waiting",
             CallTooltip(r, *call, stuck, axis));
  }
  // Each spinning or stalled getitem in a lane of its own within the row.
  const double lanes = static_cast<double>(std::max<size_t>(rank.spins.size() + rank.stalls.size(), 1));
  const double lane_height = std::min(8.0, (kRowHeight - 10) / lanes);
  double lane_y = y + kRowHeight / 2 - lane_height * lanes / 2;
  for (const StuckGetitem& spin : rank.spins) {
    const double start = x(axis.Seconds(spin.since_ns));
    svg.Rect(start, lane_y, x.pixel_max - start, lane_height - 1, "spin",
             fmt::format("rank {}, since {} s: {}", r, HtmlNumber(axis.Seconds(spin.since_ns), 3),
                         spin.report.empty() ? spin.Describe() : spin.report));
    lane_y += lane_height;
  }
  for (const WorkerStall& stall : rank.stalls) {
    const double start = x(axis.Seconds(stall.since_ns));
    svg.Rect(start, lane_y, x.pixel_max - start, lane_height - 1, "spin",
             fmt::format("rank {}, worker {}, batch {}, slot {}: getitem not returned since {} s{}", r, stall.worker,
                         stall.batch, stall.slot, HtmlNumber(axis.Seconds(stall.since_ns), 3),
                         stall.stack.empty() ? "" : ", in " + stall.stack.back()));
    lane_y += lane_height;
  }
  if (rank.died) {
    const double at = x(axis.Seconds(rank.died_ns));
    svg.Line(at, y + 2, at, y + kRowHeight - 2, "died",
             fmt::format("rank {} died at {} s: {}", r, HtmlNumber(axis.Seconds(rank.died_ns), 3), *rank.died));
  }
}

std::string RowLabel(uint32_t r, const StuckCollective& stuck, const Recordings* recordings) {
  if (!Contains(stuck.missing_ranks, r)) return fmt::format("rank {} waits", r);
  if (Contains(stuck.without_file, r)) return fmt::format("rank {} no file", r);
  if (recordings != nullptr && r < recordings->ranks.size()) {
    const auto& progress = recordings->ranks[r].progress;
    const auto it = progress.find(stuck.group);
    if (it != progress.end() && it->second.last_completed >= 0) {
      return fmt::format("rank {} missing (at {})", r, it->second.last_completed);
    }
  }
  return fmt::format("rank {} missing", r);
}

std::string AxisTitle(const Recordings& recordings, const TimeAxis& axis) {
  if (recordings.origin_ns != 0) return "seconds from the job's first recorded event";
  if (axis.origin_ns != 0) return "seconds from the earliest call drawn";
  return "seconds (the recorded clock)";
}

std::string Timeline(const StuckCollective& stuck, const Recordings* recordings) {
  const std::vector<uint32_t> rows = TimelineRanks(stuck);
  const TimeAxis axis = TimelineSpan(stuck, recordings, rows);
  const double bottom = kTop + kRowHeight * static_cast<double>(rows.size());
  SvgCanvas svg(kWidth, bottom + kBottom,
                fmt::format("per-rank timeline around {} seq {} on {}", stuck.op, stuck.seq, stuck.group),
                "plot timeline");
  const double span = axis.Seconds(axis.view_end_ns) - axis.Seconds(axis.first_ns);
  const double pad = span > 0 ? span * 0.03 : 1;
  const LinearScale x{axis.Seconds(axis.first_ns) - pad, axis.Seconds(axis.view_end_ns) + pad, kLeft, kWidth - kRight};
  if (recordings == nullptr) {
    svg.Text(x.pixel_min, bottom + 16, "the recordings give no per-rank times: the ranks only");
  } else {
    svg.XAxis(x, bottom, kTop, 9, span >= 100 ? 0 : 3, AxisTitle(*recordings, axis));
  }
  if (axis.Clipped()) {
    svg.Text(x.pixel_max, bottom + 48,
             fmt::format("cut here; the recordings end at {} s", HtmlNumber(axis.Seconds(axis.end_ns), 3)), "end");
  }
  for (size_t k = 0; k < rows.size(); ++k) {
    const uint32_t r = rows[k];
    const double y = kTop + kRowHeight * static_cast<double>(k);
    const bool missing = Contains(stuck.missing_ranks, r);
    svg.Text(kLeft - 6, y + kRowHeight / 2 + 4, RowLabel(r, stuck, recordings), "end");
    if (missing) {
      svg.Rect(x.pixel_min, y + 2, x.pixel_max - x.pixel_min, kRowHeight - 4, "missing",
               fmt::format("rank {} never joined {} seq {} on {}", r, stuck.op, stuck.seq, stuck.group));
    }
    if (recordings != nullptr && r < recordings->ranks.size()) {
      DrawRecordedRank(svg, x, y, r, recordings->ranks[r], stuck, axis);
    } else if (!missing) {
      svg.Rect(x.pixel_min, y + 4, x.pixel_max - x.pixel_min, kRowHeight - 8, "stuck",
               fmt::format("rank {} waits in {} seq {} on {}", r, stuck.op, stuck.seq, stuck.group));
    }
  }
  return svg.Finish();
}

std::string TimelineSection(const StuckCollective& stuck, const Recordings* recordings) {
  std::string where;
  if (stuck.iteration) where = fmt::format(", iteration {}, {}", *stuck.iteration, stuck.step);
  std::string out =
      fmt::format("<h2 class=\"timeline\">{} seq {} on process group {}{}</h2>\n", HtmlEscape(stuck.op), stuck.seq,
                  HtmlEscape(stuck.group + (stuck.desc.empty() ? "" : " (" + stuck.desc + ")")), HtmlEscape(where));
  out += fmt::format(
      "<p class=\"ranks\">missing ranks: <span class=\"missing-ranks\">{}</span>; waiting ranks: "
      "<span class=\"waiting-ranks\">{}</span></p>\n",
      HtmlEscape(RankList(stuck.missing_ranks)), HtmlEscape(RankList(stuck.waiting_ranks)));
  out += Timeline(stuck, recordings);
  const size_t ranks = stuck.missing_ranks.size() + stuck.waiting_ranks.size();
  out += fmt::format(
      "<p class=\"legend\">One row per rank of the group that is missing from the collective or waits in it. Red: "
      "the stuck collective, from when the rank issued it to the end of the recordings (a view cut short says where "
      "they end); orange ticks: other collectives of the group, issued and still pending; blue ticks: completed ones "
      "(within {} sequence numbers of the stuck one, where "
      "the recordings keep them); pale red row: the rank never joined it (its label says the last sequence number "
      "it completed on the group, where known); purple: a DataLoader getitem spinning or stalled; black line: the "
      "rank died. Hover a mark for its details.{}</p>\n",
      kCallsAround,
      ranks > kTimelineRanksMax ? fmt::format(" The first {} of the ranks are drawn.", kTimelineRanksMax) : "");
  return out;
}

std::string StuckTable(const Diagnosis& diagnosis) {
  std::string out =
      "<table class=\"stuck\">\n<thead><tr><th>group</th><th>desc</th><th>seq</th><th>op</th><th>sizes</th>"
      "<th>dtype</th><th>missing ranks</th><th>waiting ranks</th><th>iteration</th><th>step</th><th>root</th>"
      "</tr></thead>\n<tbody>\n";
  for (const StuckCollective& s : diagnosis.stuck) {
    const std::vector<std::string> cells = {s.group,
                                            s.desc,
                                            std::to_string(s.seq),
                                            s.op,
                                            Shape(s.sizes),
                                            s.dtype.empty() ? "-" : s.dtype,
                                            RankList(s.missing_ranks),
                                            RankList(s.waiting_ranks),
                                            s.iteration ? std::to_string(*s.iteration) : "-",
                                            s.step.empty() ? "-" : s.step,
                                            s.root ? "root" : "consequence"};
    out += "<tr class=\"stuck-collective\">";
    for (const std::string& cell : cells) out += "<td>" + HtmlEscape(cell) + "</td>";
    out += "</tr>\n";
  }
  return out + "</tbody>\n</table>\n";
}

}  // namespace

std::string DiagnosisHtml(const Diagnosis& diagnosis, const Recordings* recordings, const std::string& report) {
  std::string body =
      fmt::format("<h1>petrsim diagnose: {} ranks, {}</h1>\n", diagnosis.world_size, HtmlEscape(diagnosis.format));
  if (diagnosis.cause) body += "<p class=\"cause\">" + HtmlEscape(*diagnosis.cause) + "</p>\n";
  if (diagnosis.stuck.empty()) {
    body += "<p>Every recorded collective was joined by every member of its group: no timeline to draw.</p>\n";
  } else {
    size_t drawn = 0;
    for (const StuckCollective& stuck : diagnosis.stuck) {
      if (!stuck.root || drawn == kTimelinesMax) continue;
      body += TimelineSection(stuck, recordings);
      ++drawn;
    }
    body += "<h2>Stuck collectives</h2>\n" + StuckTable(diagnosis);
  }
  body += "<h2>Report</h2>\n<pre class=\"report\">" + HtmlEscape(report) + "</pre>\n";
  return HtmlPage(fmt::format("petrsim diagnose: {} ranks", diagnosis.world_size), body);
}

}  // namespace petrsim
