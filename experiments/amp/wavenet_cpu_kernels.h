// Internal to experiments/amp/: the CPU kernels of the WaveNet's training path (wavenet_cpu.cpp).
// Three loops do all the per-sample work: Rows (a layer's pass over time: dilated conv or 1x1, with
// bias, input mixer, the activation or its derivative fused), Gate (the activation of SiLU, gated
// and blended layers, and its derivatives, from the kept conv outputs) and Outer (weight gradients
// summed over time). All work on [time][channels] rows of float32.
#pragma once

#include <cstdint>

namespace wavetrain::experiments::amp::kernels {

// The element-wise functions the kernels fuse. Rows takes each derivative from the function's
// output y, which the backward pass has kept (no second copy of the input a):
//   Tanh 1 - y^2;  Sigmoid y (1 - y);  ReLU [y > 0];  LeakyReLU [y > 0] + slope [y <= 0].
// LeakyReLU needs slope >= 0 (then y > 0 exactly when a > 0), and at a = 0 both ReLUs take the
// derivative of the negative side, as PyTorch's autograd does. SiLU (a sigmoid(a)) cannot be
// inverted from y: it goes through Gate, from the kept input a.
enum class Act { None, Tanh, Sigmoid, ReLU, LeakyReLU, SiLU };

// How a layer's activation combines its conv outputs a [n][M]: None p = f(a) (M = C); Gated
// p = f(a1) sigmoid(a2); Blended p = s f(a1) + (1 - s) a1 with s = sigmoid(a2) (M = 2C: a1 the first
// C channels, a2 the rest).
enum class GateMode { None, Gated, Blended };

// A layer's pass over time, [time][channels] rows, t in [0, n):
//   out[t] = init(t) + sum over k < taps, c < cin of w[k][c][:] in[t + k step][c]
//   init(t) = rows[t] (if given) + bias (if given) + x[t] mixer (if given)
// then, with `act`: out = act(out), or, when grad_of is given, out = out act'(y[t]) with
// y = grad_of (the derivative from the function's output, above). `step` may be negative: `in` must hold rows t + k step for every t
// and k. The output has `channels` channels; w is [taps][cin][channels].
struct Rows {
  const float* in = nullptr;
  int64_t cin = 0, step = 0, taps = 1;
  const float* w = nullptr;
  const float* rows = nullptr;
  const float* bias = nullptr;
  const float* x = nullptr;
  const float* mixer = nullptr;
  Act act = Act::None;
  float slope = 0.0f;  // LeakyReLU's negative slope
  const float* grad_of = nullptr;
  float* out = nullptr;
  int64_t n = 0, channels = 0;
};

// Weight gradients, summed over time, t in [0, n):
//   dw[c][o] += sum_t a[t sa + c] b[t][o]   (c < ca, o < channels)
//   db[o] += sum_t b[t][o]                  (if db is given)
struct Outer {
  const float* a = nullptr;
  int64_t sa = 0, ca = 0;
  const float* b = nullptr;
  int64_t n = 0, channels = 0;
  float* dw = nullptr;
  float* db = nullptr;
};

// A layer's activation from its kept conv outputs a = pre [n][M] (GateMode above), t in [0, n):
// forward post [n][C] = p(a); backward da [n][M] = dp [n][C] times p's derivatives at a. The
// forward pass of a gated or blended layer overwrites a2 in pre with s = sigmoid(a2), which is what
// the backward pass reads there (one sigmoid fewer per value).
struct Gate {
  GateMode mode = GateMode::None;
  Act f = Act::Tanh;
  float slope = 0.0f;  // f's LeakyReLU slope
  float* pre = nullptr;
  int64_t n = 0, channels = 0;  // channels: C
  float* post = nullptr;
  const float* dp = nullptr;
  float* da = nullptr;
};

struct KernelSet {
  void (*rows)(const Rows&);
  void (*outer)(const Outer&);
  void (*gate)(const Gate&);       // post from pre (and s into pre)
  void (*gate_grad)(const Gate&);  // da from pre and dp
};

// The kernels for this CPU: compiled for AVX-512 (rows and outer products of multiples of 16
// channels), else AVX2 + FMA, where it has them, else for the baseline ISA.
KernelSet kernels_now();
// Tests: the baseline-ISA kernels even where AVX2 + FMA exist (process-wide).
void use_baseline_isa(bool on);
// Tests and benchmarks: AVX2 + FMA at most (process-wide).
void use_no_avx512(bool on);

}  // namespace wavetrain::experiments::amp::kernels
