// The HTML/SVG page writer; see html_page.h.
#include "base/html_page.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "base/utf8.h"

namespace petrsim {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

constexpr std::string_view kStyle = R"css(
body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 72em; }
h1 { font-size: 1.4em; } h2 { font-size: 1.15em; margin-top: 1.6em; }
table { border-collapse: collapse; margin: 0.6em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.5em; text-align: left; }
td.number { text-align: right; font-variant-numeric: tabular-nums; }
p.legend { color: #555; font-size: 0.9em; max-width: 60em; }
svg.plot { display: block; margin: 0.5em 0; background: #fff; }
svg .label { font-size: 11px; fill: #222; } svg .axis-title { font-size: 12px; fill: #222; }
svg .axis { stroke: #444; stroke-width: 1; } svg .grid { stroke: #e4e4e4; stroke-width: 1; }
svg .interval { stroke: #1f5fa8; stroke-width: 2; } svg .estimate { fill: #1f5fa8; }
svg .mean { stroke: #b22; stroke-width: 2; } svg .dot { fill: #1f5fa8; fill-opacity: 0.55; }
svg .waiting { fill: #e8a33d; } svg .stuck { fill: #c8322d; } svg .missing { fill: #f4d7d5; }
svg .call { fill: #7a9cc6; } svg .spin { fill: #8e5bb5; } svg .died { stroke: #000; stroke-width: 2; }
svg .ecdf { fill: none; stroke-width: 2; }
svg .series0 { stroke: #1f5fa8; } svg .series1 { stroke: #c8322d; } svg .series2 { stroke: #2f8f3a; }
svg .series3 { stroke: #8e5bb5; } svg .series4 { stroke: #e8a33d; } svg .series5 { stroke: #17a2b8; }
svg .series6 { stroke: #6b4226; } svg .series7 { stroke: #777; }
)css";

}  // namespace

std::string HtmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const size_t length = Utf8SequenceLength(reinterpret_cast<const uint8_t*>(text.data()) + i, text.size() - i);
      if (length == 0) {
        out += kReplacement;
        ++i;
      } else {
        out += text.substr(i, length);
        i += length;
      }
      continue;
    }
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        if ((c < 0x20 && c != '\t' && c != '\n' && c != '\r') || c == 0x7F) {
          out += kReplacement;
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  return out;
}

std::string HtmlNumber(double value, int decimals) {
  if (!std::isfinite(value)) return "-";
  std::string text = fmt::format("{:.{}f}", value, decimals);
  if (text.find_first_not_of("-0.") == std::string::npos && text[0] == '-') text.erase(0, 1);  // "-0.000"
  return text;
}

std::string HtmlPage(std::string_view title, std::string_view body) {
  return fmt::format(
      "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
      "<title>{}</title>\n<style>{}</style>\n</head>\n<body>\n{}</body>\n</html>\n",
      HtmlEscape(title), kStyle, body);
}

double LinearScale::operator()(double value) const {
  if (domain_max == domain_min) return (pixel_min + pixel_max) / 2;
  return pixel_min + (value - domain_min) / (domain_max - domain_min) * (pixel_max - pixel_min);
}

std::vector<double> NiceTicks(double low, double high, size_t count_max) {
  if (!(high > low) || count_max < 2) return {low};
  const double raw = (high - low) / static_cast<double>(count_max - 1);
  const double power = std::pow(10.0, std::floor(std::log10(raw)));
  double step = power * 10;
  for (const double factor : {1.0, 2.0, 5.0}) {
    if (power * factor >= raw) {
      step = power * factor;
      break;
    }
  }
  std::vector<double> ticks;
  for (double k = std::ceil(low / step - 1e-9); k * step <= high + step * 1e-9; k += 1) ticks.push_back(k * step);
  return ticks;
}

SvgCanvas::SvgCanvas(double width, double height, std::string_view label, std::string_view css_class)
    : width_(width), height_(height), label_(label), css_class_(css_class) {}

void SvgCanvas::Shape(std::string_view element, const std::string& attributes, std::string_view css_class,
                      std::string_view tooltip) {
  content_ += fmt::format("<{} class=\"{}\" {}", element, HtmlEscape(css_class), attributes);
  if (tooltip.empty()) {
    content_ += "/>\n";
  } else {
    content_ += fmt::format("><title>{}</title></{}>\n", HtmlEscape(tooltip), element);
  }
}

void SvgCanvas::Rect(double x, double y, double width, double height, std::string_view css_class,
                     std::string_view tooltip) {
  Shape("rect",
        fmt::format("x=\"{:.1f}\" y=\"{:.1f}\" width=\"{:.1f}\" height=\"{:.1f}\"", x, y, std::max(width, 0.0),
                    std::max(height, 0.0)),
        css_class, tooltip);
}

void SvgCanvas::Line(double x1, double y1, double x2, double y2, std::string_view css_class, std::string_view tooltip) {
  Shape("line", fmt::format("x1=\"{:.1f}\" y1=\"{:.1f}\" x2=\"{:.1f}\" y2=\"{:.1f}\"", x1, y1, x2, y2), css_class,
        tooltip);
}

void SvgCanvas::Circle(double cx, double cy, double r, std::string_view css_class, std::string_view tooltip) {
  Shape("circle", fmt::format("cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"{:.1f}\"", cx, cy, r), css_class, tooltip);
}

void SvgCanvas::Polyline(const std::vector<double>& points, std::string_view css_class, std::string_view tooltip) {
  std::string list;
  for (size_t i = 0; i + 1 < points.size(); i += 2) {
    if (!list.empty()) list += ' ';
    list += fmt::format("{:.1f},{:.1f}", points[i], points[i + 1]);
  }
  Shape("polyline", "points=\"" + list + "\"", css_class, tooltip);
}

void SvgCanvas::Text(double x, double y, std::string_view text, std::string_view anchor, std::string_view css_class) {
  content_ += fmt::format("<text class=\"{}\" x=\"{:.1f}\" y=\"{:.1f}\" text-anchor=\"{}\">{}</text>\n",
                          HtmlEscape(css_class), x, y, HtmlEscape(anchor), HtmlEscape(text));
}

void SvgCanvas::XAxis(const LinearScale& x, double y, double grid_top, size_t ticks_max, int decimals,
                      std::string_view title) {
  for (const double tick : NiceTicks(x.domain_min, x.domain_max, ticks_max)) {
    Line(x(tick), grid_top, x(tick), y, "grid");
    Text(x(tick), y + 14, HtmlNumber(tick, decimals), "middle");
  }
  Line(x.pixel_min, y, x.pixel_max, y, "axis");
  Text((x.pixel_min + x.pixel_max) / 2, y + 30, title, "middle", "axis-title");
}

void SvgCanvas::YAxis(const LinearScale& y, double x, double grid_right, size_t ticks_max, int decimals,
                      std::string_view title) {
  for (const double tick : NiceTicks(y.domain_min, y.domain_max, ticks_max)) {
    Line(x, y(tick), grid_right, y(tick), "grid");
    Text(x - 4, y(tick) + 4, HtmlNumber(tick, decimals), "end");
  }
  Line(x, y.pixel_min, x, y.pixel_max, "axis");
  Text(x - 30, std::min(y.pixel_min, y.pixel_max) - 10, title, "start", "axis-title");
}

std::string SvgCanvas::Finish() const {
  return fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"{}\" width=\"{:.0f}\" height=\"{:.0f}\" "
      "viewBox=\"0 0 {:.0f} {:.0f}\" role=\"img\" aria-label=\"{}\">\n{}</svg>\n",
      HtmlEscape(css_class_), width_, height_, width_, height_, HtmlEscape(label_), content_);
}

}  // namespace petrsim
