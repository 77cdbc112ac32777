// Which build of losses/' CPU vector kernels runs (vector_math.h's WAVETRAIN_VECTOR_KERNEL): the
// best the CPU has, AVX-512, AVX2 + FMA or the baseline ISA, unless a test caps it lower.
#include <algorithm>
#include <atomic>

#include "losses/mutual_information.h"
#include "losses/vector_math.h"

namespace wavetrain::losses::detail {
namespace {
std::atomic<int> cap{static_cast<int>(VectorIsa::kAvx512)};

VectorIsa best_supported() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
      __builtin_cpu_supports("avx512bw"))
    return VectorIsa::kAvx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return VectorIsa::kAvx2Fma;
#endif
  return VectorIsa::kBaseline;
}
}  // namespace

VectorIsa vector_kernel_isa() {
  static const VectorIsa best = best_supported();
  return static_cast<VectorIsa>(std::min(static_cast<int>(best), cap.load(std::memory_order_relaxed)));
}

void cap_vector_kernels(VectorIsa highest) { cap.store(static_cast<int>(highest), std::memory_order_relaxed); }

}  // namespace wavetrain::losses::detail
