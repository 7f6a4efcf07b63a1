// Inline SVG charts for the HTML report, drawn by hand so that the page needs nothing from the
// network: line/scatter plots on linear or log axes, and horizontal bar charts.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace glass::train {

struct Series {
  Series(std::string name_, std::string color_, std::vector<std::pair<double, double>> points_ = {},
         bool lines_ = true)
      : name(std::move(name_)),
        color(std::move(color_)),
        points(std::move(points_)),
        lines(lines_) {}

  std::string name, color;
  std::vector<std::pair<double, double>> points;  // (x, y)
  bool lines = true;                              // false: a marker per point (scatter)
  std::vector<std::string> labels;                // optional, one per point: shown on hover
  std::vector<std::string> tags;                  // optional, one per point: written beside it
};

struct Axis {
  std::string label;
  bool log = false;   // log10 scale; points <= 0 are left out
  bool zero = false;  // a linear axis that starts at 0 (amounts, not changes)
};

// A plot of the series with ticks, axis labels and a legend, as an <svg> element.
std::string svg_plot(const std::string& title, const Axis& x, const Axis& y,
                     const std::vector<Series>& series);

// One horizontal bar per (label, value), longest first as given, values printed with `unit`.
std::string svg_bars(const std::string& title,
                     const std::vector<std::pair<std::string, double>>& bars,
                     const std::string& unit);

// Escapes &, <, >, " and ' for HTML text and attributes.
std::string html_escape(const std::string& s);

}  // namespace glass::train
