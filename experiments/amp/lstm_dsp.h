// NAM's LSTM for real-time buffers: a hand-written cell over the .nam file's weights, no LibTorch.
//
// Per sample and layer: gates = b + W [x; h] (4H gates in PyTorch's order i, f, g, o), then
// c = sigmoid(f) c + sigmoid(i) tanh(g), h = sigmoid(o) tanh(c); the output is head . h of the last
// layer + head bias. W is kept column by column: [in + H] columns of the gates, the units padded to
// chunks of 8 with zero weights and each chunk's i, f, g, o side by side (the i, f and o rows halved:
// sigmoid(x) comes from tanh(x / 2)). One sample's matrix-vector product is then in + H
// broadcast-multiply-adds into gate vectors that stay in registers (hidden sizes up to 24), and each
// 8 units' cell update runs on those registers: sigmoid and tanh as rational functions kept as their
// parts, two divisions per 8 units. Padded units stay at c = h = 0 (their gates are 0: c = c/2 + 0).
// A stack of 2 or 3 layers of up to 8 units (2x8) runs as a wavefront: each step moves layer l to
// time t - l, so the layers are independent within a step and make one cell, one chain of latency
// per sample instead of one per layer. Up to 16 units a layer, h goes from step to step in
// registers where that measured faster (AVX2; AVX-512 with fast tanh, or with 8 units).
// Variants: the baseline ISA, AVX2 + FMA, and AVX-512 for hidden sizes up to 24.
//
// State: reset() loads the learned initial h and c, then runs `prewarm` zeros through, as the NAM
// plugin does at reset (half a second at the model's rate): the first samples after reset then agree
// with the plugin's.
#pragma once

#include <cstddef>
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
  // Zeroed floats starting on a 64-byte boundary: the cell's vector loads and stores then never
  // straddle two cache lines (a 16-lane load from a vector's 16-byte alignment always did, and its
  // speed changed from one allocation to the next). Movable (the buffer moves with it), not copyable.
  struct Floats64 {
    std::vector<float> buffer;
    float* p = nullptr;
    Floats64() = default;
    Floats64(Floats64&&) = default;
    Floats64& operator=(Floats64&&) = default;
    Floats64(const Floats64&) = delete;
    Floats64& operator=(const Floats64&) = delete;
    void assign(size_t n) {
      buffer.assign(n + 16, 0.0f);
      const size_t misaligned = reinterpret_cast<uintptr_t>(buffer.data()) % 64 / sizeof(float);
      p = buffer.data() + (misaligned ? 16 - misaligned : 0);
    }
    float* data() { return p; }
    float& operator[](size_t i) { return p[i]; }
  };
  struct Layer {
    int64_t inputs = 0;          // 1 for the first layer, H after it
    Floats64 w;                  // [inputs + H][4 x 8 chunks]
    Floats64 bias;               // [4 x 8 chunks]
    std::vector<float> h0, c0;   // learned initial state [8 chunks]
  };
  int64_t hidden_ = 0, chunks_ = 0, prewarm_ = 0;  // chunks: units padded to 8 per gate group
  std::vector<Layer> layers_;
  Floats64 head_;
  float head_bias_ = 0;
  std::vector<float> gates_;  // scratch for hidden sizes past 24
  std::vector<const float*> w_, b_;
  std::vector<int64_t> inputs_;
  Floats64 state_h_, state_c_;  // every layer's current h and c, layer l's at [8 chunks l, 8 chunks (l + 1))
  std::vector<float*> h_, c_;    // into them
  // Stacks of 2 or 3 chunks in all (2x8, 3x8, 2x4) run as one cell, a layer a step behind the one
  // below it (lstm_dsp.cpp, run_wavefront()): its weights, and room to put back the layers that
  // wait at a buffer's start and end.
  bool wavefront_ = false;
  Floats64 wave_w_, wave_bias_;
  std::vector<float> saved_;
  bool avx2_ = false, avx512_ = false;
  bool fast_tanh_ = false;
};

}  // namespace wavetrain::experiments::amp
