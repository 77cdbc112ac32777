// The real-time engines' loops (dsp_kernels.h): compiled for the baseline ISA, for AVX2 + FMA and
// for AVX-512F, and chosen by what the CPU supports (as wavenet_kernels.h does).
#include "experiments/amp/dsp_kernels.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <string>

// Vectors pass between always-inlined helpers only (wavenet_kernels.h).
#pragma GCC diagnostic ignored "-Wpsabi"
#include "experiments/amp/wavenet_kernels.h"

namespace wavetrain::experiments::amp::dsp {
namespace {

using kernels::load;
using kernels::store;
using kernels::Vec8;

template <typename T>
__attribute__((always_inline)) inline T splat(float v) {
  return T{} + v;
}

// tanh(x) = x P(x^2) / Q(x^2) on |x| <= 7.9053111 (past it, +-1 in float): Eigen's rational
// approximation for float, a few ulp; cheaper than the exp-based kernels::fast_tanh and branch-free,
// so the loops over time vectorise. T: float, Vec8 or Vec16 (the product's epilogue).
template <typename T>
__attribute__((always_inline)) inline T rational_tanh(T x) {
  const T limit = splat<T>(7.90531110763549805f);
  x = x > limit ? limit : (x < -limit ? -limit : x);
  const T x2 = x * x, x4 = x2 * x2, x8 = x4 * x4;
  const T p_low = (x2 * 6.37261928875436e-04f + 4.89352455891786e-03f) + x4 * (x2 * 5.12229709037114e-08f + 1.48572235717979e-05f);
  const T p_high = (x2 * 2.00018790482477e-13f - 8.60467152213735e-11f) + x4 * -2.76076847742355e-16f;
  const T q = (x2 * 2.26843463243900e-03f + 4.89352518554385e-03f) + x4 * (x2 * 1.19825839466702e-06f + 1.18534705686654e-04f);
  return x * (p_low + x8 * p_high) / q;
}

// The kinds without exp, on a float or a vector; a..d are Elementwise::p (values, not the array:
// a store to x could alias it, and the loops would not vectorise).
template <Kind K, typename T>
__attribute__((always_inline)) inline T activate(T x, float a, float b, float c, float d) {
  const T zero = splat<T>(0.0f);
  if constexpr (K == Kind::Tanh) {
    return rational_tanh(x);
  } else if constexpr (K == Kind::FastTanh) {  // the core's "Fasttanh": a rational approximation of tanh
    const T x2 = x * x, ax = x < zero ? -x : x;
    const T num = x * (2.45550750702956f + 2.45550750702956f * ax + (0.893229853513558f + 0.821226666969744f * ax) * x2);
    const T inner = x + 0.814642734961073f * x * ax;
    return num / (2.44506634652299f + (2.44506634652299f + x2) * (inner < zero ? -inner : inner));
  } else if constexpr (K == Kind::Hardtanh) {  // a = min, b = max
    return x < splat<T>(a) ? splat<T>(a) : (x > splat<T>(b) ? splat<T>(b) : x);
  } else if constexpr (K == Kind::LeakyHardtanh) {  // a = min, b = max, c = slope below min, d = slope above max
    return x < splat<T>(a) ? a + c * (x - a) : (x > splat<T>(b) ? b + d * (x - b) : x);
  } else if constexpr (K == Kind::ReLU) {
    return x < zero ? zero : x;
  } else if constexpr (K == Kind::LeakyReLU || K == Kind::PReLU) {  // a = the slope below 0 (PReLU: this row's)
    return x < zero ? a * x : x;
  } else {
    static_assert(K == Kind::Identity, "a kind with exp has no epilogue form");
    return x;
  }
}

// One of the kinds above on one float (the product's last steps, past its vectors).
__attribute__((always_inline)) inline float activate(const Elementwise& f, float x) {
  const float a = f.p[0], b = f.p[1], c = f.p[2], d = f.p[3];
  switch (f.kind) {
    case Kind::Tanh: return activate<Kind::Tanh>(x, a, b, c, d);
    case Kind::FastTanh: return activate<Kind::FastTanh>(x, a, b, c, d);
    case Kind::Hardtanh: return activate<Kind::Hardtanh>(x, a, b, c, d);
    case Kind::LeakyHardtanh: return activate<Kind::LeakyHardtanh>(x, a, b, c, d);
    case Kind::ReLU: return activate<Kind::ReLU>(x, a, b, c, d);
    case Kind::LeakyReLU: return activate<Kind::LeakyReLU>(x, a, b, c, d);
    default: return x;
  }
}

// A tile's epilogue: y = K(acc) stored, its rows below sum_rows added into sum, and with Second the
// second product (MatMul::w2) from those values while they are still in registers.
template <Kind K, bool Second, typename Vec, int R, int V>
__attribute__((always_inline)) inline void finish(const MatMul& m, int64_t o0, int64_t t0, Vec (&acc)[R][V]) {
  constexpr int L = sizeof(Vec) / sizeof(float);
  // m's fields as locals first: a store through memcpy (kernels::store) may alias anything, so
  // each store would otherwise reload them.
  const float a = m.act.p[0], b = m.act.p[1], c = m.act.p[2], d = m.act.p[3];
  float* const y_out = m.y ? m.y + o0 * m.y_stride + t0 : nullptr;
  float* const sum = m.sum ? m.sum + o0 * m.sum_stride + t0 : nullptr;
  const int64_t y_stride = m.y_stride, sum_stride = m.sum_stride, sum_rows = m.sum_rows - o0;
  const float *const w2 = m.w2, *const bias2 = m.bias2, *const addend2 = Second ? m.addend2 + t0 : nullptr;
  float* const y2 = Second ? m.y2 + t0 : nullptr;
  const int64_t addend2_stride = m.addend2_stride, y2_stride = m.y2_stride, outputs2 = m.outputs2;
  Vec (&y)[R][V] = acc;  // in place
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) {
      y[r][v] = activate<K>(acc[r][v], a, b, c, d);
      if (!Second || y_out) store(y_out + r * y_stride + L * v, y[r][v]);
      if (r < sum_rows) {
        float* s = sum + r * sum_stride + L * v;
        store(s, load<Vec>(s) + y[r][v]);
      }
    }
  if constexpr (!Second) return;
  for (int64_t o = 0; o < outputs2; ++o) {  // (o0 is 0: the whole width is this tile)
    Vec out[V];
    for (int v = 0; v < V; ++v) out[v] = load<Vec>(addend2 + o * addend2_stride + L * v) + bias2[o];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) out[v] += w2[o * R + r] * y[r][v];
    for (int v = 0; v < V; ++v) store(y2 + o * y2_stride + L * v, out[v]);
  }
}

// One tile of the product: R output rows x (L V) time steps (L lanes per vector: 16 in the AVX-512
// variant, 8 in the AVX2 one, 4 in the baseline), R x V accumulators in registers; each input row's
// V vectors are loaded once and used R times. Then the epilogue K (and Second).
template <typename Vec, int R, int V, Kind K, bool Second>
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
    const float* xi = m.x[i] + t0;
    Vec xv[V];
    for (int v = 0; v < V; ++v) xv[v] = load<Vec>(xi + L * v);
    for (int r = 0; r < R; ++r) {
      const float wr = w[r * m.inputs + i];
      for (int v = 0; v < V; ++v) acc[r][v] += wr * xv[v];
    }
  }
  finish<K, Second>(m, o0, t0, acc);
}

// The time steps past the last whole vector (of 8 lanes, 4 in the baseline variant), one at a time.
__attribute__((always_inline)) inline void tail(const MatMul& m, int64_t t0) {
  for (int64_t t = t0; t < m.n; ++t) {
    float y[4];  // the second product's inputs (outputs <= 4 with it)
    for (int64_t o = 0; o < m.outputs; ++o) {
      const float* w = m.w + o * m.inputs;
      const float start = m.accumulate ? m.y[o * m.y_stride + t] : m.addend ? m.addend[o * m.addend_stride + t] : 0.0f;
      float s = (m.bias ? m.bias[o] : 0.0f) + start;
      for (int64_t i = 0; i < m.inputs; ++i) s += w[i] * m.x[i][t];
      s = activate(m.act, s);
      if (m.y) m.y[o * m.y_stride + t] = s;
      if (o < m.sum_rows) m.sum[o * m.sum_stride + t] += s;
      if (m.w2) y[o] = s;
    }
    for (int64_t o = 0; m.w2 && o < m.outputs2; ++o) {
      float s = m.addend2[o * m.addend2_stride + t] + m.bias2[o];
      for (int64_t r = 0; r < m.outputs; ++r) s += m.w2[o * m.outputs + r] * y[r];
      m.y2[o * m.y2_stride + t] = s;
    }
  }
}

template <typename Vec, int V, Kind K, bool Second>
__attribute__((always_inline)) inline void rows(const MatMul& m, int64_t t0) {
  int64_t o = 0;
  // 8-lane tiles of 6 rows (12 accumulators, 15 of AVX2's 16 registers) while at least 10 rows
  // remain, so that what is left goes in tiles of 4: 4 x 2 keeps 8 multiply-adds in flight, just
  // what two FMA units of latency 4 need, and stalls at any delay. NAM's standard WaveNets (16
  // rows: 6 + 6 + 4) played 4% faster held to AVX2 (docs/amp.md). Not with a second product (4 rows
  // at most) nor 3 vectors (4 x 3 spilled accumulators in some kinds' tiles: A2 25% slower).
  if constexpr (!Second && sizeof(Vec) == 32 && V == 2)
    for (; m.outputs - o >= 10; o += 6) tile<Vec, 6, V, K, Second>(m, o, t0);
  for (; o + 4 <= m.outputs; o += 4) tile<Vec, 4, V, K, Second>(m, o, t0);
  switch (m.outputs - o) {
    case 3: tile<Vec, 3, V, K, Second>(m, o, t0); break;
    case 2: tile<Vec, 2, V, K, Second>(m, o, t0); break;
    case 1: tile<Vec, 1, V, K, Second>(m, o, t0); break;
    default: break;
  }
}

// Lanes: the variant's vector width. 16 (AVX-512): 64- and 32-step tiles of 16-lane vectors, then
// 16- and 8-step tiles of 8. 8 (AVX2): the latter. 4 (the baseline ISA: SSE2, or NEON on ARM, both
// 128 bits with 16 or 32 registers): 8- and 4-step tiles of 4 lanes. Vectors wider than the ISA's
// are split by GCC into pairs of registers, and 4 x 2 vectors of 8 needed 16 of SSE2's 16
// registers for the accumulators alone: the spills made the baseline 10x slower than the core's
// SSE2 build.
template <int Lanes, Kind K, bool Second>
__attribute__((always_inline)) inline void run(const MatMul& m) {
  int64_t t = 0;
  if constexpr (Lanes == 16) {
    for (; t + 64 <= m.n; t += 64) rows<kernels::Vec16, 4, K, Second>(m, t);
    for (; t + 32 <= m.n; t += 32) rows<kernels::Vec16, 2, K, Second>(m, t);
  }
  if constexpr (Lanes >= 8) {
    for (; t + 16 <= m.n; t += 16) rows<Vec8, 2, K, Second>(m, t);
    for (; t + 8 <= m.n; t += 8) rows<Vec8, 1, K, Second>(m, t);
  } else {
    for (; t + 8 <= m.n; t += 8) rows<kernels::Vec4, 2, K, Second>(m, t);
    for (; t + 4 <= m.n; t += 4) rows<kernels::Vec4, 1, K, Second>(m, t);
  }
  if (t < m.n) tail(m, t);
}

template <int Lanes, bool Second>
__attribute__((always_inline)) inline void run_kind(const MatMul& m) {
  switch (m.act.kind) {
    case Kind::Tanh: return run<Lanes, Kind::Tanh, Second>(m);
    case Kind::FastTanh: return run<Lanes, Kind::FastTanh, Second>(m);
    case Kind::Hardtanh: return run<Lanes, Kind::Hardtanh, Second>(m);
    case Kind::LeakyHardtanh: return run<Lanes, Kind::LeakyHardtanh, Second>(m);
    case Kind::ReLU: return run<Lanes, Kind::ReLU, Second>(m);
    case Kind::LeakyReLU: return run<Lanes, Kind::LeakyReLU, Second>(m);
    default: return run<Lanes, Kind::Identity, Second>(m);
  }
}

// The activation is a template parameter of the whole product, not a switch in each tile: with a
// switch there, GCC kept the accumulators in memory.
template <int Lanes>
__attribute__((always_inline)) inline void matmul_impl(const MatMul& m) {
  if (m.w2) return run_kind<Lanes, true>(m);
  if (!m.sum && m.act.kind == Kind::Identity) return run<Lanes, Kind::Identity, false>(m);  // the plain product
  run_kind<Lanes, false>(m);
}

__attribute__((always_inline)) inline float sigmoid(float x) {
  // exp of a non-positive argument only: no overflow, and the loop stays branch-free.
  const float e = losses::detail::exp_nonpositive(x < 0 ? x : -x);
  const float r = 1.0f / (1.0f + e);
  return x < 0 ? e * r : r;
}

__attribute__((always_inline)) inline void apply_impl(const Elementwise& f, float* x, int64_t n) {
  const float a = f.p[0], b = f.p[1], c = f.p[2], d = f.p[3];
#define WAVETRAIN_AMP_APPLY(K) \
  for (int64_t t = 0; t < n; ++t) x[t] = activate<K>(x[t], a, b, c, d); \
  return;
  switch (f.kind) {
    case Kind::Identity: return;
    case Kind::Tanh: WAVETRAIN_AMP_APPLY(Kind::Tanh)
    case Kind::FastTanh: WAVETRAIN_AMP_APPLY(Kind::FastTanh)
    case Kind::Hardtanh: WAVETRAIN_AMP_APPLY(Kind::Hardtanh)
    case Kind::LeakyHardtanh: WAVETRAIN_AMP_APPLY(Kind::LeakyHardtanh)
    case Kind::ReLU: WAVETRAIN_AMP_APPLY(Kind::ReLU)
    case Kind::LeakyReLU:
    case Kind::PReLU: WAVETRAIN_AMP_APPLY(Kind::LeakyReLU)
#undef WAVETRAIN_AMP_APPLY
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

void matmul_baseline(const MatMul& m) { matmul_impl<4>(m); }
void apply_baseline(const Elementwise& f, float* x, int64_t n) { apply_impl(f, x, n); }
#if WAVETRAIN_AMP_AVX2
__attribute__((target("avx2,fma"))) void matmul_avx2(const MatMul& m) { matmul_impl<8>(m); }
__attribute__((target("avx2,fma"))) void apply_avx2(const Elementwise& f, float* x, int64_t n) { apply_impl(f, x, n); }
__attribute__((target("avx512f,avx2,fma"))) void matmul_avx512(const MatMul& m) { matmul_impl<16>(m); }
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

bool fits_epilogue(Kind kind, bool second) {
  switch (kind) {
    case Kind::Identity:
    case Kind::Hardtanh:
    case Kind::LeakyHardtanh:
    case Kind::ReLU:
    case Kind::LeakyReLU: return true;
    // The rational functions' dozen constants take registers from the accumulators of the larger
    // tiles (standard ran 25% slower with tanh there): with a second product only, whose tiles
    // are small.
    case Kind::Tanh:
    case Kind::FastTanh: return second;
    default: return false;
  }
}

void matmul(const MatMul& m) {
  if (m.w2 && m.outputs > 4) throw std::logic_error("dsp::matmul: a second product needs outputs <= 4, found " + std::to_string(m.outputs));
  if (!m.y && !m.w2) throw std::logic_error("dsp::matmul: y is null and there is no second product");
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
