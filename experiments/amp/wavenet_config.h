// NAM's classic WaveNet config (0.5.x files; nam_wavenet.h has every later option): layer arrays,
// presets, limits on what a file may ask for, and the .nam "config" object. No LibTorch: the .nam
// reader and the real-time engine use it without the trainable module (nam_wavenet_module.h).
//
// Lengths: each array's receptive field is 1 + (kernel_size - 1) * sum(dilations); the model's is
// 1 + the sum of (array RF - 1). An input of L samples gives L - RF + 1 outputs.
#pragma once

#include <cstdint>
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

}  // namespace wavetrain::experiments::amp
