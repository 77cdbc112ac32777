// Internal to experiments/amp/: what the hand-written CPU loops share (the real-time engines in
// dsp_kernels.cpp and lstm_dsp.cpp, the training kernels in wavenet_cpu_kernels.cpp): fixed-width float
// vectors, unaligned loads and stores, an 8-lane exp with the caller's polynomial, and a branch-free tanh.
#pragma once

#include <cstdint>
#include <cstring>

#include "losses/vector_math.h"

namespace wavetrain::experiments::amp::kernels {

// GCC/Clang vector extensions: the compiler maps them to AVX (8 wide) or SSE (4 wide, or two of
// them for 8) in each compiled variant. Loads and stores go through memcpy: unaligned, no aliasing
// questions, and compiled to one vector move. They are always inlined, so GCC's -Wpsabi note about
// returning 32-byte vectors without AVX does not apply (the files using them silence it).
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec4 __attribute__((vector_size(16)));
typedef float Vec16 __attribute__((vector_size(64)));  // only inside AVX-512 variants

template <typename Vec>
__attribute__((always_inline)) inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <typename Vec>
__attribute__((always_inline)) inline void store(float* p, const Vec& v) {
  std::memcpy(p, &v, sizeof v);
}

// exp(x) for x <= 0 on 8 lanes, with the caller's polynomial for exp(r): x = k ln 2 + r with
// |r| <= ln 2 / 2, exp(r) = poly(r), and 2^k put into the exponent bits; below -87 (where exp
// leaves float's normal range) exactly 0. The real-time LSTM and the training kernels use
// polynomials of different lengths.
template <typename Poly>
__attribute__((always_inline)) inline Vec8 exp_nonpositive_with(Vec8 x, Poly poly) {
  typedef int32_t Vec8i __attribute__((vector_size(32)));
  const Vec8 lowest = Vec8{} - 87.0f;
  const Vec8 xc = x < lowest ? lowest : x;
  const float shift = 12582912.0f + 127.0f;  // 1.5 * 2^23 + the exponent bias: rounds k into the low bits
  const Vec8 biased = xc * 1.44269504088896341f + shift;
  const Vec8 k = biased - shift;
  const Vec8 r = (xc - k * 0.693145751953125f) - k * 1.42860682030941723212e-6f;
  const Vec8 p = poly(r);
  Vec8i bits;
  std::memcpy(&bits, &biased, sizeof bits);
  bits <<= 23;
  Vec8 scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return x < lowest ? Vec8{} : p * scale;
}

// (1 - e) / (1 + e), e = exp(-2|x|): branch-free, so loops over it vectorise (with
// -fno-trapping-math). Absolute error below 1e-7 (relative error grows near 0, where 1 - e cancels).
inline float fast_tanh(float x) {
  const float a = x < 0 ? -x : x;
  const float e = losses::detail::exp_nonpositive(-2.0f * a);
  const float t = (1.0f - e) / (1.0f + e);
  return x < 0 ? -t : t;
}

// x86-64 builds compile the kernels for the baseline ISA and for AVX2 + FMA (the real-time engine
// also for AVX-512F: dsp_kernels.cpp, lstm_dsp.cpp), and pick by what the CPU supports. (Not target_clones("arch=haswell"): GCC dispatches `arch=` clones on the
// CPU model, so a newer Xeon than Haswell would get the baseline.)
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define WAVETRAIN_AMP_AVX2 1
inline bool cpu_has_avx2_fma() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
}
// AVX-512F (with AVX2 + FMA): the real-time LSTM's 16-lane variant. __builtin_cpu_supports checks
// that the OS saves the 512-bit registers too.
inline bool cpu_has_avx512f() {
  static const bool has = [] {
    __builtin_cpu_init();
    return cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f");
  }();
  return has;
}
#else
#define WAVETRAIN_AMP_AVX2 0
inline bool cpu_has_avx2_fma() { return false; }
inline bool cpu_has_avx512f() { return false; }
#endif

// The channel counts with register-blocked kernels, as Vec x W floats x V vectors a row. NAM's
// presets use 16, 12, 8, 6, 4, 3 and 2; 6, 3 and 2 as that many scalars in registers (through the
// plain loop ANY, whose sums live in memory, lite's step took 1.8x as long and nano's 1.7x), in
// functions SCALAR<N> of their own: inlined into the switch beside the vector tiles, they made its
// 8-channel kernels 30% slower (A2's training step 137 -> 184 ms). In a function returning void:
// WAVETRAIN_AMP_CHANNEL_SWITCH(kernel_template, args, plain_loop, scalar_template) with
// args.channels. 8 and 24 channels take MID x MW-float vectors, multiples of 16 WIDE x WW-float
// ones: 8-lane vectors for both in AVX2 variants, 16-lane WIDE ones in AVX-512 variants
// (WAVETRAIN_AMP_CHANNEL_SWITCH_WIDE), and 4-lane ones only in the baseline-ISA variants (SSE2, or
// NEON on ARM: WAVETRAIN_AMP_CHANNEL_SWITCH_NARROW). GCC splits a vector wider than the ISA's into
// several registers, and the 8-lane tiles then needed 16 of SSE2's 16 for their accumulators: the
// spills made a training step 5x slower than LibTorch's conv1d.
#define WAVETRAIN_AMP_CHANNEL_SWITCH_AS(KERNEL, ARG, ANY, MID, MW, WIDE, WW, SCALAR) \
  switch ((ARG).channels) {                                                \
    case 2: return SCALAR<2>(ARG);                                         \
    case 3: return SCALAR<3>(ARG);                                         \
    case 6: return SCALAR<6>(ARG);                                         \
    case 4: return KERNEL<Vec4, 4, 1>(ARG);                                \
    case 8: return KERNEL<MID, MW, 8 / MW>(ARG);                           \
    case 12: return KERNEL<Vec4, 4, 3>(ARG);                               \
    case 16: return KERNEL<WIDE, WW, 16 / WW>(ARG);                        \
    case 24: return KERNEL<MID, MW, 24 / MW>(ARG);                         \
    case 32: return KERNEL<WIDE, WW, 32 / WW>(ARG);                        \
    case 48: return KERNEL<WIDE, WW, 48 / WW>(ARG);                        \
    case 64: return KERNEL<WIDE, WW, 64 / WW>(ARG);                        \
    default: return ANY(ARG);                                              \
  }
#define WAVETRAIN_AMP_CHANNEL_SWITCH(KERNEL, ARG, ANY, SCALAR) WAVETRAIN_AMP_CHANNEL_SWITCH_AS(KERNEL, ARG, ANY, Vec8, 8, Vec8, 8, SCALAR)
#define WAVETRAIN_AMP_CHANNEL_SWITCH_WIDE(KERNEL, ARG, ANY, SCALAR) \
  WAVETRAIN_AMP_CHANNEL_SWITCH_AS(KERNEL, ARG, ANY, Vec8, 8, Vec16, 16, SCALAR)
#define WAVETRAIN_AMP_CHANNEL_SWITCH_NARROW(KERNEL, ARG, ANY, SCALAR) \
  WAVETRAIN_AMP_CHANNEL_SWITCH_AS(KERNEL, ARG, ANY, Vec4, 4, Vec4, 4, SCALAR)

}  // namespace wavetrain::experiments::amp::kernels
