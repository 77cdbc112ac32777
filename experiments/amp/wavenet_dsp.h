// Any .nam WaveNet (nam_wavenet.h: gated and blended layers, every activation, bottlenecks, grouped
// convolutions, head1x1 and layer1x1, FiLM, head kernels, a condition_dsp) for real-time buffers
// and for offline processing: one engine, so the two modes cannot disagree. No LibTorch.
//
// Each layer keeps the last (kernel - 1) x dilation samples of its input in a History, so a
// buffer of n samples costs n samples of work however small n is. Signals are channel-major
// (dsp_kernels.h): every convolution is a small matrix product vectorised over time, which serves
// any channel count (2, 3, 6, ...) as well as 16.
//
// Invariants: process() is causal and its output at sample t equals the whole-file computation
// with zeros before the first sample; reset() runs receptive_field - 1 zeros through (every part is
// a finite impulse response of the input, so after them the state is what those zeros give, as in
// the NAM plugin's prewarm).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "experiments/amp/dsp_kernels.h"
#include "experiments/amp/nam_wavenet.h"

namespace wavetrain::experiments::amp {

class WaveNetDsp {
 public:
  // weights in the file's order (nam_wavenet.h); condition_dsp's come from its own NamFileModel.
  // max_block: the largest block processed at once (longer calls are split).
  WaveNetDsp(const NamWaveNetSpec& spec, const std::vector<float>& weights, int64_t max_block = 256);
  ~WaveNetDsp();
  WaveNetDsp(const WaveNetDsp&) = delete;
  WaveNetDsp& operator=(const WaveNetDsp&) = delete;

  int64_t output_channels() const { return output_channels_; }
  int64_t receptive_field() const { return receptive_field_; }
  void reset();
  // in: [n] (mono); out: [output_channels][n], channel-major.
  void process(const float* in, float* out, int64_t n);

 private:
  struct Array;
  struct PostHead;
  void block(const float* x, float* out, int64_t out_stride, int64_t n);

  int64_t max_block_, output_channels_, receptive_field_;
  float head_scale_;
  std::vector<std::unique_ptr<Array>> arrays_;
  std::unique_ptr<PostHead> post_head_;  // the head after the arrays, if any
  std::unique_ptr<WaveNetDsp> condition_dsp_;
  int64_t condition_channels_ = 1;
  std::vector<float> condition_;  // [condition channels][max_block]
};

}  // namespace wavetrain::experiments::amp
