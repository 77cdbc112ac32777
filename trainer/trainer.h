// The training loop: runs a task for trainer.max_epochs (or trainer.max_steps), with the device
// and precision policy decided at the run's start. The loop itself (trainer.cpp) runs epochs,
// steps, gradient accumulation, the optimizer, scaler and scheduler, validation and the agreement
// between ranks; its callbacks (callback.h, callbacks/) write what a run leaves behind:
//
//   RUN/metrics.csv          step, epoch, one column per metric (callbacks/csv_logger)
//   RUN/tensorboard/         TensorBoard event file (callbacks/tensorboard_logger)
//   RUN/checkpoints/last.ckpt, best.ckpt (by trainer.monitor / trainer.mode, when set), top-k
//                            (callbacks/model_checkpoint)
//   RUN/result.json          last and best metrics, counters and checkpoint paths (multirun reads
//                            it; written by the loop at a run's end)
//
// Data order: each epoch is a permutation drawn from (trainer.seed, epoch) alone, so a run is
// reproducible for a seed and the order does not depend on how many random numbers the model used.
// Config: trainer.{seed, max_epochs, max_steps, max_time, batch_size, accumulate_grad_batches,
// cpu_batch_parts (1, N or auto: parallel_parts.h),
// gradient_clip_val, gradient_clip_algorithm (norm|value, after unscaling), limit_train_batches,
// limit_val_batches (int count or float fraction), fast_dev_run (one batch of each, no
// checkpoints), on_nonfinite (skip|stop, when no gradient scaler skips for us), log_every_n_steps,
// monitor, mode, early_stopping.{monitor, patience, min_delta, mode}},
// optimizer.{name: adam|adamw|sgd, lr, weight_decay, momentum}, scheduler.* (lr_scheduler.h),
// callbacks: [names] (callback.h). FitOptions (fit_options.h) reads and checks them.
#pragma once

#include <filesystem>
#include <functional>
#include <iosfwd>
#include <optional>
#include <string>

#include "trainer/amp.h"
#include "trainer/callback.h"
#include "trainer/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/device.h"
#include "trainer/distributed.h"
#include "trainer/fit_options.h"
#include "trainer/sweep/run_directory.h"
#include "trainer/task.h"

namespace wavetrain {

// The task's validation metrics over `split` (at most `max_batches` batches; -1 for all), each
// batch weighted by its size, under the precision policy and without gradients.
Metrics evaluate(Task& task, Split split, const at::Device& device, const AmpPolicy& amp, int64_t batch_size,
                 int64_t max_batches = -1);

class Trainer {
 public:
  // With a process group, this is one rank of a data-parallel run: each rank trains on its slice
  // of every global batch (batch_size items per rank; an incomplete last global batch is dropped),
  // gradients are averaged, and only rank 0 writes logs, metrics, checkpoints and result.json.
  Trainer(const config::Config& cfg, const RunDirectory& run, DeviceChoice device, AmpPolicy amp,
          ProcessGroup* group = nullptr);
  // A resumed run that finished_at() says is over returns at once, with nothing written.
  FitResult fit();

  // Where the progress line, the validation lines and the resume notice go (std::cout by default,
  // as a terminal when stdout_is_terminal()).
  void set_output(std::ostream& out, bool terminal);
  // The clock behind trainer.max_time, the progress line's rates and ETA and result.json's
  // seconds: seconds from any origin, steady_clock by default. Tests make time deterministic.
  void set_clock(std::function<double()> now) { now_ = std::move(now); }

 private:
  const config::Config& cfg_;
  const RunDirectory& run_;
  DeviceChoice device_;
  AmpPolicy amp_;
  ProcessGroup* group_;
  std::ostream* out_;
  bool terminal_;
  std::function<double()> now_;
};

}  // namespace wavetrain
