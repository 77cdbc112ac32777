// The built-in callbacks (callback.h), one file each in this folder. Every run has them, configured
// by trainer.* keys, with the config's `callbacks: [...]` among them, in this order, which is the
// order their hooks run in:
//
//   progress_bar        the progress line and the validation lines (progress.h)
//   csv_logger          RUN/metrics.csv (metrics_csv.h)
//   tensorboard         RUN/tensorboard/ (tensorboard.h)
//   early_stopping      trainer.early_stopping.*
//   timer               trainer.max_time over all the run's sessions (Lightning's Timer)
//   ...                 the configured callbacks (lr_monitor, a plugin's), in the config's order
//   model_checkpoint    last.ckpt, best.ckpt, top-k and every_n_steps/epochs (trainer.checkpoint.*):
//                       after every callback whose state it saves has had its hook (as Lightning
//                       puts its ModelCheckpoint last), so a checkpoint of step N holds each
//                       callback's state after step N
//   stop_on_signal      SIGUSR1/SIGTERM: last.ckpt (model_checkpoint, just before), then exit
//                       kExitInterrupted (stop_signal.h)
//   fault_injection     only when WAVETRAIN_FAULT_* is set (the resume and launcher tests): after
//                       the checkpoints due at a step, so a kill there leaves what a crash would
#pragma once

#include <memory>
#include <vector>

#include "trainer/callback.h"

namespace wavetrain {

// The run's callbacks in their order, `configured` (make_configured_callbacks) among them.
std::vector<std::unique_ptr<Callback>> make_run_callbacks(const FitOptions& options,
                                                          std::vector<std::unique_ptr<Callback>> configured);

std::unique_ptr<Callback> make_progress_bar();
std::unique_ptr<Callback> make_csv_logger();
std::unique_ptr<Callback> make_tensorboard_logger();
std::unique_ptr<Callback> make_early_stopping(const FitOptions& options);
std::unique_ptr<Callback> make_model_checkpoint(const FitOptions& options);
// nullptr unless WAVETRAIN_FAULT_KILL_AT_STEP or WAVETRAIN_FAULT_STEP_DELAY_MS is set.
std::unique_ptr<Callback> make_fault_injection();
std::unique_ptr<Callback> make_timer(const FitOptions& options);
std::unique_ptr<Callback> make_stop_on_signal();
// lr_monitor.log_momentum (bool, false): also momentum-<group> (SGD's momentum, Adam's beta1).
std::unique_ptr<Callback> make_lr_monitor(const config::Config& cfg);

}  // namespace wavetrain
