// Internal to multirun.cpp (the driver's running loop) and multirun_records.cpp (the records it
// keeps, and resuming): the Driver class that the two define between them, and two text helpers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iomanip>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "trainer/sweep/asha.h"
#include "trainer/sweep/launcher.h"
#include "trainer/sweep/multirun.h"

namespace wavetrain::sweep::detail {

inline std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

inline std::string format_seconds(double s) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << s << " s";
  return out.str();
}

// The driver of one multirun: the running loop is in multirun.cpp, the records it keeps
// (summary.json, summary.csv, the table, the best job) in multirun_records.cpp.
class Driver {
 public:
  Driver(const MultirunOptions& opt, std::ostream& out);

  MultirunSummary run(std::vector<JobOutcome> jobs);

 private:
  // multirun.cpp
  std::vector<std::string> with_budget(const JobOutcome& j, int64_t budget) const;
  void fill_asha(sweep::Asha& scheduler);
  void submit(const std::vector<sweep::JobLaunch>& launches);
  void report_started();
  void settle_earlier_attempt(JobOutcome& j, bool asha);
  std::optional<double> objective_of(const JobOutcome& j) const;
  void refresh_running();
  void finish(JobOutcome& job, const sweep::JobEnd& end);

  // multirun_records.cpp
  void pick_best();
  void save() const;
  void print_table() const;

  const MultirunOptions& opt_;
  std::ostream& out_;
  std::unique_ptr<sweep::Launcher> launcher_;
  std::optional<sweep::AshaOptions> asha_options_;
  std::map<size_t, size_t> running_rung_;  // ASHA: the rung each running trial is on
  MultirunSummary summary_;
};

}  // namespace wavetrain::sweep::detail
