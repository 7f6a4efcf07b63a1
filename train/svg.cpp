#include "train/svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace glass::train {

namespace {

constexpr double kWidth = 640, kHeight = 360;
constexpr double kLeft = 70, kRight = 150, kTop = 30, kBottom = 50;  // margins

// Maps data values on one axis to pixels, linearly or on log10.
struct Scale {
  bool log = false;
  double lo = 0, hi = 1;    // data range (log10 of it when log)
  double from = 0, to = 1;  // pixel range

  double value(double v) const { return log ? std::log10(v) : v; }
  double px(double v) const { return from + (value(v) - lo) / (hi - lo) * (to - from); }
};

Scale make_scale(bool log, const std::vector<double>& vs, double from, double to) {
  Scale s{log, 0, 1, from, to};
  bool any = false;
  for (double v : vs) {
    if (log && v <= 0) continue;
    const double x = s.value(v);
    s.lo = any ? std::min(s.lo, x) : x;
    s.hi = any ? std::max(s.hi, x) : x;
    any = true;
  }
  if (log) {  // whole decades
    s.lo = std::floor(s.lo);
    s.hi = std::max(std::ceil(s.hi), s.lo + 1);
  } else if (s.hi - s.lo < 1e-12) {
    s.lo -= 0.5;
    s.hi += 0.5;
  }
  return s;
}

// Five ticks evenly spaced on a linear axis; one per decade on a log axis.
std::vector<double> ticks(const Scale& s) {
  std::vector<double> t;
  if (s.log) {
    for (double e = s.lo; e <= s.hi + 1e-9; e += 1) t.push_back(std::pow(10.0, e));
  } else {
    for (int i = 0; i <= 4; ++i) t.push_back(s.lo + (s.hi - s.lo) * i / 4);
  }
  return t;
}

std::string tick_text(double v) { return fmt::format("{:.3g}", v); }

std::string svg_open(const std::string& title, double height) {
  return fmt::format(
      "<svg width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} "
      "{1}\" font-family=\"sans-serif\" font-size=\"11\">\n<text x=\"{2}\" y=\"18\" "
      "font-size=\"14\" font-weight=\"bold\">{3}</text>\n",
      kWidth, height, kLeft, html_escape(title));
}

}  // namespace

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
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
        out += c;
    }
  }
  return out;
}

std::string svg_plot(const std::string& title, const Axis& x, const Axis& y,
                     const std::vector<Series>& series) {
  std::vector<double> xs, ys;
  for (const Series& s : series)
    for (auto [px, py] : s.points) {
      xs.push_back(px);
      ys.push_back(py);
    }
  if (x.zero) xs.push_back(0);
  if (y.zero) ys.push_back(0);
  const Scale sx = make_scale(x.log, xs, kLeft, kWidth - kRight);
  const Scale sy = make_scale(y.log, ys, kHeight - kBottom, kTop);
  std::string out = svg_open(title, kHeight);
  // Frame, ticks with grid lines, axis labels.
  out += fmt::format(
      "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" "
      "stroke=\"#444\"/>\n",
      kLeft, kTop, kWidth - kRight - kLeft, kHeight - kBottom - kTop);
  for (double t : ticks(sx))
    out += fmt::format(
        "<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
        "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4}</text>\n",
        sx.px(t), kTop, kHeight - kBottom, kHeight - kBottom + 14, tick_text(t));
  for (double t : ticks(sy))
    out += fmt::format(
        "<line x1=\"{1}\" y1=\"{0:.1f}\" x2=\"{2}\" y2=\"{0:.1f}\" stroke=\"#ddd\"/>"
        "<text x=\"{3}\" y=\"{0:.1f}\" text-anchor=\"end\">{4}</text>\n",
        sy.px(t), kLeft, kWidth - kRight, kLeft - 4, tick_text(t));
  out += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
                     (kLeft + kWidth - kRight) / 2, kHeight - 12, html_escape(x.label));
  out += fmt::format(
      "<text transform=\"translate(14 {}) rotate(-90)\" text-anchor=\"middle\">{}"
      "</text>\n",
      (kTop + kHeight - kBottom) / 2, html_escape(y.label));
  // The data, then a legend entry per series.
  for (size_t k = 0; k < series.size(); ++k) {
    const Series& s = series[k];
    std::string path;
    for (size_t i = 0; i < s.points.size(); ++i) {
      const auto [vx, vy] = s.points[i];
      if ((x.log && vx <= 0) || (y.log && vy <= 0)) continue;
      if (i < s.tags.size() && !s.tags[i].empty())
        out +=
            fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"{}\" font-size=\"10\">{}</text>\n",
                        sx.px(vx) + 5, sy.px(vy) - 5, s.color, html_escape(s.tags[i]));
      if (s.lines) {
        path += fmt::format("{}{:.1f},{:.1f} ", path.empty() ? "M" : "L", sx.px(vx), sy.px(vy));
      } else {
        out += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\">", sx.px(vx),
                           sy.px(vy), s.color);
        if (i < s.labels.size()) out += "<title>" + html_escape(s.labels[i]) + "</title>";
        out += "</circle>\n";
      }
    }
    if (!path.empty())
      out += fmt::format("<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>\n",
                         path, s.color);
    const double ly = kTop + 12 + 16 * static_cast<double>(k);
    out += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\">{}</text>\n",
        kWidth - kRight + 10, ly - 9, s.color, kWidth - kRight + 24, ly, html_escape(s.name));
  }
  return out + "</svg>\n";
}

std::string svg_bars(const std::string& title,
                     const std::vector<std::pair<std::string, double>>& bars,
                     const std::string& unit) {
  constexpr double row = 18, label_width = 200, bar_width = kWidth - label_width - 90;
  double most = 0;
  for (const auto& b : bars) most = std::max(most, b.second);
  const double height = kTop + row * static_cast<double>(bars.size()) + 10;
  std::string out = svg_open(title, height);
  for (size_t i = 0; i < bars.size(); ++i) {
    const double y = kTop + row * static_cast<double>(i);
    const double w = most > 0 ? bars[i].second / most * bar_width : 0;
    out += fmt::format(
        "<text x=\"{}\" y=\"{:.1f}\" text-anchor=\"end\">{}</text><rect x=\"{}\" y=\"{:.1f}\" "
        "width=\"{:.1f}\" height=\"{}\" fill=\"#4878d0\"/><text x=\"{:.1f}\" y=\"{:.1f}\">{:.3g} "
        "{}</text>\n",
        label_width - 6, y + 12, html_escape(bars[i].first), label_width, y + 2, w, row - 4,
        label_width + w + 4, y + 12, bars[i].second, html_escape(unit));
  }
  return out + "</svg>\n";
}

}  // namespace glass::train
