// Internal to tests/: the NAM LSTM in double precision, written from the .nam weight order, as a
// reference for the real-time cell (lstm_dsp.h). No LibTorch: tests/arm/dsp_check.cpp uses it too.
#pragma once

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "experiments/amp/lstm_config.h"

namespace wavetrain::testing {

// The NAM core's fast tanh, in double, in its order of operations.
inline double core_fast_tanh(double x) {
  const double ax = std::abs(x), x2 = x * x;
  const double num = x * (2.45550750702956 + 2.45550750702956 * ax + (0.893229853513558 + 0.821226666969744 * ax) * x2);
  return num / (2.44506634652299 + (2.44506634652299 + x2) * std::abs(x + 0.814642734961073 * x * ax));
}
inline double exact_tanh(double x) { return std::tanh(x); }

// The output for each input sample. Weights: per layer W [4H][inputs + H] (gates i, f, g, o), b [4H],
// h0 [H], c0 [H]; then the head [H] and its bias. tanh_of is the cell's tanh, and sigmoid(x) =
// (tanh_of(x / 2) + 1) / 2, as the core computes it.
inline std::vector<double> lstm_reference(const experiments::amp::LstmConfig& config, const std::vector<float>& weights,
                                          const std::vector<float>& in, double (*tanh_of)(double)) {
  const int64_t H = config.hidden_size;
  struct Layer {
    int64_t inputs;
    std::vector<double> w, b, h, c;
  };
  std::vector<Layer> layers;
  size_t at = 0;
  auto take = [&](int64_t count) {
    if (at + static_cast<size_t>(count) > weights.size()) throw std::invalid_argument("lstm_reference: too few weights");
    std::vector<double> v(weights.begin() + static_cast<std::ptrdiff_t>(at), weights.begin() + static_cast<std::ptrdiff_t>(at + count));
    at += static_cast<size_t>(count);
    return v;
  };
  for (int64_t l = 0; l < config.num_layers; ++l) {
    const int64_t inputs = l == 0 ? config.input_size : H;
    Layer layer{inputs, take(4 * H * (inputs + H)), take(4 * H), take(H), take(H)};
    layers.push_back(std::move(layer));
  }
  const std::vector<double> head = take(H), head_bias = take(1);
  if (at != weights.size()) throw std::invalid_argument("lstm_reference: too many weights");
  auto sigmoid = [tanh_of](double v) { return 0.5 * (tanh_of(0.5 * v) + 1.0); };
  std::vector<double> out(in.size());
  for (size_t t = 0; t < in.size(); ++t) {
    std::vector<double> x = {in[t]};
    for (Layer& L : layers) {
      std::vector<double> xh = x;
      xh.insert(xh.end(), L.h.begin(), L.h.end());
      std::vector<double> g(L.b);
      for (int64_t r = 0; r < 4 * H; ++r)
        for (int64_t j = 0; j < L.inputs + H; ++j) g[static_cast<size_t>(r)] += L.w[static_cast<size_t>(r * (L.inputs + H) + j)] * xh[static_cast<size_t>(j)];
      for (int64_t k = 0; k < H; ++k) {
        const double i = sigmoid(g[static_cast<size_t>(k)]), f = sigmoid(g[static_cast<size_t>(H + k)]);
        const double gg = tanh_of(g[static_cast<size_t>(2 * H + k)]), o = sigmoid(g[static_cast<size_t>(3 * H + k)]);
        L.c[static_cast<size_t>(k)] = f * L.c[static_cast<size_t>(k)] + i * gg;
        L.h[static_cast<size_t>(k)] = o * tanh_of(L.c[static_cast<size_t>(k)]);
      }
      x = L.h;
    }
    double y = head_bias[0];
    for (int64_t k = 0; k < H; ++k) y += head[static_cast<size_t>(k)] * x[static_cast<size_t>(k)];
    out[t] = y;
  }
  return out;
}

}  // namespace wavetrain::testing
