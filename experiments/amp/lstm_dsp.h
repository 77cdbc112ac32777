// NAM's LSTM for real-time buffers: a hand-written cell over the .nam file's weights, no LibTorch.
//
// Per sample and layer: gates = b + W [x; h] (4H gates in PyTorch's order i, f, g, o), then
// c = sigmoid(f) c + sigmoid(i) tanh(g), h = sigmoid(o) tanh(c); the output is head . h of the last
// layer + head bias. W is kept column by column ([in + H] columns of the four gate groups, each
// padded to a multiple of 8 units with zero weights), so one sample's matrix-vector product is
// in + H broadcast-multiply-adds into gate vectors that stay in registers (hidden sizes up to 24),
// and each 8 units' cell update runs on those registers: sigmoid and tanh as fractions with one
// shared exp each, two divisions per 8 units. Padded units stay at c = h = 0 (their gates are 0:
// c = c/2 + 0).
//
// State: reset() loads the learned initial h and c, then runs `prewarm` zeros through, as the NAM
// plugin does at reset (half a second at the model's rate): the first samples after reset then agree
// with the plugin's.
#pragma once

#include <cstdint>
#include <vector>

#include "experiments/amp/lstm_config.h"

namespace wavetrain::experiments::amp {

class LstmDsp {
 public:
  // weights: the .nam file's, in NAM's order (lstm.h). Throws std::invalid_argument on a count that
  // does not fit the config.
  // fast_tanh: sigmoid and tanh as the NAM core's fast approximation (what its plugin plays).
  LstmDsp(const LstmConfig& config, const std::vector<float>& weights, int64_t prewarm = 0, bool fast_tanh = false);

  void reset();
  void process(const float* in, float* out, int64_t n);

 private:
  struct Layer {
    int64_t inputs = 0;          // 1 for the first layer, H after it
    std::vector<float> w;        // [inputs + H][4 x 8 chunks]
    std::vector<float> bias;     // [4 x 8 chunks]
    std::vector<float> h0, c0;   // learned initial state [8 chunks]
    std::vector<float> h, c;     // current state [8 chunks]
  };
  int64_t hidden_ = 0, chunks_ = 0, prewarm_ = 0;  // chunks: units padded to 8 per gate group
  std::vector<Layer> layers_;
  std::vector<float> head_;
  float head_bias_ = 0;
  std::vector<float> gates_;  // scratch for hidden sizes past 24
  std::vector<const float*> w_, b_;
  std::vector<int64_t> inputs_;
  std::vector<float*> h_, c_;
  bool avx2_ = false, avx512_ = false;
  bool fast_tanh_ = false;
};

}  // namespace wavetrain::experiments::amp
