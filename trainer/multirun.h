// Multirun: runs one child process per job of a sweep, K at a time, in DIR/N/ (N = 0, 1, ...).
//
// A job that fails is reported as soon as it fails (exit code and the last lines of its output);
// the others go on, and the multirun fails at the end. `summary.json` is rewritten after every job,
// so an interrupted multirun can be resumed: jobs marked done are kept, the rest run again (the
// directory of a failed attempt is kept as N.attempt-M). At the end a table (job, overrides,
// status, duration, metrics from each job's result.json) is printed and written to summary.csv and
// summary.json; with an objective (`val/esr`, mode min or max) the best job is named.
//
//   DIR/multirun.yaml     the command, the fixed overrides and every job's overrides
//   DIR/N/                job N's run directory (the child is given ++run.dir=DIR/N)
//   DIR/logs/N.log        job N's stdout and stderr
//   DIR/summary.{json,csv}
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace wavetrain {

struct MultirunOptions {
  std::filesystem::path dir;          // the multirun directory (exists)
  std::vector<std::string> command;   // a job's argv before its overrides: {"/path/wavetrain", "train", ...}
  int parallel = 1;                   // jobs at a time
  std::string objective;              // metric naming the best job; empty for none
  std::string mode = "min";           // min or max
  int log_tail_lines = 15;            // lines of a failed job's output to print
};

struct JobOutcome {
  size_t index = 0;
  std::vector<std::string> overrides;
  std::string status = "pending";     // pending, done, failed
  int exit_code = 0;
  double seconds = 0;
  nlohmann::json metrics = nlohmann::json::object();  // flattened numbers of result.json ("best.val/esr": 0.01)
};

struct MultirunSummary {
  std::vector<JobOutcome> jobs;
  std::optional<size_t> best;         // index into jobs
  size_t failed = 0;
};

// Starts a new multirun of `jobs` in options.dir: writes multirun.yaml, runs the jobs, summarises.
MultirunSummary run_multirun(const std::vector<std::vector<std::string>>& jobs, const MultirunOptions& options,
                             std::ostream& out);

// Resumes the multirun in options.dir from its multirun.yaml and summary.json (options.command is
// taken from multirun.yaml when empty). Throws std::runtime_error if the directory holds none.
MultirunSummary resume_multirun(const MultirunOptions& options, std::ostream& out);

// The value of `objective` for a job: metrics "best.<objective>", then "last.<objective>", then
// "<objective>". nullopt when the job has none.
std::optional<double> objective_value(const JobOutcome& job, const std::string& objective);

}  // namespace wavetrain
