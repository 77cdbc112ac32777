// Which build of losses/' CPU vector kernels runs (vector_math.h's WAVETRAIN_VECTOR_KERNEL): the
// AVX2 + FMA one where the CPU has both, unless a test forces the baseline ISA's.
#include <atomic>

#include "losses/mutual_information.h"
#include "losses/vector_math.h"

namespace wavetrain::losses::detail {
namespace {
std::atomic<bool> baseline_forced{false};
}  // namespace

bool vector_kernels_use_avx2() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has && !baseline_forced.load(std::memory_order_relaxed);
#else
  return false;
#endif
}

void force_baseline_vector_kernels(bool on) { baseline_forced.store(on, std::memory_order_relaxed); }

}  // namespace wavetrain::losses::detail
