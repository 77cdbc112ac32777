// Report building blocks (report_html.h).
#include "experiments/common/report_html.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iomanip>
#include <sstream>

namespace fs = std::filesystem;

namespace wavetrain::experiments::report_html {

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


// A line plot as inline SVG: axes with min/max labels, one polyline per series, a legend.
std::string line_plot(const std::string& title, const std::vector<Series>& series, const std::string& x_label, bool log_y) {
  const double w = 640, h = 260, left = 60, right = 20, top = 30, bottom = 40;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  auto ty = [&](double v) { return log_y ? std::log10(std::max(v, 1e-12)) : v; };
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, ty(s.y[i])), y1 = std::max(y1, ty(s.y[i]));
    }
  if (!(x1 > x0)) x1 = x0 + 1;
  if (!(y1 > y0)) y1 = y0 + 1;
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' class='plot' width='" << w << "' height='" << h << "' role='img' aria-label='"
    << escape(title) << "'>";
  o << "<text x='" << left << "' y='18' font-size='14' font-weight='bold'>" << escape(title) << "</text>";
  o << "<rect x='" << left << "' y='" << top << "' width='" << w - left - right << "' height='" << h - top - bottom
    << "' fill='none' stroke='#999'/>";
  auto label_y = [&](double v) { return log_y ? number(std::pow(10.0, v), 3) : number(v, 3); };
  o << "<text x='" << left - 4 << "' y='" << top + 10 << "' font-size='11' text-anchor='end'>" << label_y(y1) << "</text>";
  o << "<text x='" << left - 4 << "' y='" << h - bottom << "' font-size='11' text-anchor='end'>" << label_y(y0) << "</text>";
  o << "<text x='" << left << "' y='" << h - bottom + 14 << "' font-size='11'>" << number(x0, 4) << "</text>";
  o << "<text x='" << w - right << "' y='" << h - bottom + 14 << "' font-size='11' text-anchor='end'>" << number(x1, 4) << "</text>";
  o << "<text x='" << (left + w - right) / 2 << "' y='" << h - 8 << "' font-size='11' text-anchor='middle'>" << escape(x_label) << "</text>";
  int legend = 0;
  for (const Series& s : series) {
    o << "<polyline fill='none' stroke='" << s.colour << "' stroke-width='1.2' points='";
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.y[i])) continue;
      const double px = left + (s.x[i] - x0) / (x1 - x0) * (w - left - right);
      const double py = h - bottom - (ty(s.y[i]) - y0) / (y1 - y0) * (h - top - bottom);
      o << number(px, 6) << "," << number(py, 6) << " ";
    }
    o << "'/><text x='" << w - right - 4 << "' y='" << top + 14 + 14 * legend++ << "' font-size='11' text-anchor='end' fill='"
      << s.colour << "'>" << escape(s.name) << "</text>";
  }
  o << "</svg>";
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
  while (std::getline(in, line)) {
    std::stringstream row(line);
    std::vector<std::string> cells;
    for (std::string c; std::getline(row, c, ',');) cells.push_back(c);
    if (cells.empty() || cells[0].empty()) continue;
    const double step = std::stod(cells[0]);
    for (size_t i = 2; i < columns.size() && i < cells.size(); ++i) {
      if (cells[i].empty()) continue;
      Series& s = out[columns[i]];
      s.name = columns[i];
      s.x.push_back(step);
      s.y.push_back(std::stod(cells[i]));
    }
  }
  return out;
}

std::string bar_chart(const std::string& title, const std::vector<std::string>& categories, const std::vector<std::string>& series,
                      const std::vector<std::string>& colours, const std::vector<std::vector<double>>& values, const std::string& unit) {
  size_t longest = 0;  // labels are written at 40 degrees below the axis: room for the longest
  for (const std::string& c : categories) longest = std::max(longest, c.size());
  const double group = 36.0 * static_cast<double>(std::max<size_t>(1, series.size())) + 24, top = 40, plot_h = 180,
               label = 5.5 * static_cast<double>(longest), left = std::max(50.0, 0.77 * label);
  const double w = std::max(320.0, left + group * static_cast<double>(categories.size()) + 20), h = top + plot_h + 20 + 0.65 * label;
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
        << "' font-size='10' text-anchor='middle'>" << number(std::round(v * 10) / 10, 6) << unit << "</text>";
    }
    o << "<text x='" << x0 + 18 * static_cast<double>(series.size()) << "' y='" << top + plot_h + 14
      << "' font-size='10' text-anchor='end' transform='rotate(-40 " << x0 + 18 * static_cast<double>(series.size()) << " "
      << top + plot_h + 14 << ")'>" << escape(categories[c]) << "</text>";
  }
  o << "</svg>";
  return o.str();
}

std::string base64(const std::string& bytes) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t a = static_cast<unsigned char>(bytes[i]), b = i + 1 < bytes.size() ? static_cast<unsigned char>(bytes[i + 1]) : 0,
                   c = i + 2 < bytes.size() ? static_cast<unsigned char>(bytes[i + 2]) : 0, v = a << 16 | b << 8 | c;
    out += table[v >> 18 & 63];
    out += table[v >> 12 & 63];
    out += i + 1 < bytes.size() ? table[v >> 6 & 63] : '=';
    out += i + 2 < bytes.size() ? table[v & 63] : '=';
  }
  return out;
}

std::string wav_data_url(const at::Tensor& samples, int sample_rate) {
  const at::Tensor x = samples.to(at::kFloat).contiguous().view({-1});
  const uint32_t n = static_cast<uint32_t>(x.numel()), data_bytes = 2 * n;
  std::string wav;
  auto put = [&](uint32_t v, int size) {
    for (int k = 0; k < size; ++k) wav += static_cast<char>(v >> (8 * k) & 0xff);
  };
  wav += "RIFF";
  put(36 + data_bytes, 4);
  wav += "WAVEfmt ";
  put(16, 4), put(1, 2), put(1, 2), put(static_cast<uint32_t>(sample_rate), 4), put(static_cast<uint32_t>(sample_rate) * 2, 4), put(2, 2),
      put(16, 2);
  wav += "data";
  put(data_bytes, 4);
  const float* s = x.data_ptr<float>();
  for (uint32_t i = 0; i < n; ++i) {
    const long q = std::lround(std::clamp(static_cast<double>(s[i]), -1.0, 1.0) * 32767.0);
    put(static_cast<uint32_t>(static_cast<int16_t>(q)) & 0xffff, 2);
  }
  return "data:audio/wav;base64," + base64(wav);
}

}  // namespace wavetrain::experiments::report_html
