// NAM's LSTM amp model: an LSTM over the samples (input size 1), a linear head, and learned initial
// hidden and cell states; with its presets and its weight order for .nam export.
//
// Presets, layers x hidden size: 1x24, 2x8, 1x16, 1x12. The receptive field is unbounded (state),
// so long audio is processed by carrying the state from chunk to chunk.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
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

class LstmImpl : public torch::nn::Module {
 public:
  explicit LstmImpl(LstmConfig config);

  using State = std::pair<at::Tensor, at::Tensor>;  // (h, c), each [layers][batch][hidden]
  // x [B][1][L] -> [B][1][L], from the learned initial state.
  at::Tensor forward(const at::Tensor& x);
  // From `state` (undefined tensors: the initial state); the state after the last sample is returned.
  at::Tensor forward(const at::Tensor& x, State& state);
  const LstmConfig& config() const { return config_; }

  // NAM's order: per layer [W_ih | W_hh] ([4 hidden][input + hidden], row-major), b_ih + b_hh,
  // initial hidden, initial cell; then the head's weight and bias.
  std::vector<float> export_weights() const;
  void import_weights(const std::vector<float>& weights);

 private:
  LstmConfig config_;
  torch::nn::LSTM core_{nullptr};
  torch::nn::Linear head_{nullptr};
  at::Tensor initial_hidden_, initial_cell_;  // [layers][hidden]
};
TORCH_MODULE(Lstm);

}  // namespace wavetrain::experiments::amp
