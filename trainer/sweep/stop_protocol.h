// How a launcher and the `wavetrain train` it starts agree on stopping early: the launcher starts
// the process with SIGUSR1 and SIGTERM blocked, so that a request passed on at once is neither lost
// nor fatal; the process unblocks them once its handlers are in place (trainer/stop_signal.h),
// saves last.ckpt at the next step, and exits with kExitInterrupted (sysexits' EX_TEMPFAIL, "try
// again later"). The launcher then requeues the job or continues it from the checkpoint.
#pragma once

#include <signal.h>
#include <spawn.h>

namespace wavetrain {

inline constexpr int kExitInterrupted = 75;

// Makes `attr` start its process with the two stop signals blocked.
inline void block_stop_signals(posix_spawnattr_t& attr) {
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGUSR1);
  sigaddset(&blocked, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &blocked);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
}

}  // namespace wavetrain
