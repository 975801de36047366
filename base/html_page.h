// A small writer of self-contained HTML pages with inline SVG plots (`sweep --html`,
// `diagnose --html`): escaping, the page around a body, and an SVG canvas with linear axes. The
// pages are XHTML-shaped (every element closed, every attribute quoted, no entities but the five
// of XML) so that an XML parser reads them as well as a browser does; no script, no external
// resource. Every string that comes from input must pass through HtmlEscape (the canvas escapes
// the text and tooltips it is given).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace petrsim {

// `text` with & < > " ' replaced by their XML entities, safe in element content and in a quoted
// attribute. Bytes that XML 1.0 forbids (control characters other than tab, newline and carriage
// return) become U+FFFD, so that no input makes the page ill-formed.
std::string HtmlEscape(std::string_view text);

// A fixed-point number with `decimals` digits, as the pages print every number ("0.168").
std::string HtmlNumber(double value, int decimals);

// The whole page: doctype, <html> with the XHTML namespace, a <head> with the escaped `title`
// and the pages' style sheet, and `body` (already HTML) inside <body>.
std::string HtmlPage(std::string_view title, std::string_view body);

// A linear map from a domain [domain_min, domain_max] onto pixels [pixel_min, pixel_max]; a
// domain of zero width maps everything to the middle.
struct LinearScale {
  double domain_min = 0, domain_max = 1;
  double pixel_min = 0, pixel_max = 1;
  double operator()(double value) const;
};

// About `count_max` round tick values (1, 2 or 5 times a power of ten apart) covering [low, high].
std::vector<double> NiceTicks(double low, double high, size_t count_max);

// One <svg> element, drawn into with shapes; each shape takes a CSS class (the page's style sheet
// colours them) and an optional tooltip (a <title> child; escaped here).
class SvgCanvas {
 public:
  // `label`: the plot's accessible name (aria-label), escaped here.
  SvgCanvas(double width, double height, std::string_view label, std::string_view css_class = "plot");

  void Rect(double x, double y, double width, double height, std::string_view css_class, std::string_view tooltip = "");
  void Line(double x1, double y1, double x2, double y2, std::string_view css_class, std::string_view tooltip = "");
  void Circle(double cx, double cy, double r, std::string_view css_class, std::string_view tooltip = "");
  // A polyline through `points` (x0, y0, x1, y1, ...).
  void Polyline(const std::vector<double>& points, std::string_view css_class, std::string_view tooltip = "");
  // `anchor`: "start", "middle" or "end".
  void Text(double x, double y, std::string_view text, std::string_view anchor = "start",
            std::string_view css_class = "label");
  // A horizontal axis at pixel row `y` under the plot, its ticks labelled with `decimals` digits,
  // and `title` centred below them; vertical grid lines up to `grid_top`.
  void XAxis(const LinearScale& x, double y, double grid_top, size_t ticks_max, int decimals, std::string_view title);
  // A vertical axis at pixel column `x`, grid lines across to `grid_right`, `title` above it (leave
  // 24 pixels free above the axis for it).
  void YAxis(const LinearScale& y, double x, double grid_right, size_t ticks_max, int decimals, std::string_view title);

  // The finished <svg> element.
  std::string Finish() const;

 private:
  void Shape(std::string_view element, const std::string& attributes, std::string_view css_class,
             std::string_view tooltip);

  double width_, height_;
  std::string label_, css_class_;
  std::string content_;
};

}  // namespace petrsim
