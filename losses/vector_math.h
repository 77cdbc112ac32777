// Internal to losses/: exp and log1p written as branch-free polynomials, so that loops calling
// them vectorise (libm's calls do not; GCC additionally needs -fno-trapping-math to if-convert the
// comparisons, set per file in losses/CMakeLists.txt). Accuracy near the last bit of float and
// double on their domains; used by the CPU kernels of the transducer losses.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

// Loops over these functions are compiled three times on x86-64: for the baseline ISA (SSE2, 4
// floats per instruction), for AVX2 + FMA (8 floats, and a multiply-add in one instruction and one
// rounding), and for AVX-512 (F, VL, DQ, BW; 16 floats, GCC told to prefer 512-bit vectors, which
// its default tuning does not); each call picks the best one the CPU has (vector_kernel_isa).
// Not target_clones: its "avx2" clone has no FMA, which cost 15-25% here, and its "arch=" clones
// dispatch on the CPU model, not its features. Elsewhere (ARM) the baseline build already has NEON
// and fused multiply-adds.
//
// WAVETRAIN_VECTOR_KERNEL(RET, NAME, (PARAMS), (ARGS)) defines NAME(PARAMS), which runs
// NAME_impl(ARGS) compiled each way.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(WAVETRAIN_NO_VECTOR_CLONES)
#include "losses/mutual_information.h"  // VectorIsa
namespace wavetrain::losses::detail {
// The best build the CPU runs, capped by cap_vector_kernels (mutual_information.h); vector_math.cpp.
VectorIsa vector_kernel_isa();
}  // namespace wavetrain::losses::detail
#define WAVETRAIN_AVX512_TARGET "avx512f,avx512vl,avx512dq,avx512bw,avx2,fma,prefer-vector-width=512"
#define WAVETRAIN_VECTOR_KERNEL(RET, NAME, PARAMS, ARGS)                                            \
  __attribute__((target(WAVETRAIN_AVX512_TARGET))) RET NAME##_avx512 PARAMS { return NAME##_impl ARGS; } \
  __attribute__((target("avx2,fma"))) RET NAME##_avx2_fma PARAMS { return NAME##_impl ARGS; }     \
  RET NAME##_baseline PARAMS { return NAME##_impl ARGS; }                                         \
  RET NAME PARAMS {                                                                               \
    switch (vector_kernel_isa()) {                                                                \
      case VectorIsa::kAvx512: return NAME##_avx512 ARGS;                                         \
      case VectorIsa::kAvx2Fma: return NAME##_avx2_fma ARGS;                                      \
      default: return NAME##_baseline ARGS;                                                       \
    }                                                                                             \
  }
#else
#define WAVETRAIN_VECTOR_KERNEL(RET, NAME, PARAMS, ARGS) \
  RET NAME PARAMS { return NAME##_impl ARGS; }
#endif

// The loops that call these vectorise only if every call is inlined; GCC's inliner stops at its unit
// growth limits in a large translation unit (a new kernel in mutual_information_lanes.cpp lost its
// vector loop that way, 3x slower), so they are forced inline.
#define WAVETRAIN_VECTOR_INLINE inline __attribute__((always_inline))

namespace wavetrain::losses::detail {

template <typename To, typename From>
WAVETRAIN_VECTOR_INLINE To bit_cast(From from) {
  static_assert(sizeof(To) == sizeof(From));
  To to;
  std::memcpy(&to, &from, sizeof(To));
  return to;
}

// exp(x) for x <= 0; x below the smallest normal result (and -inf) gives exactly 0; NaN gives NaN.
// Range reduction x = k ln2 + r with |r| <= ln2 / 2, a Taylor polynomial for exp(r) (degree 7 in
// float: truncation 4e-9; degree 12 in double: 2e-16), and 2^k put into the exponent bits.
WAVETRAIN_VECTOR_INLINE float exp_nonpositive(float x) {
  const float lowest = -87.0f;  // exp(-87) = 1.6e-38, just above FLT_MIN
  const float xc = x < lowest ? lowest : x;
  const float shift = 12582912.0f + 127.0f;  // 1.5 * 2^23: adding it rounds to an integer; + bias
  const float biased = xc * 1.44269504088896341f + shift;
  const float k = biased - shift;
  const float r = (xc - k * 0.693145751953125f) - k * 1.42860682030941723212e-6f;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // The low mantissa bits of `biased` hold k + 127; shifting them into the exponent gives 2^k.
  const float scale = bit_cast<float>(bit_cast<uint32_t>(biased) << 23);
  return x < lowest ? 0.0f : p * scale;
}

WAVETRAIN_VECTOR_INLINE double exp_nonpositive(double x) {
  const double lowest = -708.0;  // exp(-708) = 3.3e-308, just above DBL_MIN
  const double xc = x < lowest ? lowest : x;
  const double shift = 6755399441055744.0 + 1023.0;  // 1.5 * 2^52, + bias
  const double biased = xc * 1.4426950408889634074 + shift;
  const double k = biased - shift;
  const double r = (xc - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  double p = 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  const double scale = bit_cast<double>(bit_cast<uint64_t>(biased) << 52);
  return x < lowest ? 0.0 : p * scale;
}

// log(1 + u) for u in [0, 1]. Above sqrt(2) - 1 it uses 1 + u = 2 (1 + w), w = (u - 1) / 2, so the
// argument is always in [-0.293, 0.415]; then log(1 + w) = 2 atanh(z), z = w / (2 + w), |z| <= 0.172,
// by its odd series (to z^9 in float, z^23 in double: truncation below 1e-9 and 1e-16 relative).
WAVETRAIN_VECTOR_INLINE float log1p_unit(float u) {
  const bool big = u > 0.41421356f;
  const float w = big ? (u - 1.0f) * 0.5f : u;
  const float z = w / (2.0f + w), z2 = z * z;
  float p = 1.0f / 9.0f;
  p = p * z2 + 1.0f / 7.0f;
  p = p * z2 + 1.0f / 5.0f;
  p = p * z2 + 1.0f / 3.0f;
  p = p * z2 + 1.0f;
  return 2.0f * z * p + (big ? 0.693147180559945309f : 0.0f);
}

WAVETRAIN_VECTOR_INLINE double log1p_unit(double u) {
  const bool big = u > 0.41421356237309504880;
  const double w = big ? (u - 1.0) * 0.5 : u;
  const double z = w / (2.0 + w), z2 = z * z;
  double p = 1.0 / 23.0;
  p = p * z2 + 1.0 / 21.0;
  p = p * z2 + 1.0 / 19.0;
  p = p * z2 + 1.0 / 17.0;
  p = p * z2 + 1.0 / 15.0;
  p = p * z2 + 1.0 / 13.0;
  p = p * z2 + 1.0 / 11.0;
  p = p * z2 + 1.0 / 9.0;
  p = p * z2 + 1.0 / 7.0;
  p = p * z2 + 1.0 / 5.0;
  p = p * z2 + 1.0 / 3.0;
  p = p * z2 + 1.0;
  return 2.0 * z * p + (big ? 0.69314718055994530942 : 0.0);
}

// The MI backward's rule for one cell: its occupation g goes share * g to its term1 predecessor and
// the rest to its term2 one; a NaN share sends nothing. Parts below the smallest normal number are
// flushed to 0: they are negligible, and subnormal numbers make every later product slow (the
// normaliser's matmul ran 3x slower).
template <typename T>
WAVETRAIN_VECTOR_INLINE void split_by_share(T g, T share, T& to_term1, T& to_term2) {
  const T tiny = std::numeric_limits<T>::min();
  const bool ok = share == share;
  const T g1 = ok ? share * g : T(0), g2 = ok ? (T(1) - share) * g : T(0);
  to_term1 = g1 < tiny ? T(0) : g1;
  to_term2 = g2 < tiny ? T(0) : g2;
}

// log(exp(a) + exp(b)). Both -inf gives -inf; NaN in either gives NaN.
template <typename T>
WAVETRAIN_VECTOR_INLINE T log_add(T a, T b) {
  const T ninf = -std::numeric_limits<T>::infinity();
  const T hi = a > b ? a : b;
  const T diff = a > b ? b - a : a - b;  // <= 0
  const T r = hi + log1p_unit(exp_nonpositive(diff));
  return ((a == ninf) & (b == ninf)) ? ninf : r;  // `&`, not `&&`: no branch, so loops vectorise
}

}  // namespace wavetrain::losses::detail
