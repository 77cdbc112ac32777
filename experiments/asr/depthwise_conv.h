// The Conformer's depthwise convolution over time, on [batch][time][channels] tensors, with its own
// CPU forward and backward.
//
// Why: ATen runs a grouped convolution without oneDNN as one small convolution per group (128 per
// layer for the tiny model), which made this 2-million-MAC operation 30 ms of a 130 ms training step
// when the batch's parts train at once (trainer/parallel_parts.h, where oneDNN is off). These loops
// take the channels-last layout the block already has (no transposes) and vectorise over channels.
//
//   y[b][t][c] = bias[c] + sum_k w[c][0][k] x[b][t + k - P][c],  P = (K - 1) / 2, x = 0 outside [0, T)
//
// Shapes: x float32 [B][T][C] (any strides; made contiguous), w [C][1][K] (torch.nn.Conv1d's weight
// with groups = C, K odd), bias [C]. Gradients for all three. Sums run in a fixed order whatever the
// thread count (the weight gradient is split by tap k, not by frames), so results are reproducible.
// Off the CPU, or for another dtype (autocast), it is ATen's conv1d on the transposed tensor.
#pragma once

#include <ATen/ATen.h>

namespace wavetrain::experiments::asr {

at::Tensor depthwise_conv_time(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias);

}  // namespace wavetrain::experiments::asr
