// NAM's LSTM for real-time buffers (lstm_dsp.h).
#include "experiments/amp/lstm_dsp.h"

#include <algorithm>
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

// gates[0 .. 8V) = bias + sum over j < inputs of w[j] x[j] (+ the H state columns after them), with
// the V accumulators in registers.
template <int V>
__attribute__((always_inline)) inline void gates_blocked(const float* w, const float* bias, const float* x, int64_t inputs, const float* h,
                                                         int64_t hidden, float* gates) {
  constexpr int64_t G = 8 * V;
  Vec8 acc[V];
  for (int v = 0; v < V; ++v) acc[v] = load<Vec8>(bias + 8 * v);
  for (int64_t j = 0; j < inputs; ++j, w += G)
    for (int v = 0; v < V; ++v) acc[v] += load<Vec8>(w + 8 * v) * x[j];
  for (int64_t j = 0; j < hidden; ++j, w += G)
    for (int v = 0; v < V; ++v) acc[v] += load<Vec8>(w + 8 * v) * h[j];
  for (int v = 0; v < V; ++v) store(gates + 8 * v, acc[v]);
}

__attribute__((always_inline)) inline void gates_any(const float* w, const float* bias, const float* x, int64_t inputs, const float* h,
                                                     int64_t hidden, float* gates, int64_t padded) {
  std::copy(bias, bias + padded, gates);
  for (int64_t j = 0; j < inputs; ++j, w += padded)
    for (int64_t g = 0; g < padded; ++g) gates[g] += w[g] * x[j];
  for (int64_t j = 0; j < hidden; ++j, w += padded)
    for (int64_t g = 0; g < padded; ++g) gates[g] += w[g] * h[j];
}

__attribute__((always_inline)) inline float sigmoid(float x) {
  const float e = losses::detail::exp_nonpositive(x < 0 ? x : -x);
  const float r = 1.0f / (1.0f + e);
  return x < 0 ? e * r : r;
}

// One layer's step: gates, then the cell update of c and h in place.
__attribute__((always_inline)) inline void cell(const float* w, const float* bias, const float* x, int64_t inputs, float* h, float* c,
                                                int64_t hidden, float* gates, int64_t padded) {
  switch (padded / 8) {
    case 1: gates_blocked<1>(w, bias, x, inputs, h, hidden, gates); break;
    case 2: gates_blocked<2>(w, bias, x, inputs, h, hidden, gates); break;
    case 3: gates_blocked<3>(w, bias, x, inputs, h, hidden, gates); break;
    case 4: gates_blocked<4>(w, bias, x, inputs, h, hidden, gates); break;
    case 5: gates_blocked<5>(w, bias, x, inputs, h, hidden, gates); break;
    case 6: gates_blocked<6>(w, bias, x, inputs, h, hidden, gates); break;
    case 7: gates_blocked<7>(w, bias, x, inputs, h, hidden, gates); break;
    case 8: gates_blocked<8>(w, bias, x, inputs, h, hidden, gates); break;
    case 9: gates_blocked<9>(w, bias, x, inputs, h, hidden, gates); break;
    case 10: gates_blocked<10>(w, bias, x, inputs, h, hidden, gates); break;
    case 11: gates_blocked<11>(w, bias, x, inputs, h, hidden, gates); break;
    case 12: gates_blocked<12>(w, bias, x, inputs, h, hidden, gates); break;
    default: gates_any(w, bias, x, inputs, h, hidden, gates, padded);
  }
  const int64_t H = hidden;
  float* gi = gates;
  float* gf = gates + H;
  float* gg = gates + 2 * H;
  float* go = gates + 3 * H;
  for (int64_t k = 0; k < H; ++k) {
    c[k] = sigmoid(gf[k]) * c[k] + sigmoid(gi[k]) * kernels::fast_tanh(gg[k]);
    h[k] = sigmoid(go[k]) * kernels::fast_tanh(c[k]);
  }
}

void cell_baseline(const float* w, const float* bias, const float* x, int64_t inputs, float* h, float* c, int64_t hidden, float* gates,
                   int64_t padded) {
  cell(w, bias, x, inputs, h, c, hidden, gates, padded);
}
#if WAVETRAIN_AMP_AVX2
__attribute__((target("avx2,fma"))) void cell_avx2(const float* w, const float* bias, const float* x, int64_t inputs, float* h, float* c,
                                                   int64_t hidden, float* gates, int64_t padded) {
  cell(w, bias, x, inputs, h, c, hidden, gates, padded);
}
#endif

}  // namespace

LstmDsp::LstmDsp(const LstmConfig& config, const std::vector<float>& weights, int64_t prewarm)
    : hidden_(config.hidden_size), prewarm_(std::max<int64_t>(0, prewarm)) {
  const int64_t H = hidden_;
  if (static_cast<int64_t>(weights.size()) != lstm_weight_count(config))
    throw std::invalid_argument("LSTM: " + std::to_string(weights.size()) + " weights given, this architecture has " +
                                std::to_string(lstm_weight_count(config)));
  gates_padded_ = (4 * H + 7) / 8 * 8;
  size_t at = 0;
  for (int64_t l = 0; l < config.num_layers; ++l) {
    Layer layer;
    layer.inputs = l == 0 ? config.input_size : H;
    const int64_t cols = layer.inputs + H;
    // The file holds [4H][inputs + H] row-major; keep it as columns of padded gates.
    layer.w.assign(static_cast<size_t>(cols * gates_padded_), 0.0f);
    for (int64_t g = 0; g < 4 * H; ++g)
      for (int64_t j = 0; j < cols; ++j) layer.w[static_cast<size_t>(j * gates_padded_ + g)] = weights[at + static_cast<size_t>(g * cols + j)];
    at += static_cast<size_t>(4 * H * cols);
    layer.bias.assign(static_cast<size_t>(gates_padded_), 0.0f);
    std::copy_n(weights.begin() + static_cast<std::ptrdiff_t>(at), 4 * H, layer.bias.begin());
    at += static_cast<size_t>(4 * H);
    layer.h0.assign(weights.begin() + static_cast<std::ptrdiff_t>(at), weights.begin() + static_cast<std::ptrdiff_t>(at + H));
    at += static_cast<size_t>(H);
    layer.c0.assign(weights.begin() + static_cast<std::ptrdiff_t>(at), weights.begin() + static_cast<std::ptrdiff_t>(at + H));
    at += static_cast<size_t>(H);
    layers_.push_back(std::move(layer));
  }
  head_.assign(weights.begin() + static_cast<std::ptrdiff_t>(at), weights.begin() + static_cast<std::ptrdiff_t>(at + H));
  head_bias_ = weights[at + static_cast<size_t>(H)];
  gates_.assign(static_cast<size_t>(gates_padded_), 0.0f);
  avx2_ = dsp::using_avx2();
  reset();
}

void LstmDsp::reset() {
  for (Layer& l : layers_) {
    l.h = l.h0;
    l.c = l.c0;
  }
  for (int64_t i = 0; i < prewarm_; ++i) step(0.0f);
}

float LstmDsp::step(float x) {
  const float* input = &x;
  for (Layer& l : layers_) {
#if WAVETRAIN_AMP_AVX2
    if (avx2_)
      cell_avx2(l.w.data(), l.bias.data(), input, l.inputs, l.h.data(), l.c.data(), hidden_, gates_.data(), gates_padded_);
    else
#endif
      cell_baseline(l.w.data(), l.bias.data(), input, l.inputs, l.h.data(), l.c.data(), hidden_, gates_.data(), gates_padded_);
    input = l.h.data();
  }
  float y = head_bias_;
  for (int64_t k = 0; k < hidden_; ++k) y += head_[static_cast<size_t>(k)] * input[k];
  return y;
}

void LstmDsp::process(const float* in, float* out, int64_t n) {
  for (int64_t t = 0; t < n; ++t) out[t] = step(in[t]);
}

}  // namespace wavetrain::experiments::amp
