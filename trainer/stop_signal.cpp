// Stopping a training run on request; see stop_signal.h.
#include "trainer/stop_signal.h"

#include <signal.h>

#include <atomic>

namespace wavetrain {
namespace {

// Lock-free atomics are async-signal-safe; the handler touches nothing else but signal() and raise().
std::atomic<int> g_received{0};
std::atomic<int> g_training{0};

extern "C" void on_stop_signal(int sig) {
  if (sig == SIGTERM && g_training.load() == 0) {
    ::signal(SIGTERM, SIG_DFL);  // not training: end as the default action would
    ::raise(SIGTERM);
    return;
  }
  int expected = 0;
  g_received.compare_exchange_strong(expected, sig);  // the first request names the reason
}

}  // namespace

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = on_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  sigaddset(&set, SIGTERM);
  ::pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
}

int stop_signal_received() { return g_received.load(); }

StopSignalScope::StopSignalScope() { g_training.fetch_add(1); }
StopSignalScope::~StopSignalScope() { g_training.fetch_sub(1); }

const char* stop_signal_name(int signal) {
  switch (signal) {
    case SIGUSR1: return "SIGUSR1";
    case SIGTERM: return "SIGTERM";
    default: return "a signal";
  }
}

}  // namespace wavetrain
