// Launchers: where a sweep's jobs run. `launcher=local` (the default) runs each job as a child
// process of `wavetrain train -m`; `launcher=slurm` submits them to a Slurm cluster with sbatch, one
// array job per submission (slurm_launcher.h). The multirun driver (multirun.h) decides what runs
// and when; a launcher only starts jobs and says when each ended.
//
// A job is `COMMAND OVERRIDES ++run.dir=DIR/N` (plus `++trainer.resume=last` to continue its run),
// its output appended to DIR/logs/N.log.
#pragma once

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainer/config/node.h"

namespace wavetrain::sweep {

struct JobLaunch {
  size_t job = 0;                      // run directory DIR/job, log DIR/logs/job.log
  std::vector<std::string> overrides;  // the job's own overrides, its budget included
  bool resume = false;                 // continue DIR/job from checkpoints/last.ckpt
};

struct JobEnd {
  size_t job = 0;
  int exit_code = 0;     // 128 + N for a process ended by signal N
  double seconds = 0;    // the job's own run time (as its launcher saw it)
  std::string note;      // what the launcher knows beyond the exit code ("time limit", "requeued 1 time")
};

class Launcher {
 public:
  virtual ~Launcher() = default;
  virtual std::string name() const = 0;
  // Starts the jobs (at most the launcher's parallelism run at once; the rest wait their turn).
  virtual void submit(const std::vector<JobLaunch>& launches) = 0;
  // Waits until at least one job has ended or `max_seconds` passed; returns the ended jobs.
  virtual std::vector<JobEnd> wait(double max_seconds) = 0;
  // Jobs submitted that have not ended.
  virtual size_t active() const = 0;
  // Whether the launcher starts the jobs itself (local), so that take_started() says which have; a
  // scheduler's launcher (Slurm) only submits them, and the cluster starts them when it will.
  virtual bool reports_starts() const { return false; }
  // The jobs started since the last call (by submit() or, as running ones end, by wait()).
  virtual std::vector<size_t> take_started() { return {}; }
  // A stop request for the sweep (the launcher was sent SIGTERM or SIGUSR1): queued jobs are dropped
  // (their indices added to `dropped`), running ones are asked to stop with a checkpoint. Returns whether the running
  // jobs end with the launcher (local: they save their checkpoints and exit 75, so wait() for them)
  // or go on without it (Slurm: a later `--resume` watches them again).
  virtual bool stop(int /*signal*/, std::vector<size_t>& /*dropped*/) { return false; }
  // What a resumed sweep needs to find this launcher's jobs again (Slurm job ids), per job.
  virtual nlohmann::json job_record(size_t /*job*/) const { return nullptr; }
  // For a resumed sweep: jobs of an earlier launcher process that are still queued or running
  // (Slurm keeps them when the launcher dies) are watched again, and those that ended meanwhile
  // are reported by the next wait(), instead of being run twice. Returns the jobs adopted.
  virtual std::vector<size_t> adopt(const std::vector<std::pair<size_t, nlohmann::json>>& /*records*/) { return {}; }
};

// The full argument list of a job (see above); `resume` adds the resume override only when the
// run has a last.ckpt. A job that starts afresh where an earlier attempt left a directory gets a
// clean one: the old one is kept as N.attempt-M. Throws when a live process holds the directory
// (run_directory.h): a running job is never moved or started twice.
std::vector<std::string> job_arguments(const std::vector<std::string>& command, const std::filesystem::path& sweep_dir,
                                       const JobLaunch& launch);

// The local launcher: `parallel` child processes at a time, each in a process group of its own (so
// that a stop reaches what the job started, e.g. its ranks) and dying with the launcher
// (stop_protocol.h).
std::unique_ptr<Launcher> make_local_launcher(const std::filesystem::path& sweep_dir, std::vector<std::string> command,
                                              int parallel);

}  // namespace wavetrain::sweep
