// Inline SVG plots (svg_plot.h).
#include "trainer/plot/svg_plot.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <sstream>

namespace fs = std::filesystem;

namespace wavetrain::plot {
namespace {

// One axis: data values to pixels, on log10 of the values when `log`.
struct Scale {
  bool log = false;
  double lo = 0, hi = 1;  // the ends, in axis units (log10 of the values when log)
  double p0 = 0, p1 = 1;  // their pixels
  double unit(double v) const { return log ? std::log10(std::max(v, 1e-300)) : v; }
  double operator()(double v) const { return p0 + (unit(v) - lo) / (hi - lo) * (p1 - p0); }
  double value(double u) const { return log ? std::pow(10.0, u) : u; }
};

// A scale over the finite values (and, on log axes, the positive ones) with `pad` of the span added
// at both ends, so that points do not sit on the frame. A single value lands in the middle.
Scale make_scale(const std::vector<double>& values, bool log, double p0, double p1, double pad) {
  Scale s;
  s.log = log, s.p0 = p0, s.p1 = p1;
  double lo = INFINITY, hi = -INFINITY;
  for (double v : values)
    if (std::isfinite(v) && (!log || v > 0)) lo = std::min(lo, s.unit(v)), hi = std::max(hi, s.unit(v));
  if (!std::isfinite(lo)) lo = 0, hi = 1;
  if (!(hi > lo)) {
    lo -= 0.5, hi += 0.5;
  } else {
    const double margin = pad * (hi - lo);
    lo -= margin, hi += margin;
  }
  s.lo = lo, s.hi = hi;
  return s;
}

// About five ticks between a and b, 1, 2 or 5 times a power of ten apart.
std::vector<double> linear_ticks(double a, double b) {
  std::vector<double> out;
  if (!(b > a) || !std::isfinite(a) || !std::isfinite(b)) return out;
  const double raw = (b - a) / 4, magnitude = std::pow(10.0, std::floor(std::log10(raw))), f = raw / magnitude;
  const double step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * magnitude;
  // Whole multiples of the step, so that 0.1 + 0.2 drift never shows in a label.
  for (int64_t k = static_cast<int64_t>(std::ceil(a / step)); k <= static_cast<int64_t>(std::floor(b / step)); ++k)
    out.push_back(static_cast<double>(k) * step);
  return out;
}

// Tick values (data units) inside the scale: on log axes the powers of ten, with 2 and 5 times
// them when fewer than two powers fit, and linear ticks when even those are fewer than two.
std::vector<double> ticks(const Scale& s) {
  if (!s.log) return linear_ticks(s.lo, s.hi);
  std::vector<double> out;
  for (int k = static_cast<int>(std::ceil(s.lo - 1e-9)); k <= static_cast<int>(std::floor(s.hi + 1e-9)); ++k) out.push_back(std::pow(10.0, k));
  if (out.size() >= 2) return out;
  out.clear();
  for (int k = static_cast<int>(std::floor(s.lo)); k <= static_cast<int>(std::ceil(s.hi)); ++k)
    for (double m : {1.0, 2.0, 5.0}) {
      const double v = m * std::pow(10.0, k);
      if (s.unit(v) >= s.lo - 1e-9 && s.unit(v) <= s.hi + 1e-9) out.push_back(v);
    }
  if (out.size() >= 2) return out;
  return linear_ticks(s.value(s.lo), s.value(s.hi));
}

std::string data_attributes(const DataAttributes& data) {
  std::string o;
  for (const auto& [name, value] : data) o += " data-" + escape(name) + "='" + escape(value) + "'";
  return o;
}

std::string svg_open(const std::string& css_class, double w, double h, const std::string& title) {
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' class='" << escape(css_class) << "' width='" << w << "' height='" << h
    << "' role='img' aria-label='" << escape(title) << "'>";
  return o.str();
}

}  // namespace

std::string read_text(const fs::path& p) {  // "" when missing: an ifstream that did not open reads nothing
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else if (c == '\'') o += "&#39;";
    else if (c == '"') o += "&quot;";
    else o += c;
  }
  return o;
}

std::string number(double v, int digits) {
  std::ostringstream s;
  s << std::setprecision(digits) << v;
  return s.str();
}

std::string line_plot(const std::string& title, const std::vector<Series>& series, const std::string& x_label, bool log_y) {
  LineOptions options;
  options.x_label = x_label;
  options.log_y = log_y;
  return line_plot(title, series, options);
}

std::string line_plot(const std::string& title, const std::vector<Series>& series, const LineOptions& options) {
  const double w = 640, h = 260, left = 60, right = 20, top = 30, bottom = 40;
  const bool log_x = options.log_x, log_y = options.log_y;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  auto tx = [&](double v) { return log_x ? std::log10(std::max(v, 1e-12)) : v; };
  auto ty = [&](double v) { return log_y ? std::log10(std::max(v, 1e-12)) : v; };
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, tx(s.x[i])), x1 = std::max(x1, tx(s.x[i]));
      y0 = std::min(y0, ty(s.y[i])), y1 = std::max(y1, ty(s.y[i]));
    }
  if (!(x1 > x0)) x1 = x0 + 1;
  if (!(y1 > y0)) y1 = y0 + 1;
  std::ostringstream o;
  o << svg_open(options.css_class, w, h, title);
  o << "<text x='" << left << "' y='18' font-size='14' font-weight='bold'>" << escape(title) << "</text>";
  o << "<rect x='" << left << "' y='" << top << "' width='" << w - left - right << "' height='" << h - top - bottom
    << "' fill='none' stroke='#999'/>";
  auto label_y = [&](double v) { return log_y ? number(std::pow(10.0, v), 3) : number(v, 3); };
  auto label_x = [&](double v) { return log_x ? number(std::pow(10.0, v), 4) : number(v, 4); };
  o << "<text x='" << left - 4 << "' y='" << top + 10 << "' font-size='11' text-anchor='end'>" << label_y(y1) << "</text>";
  o << "<text x='" << left - 4 << "' y='" << h - bottom << "' font-size='11' text-anchor='end'>" << label_y(y0) << "</text>";
  o << "<text x='" << left << "' y='" << h - bottom + 14 << "' font-size='11'>" << label_x(x0) << "</text>";
  o << "<text x='" << w - right << "' y='" << h - bottom + 14 << "' font-size='11' text-anchor='end'>" << label_x(x1) << "</text>";
  o << "<text x='" << (left + w - right) / 2 << "' y='" << h - 8 << "' font-size='11' text-anchor='middle'>" << escape(options.x_label)
    << "</text>";
  if (!options.y_label.empty()) {
    const double mid = (top + h - bottom) / 2;
    o << "<text x='14' y='" << mid << "' font-size='11' text-anchor='middle' transform='rotate(-90 14 " << mid << ")'>"
      << escape(options.y_label) << "</text>";
  }
  int legend = 0;
  for (const Series& s : series) {
    o << "<polyline" << (s.css_class.empty() ? "" : " class='" + escape(s.css_class) + "'") << data_attributes(s.data)
      << " fill='none' stroke='" << s.colour << "' stroke-width='" << number(s.width) << "' points='";
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      const double px = left + (tx(s.x[i]) - x0) / (x1 - x0) * (w - left - right);
      const double py = h - bottom - (ty(s.y[i]) - y0) / (y1 - y0) * (h - top - bottom);
      o << number(px, 6) << "," << number(py, 6) << " ";
    }
    o << "'/>";
    if (!s.name.empty())
      o << "<text x='" << w - right - 4 << "' y='" << top + 14 + 14 * legend++ << "' font-size='11' text-anchor='end' fill='" << s.colour
        << "'>" << escape(s.name) << "</text>";
  }
  o << "</svg>";
  return o.str();
}

std::string bar_chart(const std::string& title, const std::vector<std::string>& categories, const std::vector<std::string>& series,
                      const std::vector<std::string>& colours, const std::vector<std::vector<double>>& values, const std::string& unit,
                      int decimals) {
  size_t longest = 0;  // labels are written at 40 degrees below the axis: room for the longest
  for (const std::string& c : categories) longest = std::max(longest, c.size());
  const double group = 36.0 * static_cast<double>(std::max<size_t>(1, series.size())) + 24, top = 40, plot_h = 180,
               label = 5.5 * static_cast<double>(longest), left = std::max(50.0, 0.77 * label);
  const double w = std::max(320.0, left + group * static_cast<double>(categories.size()) + 20), h = top + plot_h + 20 + 0.65 * label;
  const double rounding = std::pow(10.0, decimals);
  double hi = 0;
  for (const auto& row : values)
    for (double v : row)
      if (std::isfinite(v)) hi = std::max(hi, v);
  if (!(hi > 0)) hi = 1;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' class='bars' width='" << w << "' height='" << h << "' role='img' aria-label='"
    << escape(title) << "'><text x='" << left << "' y='18' font-size='14' font-weight='bold'>" << escape(title) << "</text>";
  o << "<line x1='" << left << "' y1='" << top + plot_h << "' x2='" << w - 10 << "' y2='" << top + plot_h << "' stroke='#999'/>";
  for (size_t s = 0; s < series.size(); ++s)
    o << "<rect x='" << left + 120 * static_cast<double>(s) << "' y='24' width='10' height='10' fill='" << colours[s] << "'/><text x='"
      << left + 14 + 120 * static_cast<double>(s) << "' y='33' font-size='11'>" << escape(series[s]) << "</text>";
  for (size_t c = 0; c < categories.size(); ++c) {
    const double x0 = left + group * static_cast<double>(c) + 12;
    for (size_t s = 0; s < series.size(); ++s) {
      const double v = values[s][c];
      if (!std::isfinite(v)) continue;
      const double bh = v / hi * (plot_h - 16), x = x0 + 36 * static_cast<double>(s);
      o << "<rect class='bar' data-series='" << escape(series[s]) << "' data-category='" << escape(categories[c]) << "' data-value='"
        << number(v, 6) << "' x='" << x << "' y='" << number(top + plot_h - bh, 6) << "' width='30' height='" << number(bh, 6)
        << "' fill='" << colours[s] << "'/><text x='" << x + 15 << "' y='" << number(top + plot_h - bh - 3, 6)
        << "' font-size='10' text-anchor='middle'>" << number(std::round(v * rounding) / rounding, 6) << unit << "</text>";
    }
    o << "<text x='" << x0 + 18 * static_cast<double>(series.size()) << "' y='" << top + plot_h + 14
      << "' font-size='10' text-anchor='end' transform='rotate(-40 " << x0 + 18 * static_cast<double>(series.size()) << " "
      << top + plot_h + 14 << ")'>" << escape(categories[c]) << "</text>";
  }
  o << "</svg>";
  return o.str();
}

std::string scatter_plot(const std::string& title, const std::vector<Point>& points, const ScatterOptions& options) {
  const double w = options.width, h = options.height, left = 56, right = 14, top = 28, bottom = 46;
  const bool categorical = !options.x_categories.empty();
  std::vector<double> xs, ys;
  for (const Point& p : points) xs.push_back(p.x), ys.push_back(p.y);
  // Categories sit at whole numbers, half a slot in from each side.
  const Scale sx = categorical ? Scale{false, -0.5, static_cast<double>(options.x_categories.size()) - 0.5, left, w - right}
                               : make_scale(xs, options.log_x, left, w - right, 0.05);
  const Scale sy = make_scale(ys, options.log_y, h - bottom, top, 0.08);
  std::ostringstream o;
  o << svg_open(options.css_class, w, h, title);
  o << "<text x='" << left << "' y='16' font-size='13' font-weight='bold'>" << escape(title) << "</text>";
  o << "<rect x='" << left << "' y='" << top << "' width='" << w - left - right << "' height='" << h - top - bottom
    << "' fill='none' stroke='#999'/>";
  for (double t : ticks(sy)) {
    const double y = sy(t);
    o << "<line x1='" << left - 3 << "' y1='" << number(y, 6) << "' x2='" << left << "' y2='" << number(y, 6) << "' stroke='#999'/>"
      << "<text class='tick' x='" << left - 5 << "' y='" << number(y + 3.5, 6) << "' font-size='10' text-anchor='end'>" << number(t, 3)
      << "</text>";
  }
  const bool slanted = categorical && options.x_categories.size() > 4;  // long rows of names would overlap
  std::vector<std::pair<double, std::string>> x_ticks;
  if (categorical)
    for (size_t k = 0; k < options.x_categories.size(); ++k) x_ticks.emplace_back(static_cast<double>(k), options.x_categories[k]);
  else
    for (double t : ticks(sx)) x_ticks.emplace_back(t, number(t, 3));
  for (const auto& [t, text] : x_ticks) {
    const double x = sx(t), y = h - bottom + 13;
    o << "<line x1='" << number(x, 6) << "' y1='" << h - bottom << "' x2='" << number(x, 6) << "' y2='" << h - bottom + 3
      << "' stroke='#999'/><text class='tick' x='" << number(x, 6) << "' y='" << y << "' font-size='10' text-anchor='"
      << (slanted ? "end' transform='rotate(-30 " + number(x, 6) + " " + number(y, 6) + ")'" : "middle'") << ">" << escape(text)
      << "</text>";
  }
  o << "<text x='" << (left + w - right) / 2 << "' y='" << h - 6 << "' font-size='11' text-anchor='middle'>" << escape(options.x_label)
    << "</text>";
  const double mid = (top + h - bottom) / 2;
  o << "<text x='12' y='" << mid << "' font-size='11' text-anchor='middle' transform='rotate(-90 12 " << mid << ")'>"
    << escape(options.y_label) << "</text>";
  // Highlighted points last, so that none is hidden under another.
  for (int pass = 0; pass < 2; ++pass)
    for (const Point& p : points) {
      if (p.highlight != (pass == 1) || !std::isfinite(p.x) || !std::isfinite(p.y)) continue;
      if ((options.log_x && !categorical && p.x <= 0) || (options.log_y && p.y <= 0)) continue;
      o << "<circle class='point" << (p.highlight ? " best" : "") << "'" << data_attributes(p.data) << " cx='" << number(sx(p.x), 6)
        << "' cy='" << number(sy(p.y), 6) << "' r='" << (p.highlight ? 6 : 4) << "' fill='" << (p.colour.empty() ? options.colour : p.colour)
        << "' fill-opacity='0.85'" << (p.highlight ? " stroke='#000' stroke-width='1.5'" : "") << ">";
      if (!p.label.empty()) o << "<title>" << escape(p.label) << "</title>";
      o << "</circle>";
    }
  o << "</svg>";
  return o.str();
}

std::string heatmap(const std::string& title, const std::vector<std::vector<double>>& columns, const HeatmapOptions& options) {
  const double w = options.width, h = options.height, left = 60, top = 24, right = 10, bottom = 20;
  const size_t n_columns = columns.size(), n_rows = columns.empty() ? 0 : columns[0].size();
  double lo = options.lo, hi = options.hi;
  for (const auto& column : columns)
    for (double v : column) {
      if (!std::isfinite(v)) continue;
      if (std::isnan(options.lo)) lo = std::isnan(lo) ? v : std::min(lo, v);
      if (std::isnan(options.hi)) hi = std::isnan(hi) ? v : std::max(hi, v);
    }
  if (!(hi > lo)) hi = lo + 1;  // one level: every cell at the low end rather than a division by zero
  const double cw = (w - left - right) / static_cast<double>(std::max<size_t>(1, n_columns)),
               ch = (h - top - bottom) / static_cast<double>(std::max<size_t>(1, n_rows));
  std::ostringstream o;
  o << svg_open(options.css_class, w, h, title) << "<text x='" << left << "' y='16' font-size='14' font-weight='bold'>" << escape(title)
    << "</text>";
  for (size_t c = 0; c < n_columns; ++c)
    for (size_t r = 0; r < columns[c].size(); ++r) {
      if (!std::isfinite(columns[c][r])) continue;
      const double level = std::clamp((columns[c][r] - lo) / (hi - lo), 0.0, 1.0);
      std::string fill;
      if (options.grey) {
        const int grey = static_cast<int>(255 * (1 - level));
        fill = "rgb(" + std::to_string(grey) + "," + std::to_string(grey) + "," + std::to_string(grey) + ")";
      } else {
        fill = colour_scale(level);
      }
      // A little wider and taller than a cell: neighbours overlap, so no hairline gaps show between them.
      o << "<rect x='" << number(left + static_cast<double>(c) * cw, 6) << "' y='"
        << number(top + static_cast<double>(n_rows - 1 - r) * ch, 6) << "' width='" << number(cw + 0.3, 4) << "' height='"
        << number(ch + 0.3, 4) << "' fill='" << fill << "'/>";
    }
  if (!options.y_top_label.empty())
    o << "<text x='" << left - 4 << "' y='" << top + 10 << "' font-size='11' text-anchor='end'>" << escape(options.y_top_label) << "</text>";
  if (!options.y_bottom_label.empty())
    o << "<text x='" << left - 4 << "' y='" << h - bottom << "' font-size='11' text-anchor='end'>" << escape(options.y_bottom_label)
      << "</text>";
  if (!options.x_left_label.empty())
    o << "<text x='" << left << "' y='" << h - 4 << "' font-size='11'>" << escape(options.x_left_label) << "</text>";
  if (!options.x_right_label.empty())
    o << "<text x='" << w - right << "' y='" << h - 4 << "' font-size='11' text-anchor='end'>" << escape(options.x_right_label) << "</text>";
  o << "</svg>";
  return o.str();
}

std::string colour_scale(double t) {
  // Stops of matplotlib's "plasma" up to 0.85: its last, pale yellow part is lost on a white page.
  static const double stops[5][3] = {{13, 8, 135}, {106, 0, 168}, {177, 42, 144}, {225, 100, 98}, {252, 166, 54}};
  t = std::isfinite(t) ? std::clamp(t, 0.0, 1.0) : 0.5;
  const double at = t * 4;
  const int i = std::min(3, static_cast<int>(at));
  const double f = at - i;
  char out[8];
  std::snprintf(out, sizeof out, "#%02x%02x%02x", static_cast<int>(std::lround(stops[i][0] + f * (stops[i + 1][0] - stops[i][0]))),
                static_cast<int>(std::lround(stops[i][1] + f * (stops[i + 1][1] - stops[i][1]))),
                static_cast<int>(std::lround(stops[i][2] + f * (stops[i + 1][2] - stops[i][2]))));
  return out;
}

std::string parallel_coordinates(const std::string& title, const std::vector<ParallelAxis>& axes, const std::vector<ParallelLine>& lines,
                                 const ParallelOptions& options) {
  const size_t n_axes = axes.size() + 1;  // the objective last
  const double left = 70, right = 90, top = 58, bottom = 24, spacing = 130, h = 340;
  const double w = std::max(640.0, left + spacing * static_cast<double>(n_axes - 1) + right);
  const double gap = n_axes > 1 ? (w - left - right) / static_cast<double>(n_axes - 1) : 0;
  std::vector<const ParallelLine*> drawn;  // the lines with an objective; highlighted ones last, on top
  for (int pass = 0; pass < 2; ++pass)
    for (const ParallelLine& l : lines)
      if (std::isfinite(l.objective) && l.highlight == (pass == 1) && (!options.objective_log || l.objective > 0)) drawn.push_back(&l);

  // One scale per numeric axis, over the lines drawn: its ends are their min and max.
  std::vector<Scale> scales;
  for (size_t a = 0; a < n_axes; ++a) {
    std::vector<double> values;
    for (const ParallelLine* l : drawn) values.push_back(a < axes.size() ? (a < l->values.size() ? l->values[a] : NAN) : l->objective);
    scales.push_back(make_scale(values, a < axes.size() ? axes[a].log : options.objective_log, h - bottom, top, 0));
  }
  auto category_y = [&](size_t a, double index) {
    const size_t n = axes[a].categories.size();
    return n <= 1 ? (top + h - bottom) / 2 : h - bottom - index / static_cast<double>(n - 1) * (h - top - bottom);
  };
  // A line's height on axis a, or NaN where it has no value there.
  auto y_of = [&](size_t a, const ParallelLine& l) -> double {
    const double v = a < axes.size() ? (a < l.values.size() ? l.values[a] : NAN) : l.objective;
    if (!std::isfinite(v)) return NAN;
    if (a < axes.size() && !axes[a].categories.empty())
      return v >= 0 && v < static_cast<double>(axes[a].categories.size()) ? category_y(a, std::round(v)) : NAN;
    if (scales[a].log && v <= 0) return NAN;
    return scales[a](v);
  };
  const Scale& objective = scales.back();
  auto colour_at = [&](double unit) {  // the colour of an objective value, in its axis units
    const double f = (unit - objective.lo) / (objective.hi - objective.lo);
    return colour_scale(options.higher_is_better ? 1 - f : f);
  };

  std::ostringstream o, ticks_svg;  // the tick labels go last, over the lines, so that none is hidden
  o << svg_open(options.css_class, w, h, title);
  o << "<text x='10' y='18' font-size='14' font-weight='bold'>" << escape(title) << "</text>";
  for (size_t a = 0; a < n_axes; ++a) {
    const double x = left + gap * static_cast<double>(a);
    const bool is_objective = a == axes.size();
    const std::string name = is_objective ? options.objective_name : axes[a].name;
    o << "<g class='axis" << (is_objective ? " objective" : "") << "' data-axis='" << escape(name) << "'>";
    o << "<text x='" << x << "' y='" << top - 14 << "' font-size='11' font-weight='bold' text-anchor='middle'>" << escape(name)
      << (!is_objective && axes[a].log ? " (log)" : "") << (is_objective && options.objective_log ? " (log)" : "") << "</text>";
    if (is_objective) {  // the axis is the colour scale
      const int steps = 24;
      const double step_h = (h - top - bottom) / steps;
      for (int k = 0; k < steps; ++k) {
        const double f = (k + 0.5) / steps;
        o << "<rect x='" << x - 4 << "' y='" << number(h - bottom - (k + 1) * step_h, 6) << "' width='8' height='" << number(step_h + 0.3, 4)
          << "' fill='" << colour_at(objective.lo + f * (objective.hi - objective.lo)) << "'/>";
      }
    }
    o << "<line x1='" << x << "' y1='" << top << "' x2='" << x << "' y2='" << h - bottom << "' stroke='#444'/>";
    std::vector<std::pair<double, std::string>> labels;  // (pixel y, text)
    if (!is_objective && !axes[a].categories.empty()) {
      for (size_t k = 0; k < axes[a].categories.size(); ++k) labels.emplace_back(category_y(a, static_cast<double>(k)), axes[a].categories[k]);
    } else {
      // The data's min and max at the ends, ticks between them clear of those two.
      double lo = INFINITY, hi = -INFINITY;
      for (const ParallelLine* l : drawn) {
        const double v = is_objective ? l->objective : (a < l->values.size() ? l->values[a] : NAN);
        if (std::isfinite(v) && (!scales[a].log || v > 0)) lo = std::min(lo, v), hi = std::max(hi, v);
      }
      if (std::isfinite(lo)) {
        labels.emplace_back(scales[a](lo), number(lo, 4));
        if (hi > lo) {
          labels.emplace_back(scales[a](hi), number(hi, 4));
          for (double t : ticks(scales[a]))
            if (std::abs(scales[a](t) - scales[a](lo)) > 12 && std::abs(scales[a](t) - scales[a](hi)) > 12)
              labels.emplace_back(scales[a](t), number(t, 3));
        }
      }
    }
    o << "</g>";
    ticks_svg << "<g class='ticks' data-axis='" << escape(name) << "'>";
    for (const auto& [y, text] : labels)
      ticks_svg << "<line x1='" << x - 3 << "' y1='" << number(y, 6) << "' x2='" << x + 3 << "' y2='" << number(y, 6)
                << "' stroke='#444'/><text class='tick' x='" << x + (is_objective ? 8 : 5) << "' y='" << number(y + 3.5, 6)
                << "' font-size='10' paint-order='stroke' stroke='#fff' stroke-width='3'>" << escape(text) << "</text>";
    ticks_svg << "</g>";
  }
  for (const ParallelLine* l : drawn) {
    o << "<polyline class='job" << (l->highlight ? " best" : "") << "' data-job='" << escape(l->id) << "' data-objective='"
      << number(l->objective, 6) << "' fill='none' stroke='" << colour_at(objective.unit(l->objective)) << "' stroke-width='"
      << (l->highlight ? 3.5 : 1.5) << "' stroke-opacity='" << (l->highlight ? 1 : 0.8) << "' points='";
    for (size_t a = 0; a < n_axes; ++a) {
      const double y = y_of(a, *l);
      if (std::isfinite(y)) o << number(left + gap * static_cast<double>(a), 6) << "," << number(y, 6) << " ";
    }
    o << "'>";
    if (!l->label.empty()) o << "<title>" << escape(l->label) << "</title>";
    o << "</polyline>";
  }
  o << ticks_svg.str() << "</svg>";
  return o.str();
}

std::map<std::string, Series> read_metrics_csv(const fs::path& path) {
  std::map<std::string, Series> out;
  std::ifstream in(path);
  std::string line;
  if (!std::getline(in, line)) return out;
  std::vector<std::string> columns;
  std::stringstream header(line);
  for (std::string c; std::getline(header, c, ',');) columns.push_back(c);
  // A number only when all of the cell reads as one: the last row of a file still being written
  // may be cut short.
  auto parse = [](const std::string& cell, double& v) {
    char* end = nullptr;
    v = std::strtod(cell.c_str(), &end);
    return !cell.empty() && end == cell.c_str() + cell.size();
  };
  while (std::getline(in, line)) {
    std::stringstream row(line);
    std::vector<std::string> cells;
    for (std::string c; std::getline(row, c, ',');) cells.push_back(c);
    double step = 0;
    if (cells.empty() || !parse(cells[0], step)) continue;
    for (size_t i = 2; i < columns.size() && i < cells.size(); ++i) {
      double v = 0;
      if (!parse(cells[i], v)) continue;
      Series& s = out[columns[i]];
      s.name = columns[i];
      s.x.push_back(step);
      s.y.push_back(v);
    }
  }
  return out;
}

}  // namespace wavetrain::plot
