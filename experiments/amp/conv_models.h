// NAM's two convolutional architectures besides WaveNet, as the plugin's core reads and plays
// them (its Python trainer writes both): their .nam configs and weights, and real-time engines.
// No LibTorch.
//
// ConvNet: blocks of a causal dilated convolution with kernel 2 (tap 0 on x[t - d], tap 1 on
// x[t]), then batch norm (folded into a per-channel scale and shift) or a bias, then the
// activation; one block per dilation, `channels` wide; a 1x1 head with a bias. Weights, block by
// block: the conv's [out][in][2], its bias (only without batch norm), or with it running_mean,
// running_var, weight, bias [channels each] and eps; then the head's [channels] and its bias.
// The stream starts as after an endless run of zeros (the core prewarms 1 + sum(dilations) zeros).
//
// Linear: y[t] = bias + sum over j < receptive_field of w[j] x[t - j]: the weights are the
// impulse response (as the core plays them; NAM's Python trainer computes a cross-correlation,
// so its own output is the time reverse of what the plugin plays). Weights: the taps, then the
// bias when `bias` is true. Zero history at the start.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "experiments/amp/nam_wavenet.h"
#include "experiments/amp/row_activation.h"

namespace wavetrain::experiments::amp {

struct ConvNetConfig {
  int64_t channels = 0;
  std::vector<int64_t> dilations;
  bool batchnorm = false;
  ActivationSpec activation;
  nlohmann::json source;  // the config as read (written back unchanged); null for one made here

  int64_t receptive_field() const;  // 1 + sum(dilations)
  int64_t weight_count() const;
};

struct LinearConfig {
  int64_t receptive_field = 0;
  bool bias = false;
  nlohmann::json source;  // as read; null for one made here

  int64_t weight_count() const { return receptive_field + (bias ? 1 : 0); }
};

// `where` is the config's path in the file ("config"); errors are NamKeyError naming the key.
ConvNetConfig convnet_config_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json convnet_config_to_json(const ConvNetConfig& c);
LinearConfig linear_config_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json linear_config_to_json(const LinearConfig& c);

class ConvNetDsp {
 public:
  // fast_tanh: "Tanh" plays as the core's fast approximation (the NAM plugin's setting).
  ConvNetDsp(const ConvNetConfig& config, const std::vector<float>& weights, int64_t max_block = 256, bool fast_tanh = false);
  void reset();
  void process(const float* in, float* out, int64_t n);

 private:
  struct Block {
    int64_t inputs = 0, dilation = 1;
    std::vector<float> w;           // [channels][inputs x 2], tap-major within an input: (i, k)
    std::vector<float> scale, shift;  // per channel: batch norm folded, or 1 and the conv's bias
    std::vector<float> history;     // [inputs][dilation + max_block]: dilation samples, then the block
    std::vector<const float*> taps;  // per input, x[t - d] then x[t] (into history): the conv's rows
    std::vector<float> out;         // [channels][max_block]
  };
  void run(const float* in, float* out, int64_t n);
  int64_t channels_ = 0, max_block_ = 0, prewarm_ = 0;
  RowActivation activation_;
  std::vector<Block> blocks_;
  std::vector<float> head_;
  float head_bias_ = 0;
};

class LinearDsp {
 public:
  LinearDsp(const LinearConfig& config, const std::vector<float>& weights, int64_t max_block = 256);
  void reset();
  void process(const float* in, float* out, int64_t n);

 private:
  std::vector<float> taps_;     // w[j] multiplies x[t - j]
  float bias_ = 0;
  int64_t max_block_ = 0;
  std::vector<float> history_;  // receptive_field - 1 samples, then the block
};

}  // namespace wavetrain::experiments::amp
