// The LSTM cell's arithmetic for the real-time engine (lstm_dsp.cpp, its only user): tanh and
// sigmoid kept as the parts of their fractions (exact: Eigen's rational tanh; fast: the NAM core's),
// and the update of 8 units' c and h from their four gate vectors. Templates on the vector type
// (Vec4, Vec8, Vec16), always inlined into the ISA variants that include them.
#pragma once

#include "experiments/amp/wavenet_kernels.h"

namespace wavetrain::experiments::amp::lstm_cell {

using kernels::load;
using kernels::store;

// tanh(x) = x P(x^2) / Q(x^2) on |x| <= 7.9053111 (beyond it tanh is 1 to float precision):
// Eigen's rational approximation for float (error a few ulp), with P evaluated in halves (Estrin)
// because the recurrence waits on this latency. Kept as its parts x, P, Q: the cell multiplies x
// into its numerators while P is still being evaluated, and divides twice per 8 units, not five
// times. sigmoid(x) = (1 + tanh(x / 2)) / 2 = (Q + x' P) / 2Q with x' = x / 2: the constructor
// halves the i, f and o gates' weights (exact in float), so no multiply waits here.
// V is Vec8 or Vec16 (the AVX-512 variant's gates).
template <typename V>
struct TanhParts {
  V x, p, q;
};
template <typename V>
struct Fraction {
  V n, d;
};
template <typename V>
__attribute__((always_inline)) inline TanhParts<V> tanh_parts(V x) {
  const float limit = 7.90531110763549805f, limit2 = limit * limit;
  // x^2 of the clamped x, as min(x^2, limit^2): the same number, one step sooner on the chain (the
  // clamp's compare and blend run beside the polynomial; only the last products wait on it).
  V x2 = x * x;
  x2 = x2 < limit2 ? x2 : V{} + limit2;
  x = x > limit ? V{} + limit : (x < -limit ? V{} - limit : x);
  const V x4 = x2 * x2, x8 = x4 * x4;
  const V p_low = (x2 * 6.37261928875436e-04f + 4.89352455891786e-03f) + x4 * (x2 * 5.12229709037114e-08f + 1.48572235717979e-05f);
  const V p_high = (x2 * 2.00018790482477e-13f - 8.60467152213735e-11f) + x4 * -2.76076847742355e-16f;
  const V q = (x2 * 2.26843463243900e-03f + 4.89352518554385e-03f) + x4 * (x2 * 1.19825839466702e-06f + 1.18534705686654e-04f);
  return {x, p_low + x8 * p_high, q};
}
// sigmoid of the halved gate x': (Q + x' P) / 2Q.
template <typename V>
__attribute__((always_inline)) inline Fraction<V> sigmoid_of_half(const TanhParts<V>& t) {
  return {t.q + t.x * t.p, 2.0f * t.q};
}

// The NAM core's fast tanh (its plugin's setting), in the core's order of operations:
//   x (a + a|x| + (b + c|x|) x^2) / (e + (e + x^2) |x + d x |x||)
// It is 1.008 at infinity, not 1, and its error is up to 4.4e-4 on |x| <= 8. The core's LSTM uses
// it for the sigmoids too, as (fast_tanh(x / 2) + 1) / 2 (x / 2 from the halved weights, exactly as
// the core's multiply by 0.5). Divided at once: its denominator grows as x^4, and products of three
// would overflow.
// Kept as its numerator and denominator until the one division, so that what follows the
// function (sigmoid's + 1 and / 2, the cell's o *) is worked into them while the denominator is
// still being computed, not after the division: on the chain each sample waits on.
template <typename V>
__attribute__((always_inline)) inline Fraction<V> fast_tanh_parts(V x) {
  const V ax = x < 0.0f ? -x : x, x2 = x * x;
  const V num = x * (2.45550750702956f + 2.45550750702956f * ax + (0.893229853513558f + 0.821226666969744f * ax) * x2);
  const V inner = x + 0.814642734961073f * x * ax;
  const V den = 2.44506634652299f + (2.44506634652299f + x2) * (inner < 0.0f ? -inner : inner);
  return {num, den};
}
template <typename V>
__attribute__((always_inline)) inline V fast_tanh(V x) {
  const Fraction<V> t = fast_tanh_parts(x);
  return t.n / t.d;
}
// (t + 1) / 2 of t = n / d: (n + d) / 2d
template <typename V>
__attribute__((always_inline)) inline V half_past_one(const Fraction<V>& t) {
  return (t.n + t.d) / (2.0f * t.d);
}
template <typename V>
__attribute__((always_inline)) inline V fast_sigmoid_of_half(V x) {
  return half_past_one(fast_tanh_parts(x));
}

// Units [8u, 8u + 8) of one step, exact: c = sigmoid(f) c + sigmoid(i) tanh(g),
//   c = (fn c / fd) + (in gx gp) / (id gq) = [(fn id)(c gq) + (in fd)(gx gp)] / (fd id gq)
// (every d is between 4.9e-3 and 2: the products stay well inside float's range), grouped so the
// products that wait on the gates are two deep, then h = sigmoid(o) tanh(c) = (on cx)(cp) / (od cq).
// (V: Vec8, or Vec4 in the baseline variant, where units [8u, 8u + 4) and [8u + 4, 8u + 8) go in turn.)
template <typename V>
__attribute__((always_inline)) inline V update(Fraction<V> i, Fraction<V> f, TanhParts<V> g, Fraction<V> o, float* c, float* h) {
  const V cv = load<V>(c);
  const V cn = ((f.n * i.d) * (cv * g.q) + (i.n * f.d) * (g.x * g.p)) / ((f.d * i.d) * g.q);
  const TanhParts<V> t = tanh_parts(cn);
  store(c, cn);
  const V hn = ((o.n * t.x) * t.p) / (o.d * t.q);
  store(h, hn);
  return hn;
}
template <typename V>
__attribute__((always_inline)) inline V update_fast(V i, V f, V g, V o, float* c, float* h) {
  const V cn = f * load<V>(c) + i * g;
  store(c, cn);
  const Fraction<V> t = fast_tanh_parts(cn);
  const V hn = (o * t.n) / t.d;
  store(h, hn);
  return hn;
}

// Units [8u, 8u + 8) from their four gate vectors (the i, f and o ones halved).
template <bool Fast, typename V>
__attribute__((always_inline)) inline V units(V gi, V gf, V gg, V go, float* c, float* h) {
  if constexpr (Fast)
    return update_fast(fast_sigmoid_of_half(gi), fast_sigmoid_of_half(gf), fast_tanh(gg), fast_sigmoid_of_half(go), c, h);
  else
    return update(sigmoid_of_half(tanh_parts(gi)), sigmoid_of_half(tanh_parts(gf)), tanh_parts(gg), sigmoid_of_half(tanh_parts(go)), c, h);
}

}  // namespace wavetrain::experiments::amp::lstm_cell
