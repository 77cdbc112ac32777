// NAM's WaveNet forward and backward on the CPU written out by hand, as one autograd function:
// the training step's fast path (WaveNetImpl::forward uses it for float32 CPU tensors).
//
// Why: the model is twenty 16- and 8-channel dilated convolutions, so LibTorch's conv1d (im2col
// and GEMM per layer, plus separate passes for bias, mixer, tanh, 1x1 and residual, each with its
// own allocation) spends most of its time moving memory. Here each batch item runs on one thread
// in [time][channels] layout: a layer's conv, bias, input mixer and tanh are one pass, its 1x1
// and residual another, with the accumulators of several time steps in vector registers.
//
// Forward per layer: a[t] = bias + mixer x[t] + sum_k Conv_k^T z[t + k d]; p = tanh(a);
// z_out[t] = z[t + (K-1) d] + one_bias + One^T p[t] (Conv_k and One as [in][out] matrices).
// Backward per layer (g = dL/dz_out):
//   dp = One g (+ the head sum's gradient on the last out_len steps); da = dp (1 - p^2);
//   dOne += p g^T; dConv_k += z[t + k d] da^T; dbias, dmixer, done_bias from da and g;
//   dz[s] = g[s - (K-1) d] + sum_k Conv_k da[s - k d]   (the residual path, then the conv's).
// Weight gradients are summed per thread and added up at the end.
#pragma once

#include <ATen/ATen.h>

namespace wavetrain::experiments::amp {

class WaveNetImpl;

// True when wavenet_cpu_forward handles this model and input: float32 CPU input and parameters,
// the input not requiring a gradient, no CPU autocast, ungated Tanh layer arrays, a one-channel
// model input and condition (input_size of the first array and every condition_size 1).
bool wavenet_cpu_supported(const WaveNetImpl& model, const at::Tensor& x);

// x [B][1][L] -> [B][head_size][L - receptive_field + 1], differentiable (once) w.r.t. the model's
// parameters, not w.r.t. x. Equals WaveNetImpl's LibTorch path to float rounding. Throws
// std::invalid_argument when wavenet_cpu_supported is false.
at::Tensor wavenet_cpu_forward(const WaveNetImpl& model, const at::Tensor& x);

// Tests: run the kernels compiled for the baseline ISA even where AVX2 + FMA exist (process-wide).
void wavenet_cpu_use_baseline_isa(bool on);

}  // namespace wavetrain::experiments::amp
