// NAM's WaveNet (the Neural Amp Modeler's "layer array" design), with its presets and its weight
// order, so that a trained model exports to a .nam file the NAM plugin loads.
//
// A layer array: a 1x1 "rechannel" conv (no bias) from the array's input to `channels`; then per
// dilation a layer: dilated conv (kernel_size, bias) on the running signal z, plus a 1x1
// "input mixer" (no bias) of the condition (the model's input audio), an activation (gated:
// tanh(a) * sigmoid(b) over twice the channels), whose output goes two ways: z + 1x1(post) (bias)
// to the next layer, and `post` summed into the array's head; the head sum passes through a 1x1
// "head rechannel" (bias if head_bias) to head_size channels and is added into the next array's
// head sum. The last array's head output times head_scale is the model's output.
//
// Lengths: each array's receptive field is 1 + (kernel_size - 1) * sum(dilations); the model's is
// 1 + the sum of (array RF - 1). An input of L samples gives L - RF + 1 outputs.
//
// Presets (NAM's): standard 13,801 parameters, lite 6,553, feather 3,025, nano 841; all with a
// receptive field of 4,093 samples.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/conv.h>

#include <string>
#include <vector>

#include "experiments/amp/wavenet_config.h"

namespace wavetrain::experiments::amp {

class WaveNetImpl : public torch::nn::Module {
 public:
  explicit WaveNetImpl(WaveNetConfig config);

  // x [B][1][L] -> [B][1][L - receptive_field + 1]
  at::Tensor forward(const at::Tensor& x);
  int64_t receptive_field() const;
  const WaveNetConfig& config() const { return config_; }

  // Every parameter in the order the NAM plugin reads them (per array: rechannel, per layer conv
  // weight [out][in][k] and bias, input mixer, 1x1 weight and bias; head rechannel weight and
  // bias), then head_scale: the .nam file's "weights".
  std::vector<float> export_weights() const;
  // The inverse; throws std::invalid_argument when the count does not fit this architecture.
  void import_weights(const std::vector<float>& weights);
  // The parameter tensors in that order (weights [out][in][k], biases where they exist).
  std::vector<at::Tensor> ordered_parameters() const;

  // Whether forward() may use the hand-written CPU forward and backward (wavenet_cpu.h) for the
  // inputs it supports; on by default. Off: LibTorch's conv1d throughout.
  void set_cpu_kernels(bool on) { cpu_kernels_ = on; }

 private:
  struct Layer {
    torch::nn::Conv1d conv{nullptr}, input_mixer{nullptr}, one_by_one{nullptr};
  };
  struct Array {
    torch::nn::Conv1d rechannel{nullptr}, head_rechannel{nullptr};
    std::vector<Layer> layers;
  };
  at::Tensor activate(const LayerArrayConfig& c, const at::Tensor& z) const;
  std::vector<torch::nn::Conv1d> convs_in_order() const;

  WaveNetConfig config_;
  std::vector<Array> arrays_;
  bool cpu_kernels_ = true;
};
TORCH_MODULE(WaveNet);

}  // namespace wavetrain::experiments::amp
