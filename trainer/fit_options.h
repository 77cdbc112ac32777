// The training loop's settings, read from the config and checked once, before anything is built or
// written: every trainer.* key the loop and its built-in callbacks read (trainer.h lists them), the
// optimizer and the schedule. A wrong value throws config::ConfigError naming the key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/lr_scheduler.h"

namespace torch::optim {
class Optimizer;
}

namespace wavetrain {

struct ParamGroup;

// trainer.limit_train_batches / limit_val_batches: absent or 1.0 = all; an int N = at most N
// batches; a float f in (0, 1] = that fraction of the batches (at least one).
struct BatchLimit {
  int64_t count = -1;     // >= 0: at most this many batches
  double fraction = 1.0;  // used when count < 0
  int64_t of(int64_t available) const;
};

struct FitOptions {
  int64_t seed = 0;
  int64_t max_epochs = 10;
  int64_t max_steps = -1;
  double max_time = 0;  // seconds over all the run's sessions; 0: no limit
  int64_t batch_size = 32;
  int64_t accumulate = 1;  // trainer.accumulate_grad_batches
  double clip = 0;         // trainer.gradient_clip_val; 0: no clipping
  std::string clip_algorithm = "norm";
  std::string on_nonfinite = "stop";
  bool fast_dev_run = false;
  bool deterministic = false;
  bool ddp_overlap = true;  // trainer.ddp_overlap: gradient all-reduce overlapped with the backward
  double ddp_bucket_mb = 25;  // trainer.ddp_bucket_mb: gradient buckets' size (DDP's bucket_cap_mb)
  std::string ddp_engine = "auto";  // trainer.ddp_engine: auto, reducer (c10d's), hooks (gradient_sync.h)
  bool ddp_find_unused_parameters = false;  // trainer.ddp_find_unused_parameters, as DDP's
  BatchLimit limit_train, limit_val;
  // trainer.val_check_interval: an int is a number of global steps, a float a fraction of an
  // epoch's steps (worked out once the epoch's length is known); 0 / 1.0: at the epoch's end only.
  int64_t val_every_steps = 0;
  double val_every_fraction = 1.0;
  int64_t log_every = 10;  // trainer.log_every_n_steps, at least 1
  // Checkpointing (callbacks/model_checkpoint.cpp).
  std::string monitor;  // trainer.monitor; empty: no best.ckpt, no top-k
  std::string mode = "min";
  int64_t every_n_steps = 0, every_n_epochs = 0, save_top_k = 1;
  // Early stopping (callbacks/early_stopping.cpp).
  std::string stop_monitor;
  int64_t patience = 3;
  double min_delta = 0;
  std::string stop_mode = "min";
  // Resuming: trainer.resume as given ("last", "best", a path; empty: a new run).
  std::string resume;
  LrScheduleOptions schedule;
  std::string task;

  static FitOptions from(const config::Config& cfg);
};

// trainer.max_time: seconds, or "HH:MM:SS" / "DD:HH:MM:SS"; <= 0 or absent means no limit.
double max_time_seconds(const config::Config& cfg);

// A number that must be finite and >= 0 (a learning rate, a decay, a clipping threshold), naming
// the key and where it was set when it is not.
double non_negative(const config::Config& cfg, const std::string& key, double fallback);

// The optimizer optimizer.{name, lr, weight_decay, momentum} names, over `groups` (each group's own
// lr and weight_decay, when it sets them, replace the config's).
std::unique_ptr<torch::optim::Optimizer> make_optimizer(const config::Config& cfg, const std::vector<ParamGroup>& groups);

// Judging a run before it starts, and the keys the trainer reads.

// What ended a run for good: a limit that its state at a checkpoint has reached under `cfg`.
struct Finished {
  std::string reason;  // "step 64 of trainer.max_steps 64"
  std::string raise;   // the setting to raise to train on; empty when none would help
};

// Whether a run resumed from `state` under `cfg` would stop before training anything:
// trainer.max_steps or max_epochs reached, trainer.max_time used up (it counts the training time
// of all the run's sessions), or early stopping ended it and still would (same monitor, patience
// not raised). Lowering a limit below the state also counts; raising one past it does not.
std::optional<Finished> finished_at(const config::Config& cfg, const TrainingState& state);

// The checkpoint trainer.resume names: `run_dir`/checkpoints/last.ckpt or best.ckpt for last and
// best, else the path as given. Empty when trainer.resume is not set.
std::string resume_checkpoint(const config::Config& cfg, const std::filesystem::path& run_dir);

// The types of the keys configs/config.yaml gives the trainer, optimizer, scheduler, sweep and
// run: checked when a run's config is composed, whatever its task reads (a wrong type in a key the
// run would never read is still a mistake in the file).
std::vector<config::KeySpec> trainer_config_keys();

// ceil(a / b) for a >= 0, b >= 1, without the overflow of (a + b - 1) / b when b is near 2^63.
inline int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

}  // namespace wavetrain
