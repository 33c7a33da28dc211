#pragma once
// The HTML report's SVG drawing (report/html.cpp): line charts over worker
// counts, message sizes or continuous axes, their ticks and labels.
#include <string>
#include <utility>
#include <vector>

namespace dlscale::report {

constexpr int kColorCount = 8;
/// The palette, in series order.
extern const char* const kColors[kColorCount];

/// `s` with HTML's special characters escaped.
std::string esc(const std::string& s);
/// The smallest 1, 2 or 5 × 10^k that is >= v.
double nice_step(double v);
/// "1500", "2.5": an axis tick.
std::string tick_label(double v);
/// "4", "64K", "256M": a message size in bytes (powers of 1024).
std::string bytes_label(double v);

struct Series {
  std::string name;
  std::vector<std::pair<double, double>> points;  ///< (x: a category or, on a continuous axis, a value; y)
  int color = 0;
  bool dashed = false;
  const char* stroke = nullptr;  ///< a colour instead of the palette's
};

/// The x axis of a line chart: its title, how its ticks read, and whether
/// x is a category (evenly spaced) or a quantity (placed by value from 0).
struct XAxis {
  const char* label = "workers";
  std::string (*tick)(double) = tick_label;
  bool continuous = false;
};

/// A line chart over categorical x values (the worker counts, or message
/// sizes: evenly spaced, so doubling sizes read as a log scale), or over a
/// continuous axis. The y axis runs from `y_floor` to at least `y_min_top`,
/// or with `log_y` over the decades of the positive ys (points at y <= 0
/// are then left out of the drawing).
std::string line_chart(const std::string& title, const std::string& y_label,
                       const std::vector<double>& xs, const std::vector<Series>& series,
                       double y_min_top, const XAxis& axis = {}, double y_floor = 0,
                       bool log_y = false);

/// Charts side by side.
std::string chart_row(const std::vector<std::string>& charts);

}  // namespace dlscale::report
