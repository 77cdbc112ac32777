// The Slurm launcher (`launcher=slurm`): a sweep's jobs as Slurm array jobs, followed with squeue
// and scontrol alone (no accounting database), their results read from their run directories.
//
//   DIR/slurm/array-K.sbatch   the K-th submission's script (#SBATCH lines from launcher.*)
//   DIR/jobs/N.json            what job N runs (written before it is submitted)
//   DIR/jobs/N.status.json     what became of it (written by the job: running, requeued, ended)
//   DIR/logs/N.log             its output, appended across requeues
//
// In the job, `wavetrain sweep-job DIR N` (run_sweep_job) runs `wavetrain train` for job N (through
// srun, one task per rank, when launcher.tasks_per_node or launcher.nodes asks for DDP). Slurm
// sends it SIGUSR1 launcher.signal_delay_s seconds before the time limit (`--signal=B:USR1@S`): it
// passes the signal on, the run saves last.ckpt and stops (stop_signal.h), and the job requeues
// itself (`scontrol requeue`) to continue with trainer.resume=last, at most launcher.max_requeue
// times.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "trainer/config/node.h"
#include "trainer/sweep/launcher.h"

namespace wavetrain::sweep {

struct SlurmOptions {
  std::string partition, qos, account, mem;  // empty: the cluster's default
  std::string time = "60";                   // sbatch --time: minutes, or [D-]HH:MM:SS
  int64_t cpus_per_task = 1;
  int64_t gpus_per_node = 0;
  int64_t tasks_per_node = 1;                // > 1 or nodes > 1: data-parallel ranks through srun
  int64_t nodes = 1;
  int64_t array_parallelism = 16;            // array tasks running at once (--array=...%N)
  int64_t signal_delay_s = 120;              // SIGUSR1 this long before the time limit
  int64_t max_requeue = 3;                   // requeues after SIGUSR1, per job
  std::vector<std::string> additional;       // more sbatch options, e.g. "--constraint=a100"
  std::vector<std::string> setup;            // shell lines run in the job before wavetrain
  double poll_interval_s = 0.5;              // how often squeue is asked
  bool ddp() const { return tasks_per_node > 1 || nodes > 1; }
};

// The `launcher` section of a config (name: slurm, and the keys above). Throws config::ConfigError
// naming launcher.KEY for an unknown key (with the closest known one) or a bad value.
SlurmOptions parse_slurm_options(const config::Node& section);

// Checks that sbatch, squeue and scontrol are on PATH (std::runtime_error saying which is missing).
void check_slurm_client();

// `command` is a job's argv before its overrides ({"/path/wavetrain", "train", ...}).
std::unique_ptr<Launcher> make_slurm_launcher(const std::filesystem::path& sweep_dir, std::vector<std::string> command,
                                              SlurmOptions options);

// The job side (`wavetrain sweep-job DIR N`): runs job N of the sweep in DIR as described above.
// Returns the process's exit code.
int run_sweep_job(const std::filesystem::path& sweep_dir, size_t job);

}  // namespace wavetrain::sweep
