// The simple RNN-T loss's matrix products (small_matmul.h). Two shapes of register tile:
// - matmul_nt: a tile of RA rows of a by RB rows of b, RA * RB vector accumulators that each sum
//   one dot product lane-wise along k; the lanes are added once at the end. K's last partial vector
//   is read through a zero-padded copy, so a product of any K costs one extra step, not a scalar
//   loop per pair.
// - matmul_times: a tile of MR output rows by NV vectors of columns, updated from one row of b and
//   MR scalars of a per k (b's rows stay in cache across the row blocks of a column block). The
//   last columns, fewer than a tile's, are copied into a zero-padded panel first.
// Sums run in k order per lane, so a result differs from a BLAS's in the last bits only.
#include "losses/small_matmul.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "losses/vector_math.h"

namespace wavetrain::losses::detail {
namespace {

template <typename T, int Bytes>
struct Vec {
  typedef T type __attribute__((vector_size(Bytes)));
};

// Vectors go in and out through references: passed or returned by value, they would change the
// ABI between the ISA builds (GCC's -Wpsabi).
template <typename V, typename T>
WAVETRAIN_VECTOR_INLINE void load(V& v, const T* p) {
  std::memcpy(&v, p, sizeof v);
}

template <typename V, typename T>
WAVETRAIN_VECTOR_INLINE void store(T* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

// The first n < lanes elements of p, the rest zero.
template <typename V, typename T>
WAVETRAIN_VECTOR_INLINE void load_partial(V& v, const T* p, int64_t n) {
  T padded[sizeof(V) / sizeof(T)] = {};
  std::memcpy(padded, p, n * sizeof(T));
  load(v, padded);
}

// The sum of v's lanes, halving the vector each step.
template <typename T, int Bytes>
WAVETRAIN_VECTOR_INLINE T lane_sum(const typename Vec<T, Bytes>::type& v) {
  if constexpr (Bytes == sizeof(T)) {
    return v[0];
  } else {
    typedef typename Vec<T, Bytes / 2>::type Half;
    Half low, high;
    std::memcpy(&low, &v, Bytes / 2);
    std::memcpy(&high, reinterpret_cast<const char*>(&v) + Bytes / 2, Bytes / 2);
    return lane_sum<T, Bytes / 2>(low + high);
  }
}

// ---- matmul_nt ----

template <typename T, int Bytes, int RA, int RB>
WAVETRAIN_VECTOR_INLINE void nt_tile(int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb, T* out, int64_t ldo) {
  typedef typename Vec<T, Bytes>::type V;
  constexpr int64_t L = Bytes / sizeof(T);
  V acc[RA][RB];
  for (int i = 0; i < RA; ++i)
    for (int j = 0; j < RB; ++j) acc[i][j] = V{};
  int64_t k = 0;
  for (; k + L <= K; k += L) {
    V bv[RB];
    for (int j = 0; j < RB; ++j) load(bv[j], b + j * ldb + k);
    for (int i = 0; i < RA; ++i) {
      V av;
      load(av, a + i * lda + k);
      for (int j = 0; j < RB; ++j) acc[i][j] += av * bv[j];
    }
  }
  if (k < K) {
    V bv[RB];
    for (int j = 0; j < RB; ++j) load_partial(bv[j], b + j * ldb + k, K - k);
    for (int i = 0; i < RA; ++i) {
      V av;
      load_partial(av, a + i * lda + k, K - k);
      for (int j = 0; j < RB; ++j) acc[i][j] += av * bv[j];
    }
  }
  for (int i = 0; i < RA; ++i)
    for (int j = 0; j < RB; ++j) out[i * ldo + j] = lane_sum<T, Bytes>(acc[i][j]);
}

// A tile of ra <= RA rows by rb <= RB columns: the instance for that size.
template <typename T, int Bytes, int RA, int RB>
WAVETRAIN_VECTOR_INLINE void nt_tile_columns(int rb, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb, T* out,
                                             int64_t ldo) {
  if constexpr (RB > 0) {
    if (rb == RB) return nt_tile<T, Bytes, RA, RB>(K, a, lda, b, ldb, out, ldo);
    nt_tile_columns<T, Bytes, RA, RB - 1>(rb, K, a, lda, b, ldb, out, ldo);
  }
}

template <typename T, int Bytes, int RA, int RB>
WAVETRAIN_VECTOR_INLINE void nt_tile_any(int ra, int rb, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb,
                                         T* out, int64_t ldo) {
  if constexpr (RA > 0) {
    if (ra == RA) return nt_tile_columns<T, Bytes, RA, RB>(rb, K, a, lda, b, ldb, out, ldo);
    nt_tile_any<T, Bytes, RA - 1, RB>(ra, rb, K, a, lda, b, ldb, out, ldo);
  }
}

template <typename T, int Bytes, int RA, int RB>
WAVETRAIN_VECTOR_INLINE void matmul_nt_impl(int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b,
                                            int64_t ldb, T* out, int64_t ldo) {
  // Column blocks outside: a block's RB rows of b stay in L1 while every row block of a passes.
  for (int64_t j = 0; j < N; j += RB)
    for (int64_t i = 0; i < M; i += RA)
      nt_tile_any<T, Bytes, RA, RB>(int(std::min<int64_t>(RA, M - i)), int(std::min<int64_t>(RB, N - j)), K,
                                    a + i * lda, lda, b + j * ldb, ldb, out + i * ldo + j, ldo);
}

// ---- matmul_times ----

template <typename T, int Bytes, int R, int NV, bool kFactor>
WAVETRAIN_VECTOR_INLINE void times_tile(int64_t K, const T* a, int64_t a_row, int64_t a_col, const T* b, int64_t ldb,
                                        const T* factor, int64_t ldf, T* out, int64_t ldo) {
  typedef typename Vec<T, Bytes>::type V;
  constexpr int64_t L = Bytes / sizeof(T);
  V acc[R][NV];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < NV; ++j) acc[i][j] = V{};
  for (int64_t k = 0; k < K; ++k) {
    V bv[NV];
    for (int j = 0; j < NV; ++j) load(bv[j], b + k * ldb + j * L);
    for (int i = 0; i < R; ++i) {
      const T s = a[i * a_row + k * a_col];
      for (int j = 0; j < NV; ++j) acc[i][j] += s * bv[j];
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < NV; ++j) {
      V v = acc[i][j];
      if constexpr (kFactor) {
        V f;
        load(f, factor + i * ldf + j * L);
        v *= f;
      }
      store(out + i * ldo + j * L, v);
    }
}

template <typename T, int Bytes, int R, int NV, bool kFactor>
WAVETRAIN_VECTOR_INLINE void times_tile_any(int r, int64_t K, const T* a, int64_t a_row, int64_t a_col, const T* b,
                                            int64_t ldb, const T* factor, int64_t ldf, T* out, int64_t ldo) {
  if constexpr (R > 0) {
    if (r == R) return times_tile<T, Bytes, R, NV, kFactor>(K, a, a_row, a_col, b, ldb, factor, ldf, out, ldo);
    times_tile_any<T, Bytes, R - 1, NV, kFactor>(r, K, a, a_row, a_col, b, ldb, factor, ldf, out, ldo);
  }
}

template <typename T, int Bytes, int MR, int NV, bool kFactor>
WAVETRAIN_VECTOR_INLINE void matmul_times_impl(int64_t M, int64_t N, int64_t K, const T* a, int64_t a_row,
                                               int64_t a_col, const T* b, int64_t ldb, const T* factor, int64_t ldf,
                                               T* out, int64_t ldo) {
  constexpr int64_t NR = NV * Bytes / sizeof(T);
  const int64_t full = N / NR * NR;
  for (int64_t j = 0; j < full; j += NR)
    for (int64_t i = 0; i < M; i += MR)
      times_tile_any<T, Bytes, MR, NV, kFactor>(int(std::min<int64_t>(MR, M - i)), K, a + i * a_row, a_row, a_col,
                                                b + j, ldb, factor + (kFactor ? i * ldf + j : 0), ldf,
                                                out + i * ldo + j, ldo);
  if (full == N) return;
  // The last w < NR columns: b's through a zero-padded [K][NR] panel, the factor and the output
  // through an [MR][NR] tile each.
  const int64_t w = N - full;
  std::vector<T> scratch(K * NR + 2 * MR * NR, T(0));
  T* panel = scratch.data();
  T* factor_tile = panel + K * NR;
  T* out_tile = factor_tile + MR * NR;
  for (int64_t k = 0; k < K; ++k) std::memcpy(panel + k * NR, b + k * ldb + full, w * sizeof(T));
  for (int64_t i = 0; i < M; i += MR) {
    const int r = int(std::min<int64_t>(MR, M - i));
    if constexpr (kFactor)
      for (int q = 0; q < r; ++q) std::memcpy(factor_tile + q * NR, factor + (i + q) * ldf + full, w * sizeof(T));
    times_tile_any<T, Bytes, MR, NV, kFactor>(r, K, a + i * a_row, a_row, a_col, panel, NR, factor_tile, NR, out_tile,
                                              NR);
    for (int q = 0; q < r; ++q) std::memcpy(out + (i + q) * ldo + full, out_tile + q * NR, w * sizeof(T));
  }
}

template <typename T, int Bytes, int MR, int NV>
WAVETRAIN_VECTOR_INLINE void matmul_times_either(int64_t M, int64_t N, int64_t K, const T* a, int64_t a_row,
                                                 int64_t a_col, const T* b, int64_t ldb, const T* factor, int64_t ldf,
                                                 T* out, int64_t ldo) {
  if (factor != nullptr)
    matmul_times_impl<T, Bytes, MR, NV, true>(M, N, K, a, a_row, a_col, b, ldb, factor, ldf, out, ldo);
  else
    matmul_times_impl<T, Bytes, MR, NV, false>(M, N, K, a, a_row, a_col, b, ldb, factor, ldf, out, ldo);
}

// Tile sizes per ISA, to fit the vector registers: 32 zmm for AVX-512 (nt: 5 x 4 accumulators and
// 5 operands; times: 6 x 2 and 3), 16 ymm for AVX2 (nt: 4 x 3 and 4; times: 6 x 2 and 3), and 16
// xmm (SSE2) or 32 (NEON) 16-byte registers otherwise (nt: 3 x 3; times: 4 x 2). Measured on the
// loss's shapes ([51] x [500] x [300]) by a standalone copy, on an idle Zen 5 core with AVX-512: 70
// and 102 GMAC/s, against 46 and 47-52 for OpenBLAS's sgemm (with its separate elementwise factor).
// The widths and tiles differ per ISA, which WAVETRAIN_VECTOR_KERNEL (one _impl for every build)
// cannot say; hence this macro and its own dispatch.
#define WAVETRAIN_SMALL_MATMUL(SUFFIX, TARGET, BYTES, NT_A, NT_B, TIMES_R, TIMES_NV)                                  \
  template <typename T>                                                                                               \
  TARGET void matmul_nt_##SUFFIX(int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb,   \
                                 T* out, int64_t ldo) {                                                               \
    matmul_nt_impl<T, BYTES, NT_A, NT_B>(M, N, K, a, lda, b, ldb, out, ldo);                                          \
  }                                                                                                                   \
  template <typename T>                                                                                               \
  TARGET void matmul_times_##SUFFIX(int64_t M, int64_t N, int64_t K, const T* a, int64_t a_row, int64_t a_col,       \
                                    const T* b, int64_t ldb, const T* factor, int64_t ldf, T* out, int64_t ldo) {     \
    matmul_times_either<T, BYTES, TIMES_R, TIMES_NV>(M, N, K, a, a_row, a_col, b, ldb, factor, ldf, out, ldo);      \
  }

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(WAVETRAIN_NO_VECTOR_CLONES)
WAVETRAIN_SMALL_MATMUL(avx512, __attribute__((target(WAVETRAIN_AVX512_TARGET))), 64, 5, 4, 6, 2)
WAVETRAIN_SMALL_MATMUL(avx2_fma, __attribute__((target("avx2,fma"))), 32, 4, 3, 6, 2)
WAVETRAIN_SMALL_MATMUL(baseline, , 16, 3, 3, 4, 2)

template <typename T>
void matmul_nt_any(int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb, T* out,
                   int64_t ldo) {
  switch (vector_kernel_isa()) {
    case VectorIsa::kAvx512: return matmul_nt_avx512(M, N, K, a, lda, b, ldb, out, ldo);
    case VectorIsa::kAvx2Fma: return matmul_nt_avx2_fma(M, N, K, a, lda, b, ldb, out, ldo);
    default: return matmul_nt_baseline(M, N, K, a, lda, b, ldb, out, ldo);
  }
}

template <typename T>
void matmul_times_any(int64_t M, int64_t N, int64_t K, const T* a, int64_t a_row, int64_t a_col, const T* b,
                      int64_t ldb, const T* factor, int64_t ldf, T* out, int64_t ldo) {
  switch (vector_kernel_isa()) {
    case VectorIsa::kAvx512: return matmul_times_avx512(M, N, K, a, a_row, a_col, b, ldb, factor, ldf, out, ldo);
    case VectorIsa::kAvx2Fma: return matmul_times_avx2_fma(M, N, K, a, a_row, a_col, b, ldb, factor, ldf, out, ldo);
    default: return matmul_times_baseline(M, N, K, a, a_row, a_col, b, ldb, factor, ldf, out, ldo);
  }
}
#else
WAVETRAIN_SMALL_MATMUL(portable, , 16, 3, 3, 4, 2)

template <typename T>
void matmul_nt_any(int64_t M, int64_t N, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb, T* out,
                   int64_t ldo) {
  matmul_nt_portable(M, N, K, a, lda, b, ldb, out, ldo);
}

template <typename T>
void matmul_times_any(int64_t M, int64_t N, int64_t K, const T* a, int64_t a_row, int64_t a_col, const T* b,
                      int64_t ldb, const T* factor, int64_t ldf, T* out, int64_t ldo) {
  matmul_times_portable(M, N, K, a, a_row, a_col, b, ldb, factor, ldf, out, ldo);
}
#endif
#undef WAVETRAIN_SMALL_MATMUL

}  // namespace

void matmul_nt(int64_t M, int64_t N, int64_t K, const float* a, int64_t lda, const float* b, int64_t ldb, float* out,
               int64_t ldo) {
  matmul_nt_any(M, N, K, a, lda, b, ldb, out, ldo);
}
void matmul_nt(int64_t M, int64_t N, int64_t K, const double* a, int64_t lda, const double* b, int64_t ldb, double* out,
               int64_t ldo) {
  matmul_nt_any(M, N, K, a, lda, b, ldb, out, ldo);
}
void matmul_times(int64_t M, int64_t N, int64_t K, const float* a, int64_t a_row, int64_t a_col, const float* b,
                  int64_t ldb, const float* factor, int64_t ldf, float* out, int64_t ldo) {
  matmul_times_any(M, N, K, a, a_row, a_col, b, ldb, factor, ldf, out, ldo);
}
void matmul_times(int64_t M, int64_t N, int64_t K, const double* a, int64_t a_row, int64_t a_col, const double* b,
                  int64_t ldb, const double* factor, int64_t ldf, double* out, int64_t ldo) {
  matmul_times_any(M, N, K, a, a_row, a_col, b, ldb, factor, ldf, out, ldo);
}

}  // namespace wavetrain::losses::detail
