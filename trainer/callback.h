// Callbacks: what happens around the training loop without being training (the role of Lightning's
// Callback). The loop (trainer.cpp) only runs epochs, steps, the optimizer and validation; it calls
// each callback's hooks, in order, at named points, and the callbacks do the rest: checkpoints,
// early stopping, the progress line, metrics.csv and TensorBoard, trainer.max_time, stop signals.
//
// The built-in callbacks (callbacks/builtin.h) are always there, configured by trainer.* keys.
// Others are named in the config, `callbacks: [lr_monitor, my_callback]`, and made by the factory
// they registered under that name (CallbackRegistration: the built-in lr_monitor, or a plugin's);
// they run among the built-in ones (callbacks/builtin.h has the order), in the config's order:
// after the loggers, early stopping and the timer, before the checkpoints, which then hold their
// state after the step.
//
// The hooks of one step, in the order the loop calls them:
//   on_train_batch_end   after the optimizer step and the scheduler (callbacks may add to the
//                        step's logged metrics, and ask the run to stop or to end at once)
//   on_log_metrics       when the step is logged (trainer.log_every_n_steps): the loggers write
//   on_validation_end    when a validation ran (mid-epoch by trainer.val_check_interval, or at the
//                        epoch's end), after its metrics were logged
// and of the epoch: on_train_epoch_start, then on_train_epoch_end (after its validation; the
// checkpoint callback saves last.ckpt here). on_fit_start comes after a resumed run's state is
// loaded (on_load_checkpoint), on_fit_end after the last epoch; on_interrupt when a stop signal
// ended the session; on_exception when the loop throws (the exception is then rethrown).
//
// A callback's state goes into every checkpoint under its own key (state_dict(), saved under
// `callbacks/<name>`) and comes back on resume (load_state_dict), so that a resumed run's callbacks
// go on as an uninterrupted run's would. The built-in early stopping and checkpoint callbacks keep
// the keys checkpoints had before callbacks existed (early_stopping, metrics/best/...), so every
// older checkpoint loads.
#pragma once

#include <cmath>
#include <functional>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "trainer/checkpoint.h"
#include "trainer/config/config.h"
#include "trainer/fit_options.h"
#include "trainer/sweep/run_directory.h"
#include "trainer/task.h"

namespace torch::optim {
class Optimizer;
}

namespace wavetrain {

struct FitResult {
  Metrics last;  // the last validation (and training) metrics
  Metrics best;  // the validation metrics at the best monitored value (empty without a monitor)
  int64_t epochs = 0;
  int64_t global_step = 0;
  // Set when a resumed run had nothing left to train (why; see finished_at); nothing was written.
  std::string already_finished;
  // The stop signal (stop_signal.h) that ended this session after saving last.ckpt; 0 when the run
  // ended by itself. An interrupted session writes no result.json.
  int interrupted_by = 0;
};

// What the loop shows its callbacks: the run's parts, its counters and how to act on the run.
struct FitContext {
  FitContext(const config::Config& cfg, const FitOptions& options, const RunDirectory& run, Task& task,
             torch::optim::Optimizer& optimizer, const std::vector<ParamGroup>& param_groups, FitResult& result,
             std::ostream& out, bool terminal)
      : cfg(cfg), options(options), run(run), task(task), optimizer(optimizer), param_groups(param_groups), result(result),
        out(out), terminal(terminal) {}

  const config::Config& cfg;
  const FitOptions& options;
  const RunDirectory& run;
  Task& task;
  torch::optim::Optimizer& optimizer;
  const std::vector<ParamGroup>& param_groups;  // the optimizer's groups, in its order
  FitResult& result;                            // result.last: the last validation's metrics
  std::ostream& out;                            // the console (progress, validation lines)
  bool terminal;                                // whether `out` is a terminal

  int rank = 0, world = 1;  // this process in a data-parallel run
  bool writer() const { return rank == 0; }  // only rank 0 writes files and prints
  bool resuming = false;                     // trainer.resume is set (and the state was loaded)

  // Counters. `epoch` is 0-based and the one under way; `batch_in_epoch` of its batches are done.
  int64_t epoch = 0, batch_in_epoch = 0;
  int64_t step = 0;           // optimizer steps of the run, earlier sessions included
  int64_t start_step = 0;     // the step this session started at
  int64_t batches = 0;        // training batches per epoch (on this rank)
  int64_t epochs = 0;         // epochs the run trains for; < 1: unbounded (max_steps decides)
  int64_t total_steps = 0;    // steps the run trains for
  int64_t items = 0;          // training items this session
  double loss = NAN;          // the last step's training loss
  ThroughputUnit unit;        // the task's (progress line)
  double earlier_seconds = 0; // training time of the run's earlier sessions

  // Flow. `stop`: end the run after this step (the epoch's validation and last.ckpt still come).
  // `interrupted_by`: a stop signal: end the session now, resumable (on_interrupt is called).
  bool stop = false;
  int interrupted_by = 0;

  // Set by the loop.
  std::function<double()> elapsed;  // this session's seconds, on the trainer's clock
  double run_seconds() const { return earlier_seconds + elapsed(); }
  // True on every rank when `flag` is true on any: decisions that change the flow must agree. A
  // collective: every rank must call it at the same point.
  std::function<bool(bool flag)> any_rank;
  // A line in the run's log (rank 0 only).
  std::function<void(const std::string& line)> log;
  // The full training state as a checkpoint holds it, `batch_in_epoch` batches into `epoch`, with
  // every callback's state (on_save_checkpoint).
  std::function<TrainingState(int64_t epoch, int64_t batch_in_epoch, const Metrics& metrics)> capture;
  // Sends metrics to every logger (on_log_metrics) at the current step and epoch.
  std::function<void(const Metrics& metrics)> log_metrics;
};

// One optimizer step as the callbacks see it.
struct TrainStep {
  double loss = NAN;  // the step's training loss (of its last batch under accumulation)
  Metrics logged;     // what is logged for it: train/loss, the task's, lr; callbacks may add
  bool log = false;   // whether on_log_metrics follows (trainer.log_every_n_steps, the last step)
};

class Callback {
 public:
  virtual ~Callback() = default;
  // The name it is registered and configured under; its state's key in checkpoints.
  virtual std::string name() const = 0;

  virtual void on_fit_start(FitContext& ctx) { (void)ctx; }
  virtual void on_train_epoch_start(FitContext& ctx) { (void)ctx; }
  virtual void on_train_batch_end(FitContext& ctx, TrainStep& step) { (void)ctx, (void)step; }
  virtual void on_log_metrics(FitContext& ctx, const Metrics& metrics) { (void)ctx, (void)metrics; }
  virtual void on_validation_end(FitContext& ctx, const Metrics& metrics) { (void)ctx, (void)metrics; }
  virtual void on_train_epoch_end(FitContext& ctx) { (void)ctx; }
  // A stop signal ended the session; `mid_epoch` when it came between an epoch's steps (last.ckpt
  // of the epoch's end was not saved).
  virtual void on_interrupt(FitContext& ctx, bool mid_epoch) { (void)ctx, (void)mid_epoch; }
  virtual void on_fit_end(FitContext& ctx) { (void)ctx; }
  virtual void on_exception(FitContext& ctx, const std::exception& error) { (void)ctx, (void)error; }

  // Checkpoints: by default the callback's state_dict() under `callbacks/<name()>` (when not None).
  virtual void on_save_checkpoint(const FitContext& ctx, TrainingState& state) const;
  virtual void on_load_checkpoint(FitContext& ctx, const TrainingState& state);
  virtual serialization::Value state_dict() const { return serialization::Value::none(); }
  virtual void load_state_dict(const serialization::Value& state) { (void)state; }
};

using CallbackFactory = std::function<std::unique_ptr<Callback>(const config::Config&)>;

// Registers a callback that a config can name in `callbacks: [...]`. `config_keys` are the keys it
// reads ("lr_monitor.*"); they are known keys of a config that names it. A taken name is not
// replaced (see TaskRegistration).
struct CallbackRegistration {
  CallbackRegistration(const std::string& name, CallbackFactory factory, std::vector<std::string> config_keys = {});
};

std::vector<std::string> callback_names();
// The keys a registered callback reads (none for an unknown name).
std::vector<std::string> callback_config_keys(const std::string& name);
// The callbacks `callbacks: [...]` names, in its order; throws config::ConfigError naming the
// unknown one and the known ones, or a name given twice.
std::vector<std::string> configured_callback_names(const config::Config& cfg);
std::vector<std::unique_ptr<Callback>> make_configured_callbacks(const config::Config& cfg);

}  // namespace wavetrain
