// A .nam model ready to play (nam_dsp.h).
#include "experiments/amp/nam_dsp.h"

#include <cmath>
#include <stdexcept>

namespace wavetrain::experiments::amp {
namespace {

// The spec with every "Tanh" the core looks up by name as "Fasttanh": the layers' activations
// (a gate's secondary function is not looked up that way), the head's, a condition_dsp's.
void use_fast_tanh(NamWaveNetSpec& spec) {
  auto fast = [](ActivationSpec& a) {
    if (a.type == "Tanh") a.type = "Fasttanh";
  };
  for (NamLayerArraySpec& array : spec.arrays)
    for (NamLayerSpec& layer : array.layers) fast(layer.activation);
  if (spec.post_head) fast(spec.post_head->activation);
  if (spec.condition_dsp) {
    auto condition = std::make_shared<NamFileModel>(*spec.condition_dsp);
    if (condition->architecture == "WaveNet") use_fast_tanh(condition->wavenet);
    spec.condition_dsp = condition;
  }
}

}  // namespace

NamDsp::NamDsp(const NamFileModel& file, int64_t max_block, bool prewarm_lstm, bool fast_tanh) {
  const NamFileModel& m = file.default_model();
  const std::optional<double> rate = m.sample_rate ? m.sample_rate : file.sample_rate;
  sample_rate_ = rate.value_or(48000.0);
  if (m.architecture == "WaveNet") {
    NamWaveNetSpec spec = m.wavenet;
    if (fast_tanh) use_fast_tanh(spec);
    wavenet_ = std::make_unique<WaveNetDsp>(spec, m.weights, max_block);
  } else if (m.architecture == "LSTM") {
    // The plugin runs half a second of zeros through at reset.
    // The core's count: half a second at the model's rate, truncated; one sample when the file
    // gives no rate.
    const int64_t prewarm = !prewarm_lstm ? 0 : rate ? static_cast<int64_t>(0.5 * *rate) : 1;
    lstm_ = std::make_unique<LstmDsp>(m.lstm, m.weights, prewarm, fast_tanh);
  } else if (m.architecture == "ConvNet") {
    convnet_ = std::make_unique<ConvNetDsp>(m.convnet, m.weights, max_block, fast_tanh);
  } else if (m.architecture == "Linear") {
    linear_ = std::make_unique<LinearDsp>(m.linear, m.weights, max_block);
  } else {
    throw std::invalid_argument("NamDsp: architecture " + m.architecture + " cannot play");
  }
}

NamDsp::~NamDsp() = default;

void NamDsp::reset() {
  if (wavenet_) wavenet_->reset();
  else if (lstm_) lstm_->reset();
  else if (convnet_) convnet_->reset();
  else linear_->reset();
}

void NamDsp::process(const float* in, float* out, int64_t n) {
  if (wavenet_) wavenet_->process(in, out, n);
  else if (lstm_) lstm_->process(in, out, n);
  else if (convnet_) convnet_->process(in, out, n);
  else linear_->process(in, out, n);
}

}  // namespace wavetrain::experiments::amp
