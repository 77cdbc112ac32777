// NAM's LSTM amp model: an LSTM over the samples (input size 1), a linear head, and learned initial
// hidden and cell states; with its presets and its weight order for .nam export.
//
// Presets, layers x hidden size: 1x24, 2x8, 1x16, 1x12. The receptive field is unbounded (state),
// so long audio is processed by carrying the state from chunk to chunk.
#pragma once

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/modules/rnn.h>

#include <string>
#include <utility>
#include <vector>

#include "experiments/amp/lstm_config.h"

namespace wavetrain::experiments::amp {

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
