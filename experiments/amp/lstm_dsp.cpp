// NAM's LSTM for real-time buffers (lstm_dsp.h).
#include "experiments/amp/lstm_dsp.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

#pragma GCC diagnostic ignored "-Wpsabi"  // vectors between always-inlined helpers (wavenet_kernels.h)
#include "experiments/amp/dsp_kernels.h"
#include "experiments/amp/wavenet_kernels.h"

namespace wavetrain::experiments::amp {
namespace {

using kernels::load;
using kernels::store;
using kernels::Vec8;

// exp(x) for x <= 0 on 8 lanes: x = k ln 2 + r, |r| <= ln 2 / 2, exp(r) = 1 + r + r^2 P(r) with
// P of degree 5 (Cephes' expf coefficients, relative error about 1e-7), evaluated in two halves
// at once (Estrin) because the recurrence waits on this latency; 2^k made in the exponent bits.
__attribute__((always_inline)) inline Vec8 exp_nonpositive(Vec8 x) {
  return kernels::exp_nonpositive_with(x, [](Vec8 r) __attribute__((always_inline)) {
    const Vec8 r2 = r * r;
    const Vec8 low = (r * 4.1665795894e-2f + 1.6666665459e-1f) * r + 5.0000001201e-1f;
    const Vec8 high = (r * 1.9875691500e-4f + 1.3981999507e-3f) * r + 8.3334519073e-3f;
    return (high * (r2 * r) + low) * r2 + r + 1.0f;
  });
}

// tanh(x) = x P(x^2) / Q(x^2) on |x| <= 7.9053111 (beyond it tanh is 1 to float precision):
// Eigen's rational approximation for float (error a few ulp), with P and Q evaluated side by side
// (Estrin) because the recurrence waits on this latency. sigmoid(x) = (1 + tanh(x / 2)) / 2.
// Each is returned as a fraction n / d, so the cell divides twice per 8 units, not five times.
struct Fraction {
  Vec8 n, d;
};
__attribute__((always_inline)) inline Fraction tanh_fraction(Vec8 x) {
  const float limit = 7.90531110763549805f;
  x = x > limit ? Vec8{} + limit : (x < -limit ? Vec8{} - limit : x);
  const Vec8 x2 = x * x, x4 = x2 * x2, x8 = x4 * x4;
  const Vec8 p_low = (x2 * 6.37261928875436e-04f + 4.89352455891786e-03f) + x4 * (x2 * 5.12229709037114e-08f + 1.48572235717979e-05f);
  const Vec8 p_high = (x2 * 2.00018790482477e-13f - 8.60467152213735e-11f) + x4 * -2.76076847742355e-16f;
  const Vec8 q = (x2 * 2.26843463243900e-03f + 4.89352518554385e-03f) + x4 * (x2 * 1.19825839466702e-06f + 1.18534705686654e-04f);
  return {x * (p_low + x8 * p_high), q};
}
__attribute__((always_inline)) inline Fraction sigmoid(Vec8 x) {
  const Fraction t = tanh_fraction(0.5f * x);
  return {t.d + t.n, 2.0f * t.d};
}

// The NAM core's fast tanh (its plugin's setting), on 8 lanes, in the core's order of operations:
//   x (a + a|x| + (b + c|x|) x^2) / (e + (e + x^2) |x + d x |x||)
// It is 1.008 at infinity, not 1, and its error is up to 4.4e-4 on |x| <= 8. The core's LSTM uses
// it for the sigmoids too, as (fast_tanh(x / 2) + 1) / 2. Returned as a value (denominator 1):
// its denominator grows as x^4, and the cell's products of three would overflow.
__attribute__((always_inline)) inline Fraction fast_tanh(Vec8 x) {
  const Vec8 ax = x < 0.0f ? -x : x, x2 = x * x;
  const Vec8 num = x * (2.45550750702956f + 2.45550750702956f * ax + (0.893229853513558f + 0.821226666969744f * ax) * x2);
  const Vec8 inner = x + 0.814642734961073f * x * ax;
  const Vec8 den = 2.44506634652299f + (2.44506634652299f + x2) * (inner < 0.0f ? -inner : inner);
  return {num / den, Vec8{} + 1.0f};
}

// Units [8u, 8u + 8) of one step, from their four gate vectors:
//   c = sigmoid(f) c + sigmoid(i) tanh(g) = (nf c di dg + ni ng df) / (df di dg)
// (every d is between 4.9e-3 and 2: the products stay well inside float's range)
//   h = sigmoid(o) tanh(c)
template <bool Fast>
__attribute__((always_inline)) inline Fraction tanh_of(Vec8 x) {
  if constexpr (Fast) return fast_tanh(x);
  else return tanh_fraction(x);
}
template <bool Fast>
__attribute__((always_inline)) inline Fraction sigmoid_of(Vec8 x) {
  if constexpr (Fast) {
    const Fraction t = fast_tanh(0.5f * x);
    return {(t.n + 1.0f) * 0.5f, t.d};
  } else {
    return sigmoid(x);
  }
}

template <bool Fast>
__attribute__((always_inline)) inline void units(Vec8 gi, Vec8 gf, Vec8 gg, Vec8 go, float* c, float* h) {
  const Fraction i = sigmoid_of<Fast>(gi), f = sigmoid_of<Fast>(gf), g = tanh_of<Fast>(gg), o = sigmoid_of<Fast>(go);
  const Vec8 cv = load<Vec8>(c);
  const Vec8 cn = (f.n * cv * i.d * g.d + i.n * g.n * f.d) / (f.d * i.d * g.d);
  const Fraction t = tanh_of<Fast>(cn);
  store(c, cn);
  store(h, (o.n * t.n) / (o.d * t.d));
}

// One layer's step with U chunks of 8 units: the 4U gate vectors (i, f, g, o groups of U) stay in
// registers through the matrix-vector product and the cell update.
template <int U, bool Fast>
__attribute__((always_inline)) inline void cell_blocked(const float* w, const float* bias, const float* x, int64_t inputs, float* h, float* c,
                                                        int64_t hidden) {
  constexpr int G = 4 * U;
  Vec8 acc[G];
  for (int v = 0; v < G; ++v) acc[v] = load<Vec8>(bias + 8 * v);
  for (int64_t j = 0; j < inputs; ++j, w += 8 * G)
    for (int v = 0; v < G; ++v) acc[v] += load<Vec8>(w + 8 * v) * x[j];
  if constexpr (U == 1) {
    // Four gate vectors leave the FMA units idle between dependent adds: two interleaved sums over
    // the hidden columns halve the chain the next step waits for.
    Vec8 odd[G] = {};
    int64_t j = 0;
    for (; j + 1 < hidden; j += 2, w += 16 * G)
      for (int v = 0; v < G; ++v) {
        acc[v] += load<Vec8>(w + 8 * v) * h[j];
        odd[v] += load<Vec8>(w + 8 * G + 8 * v) * h[j + 1];
      }
    for (; j < hidden; ++j, w += 8 * G)
      for (int v = 0; v < G; ++v) acc[v] += load<Vec8>(w + 8 * v) * h[j];
    for (int v = 0; v < G; ++v) acc[v] += odd[v];
  } else {
    for (int64_t j = 0; j < hidden; ++j, w += 8 * G)
      for (int v = 0; v < G; ++v) acc[v] += load<Vec8>(w + 8 * v) * h[j];
  }
  for (int u = 0; u < U; ++u) units<Fast>(acc[u], acc[U + u], acc[2 * U + u], acc[3 * U + u], c + 8 * u, h + 8 * u);
}

// Any hidden size: the gates through memory.
template <bool Fast>
__attribute__((always_inline)) inline void cell_any(const float* w, const float* bias, const float* x, int64_t inputs, float* h, float* c,
                                                    int64_t hidden, float* gates, int64_t chunks) {
  const int64_t G = 4 * chunks * 8;
  std::copy(bias, bias + G, gates);
  for (int64_t j = 0; j < inputs; ++j, w += G)
    for (int64_t g = 0; g < G; ++g) gates[g] += w[g] * x[j];
  for (int64_t j = 0; j < hidden; ++j, w += G)
    for (int64_t g = 0; g < G; ++g) gates[g] += w[g] * h[j];
  for (int64_t u = 0; u < chunks; ++u)
    units<Fast>(load<Vec8>(gates + 8 * u), load<Vec8>(gates + 8 * (chunks + u)), load<Vec8>(gates + 8 * (2 * chunks + u)),
          load<Vec8>(gates + 8 * (3 * chunks + u)), c + 8 * u, h + 8 * u);
}

// The head: y = bias + head . h over the padded units (the padding's weights are zero).
__attribute__((always_inline)) inline float head_dot(const float* head, const float* h, int64_t chunks, float bias) {
  Vec8 acc = Vec8{};
  for (int64_t u = 0; u < chunks; ++u) acc += load<Vec8>(head + 8 * u) * load<Vec8>(h + 8 * u);
  float y = bias;
  for (int l = 0; l < 8; ++l) y += acc[l];
  return y;
}

struct Args {
  const float* const* w;
  const float* const* bias;
  const int64_t* inputs;
  float* const* h;
  float* const* c;
  int64_t layers, hidden, chunks;
  float* gates;
  const float* head;
  float head_bias;
  bool fast_tanh;
};

// The whole buffer, sample by sample, with U chunks of 8 units known at compile time (0: any):
// the loop over time is inside, so nothing is called per sample.
template <int U, bool Fast>
__attribute__((always_inline)) inline void run(const Args& a, const float* in, float* out, int64_t n) {
  for (int64_t t = 0; t < n; ++t) {
    const float* input = in + t;
    for (int64_t l = 0; l < a.layers; ++l) {
      if constexpr (U > 0) cell_blocked<U, Fast>(a.w[l], a.bias[l], input, a.inputs[l], a.h[l], a.c[l], a.hidden);
      else cell_any<Fast>(a.w[l], a.bias[l], input, a.inputs[l], a.h[l], a.c[l], a.hidden, a.gates, a.chunks);
      input = a.h[l];
    }
    out[t] = head_dot(a.head, input, a.chunks, a.head_bias);
  }
}

template <bool Fast>
__attribute__((always_inline)) inline void run_chunks(const Args& a, const float* in, float* out, int64_t n) {
  switch (a.chunks) {
    case 1: return run<1, Fast>(a, in, out, n);
    case 2: return run<2, Fast>(a, in, out, n);
    case 3: return run<3, Fast>(a, in, out, n);
    default: return run<0, Fast>(a, in, out, n);
  }
}

__attribute__((always_inline)) inline void run_any(const Args& a, const float* in, float* out, int64_t n) {
  if (a.fast_tanh) run_chunks<true>(a, in, out, n);
  else run_chunks<false>(a, in, out, n);
}

void run_baseline(const Args& a, const float* in, float* out, int64_t n) { run_any(a, in, out, n); }
#if WAVETRAIN_AMP_AVX2
__attribute__((target("avx2,fma"))) void run_avx2(const Args& a, const float* in, float* out, int64_t n) { run_any(a, in, out, n); }
#endif

}  // namespace

LstmDsp::LstmDsp(const LstmConfig& config, const std::vector<float>& weights, int64_t prewarm, bool fast_tanh)
    : hidden_(config.hidden_size), prewarm_(std::max<int64_t>(0, prewarm)), fast_tanh_(fast_tanh) {
  const int64_t H = hidden_;
  if (static_cast<int64_t>(weights.size()) != lstm_weight_count(config))
    throw std::invalid_argument("LSTM: " + std::to_string(weights.size()) + " weights given, this architecture has " +
                                std::to_string(lstm_weight_count(config)));
  // Each gate group (i, f, g, o) padded to a multiple of 8 units: group q is rows [q Hp, q Hp + H).
  chunks_ = (H + 7) / 8;
  const int64_t Hp = 8 * chunks_, G = 4 * Hp;
  size_t at = 0;
  auto next = [&] { return weights[at++]; };
  for (int64_t l = 0; l < config.num_layers; ++l) {
    Layer layer;
    layer.inputs = l == 0 ? config.input_size : H;
    const int64_t cols = layer.inputs + H;
    // The file holds [4H][inputs + H] row-major; keep it as columns of padded gates.
    layer.w.assign(static_cast<size_t>(cols * G), 0.0f);
    for (int64_t q = 0; q < 4; ++q)
      for (int64_t k = 0; k < H; ++k)
        for (int64_t j = 0; j < cols; ++j) layer.w[static_cast<size_t>(j * G + q * Hp + k)] = next();
    layer.bias.assign(static_cast<size_t>(G), 0.0f);
    for (int64_t q = 0; q < 4; ++q)
      for (int64_t k = 0; k < H; ++k) layer.bias[static_cast<size_t>(q * Hp + k)] = next();
    layer.h0.assign(static_cast<size_t>(Hp), 0.0f);
    layer.c0.assign(static_cast<size_t>(Hp), 0.0f);
    for (int64_t k = 0; k < H; ++k) layer.h0[static_cast<size_t>(k)] = next();
    for (int64_t k = 0; k < H; ++k) layer.c0[static_cast<size_t>(k)] = next();
    layers_.push_back(std::move(layer));
  }
  head_.assign(static_cast<size_t>(Hp), 0.0f);
  for (int64_t k = 0; k < H; ++k) head_[static_cast<size_t>(k)] = next();
  head_bias_ = next();
  gates_.assign(static_cast<size_t>(G), 0.0f);
  for (Layer& l : layers_) {
    w_.push_back(l.w.data());
    b_.push_back(l.bias.data());
    inputs_.push_back(l.inputs);
  }
  avx2_ = dsp::using_avx2();
  reset();
}

void LstmDsp::reset() {
  h_.clear();
  c_.clear();
  for (Layer& l : layers_) {
    l.h = l.h0;
    l.c = l.c0;
    h_.push_back(l.h.data());
    c_.push_back(l.c.data());
  }
  std::vector<float> zeros(static_cast<size_t>(std::min<int64_t>(prewarm_, 4096)), 0.0f), ignored(zeros.size());
  for (int64_t left = prewarm_; left > 0;) {
    const int64_t n = std::min<int64_t>(left, static_cast<int64_t>(zeros.size()));
    process(zeros.data(), ignored.data(), n);
    left -= n;
  }
}

void LstmDsp::process(const float* in, float* out, int64_t n) {
  const Args a{w_.data(), b_.data(), inputs_.data(), h_.data(), c_.data(), static_cast<int64_t>(layers_.size()), hidden_, chunks_,
               gates_.data(), head_.data(), head_bias_, fast_tanh_};
#if WAVETRAIN_AMP_AVX2
  if (avx2_) return run_avx2(a, in, out, n);
#endif
  run_baseline(a, in, out, n);
}

}  // namespace wavetrain::experiments::amp
