// The real-time engines' loops (experiments/amp/dsp_kernels.h, lstm_dsp.h) against LibTorch in
// float64, in both compiled ISAs.
#include <gtest/gtest.h>

#include <torch/torch.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "experiments/amp/dsp_kernels.h"
#include "experiments/amp/lstm.h"
#include "experiments/amp/lstm_dsp.h"
#include "experiments/amp/nam_dsp.h"
#include "experiments/amp/nam_wavenet_module.h"
#include "tests/lstm_reference.h"

namespace {

using namespace wavetrain::experiments::amp;

// Runs the body with each compiled ISA the CPU has: AVX-512 (the LSTM's variant), AVX2 + FMA, and
// the baseline ISA.
template <typename F>
void for_each_isa(F body) {
  dsp::force_baseline(false);
  if (dsp::using_avx512()) body("avx512");
  dsp::force_no_avx512(true);
  if (dsp::using_avx2()) body("avx2");
  dsp::force_baseline(true);
  body("baseline");
  dsp::force_baseline(false);
  dsp::force_no_avx512(false);
}

std::vector<float> to_vector(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kFloat).contiguous();
  return {c.data_ptr<float>(), c.data_ptr<float>() + c.numel()};
}

// Every output count 1..64 (the tiles of 6 and 4 rows and their remainders) and lengths around the
// 16- and 8-sample tiles (and the AVX-512 variant's 32 and 64), with shifted (dilated-conv) input
// rows, and y0 added either by accumulating into y (even counts) or as a residual from its own rows
// (odd counts: y starts as NaN, so an ignored addend or a read of y shows).
TEST(AmpDsp, MatMulEqualsLibTorchForEveryChannelCount) {
  torch::manual_seed(3);
  for_each_isa([](const char* isa) {
    for (int64_t outputs = 1; outputs <= 64; ++outputs) {
      const int64_t inputs = 1 + (outputs * 7) % 23, n = outputs % 5 == 0 ? 64 : 1 + (outputs * 13) % 41, lag = 5;
      const at::Tensor w = torch::randn({outputs, inputs}, torch::kFloat64);
      const at::Tensor x = torch::randn({inputs, n + lag}, torch::kFloat64);
      const at::Tensor bias = torch::randn({outputs}, torch::kFloat64);
      const at::Tensor y0 = torch::randn({outputs, n}, torch::kFloat64);
      // Input row i is read `i % lag` samples back.
      std::vector<at::Tensor> rows;
      for (int64_t i = 0; i < inputs; ++i) rows.push_back(x[i].narrow(0, lag - i % lag, n));
      const at::Tensor expected = y0 + bias.unsqueeze(1) + w.matmul(torch::stack(rows));
      std::vector<float> wf = to_vector(w), xf = to_vector(x), bf = to_vector(bias), yf = to_vector(y0);
      std::vector<const float*> pointers;
      for (int64_t i = 0; i < inputs; ++i) pointers.push_back(xf.data() + i * (n + lag) + lag - i % lag);
      dsp::MatMul m;
      m.w = wf.data();
      m.x = pointers.data();
      m.y = yf.data();
      m.y_stride = n;
      m.bias = bf.data();
      m.outputs = outputs;
      m.inputs = inputs;
      m.n = n;
      const int64_t addend_stride = n + 3;
      std::vector<float> addend(static_cast<size_t>(outputs * addend_stride));
      if (outputs % 2 == 0) {
        m.accumulate = true;
      } else {
        for (int64_t o = 0; o < outputs; ++o) std::copy(yf.begin() + o * n, yf.begin() + (o + 1) * n, addend.begin() + o * addend_stride);
        std::fill(yf.begin(), yf.end(), std::nanf(""));
        m.addend = addend.data();
        m.addend_stride = addend_stride;
      }
      dsp::matmul(m);
      const at::Tensor got = torch::from_blob(yf.data(), {outputs, n}, torch::kFloat).to(torch::kFloat64);
      ASSERT_LE((got - expected).abs().max().item<double>(), 1e-4 * (1 + expected.abs().max().item<double>()))
          << isa << " outputs " << outputs << " inputs " << inputs << " n " << n;
    }
  });
}

// The product's epilogue (MatMul::act, sum, and the second product w2) equals the plain product
// followed by the separate passes: dsp::apply, dsp::add_rows, and a 1x1 with its residual computed
// in float64. Every kind the epilogue takes, output counts with and without a second product (up
// to 4 with; 5, 8 and 16 without), lengths over each tile and the scalar tail; with a second
// product, y is not stored on odd output counts (y starts as NaN, so a stray store shows).
TEST(AmpDsp, MatMulEpilogueEqualsTheSeparatePasses) {
  using dsp::Kind;
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  auto random = [&](int64_t count) {
    std::vector<float> v(static_cast<size_t>(count));
    for (float& x : v) x = normal(rng);
    return v;
  };
  const std::vector<dsp::Elementwise> kinds = {{Kind::Identity, {}},        {Kind::ReLU, {}},      {Kind::LeakyReLU, {0.01f}},
                                               {Kind::Hardtanh, {-0.5f, 0.75f}}, {Kind::LeakyHardtanh, {-1.0f, 0.9f, 0.05f, 0.02f}},
                                               {Kind::Tanh, {}},            {Kind::FastTanh, {}}};
  for_each_isa([&](const char* isa) {
    for (const dsp::Elementwise& act : kinds)
      for (int64_t outputs : {1, 2, 3, 4, 5, 8, 12, 16, 22})
        for (int64_t n : {64, 45, 8, 3}) {
          const bool second = outputs <= 4, store_y = !second || outputs % 2 == 0;
          const int64_t inputs = 7 + outputs, lag = 3, sum_rows = (outputs + 1) / 2, outputs2 = 3, stride = n + 5;
          const std::vector<float> w = random(outputs * inputs), bias = random(outputs), x = random(inputs * (n + lag));
          const std::vector<float> w2 = random(outputs2 * outputs), bias2 = random(outputs2), addend2 = random(outputs2 * stride);
          const std::vector<float> sum0 = random(sum_rows * stride);
          std::vector<const float*> rows;
          for (int64_t i = 0; i < inputs; ++i) rows.push_back(x.data() + i * (n + lag) + lag - i % lag);
          dsp::MatMul m;
          m.w = w.data();
          m.x = rows.data();
          m.y_stride = stride;
          m.bias = bias.data();
          m.outputs = outputs;
          m.inputs = inputs;
          m.n = n;
          // The reference: the plain product, then the passes.
          std::vector<float> y_ref(static_cast<size_t>(outputs * stride)), sum_ref = sum0;
          m.y = y_ref.data();
          dsp::matmul(m);
          for (int64_t o = 0; o < outputs; ++o) dsp::apply(act, y_ref.data() + o * stride, n);
          dsp::add_rows(y_ref.data(), stride, sum_ref.data(), stride, sum_rows, n);
          // The fused product.
          std::vector<float> y(static_cast<size_t>(outputs * stride), std::nanf("")), sum = sum0;
          std::vector<float> y2(static_cast<size_t>(outputs2 * stride), std::nanf(""));
          m.y = store_y ? y.data() : nullptr;
          m.act = act;
          m.sum = sum.data();
          m.sum_stride = stride;
          m.sum_rows = sum_rows;
          if (second) {
            m.w2 = w2.data();
            m.bias2 = bias2.data();
            m.addend2 = addend2.data();
            m.addend2_stride = stride;
            m.y2 = y2.data();
            m.y2_stride = stride;
            m.outputs2 = outputs2;
          }
          dsp::matmul(m);
          const std::string where = std::string(isa) + " kind " + std::to_string(static_cast<int>(act.kind)) + " outputs " +
                                    std::to_string(outputs) + " n " + std::to_string(n);
          for (int64_t o = 0; o < outputs; ++o)
            for (int64_t t = 0; t < n; ++t) {
              const size_t at = static_cast<size_t>(o * stride + t);
              if (store_y) {
                ASSERT_NEAR(y[at], y_ref[at], 1e-6f * (1 + std::abs(y_ref[at]))) << where << " y[" << o << "][" << t << "]";
              }
              if (o < sum_rows) {
                ASSERT_NEAR(sum[at], sum_ref[at], 1e-6f * (1 + std::abs(sum_ref[at]))) << where << " sum[" << o << "][" << t << "]";
              }
            }
          for (int64_t o = 0; second && o < outputs2; ++o)
            for (int64_t t = 0; t < n; ++t) {
              double expected = static_cast<double>(addend2[static_cast<size_t>(o * stride + t)]) + bias2[static_cast<size_t>(o)];
              for (int64_t r = 0; r < outputs; ++r)
                expected += static_cast<double>(w2[static_cast<size_t>(o * outputs + r)]) * y_ref[static_cast<size_t>(r * stride + t)];
              ASSERT_NEAR(y2[static_cast<size_t>(o * stride + t)], expected, 1e-5 * (1 + std::abs(expected))) << where << " y2[" << o << "][" << t << "]";
            }
        }
  });
}

TEST(AmpDsp, ElementwiseFunctionsEqualLibTorch) {
  const at::Tensor x = torch::linspace(-12, 12, 2401, torch::kFloat64);
  struct Case {
    dsp::Elementwise f;
    at::Tensor expected;
  };
  using dsp::Kind;
  const std::vector<Case> cases = {
      {{Kind::Tanh, {}}, torch::tanh(x)},
      {{Kind::Sigmoid, {}}, torch::sigmoid(x)},
      {{Kind::SiLU, {}}, torch::silu(x)},
      {{Kind::Hardswish, {}}, torch::hardswish(x)},
      {{Kind::Softsign, {}}, x / (1 + x.abs())},
      {{Kind::ReLU, {}}, torch::relu(x)},
      {{Kind::LeakyReLU, {0.01f}}, torch::leaky_relu(x, 0.01)},
      {{Kind::Hardtanh, {-0.5f, 0.75f}}, torch::hardtanh(x, -0.5, 0.75)},
      {{Kind::LeakyHardtanh, {-1.0f, 0.9f, 0.05f, 0.02f}},
       torch::where(x < -1, -1 + 0.05 * (x + 1), torch::where(x > 0.9, 0.9 + 0.02 * (x - 0.9), x))},
  };
  for_each_isa([&](const char* isa) {
    for (const Case& c : cases) {
      std::vector<float> v = to_vector(x);
      dsp::apply(c.f, v.data(), static_cast<int64_t>(v.size()));
      const at::Tensor got = torch::from_blob(v.data(), {x.numel()}, torch::kFloat).to(torch::kFloat64);
      const at::Tensor want = c.expected.to(torch::kFloat).to(torch::kFloat64);
      EXPECT_LE((got - want).abs().max().item<double>(), 4e-7 * (1 + want.abs().max().item<double>()))
          << isa << " kind " << static_cast<int>(c.f.kind);
    }
  });
}

// Buffers of these sizes in turn: full ones, and ones shorter than a stack's depth (a wavefront's
// start and end in the same buffer).
void in_buffers(LstmDsp& dsp, const std::vector<float>& in, std::vector<float>& out) {
  const int64_t sizes[] = {64, 1, 2, 37, 3, 128}, n = static_cast<int64_t>(in.size());
  for (int64_t s = 0, k = 0; s < n; s += sizes[k++ % 6])
    dsp.process(in.data() + s, out.data() + s, std::min<int64_t>(sizes[k % 6], n - s));
}

// The stacks: NAM's 2x8, and ones of 3 layers, of padded units, and of 4 chunks in all (layer by
// layer, not as a wavefront).
std::vector<LstmConfig> lstm_configs() {
  return {lstm_preset("1x24"), lstm_preset("2x8"), lstm_preset("1x16"), lstm_preset("1x12"), LstmConfig{1, 3, 1},
          LstmConfig{1, 40, 1},  LstmConfig{1, 8, 3},  LstmConfig{1, 5, 2},  LstmConfig{1, 12, 2}};
}

// The hand-written cell equals LibTorch's LSTM (float64) for every preset, a hidden size that is
// not a multiple of 2 (3 units: 12 gates, padded to 16) and the stacks above, and carries its state
// across buffers.
TEST(AmpDsp, LstmCellEqualsLibTorchLstm) {
  torch::manual_seed(5);
  for (const LstmConfig& config : lstm_configs()) {
    Lstm model(config);
    {
      torch::NoGradGuard no_grad;
      for (auto& p : model->parameters()) p.uniform_(-0.6, 0.6);
    }
    const std::vector<float> weights = model->export_weights();
    Lstm reference(config);
    reference->import_weights(weights);
    reference->to(torch::kFloat64);
    const int64_t n = 3000;
    const at::Tensor x = 0.8 * torch::sin(torch::arange(n, torch::kFloat64) * 0.031) + 0.2 * torch::randn({n}, torch::kFloat64);
    at::Tensor expected;
    {
      torch::NoGradGuard no_grad;
      expected = reference->forward(x.view({1, 1, n})).view({n});
    }
    for_each_isa([&](const char* isa) {
      LstmDsp dsp(config, weights);
      std::vector<float> in = to_vector(x), out(static_cast<size_t>(n));
      in_buffers(dsp, in, out);
      const at::Tensor got = torch::from_blob(out.data(), {n}, torch::kFloat).to(torch::kFloat64);
      EXPECT_LE((got - expected).abs().max().item<double>(), 2e-5 * (1 + expected.abs().max().item<double>()))
          << isa << " " << config.num_layers << "x" << config.hidden_size;
    });
  }
}

// With fast_tanh the cell plays the core's function (sigmoid(x) = (fast_tanh(x / 2) + 1) / 2, tanh
// = fast_tanh), from the .nam weight order in double (tests/lstm_reference.h), for every preset
// and a hidden size of 3 and of 40 (through memory), in every ISA (AVX-512's 16-lane activations
// included).
TEST(AmpDsp, LstmWithFastTanhPlaysTheCoresFunction) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-0.6f, 0.6f);
  for (const LstmConfig& config : lstm_configs()) {
    std::vector<float> weights(static_cast<size_t>(lstm_weight_count(config)));
    for (float& w : weights) w = uniform(rng);
    const int64_t H = config.hidden_size, n = 2000;
    std::vector<float> in(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) in[static_cast<size_t>(t)] = static_cast<float>(0.8 * std::sin(0.031 * t) + 0.2 * std::cos(0.17 * t));
    const std::vector<double> expected = wavetrain::testing::lstm_reference(config, weights, in, wavetrain::testing::core_fast_tanh);
    double peak = 0;
    for (double v : expected) peak = std::max(peak, std::abs(v));
    for_each_isa([&](const char* isa) {
      LstmDsp dsp(config, weights, /*prewarm=*/0, /*fast_tanh=*/true);
      std::vector<float> out(static_cast<size_t>(n));
      in_buffers(dsp, in, out);
      double worst = 0;
      for (int64_t t = 0; t < n; ++t) worst = std::max(worst, std::abs(out[static_cast<size_t>(t)] - expected[static_cast<size_t>(t)]));
      EXPECT_LE(worst, 2e-5 * (1 + peak)) << isa << " " << config.num_layers << "x" << H;
    });
  }
}

// A WaveNet of every channel count 1..64 (gated for odd counts: twice the rows) through the
// real-time engine in 64-sample buffers equals the module's LibTorch path in float64.
TEST(AmpDsp, WaveNetEngineEqualsLibTorchForEveryChannelCount) {
  torch::manual_seed(8);
  const int64_t n = 700;
  const at::Tensor x = 0.5 * torch::sin(torch::arange(n, torch::kFloat64) * 0.043) + 0.1 * torch::randn({n}, torch::kFloat64);
  for (int64_t channels = 1; channels <= 64; ++channels) {
    LayerArrayConfig a;
    a.channels = channels;
    a.head_size = 1;
    a.kernel_size = 2 + channels % 2;
    a.dilations = {1, 3};
    a.gated = channels % 2 == 1;
    a.activation = channels % 3 == 0 ? "ReLU" : "Tanh";
    WaveNetConfig c;
    c.layers = {a};
    NamWaveNet net(nam_of(c));
    {
      torch::NoGradGuard no_grad;
      for (auto& p : net->parameters()) p.uniform_(-0.4, 0.4);
    }
    NamFileModel file;
    file.architecture = "WaveNet";
    file.wavenet = nam_of(c);
    file.weights = net->export_weights();
    net->set_cpu_kernels(false);
    net->to(torch::kFloat64);
    at::Tensor expected;
    {
      torch::NoGradGuard no_grad;
      expected = net->forward(torch::cat({torch::zeros({net->receptive_field() - 1}, torch::kFloat64), x}).view({1, 1, -1})).view({-1});
    }
    for_each_isa([&](const char* isa) {
      NamDsp dsp(file, 64);
      std::vector<float> in = to_vector(x), out(static_cast<size_t>(n));
      for (int64_t s = 0; s < n; s += 64) dsp.process(in.data() + s, out.data() + s, std::min<int64_t>(64, n - s));
      const at::Tensor got = torch::from_blob(out.data(), {n}, torch::kFloat).to(torch::kFloat64);
      ASSERT_LE((got - expected).abs().max().item<double>(), 1e-5 * (1 + expected.abs().max().item<double>())) << isa << " channels " << channels;
    });
  }
}

// The output does not depend on how the input is cut into buffers, to the bit: one sample at a
// time, 2, 5, 64 or all at once (with an empty buffer after each), for the layer-by-layer cells and
// the wavefront stacks, exact and fast.
TEST(AmpDsp, LstmOutputDoesNotDependOnTheBufferSize) {
  std::mt19937 rng(12);
  std::uniform_real_distribution<float> uniform(-0.6f, 0.6f);
  for (const LstmConfig& config : lstm_configs()) {
    std::vector<float> weights(static_cast<size_t>(lstm_weight_count(config)));
    for (float& w : weights) w = uniform(rng);
    const int64_t n = 500;
    std::vector<float> in(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) in[static_cast<size_t>(t)] = static_cast<float>(0.7 * std::sin(0.05 * t) + 0.3 * std::cos(0.31 * t));
    for (bool fast : {false, true})
      for_each_isa([&](const char* isa) {
        std::vector<float> whole(static_cast<size_t>(n));
        LstmDsp(config, weights, 0, fast).process(in.data(), whole.data(), n);
        for (int64_t size : {1, 2, 5, 64}) {
          LstmDsp dsp(config, weights, 0, fast);
          std::vector<float> out(static_cast<size_t>(n));
          for (int64_t s = 0; s < n; s += size) {
            dsp.process(in.data() + s, out.data() + s, std::min(size, n - s));
            dsp.process(in.data() + s, out.data() + s, 0);  // an empty buffer changes nothing
          }
          ASSERT_EQ(out, whole) << isa << " " << config.num_layers << "x" << config.hidden_size << " fast " << fast << " buffers of " << size;
        }
      });
  }
}

// reset() with a prewarm equals the state after that many zeros from the initial state.
TEST(AmpDsp, LstmPrewarmIsZerosFromTheInitialState) {
  torch::manual_seed(6);
  Lstm model(lstm_preset("2x8"));
  {
    torch::NoGradGuard no_grad;
    for (auto& p : model->parameters()) p.uniform_(-0.6, 0.6);
  }
  const std::vector<float> weights = model->export_weights();
  LstmDsp warm(lstm_preset("2x8"), weights, 500), cold(lstm_preset("2x8"), weights, 0);
  std::vector<float> zeros(500, 0.0f), ignored(500), in(100), a(100), b(100);
  for (size_t i = 0; i < in.size(); ++i) in[i] = 0.3f * static_cast<float>(i % 7) - 0.9f;
  cold.process(zeros.data(), ignored.data(), 500);
  cold.process(in.data(), a.data(), 100);
  warm.process(in.data(), b.data(), 100);
  EXPECT_EQ(a, b);
  warm.reset();
  warm.process(in.data(), b.data(), 100);
  EXPECT_EQ(a, b);  // reset() prewarms again
  LstmDsp cold_again(lstm_preset("2x8"), weights, 0);
  cold_again.process(in.data(), b.data(), 100);
  EXPECT_NE(a, b);  // and the prewarm matters
}

}  // namespace
