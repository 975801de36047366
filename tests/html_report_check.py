#!/usr/bin/python3
"""Checks a page of `petrsim sweep --html` or `petrsim diagnose --html` (tests/html_report.sh) against
the same command's --json: it must parse as XML (xml.etree, stricter than a browser), hold the plots
(SVG), and show the numbers the JSON has, drawn where the plot's own axis puts them.

  html_report_check.py sweep PAGE SWEEP_JSON          (the JSON of `sweep --json --runs`)
  html_report_check.py diagnose PAGE DIAGNOSE_JSON REPORT_TXT

Exit 0, or 1 naming the first difference.
"""
import json
import math
import re
import sys
import xml.etree.ElementTree as ET

XHTML = "{http://www.w3.org/1999/xhtml}"
SVG = "{http://www.w3.org/2000/svg}"
Z95 = 1.959963984540054


def fail(message):
    print(f"html_report_check: {message}", file=sys.stderr)
    sys.exit(1)


def expect(condition, message):
    if not condition:
        fail(message)


def wilson(k, n):
    if n == 0:
        return 0.0, 1.0
    p = k / n
    d = 1 + Z95 * Z95 / n
    centre = (p + Z95 * Z95 / (2 * n)) / d
    half = Z95 / d * math.sqrt(p * (1 - p) / n + Z95 * Z95 / (4 * n * n))
    return max(0.0, centre - half), min(1.0, centre + half)


def classes(element):
    return element.get("class", "").split()


def svgs(root, css_class):
    found = [s for s in root.iter(SVG + "svg") if css_class in classes(s)]
    expect(len(found) == 1, f"expected one <svg class=... {css_class}>, found {len(found)}")
    return found[0]


def shapes(svg, tag, css_class):
    return [e for e in svg.iter(SVG + tag) if css_class in classes(e)]


def tooltip(element):
    title = element.find(SVG + "title")
    return "" if title is None else title.text


def axis_map(svg, attribute):
    """The plot's own axis: value -> pixel along x ('x') or y ('y'), from its tick labels (their values) and
    grid lines (where they are drawn)."""
    anchor = "middle" if attribute == "x" else "end"  # x ticks are centred under the axis, y ticks left of it
    values = sorted(float(t.text) for t in svg.iter(SVG + "text")
                    if "label" in classes(t) and t.get("text-anchor") == anchor
                    and re.fullmatch(r"-?\d+(\.\d+)?", t.text or ""))
    other = "y" if attribute == "x" else "x"
    pixels = sorted(float(g.get(attribute + "1")) for g in shapes(svg, "line", "grid")
                    if g.get(attribute + "1") == g.get(attribute + "2") and g.get(other + "1") != g.get(other + "2"))
    if attribute == "y":
        pixels.reverse()  # up the page
    expect(len(values) >= 2 and len(values) == len(pixels), f"axis {attribute}: ticks {values}, grid {pixels}")
    v0, p0, v1, p1 = values[0], pixels[0], values[-1], pixels[-1]
    return lambda value: p0 + (value - v0) / (v1 - v0) * (p1 - p0)


def near(a, b, what):
    expect(abs(a - b) <= 0.6, f"{what}: drawn at {a:.1f} px, the number says {b:.1f} px")


def cell(row, css_class):
    found = [td for td in row.iter(XHTML + "td") if css_class in classes(td)]
    expect(len(found) == 1, f"row {row.get('data-combination')}: no cell {css_class}")
    return found[0].text or ""


def seconds(ns):
    return "-" if ns is None else f"{ns / 1e9:.3f}"


def check_table(root, sweep):
    rows = [tr for tr in root.iter(XHTML + "tr") if "combination" in classes(tr)]
    combinations = sweep["combinations"]
    expect(len(rows) == len(combinations), f"{len(rows)} table rows for {len(combinations)} combinations")
    for row, c in zip(rows, combinations):
        where = f"combination {c['combination']}"
        values = [td.text for td in row.iter(XHTML + "td") if "value" in classes(td)]
        expect(values == list(c["values"].values()), f"{where}: values {values}, JSON {c['values']}")
        low, high = wilson(c["not_completed"], c["run_count"])
        expected = {
            "runs": str(c["run_count"]),
            "not-completed": str(c["not_completed"]),
            "hang-p": f"{c['hang_probability']:.3f}",
            "wilson-low": f"{low:.3f}",
            "wilson-high": f"{high:.3f}",
            "hang-median": seconds(c["time_to_hang"]["median_ns"]),
            "hang-p90": seconds(c["time_to_hang"]["p90_ns"]),
            "mean-breaks": f"{c['mean_stream_breaks']:.2f}",
        }
        for css_class, text in expected.items():
            expect(cell(row, css_class) == text, f"{where}: {css_class} shows {cell(row, css_class)}, expected {text}")


def check_hang_probability(root, sweep):
    svg = svgs(root, "hang-probability")
    x = axis_map(svg, "x")
    dots = shapes(svg, "circle", "estimate")
    combinations = sweep["combinations"]
    expect(len(dots) == len(combinations), f"{len(dots)} hang probability dots for {len(combinations)} combinations")
    bars = [line for line in shapes(svg, "line", "interval") if tooltip(line)]
    for dot, bar, c in zip(dots, bars, combinations):
        p = c["hang_probability"]
        low, high = wilson(c["not_completed"], c["run_count"])
        near(float(dot.get("cx")), x(p), f"combination {c['combination']} hang probability {p}")
        near(float(bar.get("x1")), x(low), f"combination {c['combination']} Wilson low {low}")
        near(float(bar.get("x2")), x(high), f"combination {c['combination']} Wilson high {high}")
        text = f"p = {p:.3f}, 95% Wilson interval [{low:.3f}, {high:.3f}]"
        expect(text in tooltip(dot), f"the tooltip '{tooltip(dot)}' does not say '{text}'")


def check_time_to_hang(root, sweep):
    svg = svgs(root, "time-to-hang")
    y = axis_map(svg, "y")
    hanging = [c for c in sweep["combinations"] if c["time_to_hang"]["runs"] > 0]
    lines = [p for p in svg.iter(SVG + "polyline") if "ecdf" in classes(p)]
    expect(len(lines) == len(hanging), f"{len(lines)} ECDF lines for {len(hanging)} combinations that hang")
    for line, c in zip(lines, hanging):
        points = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
        reached = c["time_to_hang"]["runs"] / c["run_count"]
        near(points[-1][1], y(reached), f"combination {c['combination']}: the ECDF ends at {reached}")
        steps = sum(1 for a, b in zip(points, points[1:]) if a[0] == b[0] and a[1] != b[1])
        times = {r["time_to_hang_ns"] for r in c["runs"] if r["time_to_hang_ns"] is not None}
        expect(steps == len(times) or steps == c["time_to_hang"]["runs"],
               f"combination {c['combination']}: {steps} ECDF steps for {len(times)} distinct times to hang")


def check_stream_breaks(root, sweep):
    svg = svgs(root, "stream-breaks")
    x = axis_map(svg, "x")
    runs = {r["run"]: r for c in sweep["combinations"] for r in c["runs"]}
    dots = shapes(svg, "circle", "dot")
    expect(len(dots) == len(runs), f"{len(dots)} stream break dots for {len(runs)} runs")
    for dot in dots:
        m = re.match(r"run (\d+) .*: (\d+) stream breaks", tooltip(dot))
        expect(m is not None, f"a dot's tooltip names no run: {tooltip(dot)}")
        run = runs[int(m.group(1))]
        expect(int(m.group(2)) == run["stream_breaks"], f"run {run['run']}: {m.group(2)} breaks shown")
        near(float(dot.get("cx")), x(run["stream_breaks"]), f"run {run['run']}'s dot")


def check_sweep(page, sweep_json):
    root = ET.parse(page).getroot()
    with open(sweep_json) as f:
        sweep = json.load(f)
    title = root.find(f"{XHTML}head/{XHTML}title").text
    expect(sweep["sweep"]["scenario"] in title, f"the title '{title}' does not name the scenario")
    expect(len(list(root.iter(SVG + "svg"))) == 3, "expected three plots")
    check_table(root, sweep)
    check_hang_probability(root, sweep)
    check_time_to_hang(root, sweep)
    check_stream_breaks(root, sweep)
    legend = " ".join(p.text or "" for p in root.iter(XHTML + "p"))
    expect("Wilson score interval" in legend, "the legend does not name the Wilson score interval")


def rank_list(ranks):
    out, i = [], 0
    while i < len(ranks):
        j = i
        while j + 1 < len(ranks) and ranks[j + 1] == ranks[j] + 1:
            j += 1
        out.append(f"{ranks[i]}-{ranks[j]}" if j > i + 1 else ", ".join(map(str, ranks[i:j + 1])))
        i = j + 1
    return ", ".join(out) or "-"


def check_diagnose(page, diagnose_json, report_txt):
    root = ET.parse(page).getroot()
    with open(diagnose_json) as f:
        diagnosis = json.load(f)
    with open(report_txt) as f:
        report = f.read()
    pre = [p for p in root.iter(XHTML + "pre") if "report" in classes(p)]
    expect(len(pre) == 1 and pre[0].text == report, "the page's report is not what diagnose printed")
    groups = diagnosis["groups"]
    expect(groups, "the diagnosis names no stuck collective")
    timelines = [s for s in root.iter(SVG + "svg") if "timeline" in classes(s)]
    expect(len(timelines) == min(len(groups), 4), f"{len(timelines)} timelines for {len(groups)} stuck collectives")
    missing = [s.text for s in root.iter(XHTML + "span") if "missing-ranks" in classes(s)]
    waiting = [s.text for s in root.iter(XHTML + "span") if "waiting-ranks" in classes(s)]
    for k, (group, svg) in enumerate(zip(groups, timelines)):
        expect(missing[k] == rank_list(group["missing_ranks"]), f"missing ranks {missing[k]}, JSON {group}")
        expect(waiting[k] == rank_list(group["waiting_ranks"]), f"waiting ranks {waiting[k]}, JSON {group}")
        stuck = shapes(svg, "rect", "stuck")
        expect(len(stuck) == len(group["waiting_ranks"]), f"{len(stuck)} stuck bars, waiting {group['waiting_ranks']}")
        name = f"{group['op']} seq {group['seq']} on {group['pg_id']}"
        for bar in stuck:
            expect(name in tooltip(bar), f"a stuck bar's tooltip '{tooltip(bar)}' does not name {name}")
        expect(len(shapes(svg, "rect", "missing")) == len(group["missing_ranks"]), "one pale row per missing rank")
        labels = {int(m.group(1)) for t in svg.iter(SVG + "text") for m in [re.match(r"rank (\d+) ", t.text or "")] if m}
        expect(labels == set(group["missing_ranks"]) | set(group["waiting_ranks"]), f"rows for ranks {labels}")
    cause = [p.text for p in root.iter(XHTML + "p") if "cause" in classes(p)]
    expect(cause == ([diagnosis["cause"]] if diagnosis["cause"] else []), f"the cause shown: {cause}")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "sweep":
        check_sweep(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 5 and sys.argv[1] == "diagnose":
        check_diagnose(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        fail(__doc__)


if __name__ == "__main__":
    main()
