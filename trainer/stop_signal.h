// Stopping a training run on request, with a checkpoint: SIGUSR1 (what Slurm sends shortly before a
// job's time limit, `sbatch --signal=USR1@60`) and SIGTERM (preemption, `scancel`, a time limit
// reached) ask the training loop to save last.ckpt at the next optimizer step and end the run with
// exit code kExitInterrupted, so that `trainer.resume=last` continues it exactly.
//
// A SIGTERM that comes while no training loop runs ends the process as it always would. SIGUSR1 is
// only remembered: a run that has not started its loop yet stops at its first step.
#pragma once

#include "trainer/sweep/stop_protocol.h"  // kExitInterrupted; how launchers start a run with the signals blocked

namespace wavetrain {

// Installs the handlers and unblocks the two signals (a launcher may have started this process with
// them blocked, so that none arrives before the handlers are in place). Call once, early in main().
void install_stop_signal_handlers();

// The signal that asked the run to stop (SIGUSR1 or SIGTERM), or 0.
int stop_signal_received();

// While a StopSignalScope lives, SIGTERM asks the loop to stop instead of ending the process.
class StopSignalScope {
 public:
  StopSignalScope();
  ~StopSignalScope();
  StopSignalScope(const StopSignalScope&) = delete;
  StopSignalScope& operator=(const StopSignalScope&) = delete;
};

// The signal's name for messages: "SIGUSR1", "SIGTERM".
const char* stop_signal_name(int signal);

}  // namespace wavetrain
