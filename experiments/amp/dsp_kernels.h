// Internal to experiments/amp/: the loops of the real-time engines (wavenet_dsp.h, lstm_dsp.h).
// No LibTorch: plain float32 arrays.
//
// Signals are channel-major: a signal of C channels over a block of n samples is C rows of n
// contiguous floats. That makes every convolution a small matrix product whose inner loop runs
// over time, so any channel count vectorises (a [time][channels] layout vectorises only the channel
// counts that fill vector registers: NAM's presets have 2 and 6).
#pragma once

#include <cstdint>

namespace wavetrain::experiments::amp::dsp {

// The element-wise functions, in place over n floats. Every kind has at most four parameters
// (see activation.h for what they mean); `slope_per_row` is for PReLU, one slope per channel.
enum class Kind { Identity, Tanh, FastTanh, Hardtanh, LeakyHardtanh, ReLU, LeakyReLU, PReLU, Sigmoid, SiLU, Hardswish, Softsign };
struct Elementwise {
  Kind kind = Kind::Identity;
  float p[4] = {0, 0, 0, 0};
};
void apply(const Elementwise& f, float* x, int64_t n);

// y[o][t] (+)= bias[o] + sum over i < inputs of w[o][i] x[i][t], for o < outputs, t < n.
//   w       [outputs][inputs], row-major
//   x       `inputs` row pointers, each to n floats (a dilated conv passes the same channel once
//           per tap, shifted back in time: rows need not be distinct or ordered)
//   y       `outputs` rows of n floats, row stride y_stride
//   bias    may be null; accumulate: add to y instead of overwriting it (bias still added)
//   addend  may be null: `outputs` rows of n floats, addend_stride apart, added as y is with
//           accumulate (a residual connection in the same pass); not with accumulate
struct MatMul {
  const float* w = nullptr;
  const float* const* x = nullptr;
  float* y = nullptr;
  int64_t y_stride = 0;
  const float* bias = nullptr;
  const float* addend = nullptr;
  int64_t addend_stride = 0;
  int64_t outputs = 0, inputs = 0, n = 0;
  bool accumulate = false;
  // The epilogue, in the same pass (a WaveNet layer's activation and its share of the head):
  // `act` (a kind fits_epilogue accepts) applied to every row of y, then y's rows r < sum_rows
  // added into sum (rows sum_stride apart).
  Elementwise act;
  float* sum = nullptr;
  int64_t sum_stride = 0, sum_rows = 0;
  // A second product from y's values while they are in registers (a WaveNet layer's 1x1 and its
  // residual), where all of y is one tile (outputs <= 4): y2[o][t] = addend2[o][t] + bias2[o] +
  // sum over r < outputs of w2[o][r] y[r][t], for o < outputs2. w2 is [outputs2][outputs]; bias2
  // and addend2 are required; y2 must not overlap y or addend2. With it, y may be null: y's values
  // are then not stored.
  const float* w2 = nullptr;
  const float* bias2 = nullptr;
  const float* addend2 = nullptr;
  int64_t addend2_stride = 0;
  float* y2 = nullptr;
  int64_t y2_stride = 0, outputs2 = 0;
};
// Whether MatMul::act is worth it for a kind (and allowed: kinds without exp, one parameter set
// for all rows), with or without a second product.
bool fits_epilogue(Kind kind, bool second);
void matmul(const MatMul& m);

// y[t] = a[t] * b[t] (gating), y may alias a.
void multiply(const float* a, const float* b, float* y, int64_t n);
// y[t] = a[t] * s[t] + b[t]; with b null, y = a * s (FiLM's scale and shift), y may alias a.
void scale_shift(const float* a, const float* s, const float* b, float* y, int64_t n);
// y[t] += a[t]
void add(const float* a, float* y, int64_t n);
// y[t] = a[t] + b[t], y may alias a or b.
void add(const float* a, const float* b, float* y, int64_t n);
// add(a + r a_stride, y + r y_stride, n) for r < rows, in one call.
void add_rows(const float* a, int64_t a_stride, float* y, int64_t y_stride, int64_t rows, int64_t n);

// Whether the AVX2 + FMA variants run (tests compare both). force_baseline: use the baseline ISA
// from now on, in this process (tests).
bool using_avx2();
void force_baseline(bool on);
// Whether the AVX-512 variants (these kernels' and the real-time LSTM's) run. force_no_avx512: AVX2
// at most from now on, in this process (tests, and benchmarks against a core built for AVX2).
bool using_avx512();
void force_no_avx512(bool on);

}  // namespace wavetrain::experiments::amp::dsp
