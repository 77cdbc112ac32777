// The real-time engines' loops (dsp_kernels.h): compiled for the baseline ISA, for AVX2 + FMA and
// for AVX-512F, and chosen by what the CPU supports (as wavenet_kernels.h does).
#include "experiments/amp/dsp_kernels.h"

#include <algorithm>
#include <atomic>

// Vectors pass between always-inlined helpers only (wavenet_kernels.h).
#pragma GCC diagnostic ignored "-Wpsabi"
#include "experiments/amp/wavenet_kernels.h"

namespace wavetrain::experiments::amp::dsp {
namespace {

using kernels::load;
using kernels::store;
using kernels::Vec8;

// One tile of the product: R output rows x (L V) time steps (L lanes per vector: 8, or 16 in the
// AVX-512 variant), R x V accumulators in registers; each input row's V vectors are loaded once and
// used R times.
template <typename Vec, int R, int V>
__attribute__((always_inline)) inline void tile(const MatMul& m, int64_t o0, int64_t t0) {
  constexpr int L = sizeof(Vec) / sizeof(float);
  Vec acc[R][V];
  // What y starts from besides the bias: y itself (accumulate), a residual, or nothing.
  const float* start = m.accumulate ? m.y + o0 * m.y_stride : m.addend ? m.addend + o0 * m.addend_stride : nullptr;
  const int64_t start_stride = m.accumulate ? m.y_stride : m.addend_stride;
  for (int r = 0; r < R; ++r) {
    const float b = m.bias ? m.bias[o0 + r] : 0.0f;
    for (int v = 0; v < V; ++v) {
      const Vec init = Vec{} + b;
      acc[r][v] = start ? load<Vec>(start + r * start_stride + t0 + L * v) + init : init;
    }
  }
  const float* w = m.w + o0 * m.inputs;
  for (int64_t i = 0; i < m.inputs; ++i) {
    Vec xv[V];
    for (int v = 0; v < V; ++v) xv[v] = load<Vec>(m.x[i] + t0 + L * v);
    for (int r = 0; r < R; ++r) {
      const float wr = w[r * m.inputs + i];
      for (int v = 0; v < V; ++v) acc[r][v] += wr * xv[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) store(m.y + (o0 + r) * m.y_stride + t0 + L * v, acc[r][v]);
}

// The time steps past the last multiple of 8, one at a time.
__attribute__((always_inline)) inline void tail(const MatMul& m, int64_t t0) {
  for (int64_t o = 0; o < m.outputs; ++o) {
    const float* w = m.w + o * m.inputs;
    float* y = m.y + o * m.y_stride;
    const float* start = m.accumulate ? y : m.addend ? m.addend + o * m.addend_stride : nullptr;
    for (int64_t t = t0; t < m.n; ++t) {
      float s = (m.bias ? m.bias[o] : 0.0f) + (start ? start[t] : 0.0f);
      for (int64_t i = 0; i < m.inputs; ++i) s += w[i] * m.x[i][t];
      y[t] = s;
    }
  }
}

template <typename Vec, int V>
__attribute__((always_inline)) inline void rows(const MatMul& m, int64_t t0) {
  int64_t o = 0;
  for (; o + 4 <= m.outputs; o += 4) tile<Vec, 4, V>(m, o, t0);
  switch (m.outputs - o) {
    case 3: tile<Vec, 3, V>(m, o, t0); break;
    case 2: tile<Vec, 2, V>(m, o, t0); break;
    case 1: tile<Vec, 1, V>(m, o, t0); break;
    default: break;
  }
}

// Wide (AVX-512): 64- and 32-step tiles of 16-lane vectors first, then as the others.
template <bool Wide = false>
__attribute__((always_inline)) inline void matmul_impl(const MatMul& m) {
  int64_t t = 0;
  if constexpr (Wide) {
    for (; t + 64 <= m.n; t += 64) rows<kernels::Vec16, 4>(m, t);
    for (; t + 32 <= m.n; t += 32) rows<kernels::Vec16, 2>(m, t);
  }
  for (; t + 16 <= m.n; t += 16) rows<Vec8, 2>(m, t);
  for (; t + 8 <= m.n; t += 8) rows<Vec8, 1>(m, t);
  if (t < m.n) tail(m, t);
}

// tanh(x) = x P(x^2) / Q(x^2) on |x| <= 7.9053111 (past it, +-1 in float): Eigen's rational
// approximation for float, a few ulp; cheaper than the exp-based kernels::fast_tanh and branch-free,
// so the loops over time vectorise.
__attribute__((always_inline)) inline float rational_tanh(float x) {
  const float limit = 7.90531110763549805f;
  x = x > limit ? limit : (x < -limit ? -limit : x);
  const float x2 = x * x, x4 = x2 * x2, x8 = x4 * x4;
  const float p_low = (x2 * 6.37261928875436e-04f + 4.89352455891786e-03f) + x4 * (x2 * 5.12229709037114e-08f + 1.48572235717979e-05f);
  const float p_high = (x2 * 2.00018790482477e-13f - 8.60467152213735e-11f) + x4 * -2.76076847742355e-16f;
  const float q = (x2 * 2.26843463243900e-03f + 4.89352518554385e-03f) + x4 * (x2 * 1.19825839466702e-06f + 1.18534705686654e-04f);
  return x * (p_low + x8 * p_high) / q;
}

__attribute__((always_inline)) inline float sigmoid(float x) {
  // exp of a non-positive argument only: no overflow, and the loop stays branch-free.
  const float e = losses::detail::exp_nonpositive(x < 0 ? x : -x);
  const float r = 1.0f / (1.0f + e);
  return x < 0 ? e * r : r;
}

__attribute__((always_inline)) inline void apply_impl(const Elementwise& f, float* x, int64_t n) {
  const float a = f.p[0], b = f.p[1], c = f.p[2], d = f.p[3];
  switch (f.kind) {
    case Kind::Identity: return;
    case Kind::Tanh:
      for (int64_t t = 0; t < n; ++t) x[t] = rational_tanh(x[t]);
      return;
    case Kind::FastTanh:  // the core's "Fasttanh": a rational approximation of tanh
      for (int64_t t = 0; t < n; ++t) {
        const float v = x[t], v2 = v * v, av = v < 0 ? -v : v;
        const float num = v * (2.45550750702956f + 2.45550750702956f * av + (0.893229853513558f + 0.821226666969744f * av) * v2);
        const float inner = v + 0.814642734961073f * v * av;
        x[t] = num / (2.44506634652299f + (2.44506634652299f + v2) * (inner < 0 ? -inner : inner));
      }
      return;
    case Kind::Hardtanh:  // a = min, b = max
      for (int64_t t = 0; t < n; ++t) x[t] = x[t] < a ? a : (x[t] > b ? b : x[t]);
      return;
    case Kind::LeakyHardtanh:  // a = min, b = max, c = slope below min, d = slope above max
      for (int64_t t = 0; t < n; ++t) {
        const float v = x[t];
        x[t] = v < a ? a + c * (v - a) : (v > b ? b + d * (v - b) : v);
      }
      return;
    case Kind::ReLU:
      for (int64_t t = 0; t < n; ++t) x[t] = x[t] < 0 ? 0.0f : x[t];
      return;
    case Kind::LeakyReLU:
    case Kind::PReLU:  // a = the slope below 0 (PReLU: this row's)
      for (int64_t t = 0; t < n; ++t) x[t] = x[t] < 0 ? a * x[t] : x[t];
      return;
    case Kind::Sigmoid:
      for (int64_t t = 0; t < n; ++t) x[t] = sigmoid(x[t]);
      return;
    case Kind::SiLU:
      for (int64_t t = 0; t < n; ++t) x[t] = x[t] * sigmoid(x[t]);
      return;
    case Kind::Hardswish:  // x relu6(x + 3) / 6
      for (int64_t t = 0; t < n; ++t) {
        const float r = x[t] + 3.0f;
        x[t] = x[t] * (r < 0 ? 0.0f : (r > 6.0f ? 6.0f : r)) * (1.0f / 6.0f);
      }
      return;
    case Kind::Softsign:
      for (int64_t t = 0; t < n; ++t) x[t] = x[t] / (1.0f + (x[t] < 0 ? -x[t] : x[t]));
      return;
  }
}

void matmul_baseline(const MatMul& m) { matmul_impl(m); }
void apply_baseline(const Elementwise& f, float* x, int64_t n) { apply_impl(f, x, n); }
#if WAVETRAIN_AMP_AVX2
__attribute__((target("avx2,fma"))) void matmul_avx2(const MatMul& m) { matmul_impl(m); }
__attribute__((target("avx2,fma"))) void apply_avx2(const Elementwise& f, float* x, int64_t n) { apply_impl(f, x, n); }
__attribute__((target("avx512f,avx2,fma"))) void matmul_avx512(const MatMul& m) { matmul_impl<true>(m); }
__attribute__((target("avx512f,avx2,fma"))) void apply_avx512(const Elementwise& f, float* x, int64_t n) { apply_impl(f, x, n); }
#endif

// The ISA the dispatchers pick: 0 baseline, 1 AVX2 + FMA, 2 AVX-512. One relaxed load per call
// (the element-wise helpers are called per row of a 64-sample buffer); the CPU is asked once.
int cpu_level() { return kernels::cpu_has_avx512f() ? 2 : kernels::cpu_has_avx2_fma() ? 1 : 0; }
std::atomic<bool> baseline_forced{false}, avx512_off{false};
std::atomic<int> level{cpu_level()};
void update_level() {
  const int cap = baseline_forced.load(std::memory_order_relaxed) ? 0 : avx512_off.load(std::memory_order_relaxed) ? 1 : 2;
  level.store(std::min(cpu_level(), cap), std::memory_order_relaxed);
}

}  // namespace

bool using_avx2() { return level.load(std::memory_order_relaxed) >= 1; }
void force_baseline(bool on) {
  baseline_forced.store(on, std::memory_order_relaxed);
  update_level();
}
bool using_avx512() { return level.load(std::memory_order_relaxed) >= 2; }
void force_no_avx512(bool on) {
  avx512_off.store(on, std::memory_order_relaxed);
  update_level();
}

void matmul(const MatMul& m) {
#if WAVETRAIN_AMP_AVX2
  if (using_avx512()) return matmul_avx512(m);
  if (using_avx2()) return matmul_avx2(m);
#endif
  matmul_baseline(m);
}

void apply(const Elementwise& f, float* x, int64_t n) {
#if WAVETRAIN_AMP_AVX2
  if (using_avx512()) return apply_avx512(f, x, n);
  if (using_avx2()) return apply_avx2(f, x, n);
#endif
  apply_baseline(f, x, n);
}

// The element-wise helpers, dispatched like the rest: in the baseline ISA they would run 4 lanes
// wide, and they are a fifth of a WaveNet's time there.
#define WAVETRAIN_AMP_DISPATCH(NAME, PARAMS, ARGS)                                        \
  __attribute__((always_inline)) inline void NAME##_impl PARAMS;                          \
  void NAME##_baseline PARAMS { NAME##_impl ARGS; }                                       \
  WAVETRAIN_AMP_VARIANTS(NAME, PARAMS, ARGS)                                              \
  void NAME##_dispatch PARAMS {                                                           \
    WAVETRAIN_AMP_PICK(NAME, ARGS)                                                        \
    NAME##_baseline ARGS;                                                                 \
  }
#if WAVETRAIN_AMP_AVX2
#define WAVETRAIN_AMP_VARIANTS(NAME, PARAMS, ARGS)                                        \
  __attribute__((target("avx2,fma"))) void NAME##_avx2 PARAMS { NAME##_impl ARGS; }        \
  __attribute__((target("avx512f,avx2,fma"))) void NAME##_avx512 PARAMS { NAME##_impl ARGS; }
#define WAVETRAIN_AMP_PICK(NAME, ARGS)        \
  if (using_avx512()) return NAME##_avx512 ARGS; \
  if (using_avx2()) return NAME##_avx2 ARGS;
#else
#define WAVETRAIN_AMP_VARIANTS(NAME, PARAMS, ARGS)
#define WAVETRAIN_AMP_PICK(NAME, ARGS)
#endif

namespace {
WAVETRAIN_AMP_DISPATCH(multiply, (const float* a, const float* b, float* y, int64_t n), (a, b, y, n))
WAVETRAIN_AMP_DISPATCH(scale_shift, (const float* a, const float* s, const float* b, float* y, int64_t n), (a, s, b, y, n))
WAVETRAIN_AMP_DISPATCH(add, (const float* a, float* y, int64_t n), (a, y, n))
WAVETRAIN_AMP_DISPATCH(add3, (const float* a, const float* b, float* y, int64_t n), (a, b, y, n))
WAVETRAIN_AMP_DISPATCH(add_rows, (const float* a, int64_t as, float* y, int64_t ys, int64_t rows, int64_t n), (a, as, y, ys, rows, n))

inline void multiply_impl(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t t = 0; t < n; ++t) y[t] = a[t] * b[t];
}
inline void scale_shift_impl(const float* a, const float* s, const float* b, float* y, int64_t n) {
  if (b)
    for (int64_t t = 0; t < n; ++t) y[t] = a[t] * s[t] + b[t];
  else
    for (int64_t t = 0; t < n; ++t) y[t] = a[t] * s[t];
}
inline void add_impl(const float* a, float* y, int64_t n) {
  for (int64_t t = 0; t < n; ++t) y[t] += a[t];
}
inline void add3_impl(const float* a, const float* b, float* y, int64_t n) {
  for (int64_t t = 0; t < n; ++t) y[t] = a[t] + b[t];
}
inline void add_rows_impl(const float* a, int64_t as, float* y, int64_t ys, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r) add_impl(a + r * as, y + r * ys, n);
}
}  // namespace

void multiply(const float* a, const float* b, float* y, int64_t n) { multiply_dispatch(a, b, y, n); }
void scale_shift(const float* a, const float* s, const float* b, float* y, int64_t n) { scale_shift_dispatch(a, s, b, y, n); }
void add(const float* a, float* y, int64_t n) { add_dispatch(a, y, n); }
void add(const float* a, const float* b, float* y, int64_t n) { add3_dispatch(a, b, y, n); }
void add_rows(const float* a, int64_t a_stride, float* y, int64_t y_stride, int64_t rows, int64_t n) {
  add_rows_dispatch(a, a_stride, y, y_stride, rows, n);
}

}  // namespace wavetrain::experiments::amp::dsp
