// The real-time engine's loops (experiments/amp/dsp_kernels.h, lstm_dsp.h) checked without
// LibTorch, for a build on another architecture: scripts/arm-check compiles this file with those
// sources for aarch64 (where the baseline variant's vectors become NEON) and runs it under
// qemu-aarch64. Every reference is double precision, written here from the definitions:
//   - the product y = bias + W x (+ y or a residual), its epilogue (each activation, the sum's
//     rows) and its second product, for output counts 1-9 and 16 and lengths around each tile;
//   - every element-wise kind against its formula;
//   - the LSTM (each preset, 3 units, 40 units) with exact tanh and with the core's fast tanh
//     (tests/lstm_reference.h).
// Prints one line per group and exits 1 if any check fails.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "experiments/amp/dsp_kernels.h"
#include "experiments/amp/lstm_config.h"
#include "experiments/amp/lstm_dsp.h"
#include "tests/lstm_reference.h"

namespace {

using namespace wavetrain::experiments::amp;
namespace testing = wavetrain::testing;
using dsp::Kind;

int failures = 0;

void check(bool ok, const std::string& what) {
  if (!ok && failures++ < 20) std::printf("FAILED: %s\n", what.c_str());
}

double reference(const dsp::Elementwise& f, double x) {
  const double a = f.p[0], b = f.p[1], c = f.p[2], d = f.p[3];
  switch (f.kind) {
    case Kind::Identity: return x;
    case Kind::Tanh: return std::tanh(x);
    case Kind::FastTanh: return testing::core_fast_tanh(x);
    case Kind::Hardtanh: return std::min(std::max(x, a), b);
    case Kind::LeakyHardtanh: return x < a ? a + c * (x - a) : (x > b ? b + d * (x - b) : x);
    case Kind::ReLU: return std::max(x, 0.0);
    case Kind::LeakyReLU:
    case Kind::PReLU: return x < 0 ? a * x : x;
    case Kind::Sigmoid: return 1 / (1 + std::exp(-x));
    case Kind::SiLU: return x / (1 + std::exp(-x));
    case Kind::Hardswish: return x * std::min(std::max(x + 3, 0.0), 6.0) / 6;
    case Kind::Softsign: return x / (1 + std::abs(x));
  }
  return 0;
}

void check_elementwise() {
  const std::vector<dsp::Elementwise> kinds = {
      {Kind::Tanh, {}},          {Kind::FastTanh, {}},       {Kind::Hardtanh, {-0.5f, 0.75f}}, {Kind::LeakyHardtanh, {-1.0f, 0.9f, 0.05f, 0.02f}},
      {Kind::ReLU, {}},          {Kind::LeakyReLU, {0.01f}}, {Kind::Sigmoid, {}},              {Kind::SiLU, {}},
      {Kind::Hardswish, {}},     {Kind::Softsign, {}}};
  double worst = 0;
  for (const dsp::Elementwise& f : kinds) {
    std::vector<float> x(2401);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(-12.0 + 0.01 * static_cast<double>(i));
    std::vector<float> y = x;
    dsp::apply(f, y.data(), static_cast<int64_t>(y.size()));
    for (size_t i = 0; i < x.size(); ++i) {
      const double want = static_cast<float>(reference(f, x[i])), e = std::abs(y[i] - want) / (1 + std::abs(want));
      worst = std::max(worst, e);
      check(e <= 4e-7, "apply kind " + std::to_string(static_cast<int>(f.kind)) + " at x = " + std::to_string(x[i]));
    }
  }
  std::printf("element-wise kinds: worst error %.2e (bound 4e-7)\n", worst);
}

void check_matmul() {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](int64_t count) {
    std::vector<float> v(static_cast<size_t>(count));
    for (float& x : v) x = normal(rng);
    return v;
  };
  const std::vector<dsp::Elementwise> kinds = {{Kind::Identity, {}}, {Kind::LeakyReLU, {0.01f}}, {Kind::Hardtanh, {-0.5f, 0.75f}},
                                               {Kind::Tanh, {}},     {Kind::FastTanh, {}},       {Kind::ReLU, {}}};
  double worst = 0;
  int cases = 0;
  for (int64_t outputs : {1, 2, 3, 4, 5, 6, 7, 8, 9, 16})
    for (int64_t n : {64, 37, 8, 5, 3, 100})
      for (size_t k = 0; k < kinds.size(); ++k) {
        const dsp::Elementwise& act = kinds[k];
        const bool second = outputs <= 4 && k % 2 == 1, accumulate = k == 0 && outputs % 2 == 0, residual = k == 0 && !accumulate;
        const int64_t inputs = 1 + (outputs * 7 + n) % 23, lag = 5, stride = n + 3, sum_rows = k == 0 ? 0 : (outputs + 1) / 2, outputs2 = 3;
        const std::vector<float> w = random(outputs * inputs), bias = random(outputs), x = random(inputs * (n + lag)), y0 = random(outputs * stride);
        const std::vector<float> sum0 = random(outputs * stride), w2 = random(outputs2 * outputs), bias2 = random(outputs2),
                                 addend2 = random(outputs2 * stride);
        std::vector<const float*> rows;
        for (int64_t i = 0; i < inputs; ++i) rows.push_back(x.data() + i * (n + lag) + lag - i % lag);  // row i read i % lag back
        std::vector<float> y = y0, sum = sum0, y2(static_cast<size_t>(outputs2 * stride), NAN);
        dsp::MatMul m;
        m.w = w.data();
        m.x = rows.data();
        m.y = y.data();
        m.y_stride = stride;
        m.bias = bias.data();
        m.outputs = outputs;
        m.inputs = inputs;
        m.n = n;
        m.accumulate = accumulate;
        if (residual) m.addend = y0.data(), m.addend_stride = stride;
        if (!accumulate && !residual) {
          m.act = act;
          m.sum = sum.data(), m.sum_stride = stride, m.sum_rows = sum_rows;
        }
        if (second) {
          m.w2 = w2.data(), m.bias2 = bias2.data(), m.addend2 = addend2.data(), m.addend2_stride = stride;
          m.y2 = y2.data(), m.y2_stride = stride, m.outputs2 = outputs2;
        }
        dsp::matmul(m);
        ++cases;
        const std::string where = "matmul outputs " + std::to_string(outputs) + " n " + std::to_string(n) + " kind " + std::to_string(k);
        std::vector<double> p(static_cast<size_t>(outputs * n));
        for (int64_t o = 0; o < outputs; ++o)
          for (int64_t t = 0; t < n; ++t) {
            double s = bias[static_cast<size_t>(o)] + (accumulate || residual ? y0[static_cast<size_t>(o * stride + t)] : 0.0);
            double scale = std::abs(s);
            for (int64_t i = 0; i < inputs; ++i) {
              const double term = static_cast<double>(w[static_cast<size_t>(o * inputs + i)]) * rows[static_cast<size_t>(i)][t];
              s += term;
              scale += std::abs(term);
            }
            const double v = accumulate || residual ? s : reference(act, s);
            p[static_cast<size_t>(o * n + t)] = v;
            const double e = std::abs(y[static_cast<size_t>(o * stride + t)] - v) / (1 + scale);
            worst = std::max(worst, e);
            check(e <= 1e-6, where + " y");
            if (o < sum_rows) {
              const double want = sum0[static_cast<size_t>(o * stride + t)] + v;
              check(std::abs(sum[static_cast<size_t>(o * stride + t)] - want) <= 1e-6 * (1 + scale), where + " sum");
            }
          }
        for (int64_t o = 0; second && o < outputs2; ++o)
          for (int64_t t = 0; t < n; ++t) {
            double want = static_cast<double>(addend2[static_cast<size_t>(o * stride + t)]) + bias2[static_cast<size_t>(o)], scale = std::abs(want);
            for (int64_t r = 0; r < outputs; ++r) {
              want += w2[static_cast<size_t>(o * outputs + r)] * p[static_cast<size_t>(r * n + t)];
              scale += std::abs(w2[static_cast<size_t>(o * outputs + r)] * p[static_cast<size_t>(r * n + t)]);
            }
            check(std::abs(y2[static_cast<size_t>(o * stride + t)] - want) <= 1e-5 * (1 + scale), where + " second product");
          }
      }
  std::printf("matmul: %d cases (epilogue, sums, second products), worst error %.2e (bound 1e-6 of the terms' size)\n", cases, worst);
}

void check_lstm(bool fast) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-0.6f, 0.6f);
  double worst = 0;
  int sizes = 0;
  for (const LstmConfig& config : {lstm_preset("1x24"), lstm_preset("2x8"), lstm_preset("1x16"), lstm_preset("1x12"), LstmConfig{1, 3, 1},
                                   LstmConfig{1, 40, 1}, LstmConfig{1, 8, 3}, LstmConfig{1, 5, 2}, LstmConfig{1, 12, 2}}) {
    ++sizes;
    std::vector<float> weights(static_cast<size_t>(lstm_weight_count(config)));
    for (float& w : weights) w = uniform(rng);
    const int64_t n = 1500;
    std::vector<float> in(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) in[static_cast<size_t>(t)] = static_cast<float>(0.8 * std::sin(0.031 * t) + 0.2 * std::cos(0.17 * t));
    const std::vector<double> expected = testing::lstm_reference(config, weights, in, fast ? testing::core_fast_tanh : testing::exact_tanh);
    double peak = 0;
    for (double v : expected) peak = std::max(peak, std::abs(v));
    LstmDsp engine(config, weights, /*prewarm=*/0, fast);
    std::vector<float> out(static_cast<size_t>(n));
    // Buffers of 64 and, now and then, shorter than a stack's depth (a wavefront's start and end
    // in one buffer).
    const int64_t buffers[] = {64, 1, 2, 64, 3};
    for (int64_t s = 0, k = 0; s < n; s += buffers[k++ % 5])
      engine.process(in.data() + s, out.data() + s, std::min<int64_t>(buffers[k % 5], n - s));
    double e = 0;
    for (int64_t t = 0; t < n; ++t) e = std::max(e, std::abs(out[static_cast<size_t>(t)] - expected[static_cast<size_t>(t)]));
    e /= 1 + peak;
    worst = std::max(worst, e);
    check(e <= 2e-5, std::string("lstm ") + (fast ? "fast tanh " : "") + std::to_string(config.num_layers) + "x" + std::to_string(config.hidden_size));
  }
  std::printf("LSTM, %s tanh: %d sizes, worst error %.2e of the peak (bound 2e-5)\n", fast ? "fast" : "exact", sizes, worst);
}

}  // namespace

int main() {
  check_elementwise();
  check_matmul();
  check_lstm(false);
  check_lstm(true);
  std::printf(failures ? "%d checks FAILED\n" : "all checks passed\n", failures);
  return failures ? 1 : 0;
}
