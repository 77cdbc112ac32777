// Inline SVG plots for self-contained HTML reports (the amp, ASR and sweep reports): the text
// helpers they share (escape, number, read_text), line plots, grouped bars, scatter plots, heatmaps,
// parallel coordinates, a colour scale, and a run's metrics.csv as series. Each plot is one <svg>
// string with no script, font or external reference, so a page made of them opens offline.
// Standard library only: no LibTorch.
#pragma once

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace wavetrain::plot {

std::string read_text(const std::filesystem::path& p);  // "" when the file is not there
std::string escape(const std::string& s);              // <, >, &, ' and " as entities
std::string number(double v, int digits = 4);

// Extra attributes of one element, written as data-NAME='value' (value escaped), so that a page's
// script or a test can find the element.
using DataAttributes = std::vector<std::pair<std::string, std::string>>;

struct Series {
  std::string name, colour;  // an empty name leaves the series out of the legend
  std::vector<double> x, y;
  double width = 1.2;        // stroke width: a highlighted series is drawn thicker
  std::string css_class{};   // class of its polyline; "" for none
  DataAttributes data{};     // on its polyline
};

struct LineOptions {
  std::string x_label, y_label;  // y_label "" for none
  bool log_x = false, log_y = false;  // log10 axes, for values that span decades (<= 0 is clamped to 1e-12)
  std::string css_class = "plot";     // the <svg>'s class
};

// A line plot: axes with min/max labels, one polyline per series (non-finite y left out), a legend.
std::string line_plot(const std::string& title, const std::vector<Series>& series, const LineOptions& options);
std::string line_plot(const std::string& title, const std::vector<Series>& series, const std::string& x_label, bool log_y = false);

// Grouped bars: for each category (x axis), one bar per series, its value written above it
// (rounded to `decimals`). values[s][c] is series s in category c; NaN leaves the bar out.
std::string bar_chart(const std::string& title, const std::vector<std::string>& categories, const std::vector<std::string>& series,
                      const std::vector<std::string>& colours, const std::vector<std::vector<double>>& values, const std::string& unit,
                      int decimals = 1);

struct Point {
  double x = 0, y = 0;
  std::string colour;      // "" for the plot's colour
  bool highlight = false;  // drawn larger with a dark ring (the best of a sweep)
  std::string label;       // its tooltip; "" for none
  DataAttributes data;     // on its <circle>
};

struct ScatterOptions {
  std::string x_label, y_label;
  bool log_x = false, log_y = false;
  std::vector<std::string> x_categories;  // non-empty: x is an index into these, and the ticks are their names
  std::string colour = "#1f77b4";
  std::string css_class = "scatter";
  double width = 340, height = 260;
};

// Points (class 'point', non-finite ones left out) on axes with ticks and labels.
std::string scatter_plot(const std::string& title, const std::vector<Point>& points, const ScatterOptions& options);

struct HeatmapOptions {
  double width = 640, height = 200;
  double lo = NAN, hi = NAN;  // the values at the two ends of the scale; NaN: the data's min or max
  bool grey = true;           // grey levels (white at lo, black at hi); false: colour_scale
  std::string css_class = "heatmap";
  // Written at the ends of the axes, "" for none: the top and bottom of the y axis, the left and
  // right ends of the x axis.
  std::string y_top_label, y_bottom_label, x_left_label, x_right_label;
};

// A grid of cells as coloured rectangles: columns[i][j] is column i (left to right), cell j (bottom
// to top), as a spectrogram's [frames][bins]. NaN cells are left blank.
std::string heatmap(const std::string& title, const std::vector<std::vector<double>>& columns, const HeatmapOptions& options);

// A colour for t in [0, 1], from deep blue (0) through purple and pink to orange (1): every colour
// of it reads on white, and its lightness rises with t, so it survives a grey printout.
std::string colour_scale(double t);

struct ParallelAxis {
  std::string name;
  std::vector<std::string> categories;  // non-empty: a categorical axis; a line's value is an index into these
  bool log = false;                     // a numeric axis on log10 (its values > 0)
};

struct ParallelLine {
  std::vector<double> values;  // one per axis; NaN where the line has none (it then goes straight past that axis)
  double objective = NAN;      // lines without a finite one are left out
  std::string id;              // its data-job
  std::string label;           // its tooltip
  bool highlight = false;      // drawn thicker, last (the best job)
};

struct ParallelOptions {
  std::string objective_name = "objective";
  bool objective_log = false;
  bool higher_is_better = false;  // which end of the colour scale (deep blue) is good
  std::string css_class = "parallel-coordinates";
};

// Parallel coordinates: one vertical axis per parameter and a last one for the objective (drawn as
// the colour scale), each with tick labels; one polyline (class 'job', data-job, data-objective)
// per line, coloured by its objective.
std::string parallel_coordinates(const std::string& title, const std::vector<ParallelAxis>& axes, const std::vector<ParallelLine>& lines,
                                 const ParallelOptions& options);

// metrics.csv (step, epoch, then one column per metric; empty cells allowed, cells that do not read
// as numbers skipped) as one series per metric, x the step.
std::map<std::string, Series> read_metrics_csv(const std::filesystem::path& path);

}  // namespace wavetrain::plot
