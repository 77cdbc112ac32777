// Internal to experiments/amp/: the CPU kernels of the WaveNet's training path (wavenet_cpu.cpp).
// Two loops do all the per-sample work: Rows (a layer's pass over time: dilated conv or 1x1, with
// bias, input mixer, tanh or the tanh's derivative fused) and Outer (weight gradients summed over
// time). Both work on [time][channels] rows of float32.
#pragma once

#include <cstdint>

namespace wavetrain::experiments::amp::kernels {

// A layer's pass over time, [time][channels] rows, t in [0, n):
//   out[t] = init(t) + sum over k < taps, c < cin of w[k][c][:] in[t + k step][c]
//   init(t) = rows[t] (if given) + bias (if given) + x[t] mixer (if given)
// then, if asked, out = tanh(out), or out = out (1 - y[t]^2) with y = tanh_grad_of (the tanh's
// derivative, from its output). `step` may be negative: `in` must hold rows t + k step for every t
// and k. The output has `channels` channels; w is [taps][cin][channels].
struct Rows {
  const float* in = nullptr;
  int64_t cin = 0, step = 0, taps = 1;
  const float* w = nullptr;
  const float* rows = nullptr;
  const float* bias = nullptr;
  const float* x = nullptr;
  const float* mixer = nullptr;
  bool tanh = false;
  const float* tanh_grad_of = nullptr;
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

struct KernelSet {
  void (*rows)(const Rows&);
  void (*outer)(const Outer&);
};

// The kernels for this CPU: compiled for AVX2 + FMA where it has them, else for the baseline ISA.
KernelSet kernels_now();
// Tests: the baseline-ISA kernels even where AVX2 + FMA exist (process-wide).
void use_baseline_isa(bool on);

}  // namespace wavetrain::experiments::amp::kernels
