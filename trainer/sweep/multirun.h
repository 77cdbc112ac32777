// Multirun: the driver of a sweep. It decides what runs when (sweep.strategy), hands the jobs to a
// launcher (local child processes, or Slurm: launcher.h), and keeps the record:
//
//   grid    every job of the sweep's grid (config/sweep.h), all submitted at once, `parallel` at a time
//   random  the trials drawn from the search space (search_space.h), likewise
//   asha    the trials under asynchronous successive halving (asha.h): each starts with a small
//           budget (sweep.asha.resource, e.g. trainer.max_steps) and the best go on from their
//           checkpoints with eta times more; never more than `parallel` at once
//
// A job that fails is reported as soon as it fails (exit code and the last lines of its output);
// the others go on, and the multirun fails at the end. `summary.json` is rewritten whenever a job
// ends, so an interrupted multirun can be resumed (`wavetrain train -m --resume DIR`): finished
// jobs are kept, jobs that a Slurm cluster still runs are watched again, the rest run again (the
// directory of a failed attempt is kept as N.attempt-M). A job that an earlier launcher's process
// still runs (it holds its directory's lock) is waited for, never started twice; one that finished
// after its launcher died is recognised by its result.json. A running job's objective is read from its
// metrics.csv as it is written; at the end a table is printed, summary.csv and summary.json are
// written, the best job is named, and the sweep report (sweep_report.h) is written.
//
//   DIR/multirun.yaml     the command, the strategy, the launcher and every trial's overrides
//   DIR/N/                job N's run directory (the child is given ++run.dir=DIR/N)
//   DIR/logs/N.log        job N's output
//   DIR/summary.{json,csv}, DIR/report.html
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/config/node.h"
#include "trainer/sweep/asha.h"
#include "trainer/sweep/launcher.h"

namespace wavetrain {

struct MultirunOptions {
  std::filesystem::path dir;          // the multirun directory (exists)
  std::vector<std::string> command;   // a job's argv before its overrides: {"/path/wavetrain", "train", ...}
  int parallel = 1;                   // jobs at a time (local launcher; ASHA's launches at a time)
  std::string objective;              // metric naming the best job; empty for none
  std::string mode = "min";           // min or max
  std::string strategy = "grid";      // grid, random or asha
  sweep::AshaOptions asha;            // strategy asha
  std::string asha_resource = "trainer.max_steps";  // the key each rung's budget is given to
  // The config's `launcher` section (name: local or slurm, and the Slurm options); null = local.
  config::Node launcher = config::Node::null();
  int log_tail_lines = 15;            // lines of a failed job's output to print
  bool write_report = true;           // report.html at the end
  // Polled while jobs run: the stop signal this process was sent (SIGTERM, SIGUSR1), or 0. On a
  // request the sweep stops: queued jobs stay pending, running local jobs save their checkpoints
  // and end (Slurm's go on), and `--resume` continues them all.
  std::function<int()> stop_requested;
};

struct JobOutcome {
  size_t index = 0;
  std::vector<std::string> overrides;
  std::string status = "pending";     // pending, running, done, failed, stopped (ASHA)
  int exit_code = 0;
  double seconds = 0;
  int64_t steps = 0;                  // result.json's global_step
  int rung = -1;                      // ASHA: the highest rung finished
  std::vector<double> rung_objectives;  // ASHA: the objective at each finished rung
  std::optional<double> objective;    // the objective: result.json's, else metrics.csv's latest value
  nlohmann::json metrics = nlohmann::json::object();  // flattened numbers of result.json ("best.val/esr": 0.01)
  std::string note;                   // the launcher's word on how it ended
  std::string error;                  // the last lines of the log of a failed job
  nlohmann::json launcher_record;     // where the launcher ran it (Slurm job id)
  bool continue_run = false;          // a resumed multirun: continue the job's run from its last.ckpt
                                      // (it was running, or stopped by a signal with its checkpoint saved)
};

struct MultirunSummary {
  std::vector<JobOutcome> jobs;
  std::optional<size_t> best;         // index into jobs
  size_t failed = 0;
  int stopped_by = 0;                 // the stop signal that ended the sweep early, or 0
};

// Starts a new multirun of `trials` (each job's overrides) in options.dir: writes multirun.yaml,
// runs the jobs, summarises.
MultirunSummary run_multirun(const std::vector<std::vector<std::string>>& trials, const MultirunOptions& options,
                             std::ostream& out);

// Resumes the multirun in options.dir from its multirun.yaml and summary.json (the command, the
// strategy and the launcher are the recorded ones; options.parallel, when > 1, replaces the
// recorded parallelism). Throws std::runtime_error if the directory holds none.
MultirunSummary resume_multirun(const MultirunOptions& options, std::ostream& out);

// Checks a config's `launcher` section before anything is written or submitted: its name (local or
// slurm) and, for Slurm, its options and that sbatch, squeue and scontrol are on PATH. Returns how
// many jobs run at once under it: `local_parallel` (-j) locally, launcher.array_parallelism on Slurm.
int check_launcher(const config::Node& launcher, int local_parallel);

// The value of `objective` for a job: metrics "best.<objective>", then "last.<objective>", then
// "<objective>". nullopt when the job has none.
std::optional<double> objective_value(const JobOutcome& job, const std::string& objective);

}  // namespace wavetrain
