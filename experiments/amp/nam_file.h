// A .nam file as the NAM plugin's core reads it, versions 0.5.x to 0.7.x: one model of
// architecture WaveNet (nam_wavenet.h), LSTM (lstm.h), ConvNet or Linear (conv_models.h), or
// SlimmableContainer (a list of whole
// models, each with the `max_value` of the size control up to which it plays), with its weights,
// sample rate and metadata. No LibTorch.
//
// Everything the file says that the model does not need is kept and written back: the version, the
// metadata object, other top-level keys ("notes", ...), the config exactly as read (when the weights
// are written back unchanged in meaning, the config is too).
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "experiments/amp/conv_models.h"
#include "experiments/amp/lstm_config.h"
#include "experiments/amp/nam_wavenet.h"

namespace wavetrain::experiments::amp {

struct NamFileModel {
  std::string version;       // as read, e.g. "0.5.4"; empty for a model made here
  std::string architecture;  // "WaveNet", "LSTM", "ConvNet", "Linear" or "SlimmableContainer"
  NamWaveNetSpec wavenet;
  LstmConfig lstm;
  ConvNetConfig convnet;
  LinearConfig linear;
  struct Submodel {
    double max_value = 1.0;
    std::shared_ptr<const NamFileModel> model;
  };
  std::vector<Submodel> submodels;  // SlimmableContainer, in the file's order (max_value ascending)
  std::vector<float> weights;       // every architecture but SlimmableContainer
  std::optional<double> sample_rate;
  bool sample_rate_float = false;  // written as 48000.0 (as read), not 48000
  nlohmann::json metadata;  // null when the file has none
  nlohmann::json extra = nlohmann::json::object();  // other top-level keys, kept

  int64_t output_channels() const;
  // Samples of input that reach one output sample (the LSTM: 1, it has state instead).
  int64_t receptive_field() const;
  // The model the plugin plays by default: for a container, the last submodel (the largest,
  // max_value 1); otherwise this model.
  const NamFileModel& default_model() const;
};

// The sample rates a model may have: 1 kHz to 768 kHz, the rates audio files are read at
// (data/audio_io.h). A rate of 0, negative, NaN or 4.6e18 is a damaged file or config.
inline constexpr double kNamMinSampleRate = 1000, kNamMaxSampleRate = 768000;
bool nam_sample_rate_supported(double rate);
// "0 Hz is outside 1000 to 768000 Hz" (for an error after the key).
std::string nam_sample_rate_problem(double rate);

// The versions the NAM plugin's current core reads.
bool nam_version_supported(const std::string& version);
inline constexpr const char* kNamSupportedVersions = "0.5.x, 0.6.x and 0.7.x";

// `where` prefixes every error ("condition_dsp", "submodels[1].model"); read_nam_file adds the path.
NamFileModel nam_model_from_json(const nlohmann::json& j, const std::string& where = "", int depth = 0);
nlohmann::json nam_model_to_json(const NamFileModel& model);

// Throws std::runtime_error "PATH: what": the key, the value and what is supported.
NamFileModel read_nam_file(const std::string& path);
// Atomically (a temporary file, then rename). Refuses non-finite weights (JSON cannot hold them).
void write_nam_file(const std::string& path, const NamFileModel& model);

// The version to write for what the model uses: 0.5.4 for a classic WaveNet or an LSTM, so that
// older plugins load it; 0.6.0 when it needs the newer WaveNet options; 0.7.0 for a container.
std::string nam_min_version(const NamFileModel& model);

}  // namespace wavetrain::experiments::amp
