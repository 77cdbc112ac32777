// How a launcher and the processes it starts agree on stopping:
//
// - Stop requests. The launcher starts `wavetrain train` with SIGUSR1 and SIGTERM blocked, so that a
//   request passed on at once is neither lost nor fatal; the process unblocks them once its handlers
//   are in place (trainer/stop_signal.h), saves last.ckpt at the next step, and exits with
//   kExitInterrupted (sysexits' EX_TEMPFAIL, "try again later"). The launcher then requeues the job
//   or continues it from the checkpoint.
// - Dying with the launcher. A launcher killed outright (SIGKILL, the OOM killer) cannot pass anything
//   on, so each child asks the kernel for a SIGTERM when its parent dies (Linux's parent-death
//   signal): the launcher names itself in WAVETRAIN_PARENT_PID, and the child, early in main(),
//   arms the signal if its parent is still that process, or stops at once if it is already gone.
//   SIGTERM, not SIGKILL: a training child saves its checkpoint and exits 75 like any stopped run.
//   The kernel sends it when the *thread* that started the child ends, so launchers start children
//   from the main thread.
#pragma once

#include <signal.h>
#include <spawn.h>

#include <string>
#include <vector>

namespace wavetrain {

inline constexpr int kExitInterrupted = 75;
inline constexpr const char* kParentPidVariable = "WAVETRAIN_PARENT_PID";

// Makes `attr` start its process with the two stop signals blocked (other flags of `attr` kept).
inline void block_stop_signals(posix_spawnattr_t& attr) {
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGUSR1);
  sigaddset(&blocked, SIGTERM);
  posix_spawnattr_setsigmask(&attr, &blocked);
  short flags = 0;
  posix_spawnattr_getflags(&attr, &flags);
  posix_spawnattr_setflags(&attr, static_cast<short>(flags | POSIX_SPAWN_SETSIGMASK));
}

// The environment for a child that dies with this process: this process's own, with each
// "NAME=VALUE" of `set` replacing or adding its variable, and WAVETRAIN_PARENT_PID=<this pid>.
class ChildEnvironment {
 public:
  explicit ChildEnvironment(const std::vector<std::string>& set = {});
  ChildEnvironment(const ChildEnvironment&) = delete;
  ChildEnvironment& operator=(const ChildEnvironment&) = delete;
  char** envp() { return pointers_.data(); }

 private:
  std::vector<std::string> entries_;
  std::vector<char*> pointers_;
};

// In a child started with a ChildEnvironment (call once, early in main(), after the stop handlers
// are installed): arms SIGTERM for when the parent dies, or raises it now if the parent already has.
// A process whose parent is not the one named (a wrapper that did not exec) is left as it is.
// Removes the variable, so that what this process starts does not take it for its own.
void die_with_parent();

}  // namespace wavetrain
