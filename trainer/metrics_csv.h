// metrics.csv: one row per logged step, columns step, epoch, then one per metric in the order
// metrics first appear. A row leaves a metric it does not have empty. When a new metric appears
// (validation metrics arrive later than training ones), the file is rewritten, atomically, with
// the wider header; otherwise rows are appended and flushed, so the file is readable during the run.
// Numbers are written as Python's repr writes them (the shortest text that reads back exactly).
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

namespace wavetrain {

class MetricsCsv {
 public:
  // With `keep_existing` (a resumed run), the rows already in the file are kept and extended.
  explicit MetricsCsv(std::filesystem::path path, bool keep_existing = false);

  void log(int64_t step, int64_t epoch, const std::vector<std::pair<std::string, double>>& metrics);
  const std::vector<std::string>& columns() const { return columns_; }

 private:
  std::string format_row(size_t row) const;
  std::string header() const;

  std::filesystem::path path_;
  std::vector<std::string> columns_;  // metric names, after step and epoch
  struct Row {
    int64_t step, epoch;
    std::map<std::string, double> values;
  };
  std::vector<Row> rows_;
};

}  // namespace wavetrain
