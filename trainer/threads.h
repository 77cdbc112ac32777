// CPU thread policy. LibTorch here starts with 1 intra-op thread (half the cores of a 2-core box);
// wavetrain uses every usable core instead, and makes libgomp wait passively, because with its
// default spin-waiting, 2 threads on a busy 2-core machine ran 3x slower than 1 (docs/threads.md).
//
// Precedence for the intra-op thread count: WAVETRAIN_THREADS (the operator's per-machine say),
// then the config's value, then the usable cores (CPU affinity and cgroup quota aware).
// Inter-op threads are 1: wavetrain runs no parallel graph work.
//
// Subnormal floats are flushed to zero (FTZ/DAZ, PyTorch's set_flush_denormal) on the thread that
// configures, before the thread pools start, so that their threads inherit it. Arithmetic on
// subnormals is many times slower on x86, and losses produce them: the transducer loss's normaliser
// matmul ran 1.5x slower in its backward with them (docs/threads.md). Values below 1.2e-38 (float)
// become 0, far below anything a training step can resolve.
//
// Freed memory is kept for reuse (glibc's mmap and trim thresholds raised to 1 GiB) unless the user
// set glibc's malloc tunables (GLIBC_TUNABLES with "malloc", MALLOC_MMAP_THRESHOLD_ or
// MALLOC_TRIM_THRESHOLD_). By default glibc gives every block over 32 MiB back to the kernel when
// it is freed, so a training step's large temporaries came back as fresh pages on every step, each
// page faulted in and zeroed: the MRSTFT loss at 4 x 65536 ran in 40 ms instead of 66, the pruned
// RNN-T pipeline in 30 instead of 40, the ASR step in one part in 117 instead of 135
// (docs/threads.md). The peak memory is unchanged; the process keeps it until it exits.
//
// OpenBLAS multiplies in the calling thread (1 thread), unless the user set OPENBLAS_NUM_THREADS.
// Its pthread build (Debian's LibTorch multiplies matrices with it; the pip wheels use MKL) keeps a
// pool of its own beside OpenMP's, sized to every core whatever the intra-op count. Its threads
// spin after each product while OpenMP's run the next operator on the same cores: at 2 threads
// the ASR step in one part took 870 ms instead of 558, rnnt_loss_simple 44 ms instead of 21, and at
// 1 thread it used a second core it was not given (docs/threads.md).
#pragma once

#include <optional>
#include <string>

namespace wavetrain {

// libgomp reads OMP_WAIT_POLICY once, when it is loaded, before main() runs: the wavetrain binary
// sets this default and re-executes itself, unless the user set the variable (cli/main.cpp).
inline constexpr const char* kDefaultOmpWaitPolicy = "PASSIVE";

struct ThreadSettings {
  int intra_op = 1;
  int inter_op = 1;
  std::string source;           // "WAVETRAIN_THREADS", "config" or "usable cores"
  std::string omp_wait_policy;  // as the process saw it at start; empty when unset
  bool flush_denormal = false;  // whether this CPU flushes subnormals (FTZ/DAZ) for us
  bool keeps_freed_memory = false;  // glibc's thresholds raised (false: the user's tunables, or not glibc)
  int openblas_threads = -1;        // OpenBLAS's thread count after configuring; -1 without OpenBLAS
};

// OpenBLAS's own thread count, or -1 where LibTorch does not multiply with OpenBLAS (looked up at
// run time: the Debian build does, the pip build uses MKL). The setter does nothing without it.
int openblas_threads();
void set_openblas_threads(int n);

// Cores this process may run on: the affinity mask, capped by a cgroup v2 cpu.max quota.
int usable_cpu_count();

// Parses a cgroup v2 cpu.max line ("max 100000" or "150000 100000") into whole CPUs, rounded up.
// Returns nullopt for no limit or text that is not of that form.
std::optional<int> parse_cgroup_cpu_max(const std::string& text);

// Pure. `env_threads` is WAVETRAIN_THREADS's text (nullptr if unset; "0" or "auto" mean the usable
// cores); `config_threads` is the config's value (nullopt if unset, 0 means the usable cores).
// Throws std::invalid_argument naming WAVETRAIN_THREADS or the config key for a bad value.
ThreadSettings choose_thread_settings(const char* env_threads, std::optional<int> config_threads, int usable_cores,
                                      const char* omp_wait_policy);

// Reads the environment and applies the choice to ATen. Inter-op threads can be set only once per
// process (LibTorch refuses later calls); a later call changes the intra-op count alone.
ThreadSettings configure_threads(std::optional<int> config_threads = std::nullopt);

// What configure_threads() last applied, or LibTorch's own setting if it was never called.
ThreadSettings current_thread_settings();

}  // namespace wavetrain
