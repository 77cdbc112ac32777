// A .nam model ready to play (nam_dsp.h).
#include "experiments/amp/nam_dsp.h"

#include <cmath>
#include <stdexcept>

namespace wavetrain::experiments::amp {

NamDsp::NamDsp(const NamFileModel& file, int64_t max_block, bool prewarm_lstm) {
  const NamFileModel& m = file.default_model();
  const std::optional<double> rate = m.sample_rate ? m.sample_rate : file.sample_rate;
  sample_rate_ = rate.value_or(48000.0);
  if (m.architecture == "WaveNet") {
    wavenet_ = std::make_unique<WaveNetDsp>(m.wavenet, m.weights, max_block);
  } else if (m.architecture == "LSTM") {
    // The plugin runs half a second of zeros through at reset.
    // The core's count: half a second at the model's rate, truncated; one sample when the file
    // gives no rate.
    const int64_t prewarm = !prewarm_lstm ? 0 : rate ? static_cast<int64_t>(0.5 * *rate) : 1;
    lstm_ = std::make_unique<LstmDsp>(m.lstm, m.weights, prewarm);
  } else {
    throw std::invalid_argument("NamDsp: architecture " + m.architecture + " cannot play");
  }
}

NamDsp::~NamDsp() = default;

void NamDsp::reset() {
  if (wavenet_) wavenet_->reset();
  else lstm_->reset();
}

void NamDsp::process(const float* in, float* out, int64_t n) {
  if (wavenet_) wavenet_->process(in, out, n);
  else lstm_->process(in, out, n);
}

}  // namespace wavetrain::experiments::amp
