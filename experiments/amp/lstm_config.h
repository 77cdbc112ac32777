// The config of NAM's LSTM (the model in lstm.h; the engine in lstm_dsp.h): presets, limits on what
// a file may ask for, and the .nam "config" object. No LibTorch: the .nam reader and the real-time
// engine use it without the trainable module.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace wavetrain::experiments::amp {

struct LstmConfig {
  int64_t input_size = 1, hidden_size = 24, num_layers = 1;
};

LstmConfig lstm_preset(const std::string& name);  // "1x24", "2x8", "1x16", "1x12"
std::vector<std::string> lstm_preset_names();
nlohmann::json lstm_config_to_json(const LstmConfig& c);
LstmConfig lstm_config_from_json(const nlohmann::json& j);  // checks kLstmLimits

// What a model file may ask for (see WaveNetLimits); NAM's presets are 1 or 2 layers of 8 to 24
// units (at most 3,000 weights).
struct LstmLimits {
  int64_t num_layers = 16, hidden_size = 4096, weights = 1 << 24;
};
inline constexpr LstmLimits kLstmLimits{};
// Weights in a .nam file for this config (NAM's order: per layer the stacked input and hidden
// weights, the summed bias, the initial hidden and cell state; then the head).
int64_t lstm_weight_count(const LstmConfig& config);

}  // namespace wavetrain::experiments::amp
