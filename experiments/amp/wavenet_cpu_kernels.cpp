// The WaveNet training path's CPU kernels (wavenet_cpu_kernels.h).
#include "experiments/amp/wavenet_cpu_kernels.h"

#include <algorithm>
#include <atomic>

// Vectors pass between always-inlined helpers only: the ABI note about 32-byte vectors without AVX
// does not apply (wavenet_kernels.h).
#pragma GCC diagnostic ignored "-Wpsabi"  // GCC and clang
#include "experiments/amp/wavenet_kernels.h"

namespace wavetrain::experiments::amp::kernels {
namespace {

// 1 / (1 + exp(-x)) with e = exp(-|x|): branch-free, so the loops over it vectorise.
__attribute__((always_inline)) inline float sigmoid(float x) {
  const float e = losses::detail::exp_nonpositive(x < 0 ? x : -x);
  const float s = 1.0f / (1.0f + e);
  return x < 0 ? e * s : s;
}

// out[j] = act(out[j]), or out[j] *= act'(y[j]) from the output y, j < n; one loop per function,
// so each vectorises. Tanh's derivative is fused into the tiles instead (the common case).
__attribute__((always_inline)) inline void activate_rows(Act act, float slope, float* out, int64_t n) {
  switch (act) {
    case Act::Tanh: for (int64_t j = 0; j < n; ++j) out[j] = fast_tanh(out[j]); break;
    case Act::Sigmoid: for (int64_t j = 0; j < n; ++j) out[j] = sigmoid(out[j]); break;
    case Act::ReLU: for (int64_t j = 0; j < n; ++j) out[j] = out[j] > 0.0f ? out[j] : 0.0f; break;
    case Act::LeakyReLU: for (int64_t j = 0; j < n; ++j) out[j] = out[j] > 0.0f ? out[j] : out[j] * slope; break;
    case Act::SiLU: for (int64_t j = 0; j < n; ++j) out[j] = out[j] * sigmoid(out[j]); break;
    case Act::None: break;
  }
}
__attribute__((always_inline)) inline void derivative_rows(Act act, float slope, const float* y, float* out, int64_t n) {
  switch (act) {
    case Act::Tanh: for (int64_t j = 0; j < n; ++j) out[j] *= 1.0f - y[j] * y[j]; break;
    case Act::Sigmoid: for (int64_t j = 0; j < n; ++j) out[j] *= y[j] * (1.0f - y[j]); break;
    case Act::ReLU: for (int64_t j = 0; j < n; ++j) out[j] = y[j] > 0.0f ? out[j] : 0.0f; break;
    case Act::LeakyReLU: for (int64_t j = 0; j < n; ++j) out[j] = y[j] > 0.0f ? out[j] : out[j] * slope; break;
    case Act::SiLU:  // not from y (Gate takes it from a)
    case Act::None: break;
  }
}

// exp_nonpositive (losses/vector_math.h) on 8 lanes: the same reduction and degree-7 polynomial,
// its halves evaluated side by side (Estrin) to shorten the chain.
__attribute__((always_inline)) inline Vec8 exp_nonpositive8(Vec8 x) {
  return exp_nonpositive_with(x, [](Vec8 r) __attribute__((always_inline)) {
    const Vec8 r2 = r * r, r4 = r2 * r2;
    return ((r + 1.0f) + r2 * (r * (1.0f / 6.0f) + 0.5f)) +
           r4 * ((r * (1.0f / 120.0f) + 1.0f / 24.0f) + r2 * (r * (1.0f / 5040.0f) + 1.0f / 720.0f));
  });
}

__attribute__((always_inline)) inline float exp_lanes(float x) { return losses::detail::exp_nonpositive(x); }
__attribute__((always_inline)) inline Vec8 exp_lanes(Vec8 x) { return exp_nonpositive8(x); }

// f(a) and f'(a) from the input a, for Gate, in two steps so that a gated layer's two functions
// share one division (a division costs as much as the rest of a sigmoid): denominator<F> gives e
// (exp(-|a|), Tanh exp(-2|a|)) and d = 1 + e, the one division f needs (1 when it needs none);
// finish<F> gives f and f' from e and inv = 1 / d. Branch-free; L is float (loops the compiler
// vectorises) or Vec8 (Gate's 8-lane path).
template <Act F, typename L>
__attribute__((always_inline)) inline L denominator(L a, L& e) {
  const L minus_abs = a < 0.0f ? a : -a;
  if constexpr (F == Act::Tanh) {
    e = exp_lanes(2.0f * minus_abs);
  } else if constexpr (F == Act::Sigmoid || F == Act::SiLU) {
    e = exp_lanes(minus_abs);
  } else {
    e = L{};
    return L{} + 1.0f;
  }
  return e + 1.0f;
}

template <Act F, typename L>
__attribute__((always_inline)) inline void finish(L a, L e, L inv, float slope, L& f, L& df) {
  const L zero{}, one = zero + 1.0f;
  if constexpr (F == Act::Tanh) {
    const L t = (1.0f - e) * inv;
    f = a < 0.0f ? -t : t;
    df = 1.0f - f * f;
  } else if constexpr (F == Act::Sigmoid) {
    f = a < 0.0f ? e * inv : inv;
    df = f * (1.0f - f);
  } else if constexpr (F == Act::ReLU) {
    f = a > 0.0f ? a : zero;
    df = a > 0.0f ? one : zero;
  } else if constexpr (F == Act::LeakyReLU) {
    f = a > 0.0f ? a : a * slope;
    df = a > 0.0f ? one : zero + slope;
  } else if constexpr (F == Act::SiLU) {
    const L s = a < 0.0f ? e * inv : inv;
    f = a * s;
    df = s + f * (1.0f - s);  // s + a s (1 - s)
  } else {
    f = a;
    df = one;
  }
}

template <Act F>
__attribute__((always_inline)) inline void value_and_slope(float a, float slope, float& f, float& df) {
  float e;
  const float d = denominator<F>(a, e);
  finish<F>(a, e, 1.0f / d, slope, f, df);
}

// Forward. Gated and blended layers: f(a1) and s = sigmoid(a2) with one division,
// 1 / (d1 d2) times d2 and d1; s then replaces a2 in pre, as the backward pass needs s, not a2.
template <Act F, GateMode MODE>
__attribute__((always_inline)) inline void gate_rows(const Gate& g) {
  const int64_t C = g.channels, M = MODE == GateMode::None ? C : 2 * C;
  for (int64_t t = 0; t < g.n; ++t) {
    float* a = g.pre + t * M;
    float* p = g.post + t * C;
    for (int64_t c = 0; c < C; ++c) {
      float f, df;
      if constexpr (MODE == GateMode::None) {
        value_and_slope<F>(a[c], g.slope, f, df);
        p[c] = f;
      } else {
        float e1, e2, s, ds;
        const float d1 = denominator<F>(a[c], e1), d2 = denominator<Act::Sigmoid>(a[C + c], e2);
        const float r = 1.0f / (d1 * d2);
        finish<F>(a[c], e1, d2 * r, g.slope, f, df);
        finish<Act::Sigmoid>(a[C + c], e2, d1 * r, 0.0f, s, ds);
        p[c] = MODE == GateMode::Gated ? f * s : s * f + (1.0f - s) * a[c];
        a[C + c] = s;
      }
    }
  }
}

// Backward, with s read from pre (gate_rows put it there):
// gated:   da1 = dp s f'(a1),           da2 = dp f(a1) s (1 - s)
// blended: da1 = dp (s f'(a1) + 1 - s),  da2 = dp (f(a1) - a1) s (1 - s)
template <Act F, GateMode MODE>
__attribute__((always_inline)) inline void gate_grad_rows(const Gate& g) {
  const int64_t C = g.channels, M = MODE == GateMode::None ? C : 2 * C;
  for (int64_t t = 0; t < g.n; ++t) {
    const float* a = g.pre + t * M;
    const float* dp = g.dp + t * C;
    float* da = g.da + t * M;
    for (int64_t c = 0; c < C; ++c) {
      float f, df;
      value_and_slope<F>(a[c], g.slope, f, df);
      if constexpr (MODE == GateMode::None) {
        da[c] = dp[c] * df;
      } else {
        const float s = a[C + c], ds = s * (1.0f - s);
        da[c] = MODE == GateMode::Gated ? dp[c] * s * df : dp[c] * (s * df + 1.0f - s);
        da[C + c] = MODE == GateMode::Gated ? dp[c] * f * ds : dp[c] * (f - a[c]) * ds;
      }
    }
  }
}

// ---- Gate on 8 lanes, several vectors interleaved ---------------------------------------------------
// A vector's activation is a chain of about 50 dependent operations (an exp is 16, a division
// waits 10 cycles or more), and the out-of-order window holds about two such chains: written as a
// plain loop, Gate ran at a quarter of its throughput, as long as the conv before it. Here each
// step is taken for kUnits vectors before the next step, so kUnits chains advance side by side.
// Used where C is a multiple of 8 (the presets' 16, 8, 24, ...); same formulas as the loops above.
constexpr int kUnits = 4;

// U vectors: pre at pre + q[u] (a1; a2 or s C further on), post, dp and da at o[u] (da: q[u]).
template <Act F, GateMode MODE, int U>
__attribute__((always_inline)) inline void gate_units(const Gate& g, const int64_t* o, const int64_t* q) {
  const int64_t C = g.channels;
  Vec8 a[U], e[U], d[U], f[U], df[U];
  for (int u = 0; u < U; ++u) a[u] = load<Vec8>(g.pre + q[u]);
  for (int u = 0; u < U; ++u) d[u] = denominator<F>(a[u], e[u]);
  if constexpr (MODE == GateMode::None) {
    for (int u = 0; u < U; ++u) finish<F>(a[u], e[u], 1.0f / d[u], g.slope, f[u], df[u]);
    for (int u = 0; u < U; ++u) store(g.post + o[u], f[u]);
  } else {
    Vec8 a2[U], e2[U], d2[U], r[U];
    for (int u = 0; u < U; ++u) a2[u] = load<Vec8>(g.pre + q[u] + C);
    for (int u = 0; u < U; ++u) d2[u] = denominator<Act::Sigmoid>(a2[u], e2[u]);
    for (int u = 0; u < U; ++u) r[u] = 1.0f / (d[u] * d2[u]);
    for (int u = 0; u < U; ++u) finish<F>(a[u], e[u], d2[u] * r[u], g.slope, f[u], df[u]);
    for (int u = 0; u < U; ++u) {
      Vec8 s, ds;
      finish<Act::Sigmoid>(a2[u], e2[u], d[u] * r[u], 0.0f, s, ds);
      store(g.post + o[u], MODE == GateMode::Gated ? f[u] * s : s * f[u] + (1.0f - s) * a[u]);
      store(g.pre + q[u] + C, s);
    }
  }
}

template <Act F, GateMode MODE, int U>
__attribute__((always_inline)) inline void gate_grad_units(const Gate& g, const int64_t* o, const int64_t* q) {
  const int64_t C = g.channels;
  Vec8 a[U], e[U], d[U], f[U], df[U];
  for (int u = 0; u < U; ++u) a[u] = load<Vec8>(g.pre + q[u]);
  for (int u = 0; u < U; ++u) d[u] = denominator<F>(a[u], e[u]);
  for (int u = 0; u < U; ++u) finish<F>(a[u], e[u], 1.0f / d[u], g.slope, f[u], df[u]);
  for (int u = 0; u < U; ++u) {
    const Vec8 dp = load<Vec8>(g.dp + o[u]);
    if constexpr (MODE == GateMode::None) {
      store(g.da + q[u], dp * df[u]);
    } else {
      const Vec8 s = load<Vec8>(g.pre + q[u] + C), ds = s * (1.0f - s);
      store(g.da + q[u], MODE == GateMode::Gated ? dp * s * df[u] : dp * (s * df[u] + 1.0f - s));
      store(g.da + q[u] + C, MODE == GateMode::Gated ? dp * f[u] * ds : dp * (f[u] - a[u]) * ds);
    }
  }
}

// The n C / 8 vectors in order, kUnits at a time: vector k is row t = k / (C / 8), lanes
// c = 8 (k mod C / 8); o = t C + c in post, dp; q = t M + c in pre, da.
template <Act F, GateMode MODE, bool BACKWARD>
__attribute__((always_inline)) inline void gate_vectors(const Gate& g) {
  const int64_t C = g.channels, M = MODE == GateMode::None ? C : 2 * C, per_row = C / 8, count = g.n * per_row;
  int64_t t = 0, c = 0;
  auto next = [&](int64_t& o, int64_t& q) {
    o = t * C + c;
    q = t * M + c;
    c += 8;
    if (c == C) c = 0, ++t;
  };
  int64_t k = 0;
  for (; k + kUnits <= count; k += kUnits) {
    int64_t o[kUnits], q[kUnits];
    for (int u = 0; u < kUnits; ++u) next(o[u], q[u]);
    if constexpr (BACKWARD) gate_grad_units<F, MODE, kUnits>(g, o, q);
    else gate_units<F, MODE, kUnits>(g, o, q);
  }
  for (; k < count; ++k) {
    int64_t o, q;
    next(o, q);
    if constexpr (BACKWARD) gate_grad_units<F, MODE, 1>(g, &o, &q);
    else gate_units<F, MODE, 1>(g, &o, &q);
  }
}

template <Act F, GateMode MODE>
__attribute__((always_inline)) inline void gate_any(const Gate& g) {
  if (g.channels % 8 == 0) gate_vectors<F, MODE, false>(g);
  else gate_rows<F, MODE>(g);
}
template <Act F, GateMode MODE>
__attribute__((always_inline)) inline void gate_grad_any(const Gate& g) {
  if (g.channels % 8 == 0) gate_vectors<F, MODE, true>(g);
  else gate_grad_rows<F, MODE>(g);
}

#define WAVETRAIN_AMP_GATE_SWITCH(KERNEL, G)                                            \
  switch ((G).mode) {                                                                   \
    case GateMode::None: WAVETRAIN_AMP_GATE_ACT(KERNEL, G, GateMode::None) break;       \
    case GateMode::Gated: WAVETRAIN_AMP_GATE_ACT(KERNEL, G, GateMode::Gated) break;     \
    case GateMode::Blended: WAVETRAIN_AMP_GATE_ACT(KERNEL, G, GateMode::Blended) break; \
  }
#define WAVETRAIN_AMP_GATE_ACT(KERNEL, G, MODE)                          \
  switch ((G).f) {                                                       \
    case Act::Tanh: return KERNEL<Act::Tanh, MODE>(G);                   \
    case Act::Sigmoid: return KERNEL<Act::Sigmoid, MODE>(G);             \
    case Act::ReLU: return KERNEL<Act::ReLU, MODE>(G);                   \
    case Act::LeakyReLU: return KERNEL<Act::LeakyReLU, MODE>(G);         \
    case Act::SiLU: return KERNEL<Act::SiLU, MODE>(G);                   \
    case Act::None: return KERNEL<Act::None, MODE>(G);                   \
  }

// T time steps x C = W x V channels at once: T x V accumulators in vector registers, and every
// weight vector loaded is used T times.
template <typename Vec, int W, int V, int T>
__attribute__((always_inline)) inline void rows_tile(const Rows& r, int64_t t0) {
  constexpr int C = W * V;
  Vec acc[T][V];
  for (int i = 0; i < T; ++i)
    for (int v = 0; v < V; ++v) {
      Vec s = Vec{};
      if (r.rows) s += load<Vec>(r.rows + (t0 + i) * C + v * W);
      if (r.bias) s += load<Vec>(r.bias + v * W);
      if (r.x) s += load<Vec>(r.mixer + v * W) * r.x[t0 + i];
      acc[i][v] = s;
    }
  for (int64_t k = 0; k < r.taps; ++k) {
    const float* in[T];
    for (int i = 0; i < T; ++i) in[i] = r.in + (t0 + i + k * r.step) * r.cin;
    const float* w = r.w + k * r.cin * C;
    for (int64_t c = 0; c < r.cin; ++c) {
      Vec wr[V];
      for (int v = 0; v < V; ++v) wr[v] = load<Vec>(w + c * C + v * W);
      for (int i = 0; i < T; ++i) {
        const float s = in[i][c];
        for (int v = 0; v < V; ++v) acc[i][v] += wr[v] * s;
      }
    }
  }
  if (r.grad_of && r.act == Act::Tanh)
    for (int i = 0; i < T; ++i)
      for (int v = 0; v < V; ++v) {
        const Vec y = load<Vec>(r.grad_of + (t0 + i) * C + v * W);
        acc[i][v] *= 1.0f - y * y;
      }
  float* out = r.out + t0 * C;
  for (int i = 0; i < T; ++i)
    for (int v = 0; v < V; ++v) store(out + i * C + v * W, acc[i][v]);
  if (r.grad_of) {
    if (r.act != Act::Tanh) derivative_rows(r.act, r.slope, r.grad_of + t0 * C, out, T * C);
  } else {
    activate_rows(r.act, r.slope, out, T * C);
  }
}

template <typename Vec, int W, int V>
__attribute__((always_inline)) inline void rows_blocked(const Rows& r) {
  constexpr int T = V >= 8 ? 1 : 8 / V;
  int64_t t = 0;
  for (; t + T <= r.n; t += T) rows_tile<Vec, W, V, T>(r, t);
  for (; t < r.n; ++t) rows_tile<Vec, W, V, 1>(r, t);
}

// Any channel count (1, 2, 6, ...): one step at a time.
__attribute__((always_inline)) inline void rows_any(const Rows& r) {
  const int64_t C = r.channels;
  for (int64_t t = 0; t < r.n; ++t) {
    float* out = r.out + t * C;
    for (int64_t o = 0; o < C; ++o)
      out[o] = (r.rows ? r.rows[t * C + o] : 0.0f) + (r.bias ? r.bias[o] : 0.0f) + (r.x ? r.mixer[o] * r.x[t] : 0.0f);
    for (int64_t k = 0; k < r.taps; ++k) {
      const float* in = r.in + (t + k * r.step) * r.cin;
      const float* w = r.w + k * r.cin * C;
      for (int64_t c = 0; c < r.cin; ++c)
        for (int64_t o = 0; o < C; ++o) out[o] += w[c * C + o] * in[c];
    }
    if (r.grad_of) derivative_rows(r.act, r.slope, r.grad_of + t * C, out, C);
    else activate_rows(r.act, r.slope, out, C);
  }
}


// R rows of dw (R x V accumulators) over times [t0, t1).
template <typename Vec, int W, int V, int R>
__attribute__((always_inline)) inline void outer_rows(const Outer& g, int64_t c0, int64_t t0, int64_t t1) {
  constexpr int C = W * V;
  Vec acc[R][V];
  for (int j = 0; j < R; ++j)
    for (int v = 0; v < V; ++v) acc[j][v] = load<Vec>(g.dw + (c0 + j) * C + v * W);
  for (int64_t t = t0; t < t1; ++t) {
    Vec bv[V];
    for (int v = 0; v < V; ++v) bv[v] = load<Vec>(g.b + t * C + v * W);
    const float* at = g.a + t * g.sa + c0;
    for (int j = 0; j < R; ++j) {
      const float s = at[j];
      for (int v = 0; v < V; ++v) acc[j][v] += bv[v] * s;
    }
  }
  for (int j = 0; j < R; ++j)
    for (int v = 0; v < V; ++v) store(g.dw + (c0 + j) * C + v * W, acc[j][v]);
}

template <typename Vec, int W, int V>
__attribute__((always_inline)) inline void outer_blocked(const Outer& g) {
  constexpr int C = W * V;
  constexpr int R = V >= 8 ? 1 : 8 / V;
  constexpr int64_t kSpan = 256;  // time steps per pass: a and b stay in L1 across the row blocks
  for (int64_t t0 = 0; t0 < g.n; t0 += kSpan) {
    const int64_t t1 = std::min(g.n, t0 + kSpan);
    int64_t c = 0;
    for (; c + R <= g.ca; c += R) outer_rows<Vec, W, V, R>(g, c, t0, t1);
    for (; c < g.ca; ++c) outer_rows<Vec, W, V, 1>(g, c, t0, t1);
  }
  if (g.db) {
    Vec s[V];
    for (int v = 0; v < V; ++v) s[v] = load<Vec>(g.db + v * W);
    for (int64_t t = 0; t < g.n; ++t)
      for (int v = 0; v < V; ++v) s[v] += load<Vec>(g.b + t * C + v * W);
    for (int v = 0; v < V; ++v) store(g.db + v * W, s[v]);
  }
}

__attribute__((always_inline)) inline void outer_any(const Outer& g) {
  const int64_t C = g.channels;
  for (int64_t t = 0; t < g.n; ++t) {
    const float* b = g.b + t * C;
    for (int64_t c = 0; c < g.ca; ++c) {
      const float s = g.a[t * g.sa + c];
      for (int64_t o = 0; o < C; ++o) g.dw[c * C + o] += s * b[o];
    }
    if (g.db)
      for (int64_t o = 0; o < C; ++o) g.db[o] += b[o];
  }
}

// The scalar tiles (2, 3 and 6 channels) of each ISA, not inlined into the channel switch (see
// WAVETRAIN_AMP_CHANNEL_SWITCH_AS).
template <int N>
__attribute__((noinline)) void rows_scalar_baseline(const Rows& r) { rows_blocked<float, 1, N>(r); }
template <int N>
__attribute__((noinline)) void outer_scalar_baseline(const Outer& g) { outer_blocked<float, 1, N>(g); }
#if WAVETRAIN_AMP_AVX2
template <int N>
__attribute__((noinline, target("avx2,fma"))) void rows_scalar_avx2(const Rows& r) { rows_blocked<float, 1, N>(r); }
template <int N>
__attribute__((noinline, target("avx2,fma"))) void outer_scalar_avx2(const Outer& g) { outer_blocked<float, 1, N>(g); }
#endif

void rows_baseline(const Rows& r) { WAVETRAIN_AMP_CHANNEL_SWITCH_NARROW(rows_blocked, r, rows_any, rows_scalar_baseline) }
void outer_baseline(const Outer& g) { WAVETRAIN_AMP_CHANNEL_SWITCH_NARROW(outer_blocked, g, outer_any, outer_scalar_baseline) }
void gate_baseline(const Gate& g) { WAVETRAIN_AMP_GATE_SWITCH(gate_any, g) }
void gate_grad_baseline(const Gate& g) { WAVETRAIN_AMP_GATE_SWITCH(gate_grad_any, g) }
#if WAVETRAIN_AMP_AVX2
__attribute__((target("avx2,fma"))) void rows_avx2(const Rows& r) { WAVETRAIN_AMP_CHANNEL_SWITCH(rows_blocked, r, rows_any, rows_scalar_avx2) }
__attribute__((target("avx2,fma"))) void outer_avx2(const Outer& g) {
  WAVETRAIN_AMP_CHANNEL_SWITCH(outer_blocked, g, outer_any, outer_scalar_avx2)
}
__attribute__((target("avx2,fma"))) void gate_avx2(const Gate& g) { WAVETRAIN_AMP_GATE_SWITCH(gate_any, g) }
__attribute__((target("avx2,fma"))) void gate_grad_avx2(const Gate& g) { WAVETRAIN_AMP_GATE_SWITCH(gate_grad_any, g) }
// 16-lane rows for multiples of 16 channels (NAM's standard has 16). The gates keep AVX2's.
__attribute__((target("avx512f,avx2,fma"))) void rows_avx512(const Rows& r) {
  WAVETRAIN_AMP_CHANNEL_SWITCH_WIDE(rows_blocked, r, rows_any, rows_scalar_avx2)
}
__attribute__((target("avx512f,avx2,fma"))) void outer_avx512(const Outer& g) {
  WAVETRAIN_AMP_CHANNEL_SWITCH_WIDE(outer_blocked, g, outer_any, outer_scalar_avx2)
}
#endif

KernelSet baseline_kernels() { return KernelSet{rows_baseline, outer_baseline, gate_baseline, gate_grad_baseline}; }

std::atomic<bool> force_baseline{false}, no_avx512{false};

KernelSet best_kernels() {
  KernelSet k = baseline_kernels();
#if WAVETRAIN_AMP_AVX2
  if (kernels::cpu_has_avx512f() && !no_avx512.load()) k = KernelSet{rows_avx512, outer_avx512, gate_avx2, gate_grad_avx2};
  else if (kernels::cpu_has_avx2_fma()) k = KernelSet{rows_avx2, outer_avx2, gate_avx2, gate_grad_avx2};
#endif
  return k;
}

}  // namespace

KernelSet kernels_now() { return force_baseline.load() ? baseline_kernels() : best_kernels(); }

void use_baseline_isa(bool on) { force_baseline = on; }
void use_no_avx512(bool on) { no_avx512 = on; }

}  // namespace wavetrain::experiments::amp::kernels
