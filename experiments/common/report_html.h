// What the run reports (amp/report.h, asr/asr_report.h) are made of: HTML escaping, numbers, inline
// SVG plots (lines, grouped bars), a run's metrics.csv as series, and audio as a data URL. Reports
// are self-contained: no scripts, fonts or requests; plots are <svg> elements in the page.
#pragma once

#include <ATen/ATen.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace wavetrain::experiments::report_html {

std::string read_text(const std::filesystem::path& p);  // "" when the file is not there
std::string escape(const std::string& s);              // <, >, &, ' and " as entities
std::string number(double v, int digits = 4);

struct Series {
  std::string name, colour;
  std::vector<double> x, y;
};

// A line plot: axes with min/max labels, one polyline per series, a legend. log_y plots log10
// (for values that span decades).
std::string line_plot(const std::string& title, const std::vector<Series>& series, const std::string& x_label, bool log_y = false);

// Grouped bars: for each category (x axis), one bar per series, its value written above it.
// values[s][c] is series s in category c; NaN leaves the bar out.
std::string bar_chart(const std::string& title, const std::vector<std::string>& categories, const std::vector<std::string>& series,
                      const std::vector<std::string>& colours, const std::vector<std::vector<double>>& values, const std::string& unit);

// metrics.csv (step, epoch, then one column per metric) as one series per metric.
std::map<std::string, Series> read_metrics_csv(const std::filesystem::path& path);

std::string base64(const std::string& bytes);
// Mono float samples as a 16-bit PCM WAV file in a data URL (for an <audio> element).
std::string wav_data_url(const at::Tensor& samples, int sample_rate);

}  // namespace wavetrain::experiments::report_html
