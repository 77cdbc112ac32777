// NAM's WaveNet for real-time buffers: plain loops over the model's weights, with every layer's
// recent inputs kept in a ring buffer between calls, so that a buffer of n samples costs n samples
// of work however small n is (the tensor path recomputes the whole receptive field per buffer).
//
// Layout: each layer's input signal z is a ring of [time][channels] floats, at least
// (kernel - 1) x dilation + the largest block long (a power of two, indexed with a mask). For each
// new sample a layer reads its kernel taps from the ring, adds the input mixer's share of the
// model's input, applies tanh, adds the result to the array's head sum, and writes
// z + 1x1(post) into the next layer's ring at the same time index.
//
// Speed: a layer's samples within a block are independent (its input ring is complete for the
// block before it runs), so the kernel takes several time steps at once and keeps their
// accumulators in vector registers: 4 steps x 16 channels, 8 x 8, 8 x 4, 2 x 12, ... Compiled for
// the baseline ISA and for AVX2 + FMA, chosen by what the CPU supports.
//
// The output equals process() in exact mode: reset() runs receptive_field - 1 zeros through, which
// is the zero padding that mode puts before the audio. Mono-in, mono-out models of ungated Tanh
// layers (every NAM preset) are supported; can_stream() says whether a model is.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "experiments/amp/wavenet.h"

namespace wavetrain::experiments::amp {

class WaveNetStream {
 public:
  // baseline_isa: use the kernels compiled for the baseline ISA even where AVX2 + FMA exist (tests).
  explicit WaveNetStream(const WaveNetImpl& model, int64_t max_block = 256, bool baseline_isa = false);
  static bool can_stream(const WaveNetConfig& config) { return why_not_streamable(config).empty(); }
  // Empty when the model streams; otherwise what stops it ("layer array 0 is gated", ...).
  static std::string why_not_streamable(const WaveNetConfig& config);

  void reset();
  // Any n; blocks larger than max_block are split.
  void process(const float* in, float* out, int64_t n);

 private:
  struct Layer {
    int64_t dilation;
    std::vector<float> conv;    // [tap][in c][out c'], so that the innermost loop runs over c'
    std::vector<float> bias;    // [C]
    std::vector<float> mixer;   // [C] (condition size 1)
    std::vector<float> one;     // [in c][out c']
    std::vector<float> one_bias;
    std::vector<float> ring;    // [size][C]
    int64_t mask = 0;
  };
  struct Array {
    int64_t in_channels, channels, head_size, kernel;
    std::vector<float> rechannel;  // [in][C]
    std::vector<Layer> layers;
    std::vector<float> head, head_bias;  // [C][H], [H] (bias empty when none)
    std::vector<float> out_ring;         // the last layer's output z for the block: [block][C]
  };
  void block(const float* in, float* out, int64_t n);

  bool avx2_ = false;  // run the per-layer kernel compiled for AVX2 + FMA

  std::vector<Array> arrays_;
  float head_scale_;
  int64_t max_block_, position_ = 0, receptive_field_;
  std::vector<float> head_sum_, head_out_, post_;
};

}  // namespace wavetrain::experiments::amp
