// The layout changes of the lanes kernel of the mutual-information recursion
// (mutual_information_lanes.cpp), in a translation unit of their own: including <immintrin.h> in
// that kernel's file made GCC 12 stop vectorising its main loop (3x slower).
#include "losses/lane_transpose.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "losses/mutual_information.h"
#include "losses/vector_math.h"

namespace wavetrain::losses::detail {
namespace {

constexpr int64_t kLanes = kTransposeLanes;

template <typename T>
void gather_lanes_scalar(const T* const* src, const int64_t* hi, int64_t shift, T fill, T* dst, int64_t t_begin,
                         int64_t t_end) {
  for (int64_t t = t_begin; t < t_end; ++t)
    for (int64_t l = 0; l < kLanes; ++l)
      dst[t * kLanes + l] = src[l] != nullptr && shift <= t && t < hi[l] ? src[l][t - shift] : fill;
}
// dst[l][t] = src[t * kLanes + l] for t in [0, hi[l]) (dst[l] == nullptr: none).
template <typename T>
void scatter_lanes_scalar(const T* src, T* const* dst, const int64_t* hi, int64_t t_begin) {
  for (int64_t l = 0; l < kLanes; ++l)
    if (dst[l] != nullptr)
      for (int64_t t = t_begin; t < hi[l]; ++t) dst[l][t] = src[t * kLanes + l];
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(WAVETRAIN_NO_VECTOR_CLONES)
#define WAVETRAIN_LANES_AVX2 1
static_assert(kLanes == 8, "the AVX2 transposes are 8 x 8 floats");
// 8 x 8 floats: r[i][j] becomes r[j][i] (unpack pairs, then quads, then swap the 128-bit halves).
__attribute__((target("avx2"))) inline void transpose8x8(__m256* r) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

// 8 columns at a time: 8 loads, the transpose, 8 contiguous stores, where the scalar loop does 64
// loads and 64 stores (the layout changes were 40% of the kernel's time).
__attribute__((target("avx2"))) void gather_lanes_avx2(const float* const* src, const int64_t* hi, int64_t shift,
                                                        float fill, float* dst, int64_t Tc) {
  int64_t t0 = 0;
  for (; t0 + 8 <= Tc; t0 += 8) {
    __m256 r[8];
    for (int64_t l = 0; l < kLanes; ++l) {
      if (src[l] != nullptr && shift <= t0 && t0 + 8 <= hi[l]) {
        r[l] = _mm256_loadu_ps(src[l] + (t0 - shift));
      } else {
        alignas(32) float v[8];
        for (int64_t j = 0; j < 8; ++j) {
          const int64_t t = t0 + j;
          v[j] = src[l] != nullptr && shift <= t && t < hi[l] ? src[l][t - shift] : fill;
        }
        r[l] = _mm256_load_ps(v);
      }
    }
    transpose8x8(r);
    for (int64_t j = 0; j < 8; ++j) _mm256_storeu_ps(dst + (t0 + j) * kLanes, r[j]);
  }
  gather_lanes_scalar(src, hi, shift, fill, dst, t0, Tc);
}

__attribute__((target("avx2"))) void scatter_lanes_avx2(const float* src, float* const* dst, const int64_t* hi,
                                                         int64_t Tc) {
  int64_t t0 = 0;
  for (; t0 + 8 <= Tc; t0 += 8) {
    __m256 r[8];
    for (int64_t j = 0; j < 8; ++j) r[j] = _mm256_loadu_ps(src + (t0 + j) * kLanes);
    transpose8x8(r);
    for (int64_t l = 0; l < kLanes; ++l) {
      if (dst[l] == nullptr) continue;
      if (t0 + 8 <= hi[l]) {
        _mm256_storeu_ps(dst[l] + t0, r[l]);
      } else {
        alignas(32) float v[8];
        _mm256_store_ps(v, r[l]);
        for (int64_t t = t0; t < hi[l]; ++t) dst[l][t] = v[t - t0];
      }
    }
  }
  scatter_lanes_scalar(src, dst, hi, t0);
}
#endif

}  // namespace

void gather_lanes(const float* const* src, const int64_t* hi, int64_t shift, float fill, float* dst, int64_t Tc) {
#ifdef WAVETRAIN_LANES_AVX2
  if (vector_kernel_isa() >= VectorIsa::kAvx2Fma) return gather_lanes_avx2(src, hi, shift, fill, dst, Tc);
#endif
  gather_lanes_scalar(src, hi, shift, fill, dst, 0, Tc);
}
void gather_lanes(const double* const* src, const int64_t* hi, int64_t shift, double fill, double* dst, int64_t Tc) {
  gather_lanes_scalar(src, hi, shift, fill, dst, 0, Tc);
}
void scatter_lanes(const float* src, float* const* dst, const int64_t* hi, int64_t Tc) {
#ifdef WAVETRAIN_LANES_AVX2
  if (vector_kernel_isa() >= VectorIsa::kAvx2Fma) return scatter_lanes_avx2(src, dst, hi, Tc);
#endif
  (void)Tc;
  scatter_lanes_scalar(src, dst, hi, 0);
}
void scatter_lanes(const double* src, double* const* dst, const int64_t* hi, int64_t /*Tc*/) {
  scatter_lanes_scalar(src, dst, hi, 0);
}

}  // namespace wavetrain::losses::detail
