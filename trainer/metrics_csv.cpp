// metrics.csv; see metrics_csv.h.
#include "trainer/metrics_csv.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "trainer/serialization/atomic_file.h"
#include "trainer/config/node.h"

namespace wavetrain {
namespace {

}  // namespace

namespace {

std::string field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

// One CSV line into fields ("" quoting as written by field()).
std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted && c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
      out.back() += '"';
      ++i;
    } else if (c == '"') {
      quoted = !quoted;
    } else if (c == ',' && !quoted) {
      out.emplace_back();
    } else {
      out.back() += c;
    }
  }
  return out;
}

MetricsCsv::MetricsCsv(std::filesystem::path path, bool keep_existing) : path_(std::move(path)) {
  std::ifstream in(path_);
  std::string line;
  if (keep_existing && in && std::getline(in, line)) {
    const std::vector<std::string> head = split_csv(line);
    if (head.size() < 2 || head[0] != "step" || head[1] != "epoch")
      throw std::runtime_error("'" + path_.string() + "' is not a wavetrain metrics.csv (header: " + line + ")");
    columns_.assign(head.begin() + 2, head.end());
    while (std::getline(in, line)) {
      const std::vector<std::string> cells = split_csv(line);
      if (cells.size() < 2) continue;
      Row row{std::stoll(cells[0]), std::stoll(cells[1]), {}};
      for (size_t i = 2; i < cells.size() && i - 2 < columns_.size(); ++i)
        if (!cells[i].empty()) row.values[columns_[i - 2]] = std::stod(cells[i]);
      rows_.push_back(std::move(row));
    }
    return;
  }
  write_file_atomic(path_.string(), header());
}

std::string MetricsCsv::header() const {
  std::string h = "step,epoch";
  for (const std::string& c : columns_) h += "," + field(c);
  return h + "\n";
}

std::string MetricsCsv::format_row(size_t i) const {
  const Row& r = rows_[i];
  std::string line = std::to_string(r.step) + "," + std::to_string(r.epoch);
  for (const std::string& c : columns_) {
    auto it = r.values.find(c);
    line += "," + (it == r.values.end() ? std::string() : config::format_float(it->second));
  }
  return line + "\n";
}

void MetricsCsv::log(int64_t step, int64_t epoch, const std::vector<std::pair<std::string, double>>& metrics) {
  Row row{step, epoch, {}};
  bool new_column = false;
  for (const auto& [name, value] : metrics) {
    row.values[name] = value;
    if (std::find(columns_.begin(), columns_.end(), name) == columns_.end()) {
      columns_.push_back(name);
      new_column = true;
    }
  }
  rows_.push_back(std::move(row));
  if (new_column) {
    std::string all = header();
    for (size_t i = 0; i < rows_.size(); ++i) all += format_row(i);
    write_file_atomic(path_.string(), all);
    return;
  }
  std::ofstream out(path_, std::ios::app);
  out << format_row(rows_.size() - 1);
  if (!out) throw std::runtime_error("Cannot append to '" + path_.string() + "'");
}

}  // namespace wavetrain
