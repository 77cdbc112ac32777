// The WaveNet's forward and backward on the CPU written out by hand, as one autograd function:
// the training step's CPU path (NamWaveNetImpl::forward uses it for float32 CPU tensors, wherever
// the model's spec is one the kernels cover; LibTorch's ops run everything else).
//
// Why: the model is twenty 16- and 8-channel dilated convolutions, so LibTorch's conv1d (im2col
// and GEMM per layer, plus separate passes for bias, mixer, activation, 1x1 and residual, each with
// its own allocation) spends most of its time moving memory. Here each batch item runs on one
// thread in [time][channels] layout: a layer's conv, bias, input mixer and activation are one pass,
// its 1x1 and residual another, with the accumulators of several time steps in vector registers.
//
// Forward per layer (kernel K, dilation d, activation f): a[t] = bias + mixer x[t] + sum_k
// Conv_k^T z[t + k d]; p = f(a) (gated or blended: p from a's two halves, wavenet_cpu_kernels.h);
// z_out[t] = z[t + (K-1) d] + one_bias + One^T p[t] (Conv_k and One as [in][out] matrices).
// Backward per layer (g = dL/dz_out):
//   dp = One g (+ the head sum's gradient on the last sum_len steps); da = dp f'(a), from p where
//   f is invertible, else from a (kept by the forward pass for SiLU, gated and blended layers);
//   dOne += p g^T; dConv_k += z[t + k d] da^T; dbias, dmixer, done_bias from da and g;
//   dz[s] = g[s - (K-1) d] + sum_k Conv_k da[s - k d]   (the residual path, then the conv's).
// Weight gradients are summed per thread and added up at the end.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <string>
#include <vector>

#include "experiments/amp/nam_wavenet.h"
#include "experiments/amp/wavenet_cpu_kernels.h"

namespace wavetrain::experiments::amp {

// What the kernels compute: layer arrays of C channels (no bottleneck, groups, FiLM or head1x1; a
// 1x1 per layer; a head of any kernel size and dilation), per layer its own kernel size, dilation,
// activation and gating.
struct KernelLayer {
  int64_t kernel_size = 3, dilation = 1;
  kernels::Act activation = kernels::Act::Tanh;
  float slope = 0.0f;  // LeakyReLU
  kernels::GateMode gating = kernels::GateMode::None;  // gated and blended: the gate is a Sigmoid
};
struct KernelArray {
  int64_t input_size = 1, channels = 16, head_size = 1, head_kernel = 1, head_dilation = 1;
  bool head_bias = true;
  std::vector<KernelLayer> layers;
};
struct KernelNet {
  std::vector<KernelArray> arrays;
  float head_scale = 0.02f;
};

// The kernels' description of a .nam WaveNet, or nullopt with the reason in *why. Covered: no
// condition_dsp or head after the arrays; one-channel input and condition; per array channels =
// bottleneck, a head (any kernel) over the sum of the layers' activations, a layer1x1 and nothing
// else (no groups, FiLM, head1x1, slimming); layers of Tanh, Sigmoid, ReLU, LeakyReLU (slope >= 0)
// or SiLU, ungated, or gated or blended by a Sigmoid; an array's head as wide as the next array's
// channels. The parameters are then
// those of NamWaveNetImpl in its (the file's) order.
std::optional<KernelNet> kernel_net_of(const NamWaveNetSpec& spec, std::string* why = nullptr);

// True when wavenet_cpu_forward handles this input: float32 CPU input and parameters, the input
// not requiring a gradient, no CPU autocast.
bool wavenet_cpu_supported(at::TensorList params, const at::Tensor& x);

// x [B][1][L] -> [B][head_size][L - receptive_field + 1], differentiable (once) w.r.t. params, not
// w.r.t. x. Equals NamWaveNetImpl's LibTorch path to float rounding. Throws std::invalid_argument
// when wavenet_cpu_supported is false or the parameters do not fit the net.
at::Tensor wavenet_cpu_forward(const KernelNet& net, at::TensorList params, const at::Tensor& x);

// Tests: run the kernels compiled for the baseline ISA even where AVX2 + FMA exist (process-wide).
void wavenet_cpu_use_baseline_isa(bool on);
// Tests and benchmarks: AVX2 + FMA at most, even where AVX-512 exists (process-wide).
void wavenet_cpu_use_no_avx512(bool on);

}  // namespace wavetrain::experiments::amp
