// NAM's ConvNet and Linear as trainable LibTorch modules (their .nam form and engines:
// conv_models.h). Both map [B][1][L] to [B][1][L - receptive_field + 1], like the WaveNet, and read
// and write the .nam file's weights in its order.
//
// ConvNet: per block Conv1d(kernel 2, dilation d, bias only without batch norm), BatchNorm1d (its
// running statistics are what the file holds), the activation; a 1x1 head with a bias.
// Linear: one Conv1d(1, 1, receptive_field). LibTorch's conv is a cross-correlation (its last tap
// meets the newest sample); the file's taps are an impulse response (the first meets the newest),
// so the taps are reversed on export and import: the NAM plugin then plays what was trained.
// (NAM's Python trainer writes them unreversed, and the plugin plays its Linear time-reversed.)
//
// Presets: convnet standard (16 channels, dilations 1..512, batch norm, Tanh), small (8 channels,
// 1..128); linear standard (receptive field 1024, bias), short (64).
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/conv.h>

#include <string>
#include <vector>

#include "experiments/amp/conv_models.h"

namespace wavetrain::experiments::amp {

std::vector<std::string> convnet_preset_names();
ConvNetConfig convnet_preset(const std::string& name);  // throws std::invalid_argument naming the presets
std::vector<std::string> linear_preset_names();
LinearConfig linear_preset(const std::string& name);

class ConvNetModuleImpl : public torch::nn::Module {
 public:
  explicit ConvNetModuleImpl(ConvNetConfig config);
  at::Tensor forward(const at::Tensor& x);
  int64_t receptive_field() const { return config_.receptive_field(); }
  const ConvNetConfig& config() const { return config_; }
  std::vector<float> export_weights() const;
  void import_weights(const std::vector<float>& weights);

 private:
  ConvNetConfig config_;
  std::vector<torch::nn::Conv1d> convs_;
  std::vector<torch::nn::BatchNorm1d> norms_;
  torch::nn::Conv1d head_{nullptr};
};
TORCH_MODULE(ConvNetModule);

class LinearModuleImpl : public torch::nn::Module {
 public:
  explicit LinearModuleImpl(LinearConfig config);
  at::Tensor forward(const at::Tensor& x);
  int64_t receptive_field() const { return config_.receptive_field; }
  const LinearConfig& config() const { return config_; }
  std::vector<float> export_weights() const;
  void import_weights(const std::vector<float>& weights);

 private:
  LinearConfig config_;
  torch::nn::Conv1d conv_{nullptr};
};
TORCH_MODULE(LinearModule);

}  // namespace wavetrain::experiments::amp
