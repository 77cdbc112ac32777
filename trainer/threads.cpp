// CPU thread policy; see threads.h for the rules and docs/threads.md for the measurements.
#include "trainer/threads.h"

#include <dlfcn.h>
#include <sched.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace wavetrain {
namespace {

std::mutex g_mutex;
std::optional<ThreadSettings> g_applied;

// Whole positive number up to 4096, or nullopt.
std::optional<int> parse_count(const std::string& text) {
  if (text.empty() || text.size() > 4 ||
      !std::all_of(text.begin(), text.end(), [](unsigned char c) { return std::isdigit(c); }))
    return std::nullopt;
  const int n = std::stoi(text);
  if (n > 4096) return std::nullopt;
  return n;
}

}  // namespace

std::optional<int> parse_cgroup_cpu_max(const std::string& text) {
  std::istringstream in(text);
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || period <= 0 || quota == "max") return std::nullopt;
  if (quota.empty() || !std::all_of(quota.begin(), quota.end(), [](unsigned char c) { return std::isdigit(c); }))
    return std::nullopt;
  const long long q = std::stoll(quota);
  if (q <= 0) return std::nullopt;
  return static_cast<int>(std::max(1LL, (q + period - 1) / period));
}

int usable_cpu_count() {
  int cores = 0;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) cores = CPU_COUNT(&set);
  if (cores <= 0) cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  std::ifstream cpu_max("/sys/fs/cgroup/cpu.max");
  std::string line;
  if (cpu_max && std::getline(cpu_max, line)) {
    if (auto quota = parse_cgroup_cpu_max(line)) cores = std::min(cores, *quota);
  }
  return cores;
}

ThreadSettings choose_thread_settings(const char* env_threads, std::optional<int> config_threads, int usable_cores,
                                      const char* omp_wait_policy) {
  ThreadSettings s;
  s.omp_wait_policy = omp_wait_policy ? omp_wait_policy : "";
  s.intra_op = std::max(1, usable_cores);
  s.source = "usable cores";

  if (env_threads != nullptr && *env_threads != '\0') {
    const std::string text = env_threads;
    if (text == "auto") {
      s.source = "WAVETRAIN_THREADS";
      return s;
    }
    const auto n = parse_count(text);
    if (!n)
      throw std::invalid_argument("WAVETRAIN_THREADS='" + text +
                                  "' is not a thread count: expected a whole number from 1 to 4096, or 0 or 'auto' "
                                  "for the usable cores (" + std::to_string(usable_cores) + ")");
    if (*n > 0) s.intra_op = *n;
    s.source = "WAVETRAIN_THREADS";
    return s;
  }
  if (config_threads) {
    if (*config_threads < 0 || *config_threads > 4096)
      throw std::invalid_argument("trainer.threads=" + std::to_string(*config_threads) +
                                  " is not a thread count: expected 1 to 4096, or 0 for the usable cores");
    if (*config_threads > 0) s.intra_op = *config_threads;
    s.source = "config";
  }
  return s;
}

namespace {

// See threads.h. Returns whether the thresholds were raised.
bool keep_freed_memory() {
#if defined(__GLIBC__)
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if ((tunables && std::string(tunables).find("malloc") != std::string::npos) || std::getenv("MALLOC_MMAP_THRESHOLD_") ||
      std::getenv("MALLOC_TRIM_THRESHOLD_"))
    return false;  // the user's say
  const int kOneGiB = 1 << 30;
  return mallopt(M_MMAP_THRESHOLD, kOneGiB) == 1 && mallopt(M_TRIM_THRESHOLD, kOneGiB) == 1;
#else
  return false;
#endif
}

// OpenBLAS's thread-count functions, if LibTorch's BLAS is OpenBLAS.
using OpenBlasSet = void (*)(int);
using OpenBlasGet = int (*)();
OpenBlasSet openblas_set() { return reinterpret_cast<OpenBlasSet>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")); }
OpenBlasGet openblas_get() { return reinterpret_cast<OpenBlasGet>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")); }

}  // namespace

int openblas_threads() {
  const OpenBlasGet get = openblas_get();
  return get && openblas_set() ? get() : -1;
}

void set_openblas_threads(int n) {
  if (const OpenBlasSet set = openblas_set(); set && openblas_get()) set(n);
}

ThreadSettings configure_threads(std::optional<int> config_threads) {
  ThreadSettings s = choose_thread_settings(std::getenv("WAVETRAIN_THREADS"), config_threads, usable_cpu_count(),
                                            std::getenv("OMP_WAIT_POLICY"));
  std::lock_guard<std::mutex> lock(g_mutex);
  s.flush_denormal = at::globalContext().setFlushDenormal(true);
  s.keeps_freed_memory = keep_freed_memory();
  if (!g_applied) {
    try {
      at::set_num_interop_threads(s.inter_op);
    } catch (const std::exception&) {
      // The inter-op pool was already started by other code in this process; keep its size.
      s.inter_op = at::get_num_interop_threads();
    }
  } else {
    s.inter_op = g_applied->inter_op;
  }
  at::set_num_threads(s.intra_op);
  const char* user_blas = std::getenv("OPENBLAS_NUM_THREADS");
  if (user_blas == nullptr || *user_blas == '\0') set_openblas_threads(1);  // else the user's say
  s.openblas_threads = openblas_threads();
  g_applied = s;
  return s;
}

ThreadSettings current_thread_settings() {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_applied) return *g_applied;
  ThreadSettings s;
  s.intra_op = at::get_num_threads();
  s.inter_op = at::get_num_interop_threads();  // reading it does not start the pool
  s.source = "LibTorch default";
  s.openblas_threads = openblas_threads();
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  s.omp_wait_policy = policy ? policy : "";
  return s;
}

}  // namespace wavetrain
