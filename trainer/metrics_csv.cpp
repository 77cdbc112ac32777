// metrics.csv; see metrics_csv.h.
#include "trainer/metrics_csv.h"

#include <algorithm>
#include <fstream>
#include <stdexcept>

#include "trainer/atomic_file.h"
#include "trainer/config/node.h"

namespace wavetrain {
namespace {

std::string field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

}  // namespace

MetricsCsv::MetricsCsv(std::filesystem::path path) : path_(std::move(path)) {
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
