#include "report/svg_chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>

namespace dlscale::report {
namespace {

/// Where a chart puts x values, and the ticks it labels.
struct XPlacement {
  std::vector<double> ticks;
  std::function<double(double)> px;
};

/// Categories: `xs` evenly spaced with a margin. Continuous: 0 to a round
/// number past the largest x of `series`, about six ticks.
XPlacement place_x(const std::vector<double>& xs, const std::vector<Series>& series, const XAxis& axis, int left,
                   int pw) {
  XPlacement p;
  if (!axis.continuous) {
    p.ticks = xs;
    p.px = [xs, left, pw](double x) {
      const auto it = std::find(xs.begin(), xs.end(), x);
      const double i = static_cast<double>(it - xs.begin());
      return xs.size() == 1 ? left + pw / 2.0 : left + 20 + i * (pw - 40) / (xs.size() - 1.0);
    };
    return p;
  }
  double xmax = 0;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) xmax = std::max(xmax, x);
  }
  const double step = nice_step(xmax / 6);
  const int n = std::max(1, static_cast<int>(std::ceil(xmax / step - 1e-9)));
  for (int i = 0; i <= n; ++i) p.ticks.push_back(i * step);
  const double xtop = n * step;
  p.px = [left, pw, xtop](double x) { return left + x / xtop * pw; };
  return p;
}

/// Where a chart puts y values, and the ticks it labels.
struct YPlacement {
  std::vector<double> ticks;
  std::function<double(double)> py;
};

/// Linear: `y_floor` to a round number of at least `y_min_top` and every y,
/// about five ticks. Logarithmic: the decades around the positive ys, ticks
/// at 1, 2 and 5 of each when they are few.
YPlacement place_y(const std::vector<Series>& series, double y_min_top, double y_floor, bool log_y,
                   int top, int ph) {
  YPlacement p;
  double ymax = y_min_top, ymin = 0;
  for (const Series& s : series) {
    for (const auto& [x, y] : s.points) {
      ymax = std::max(ymax, y);
      if (y > 0) ymin = ymin > 0 ? std::min(ymin, y) : y;
    }
  }
  if (log_y && ymin > 0) {
    const double lo = std::floor(std::log10(ymin) + 1e-9),
                 hi = std::max(lo + 1, std::ceil(std::log10(ymax) - 1e-9));
    for (double k = lo; k <= hi; ++k) {
      for (double m : {1.0, 2.0, 5.0}) {
        if ((m == 1 || hi - lo <= 2) && (k < hi || m == 1))
          p.ticks.push_back(m * std::pow(10.0, k));
      }
    }
    p.py = [top, ph, lo, hi](double y) { return top + ph - (std::log10(y) - lo) / (hi - lo) * ph; };
    return p;
  }
  const double step = nice_step((ymax - y_floor) / 5);
  const double ytop = y_floor + std::ceil((ymax - y_floor) / step - 1e-9) * step;
  for (double y = y_floor; y <= ytop + step / 2; y += step) p.ticks.push_back(y);
  p.py = [top, ph, y_floor, ytop](double y) {
    return top + ph - (y - y_floor) / (ytop - y_floor) * ph;
  };
  return p;
}

}  // namespace

const char* const kColors[kColorCount] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"};

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      case '\'': o += "&#39;"; break;
      default: o += c;
    }
  }
  return o;
}

/// The smallest 1, 2 or 5 × 10^k that is >= v.
double nice_step(double v) {
  if (v <= 0) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0}) {
    if (m * p >= v * (1 - 1e-9)) return m * p;
  }
  return 10 * p;
}

std::string tick_label(double v) {
  if (std::fabs(v) >= 1000) return fmt::format("{:.0f}", v);
  return fmt::format("{:g}", v);
}


/// "4", "64K", "256M": a message size in bytes (powers of 1024).
std::string bytes_label(double v) {
  if (v >= 1024.0 * 1024 * 1024) return fmt::format("{:g}G", v / (1024.0 * 1024 * 1024));
  if (v >= 1024.0 * 1024) return fmt::format("{:g}M", v / (1024.0 * 1024));
  if (v >= 1024.0) return fmt::format("{:g}K", v / 1024.0);
  return fmt::format("{:g}", v);
}


/// A line chart over categorical x values (the worker counts, or message
/// sizes: evenly spaced, so doubling sizes read as a log scale), or over a
/// continuous axis. The y axis runs from `y_floor` to at least `y_min_top`.
std::string line_chart(const std::string& title, const std::string& y_label,
                       const std::vector<double>& xs, const std::vector<Series>& series,
                       double y_min_top, const XAxis& axis, double y_floor, bool log_y) {
  // The legend goes under the plot, one line per series (dashed ideal lines
  // share their series' colour and are explained in the title).
  int legend_rows = 0;
  for (const Series& s : series) legend_rows += s.dashed ? 0 : 1;
  const int w = 610, plot_h = 300, left = 64, right = 24, top = 36, bottom = 56;
  const int h = plot_h + 8 + 18 * legend_rows;
  const int pw = w - left - right, ph = plot_h - top - bottom;
  const XPlacement placement = place_x(xs, series, axis, left, pw);
  const auto& px = placement.px;
  const YPlacement y_placement = place_y(series, y_min_top, y_floor, log_y, top, ph);
  const auto& py = y_placement.py;
  std::ostringstream o;
  o << fmt::format(R"svg(<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">)svg",
                   w, h, w, h, esc(title))
    << "\n";
  o << fmt::format(R"svg(<text x="{}" y="20" class="ct">{}</text>)svg", left, esc(title)) << "\n";
  for (double y : y_placement.ticks) {
    o << fmt::format(R"svg(<line x1="{}" x2="{}" y1="{:.1f}" y2="{:.1f}" class="grid"/><text x="{}" y="{:.1f}" class="yt">{}</text>)svg",
                     left, left + pw, py(y), py(y), left - 6, py(y) + 4, tick_label(y))
      << "\n";
  }
  for (double x : placement.ticks) {
    o << fmt::format(R"svg(<text x="{:.1f}" y="{}" class="xt">{}</text>)svg", px(x), top + ph + 18, axis.tick(x)) << "\n";
  }
  o << fmt::format(R"svg(<line x1="{}" x2="{}" y1="{}" y2="{}" class="axis"/><line x1="{}" x2="{}" y1="{}" y2="{}" class="axis"/>)svg",
                   left, left + pw, top + ph, top + ph, left, left, top, top + ph)
    << "\n";
  o << fmt::format(R"svg(<text x="{:.1f}" y="{}" class="xl">{}</text>)svg", left + pw / 2.0, plot_h - 14, axis.label) << "\n";
  o << fmt::format(R"svg(<text transform="translate(16 {:.1f}) rotate(-90)" class="xl">{}</text>)svg", top + ph / 2.0,
                   esc(y_label))
    << "\n";
  int legend_y = plot_h + 8;
  for (const Series& s : series) {
    const char* color = s.stroke != nullptr ? s.stroke : kColors[s.color % kColorCount];
    std::string pts;
    for (const auto& [x, y] : s.points) {
      if (!log_y || y > 0) pts += fmt::format("{:.1f},{:.1f} ", px(x), py(y));
    }
    o << fmt::format(R"svg(<polyline points="{}" fill="none" stroke="{}" stroke-width="{}"{}/>)svg", pts, color,
                     s.dashed ? 1.5 : 2.5, s.dashed ? R"svg( stroke-dasharray="6 4")svg" : "")
      << "\n";
    if (!s.dashed) {
      for (const auto& [x, y] : s.points) {
        if (log_y && y <= 0) continue;
        const std::string at = axis.continuous ? fmt::format("{} {}", axis.label, axis.tick(x))
                                               : fmt::format("{} {}", axis.tick(x), axis.label);
        o << fmt::format(R"svg(<circle cx="{:.1f}" cy="{:.1f}" r="4" fill="{}"><title>{}: {}, {}</title></circle>)svg",
                         px(x), py(y), color, esc(s.name), at, fmt::format(y >= 1 ? "{:.1f}" : "{:.3g}", y))
          << "\n";
      }
    }
    if (s.dashed) continue;
    o << fmt::format(R"svg(<line x1="{}" x2="{}" y1="{}" y2="{}" stroke="{}" stroke-width="2.5"/>)svg", left,
                     left + 24, legend_y, legend_y, color)
      << fmt::format(R"svg(<text x="{}" y="{}" class="lg">{}</text>)svg", left + 30, legend_y + 4, esc(s.name)) << "\n";
    legend_y += 18;
  }
  o << "</svg>\n";
  return o.str();
}

/// Charts side by side.
std::string chart_row(const std::vector<std::string>& charts) {
  std::string o = "<div class=\"charts\">\n";
  for (const std::string& c : charts) o += c;
  return o + "</div>\n";
}

}  // namespace dlscale::report
