// An amp model of either NAM architecture, its .nam file, and processing audio of any length.
//
// .nam (NAM's JSON model file): {"version": "0.5.4", "architecture": "WaveNet" | "LSTM",
// "config": {...}, "weights": [floats in the plugin's order], "sample_rate": 48000,
// "metadata": {...}}. write_nam writes it atomically (temporary file, then rename).
//
// process(): the output is aligned with the input (output n answers input n). WaveNet sees
// zeros before the first sample. Modes:
//   exact      WaveNet: chunks carry receptive_field - 1 samples of input as context, so the
//              result equals one pass over the whole file; LSTM: the state carries over.
//   stream     real-time buffers of `chunk` samples: WaveNet through WaveNetStream (per-layer
//              state, plain loops; same output as exact), the LSTM as in exact mode.
//   crossfade  every chunk starts fresh (zero context or initial state) `overlap` samples early,
//              and the overlap is crossfaded linearly into the previous chunk: for models whose
//              context cannot be carried exactly.
#pragma once

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <string>

#include "experiments/amp/lstm.h"
#include "experiments/amp/wavenet.h"

namespace wavetrain::experiments::amp {

struct AmpModel {
  std::string architecture;  // "WaveNet" or "LSTM"
  WaveNet wavenet{nullptr};
  Lstm lstm{nullptr};
  double sample_rate = 48000;
  nlohmann::json metadata = nlohmann::json::object();
  // The version a .nam file was read with (0.5.x); written back unchanged. Empty for a model
  // trained here, which is written as the version write_nam implements.
  std::string nam_version;

  torch::nn::Module& module();
  int64_t receptive_field() const;  // 1 for the LSTM (it has state instead)
  int64_t parameters() const;
};

// architecture "wavenet" (presets standard, lite, feather, nano) or "lstm" (1x24, 2x8, 1x16, 1x12).
AmpModel make_amp_model(const std::string& architecture, const std::string& preset, double sample_rate = 48000);

void write_nam(const std::string& path, const AmpModel& model);
// Throws std::runtime_error naming the file and the key or rule that fails.
AmpModel read_nam(const std::string& path);

struct ProcessOptions {
  int64_t chunk = 65536;
  std::string mode = "exact";  // exact, stream or crossfade
  int64_t overlap = 4096;      // crossfade mode
};

// audio [samples] (mono, float) -> [samples]
at::Tensor process(AmpModel& model, const at::Tensor& audio, const ProcessOptions& options = {});

}  // namespace wavetrain::experiments::amp
