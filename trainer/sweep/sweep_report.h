// The sweep report: one self-contained report.html over the jobs of a sweep (a multirun directory
// and its summary.json) or over any set of run directories. It shows which parameters matter:
// parallel coordinates and one scatter per parameter against the objective, every job's learning
// curve overlaid, a sortable table of the jobs with links to their own reports, the failed and
// stopped jobs with the end of their logs, and a per-parameter importance. Drawn with trainer/plot;
// no LibTorch.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace wavetrain::sweep {

struct ReportJob {
  std::string name;                                         // job index "3", or the run directory's name
  std::filesystem::path run_dir;                            // has metrics.csv, result.json, report.html (maybe)
  std::vector<std::pair<std::string, std::string>> params;  // swept key -> value as text ("optimizer.lr", "0.001")
  std::string status;                                       // done, failed, stopped, running, pending (unfinished: see below)
  std::optional<double> objective;
  double seconds = 0;
  int64_t steps = 0;                                        // training steps the job ran
  std::string error_tail;                                   // last lines of its log (failed jobs)
};

struct ReportInput {
  std::string title;       // what the jobs are: the sweep directory, or the run directories' common parent
  std::string objective;   // metric name, e.g. "val/mse"; may be empty
  std::string mode = "min";
  std::vector<ReportJob> jobs;
};

// Reads DIR/summary.json as the multirun driver writes it (unknown fields ignored) and each job's
// files: job N ran in DIR/N, its output is in DIR/logs/N.log. A job's params are the summary's
// "params" object, or else its "overrides" (key=value) reduced to the keys whose values differ
// between jobs. A job without "objective", "steps" or "seconds" fields gets them from its
// metrics ("best.<objective>", then "last.<objective>") or its result.json; a failed or stopped one
// without "error" gets the last lines of its log. Throws std::runtime_error naming the file when
// summary.json is missing or does not parse.
ReportInput report_input_from_sweep(const std::filesystem::path& sweep_dir);

// Any set of run directories (each with .wavetrain/overrides.yaml, a YAML list of the override
// strings it was started with, and result.json and metrics.csv when it ran). params = the override
// keys whose values differ between the runs (run.dir left out). objective: given, or when empty the
// runs' trainer.monitor (from .wavetrain/config.resolved.yaml, else config.yaml) if they all share
// one, else none; mode likewise from trainer.mode when given empty. A run with a result.json is
// "done"; one without is "unfinished" (it failed, or is still running), with the end of its
// wavetrain.log as its error tail.
ReportInput report_input_from_runs(const std::vector<std::filesystem::path>& run_dirs, const std::string& objective,
                                   const std::string& mode);

// Writes OUT_DIR/report.html (creating OUT_DIR) and returns its path. Throws std::runtime_error
// naming the path when it cannot be written.
std::filesystem::path write_sweep_report(const ReportInput& input, const std::filesystem::path& out_dir);

// What the report computes, for callers and tests:

// The log-axis rule: every value a positive finite number, and the largest more than `factor`
// times the smallest (20 for parameters, 10 for learning curves).
bool log_axis(const std::vector<double>& values, double factor = 20);

// The best job (an index into input.jobs): the lowest objective (highest with mode "max") among the
// done jobs, or among all jobs with an objective when none is done. nullopt when no job has one.
std::optional<size_t> best_job(const ReportInput& input);

struct ParamImportance {
  std::string param;
  bool numeric = true;  // numeric: |Spearman rank correlation| with the objective; categorical: the
                        // spread (max - min) of the mean objective per value over the objective's std
  double value = NAN;   // NaN with fewer than 3 jobs, or when the parameter or objective does not vary
  size_t jobs = 0;      // jobs with both a value of the parameter and an objective
};

// One entry per swept parameter (in the order they first appear), over the jobs with an objective.
std::vector<ParamImportance> parameter_importance(const ReportInput& input);

}  // namespace wavetrain::sweep
