// A .nam model ready to play: the real-time engine of its architecture (wavenet_dsp.h,
// lstm_dsp.h, conv_models.h), mono in, mono out, and the NAM plugin's behaviour around it: a
// container plays its default submodel (the last, up to max_value 1), the LSTM is prewarmed on half
// a second of zeros at the model's rate when reset, a WaveNet or ConvNet on its receptive field of
// zeros. With fast_tanh, "Tanh" plays as the core's fast approximation, and the LSTM's sigmoids and
// tanhs too: what the NAM plugin plays (it always turns it on). No LibTorch.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "experiments/amp/lstm_dsp.h"
#include "experiments/amp/nam_file.h"
#include "experiments/amp/wavenet_dsp.h"

namespace wavetrain::experiments::amp {

class NamDsp {
 public:
  // max_block: the largest block computed at once (a real-time host's buffer; longer calls split).
  // prewarm false: the LSTM starts from its stored state (as NAM's Python trainer computes it).
  explicit NamDsp(const NamFileModel& model, int64_t max_block = 256, bool prewarm = true, bool fast_tanh = false);
  ~NamDsp();

  void reset();
  void process(const float* in, float* out, int64_t n);
  // The model's rate (48 kHz when the file gives none).
  double sample_rate() const { return sample_rate_; }

 private:
  std::unique_ptr<WaveNetDsp> wavenet_;
  std::unique_ptr<LstmDsp> lstm_;
  std::unique_ptr<ConvNetDsp> convnet_;
  std::unique_ptr<LinearDsp> linear_;
  double sample_rate_ = 48000;
};

}  // namespace wavetrain::experiments::amp
