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

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace wavetrain::experiments::amp {

struct LayerArrayConfig {
  int64_t input_size = 1, condition_size = 1, head_size = 1, channels = 16, kernel_size = 3;
  std::vector<int64_t> dilations;
  std::string activation = "Tanh";  // Tanh, ReLU, Sigmoid, Hardtanh
  bool gated = false;
  bool head_bias = true;
};

struct WaveNetConfig {
  std::vector<LayerArrayConfig> layers;
  double head_scale = 0.02;
};

// "standard", "lite", "feather", "nano"; throws std::invalid_argument listing them.
WaveNetConfig wavenet_preset(const std::string& name);
std::vector<std::string> wavenet_preset_names();

// The .nam "config" object ({"layers": [...], "head": null, "head_scale": ...}) and back; the
// parser names the key that is missing or wrong.
nlohmann::json wavenet_config_to_json(const WaveNetConfig& config);
WaveNetConfig wavenet_config_from_json(const nlohmann::json& j);  // checks kWaveNetLimits

// What a model file may ask for. A file is read before anything is allocated for it, so these
// bound what a damaged or hostile file can make the reader allocate (a layer of 10^9 channels, a
// dilation of 10^9 samples that every chunk would be padded with). NAM's largest presets use a
// fraction of each: 16 channels, kernel size 3, dilations up to 512, 4,093 samples of receptive
// field, 13,801 weights.
struct WaveNetLimits {
  int64_t arrays = 16, channels = 1024, kernel_size = 64, layers_per_array = 128, dilation = 1 << 16;
  int64_t receptive_field = 1 << 20;  // 21.8 s at 48 kHz
  int64_t weights = 1 << 24;
};
inline constexpr WaveNetLimits kWaveNetLimits{};
// Throws std::invalid_argument naming the value and the limit it broke.
void check_wavenet_limits(const WaveNetConfig& config);
int64_t receptive_field_of(const WaveNetConfig& config);
// Weights in a .nam file for this config: every conv's weight and bias, and head_scale.
int64_t wavenet_weight_count(const WaveNetConfig& config);

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
