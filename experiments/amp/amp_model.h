// An amp model: a trainable NAM WaveNet, LSTM, ConvNet or Linear (LibTorch modules), or any other
// model a .nam file holds (containers, ...: nam_file.h), kept as the file describes it; reading and
// writing .nam files; processing audio of any length.
//
// process(): the output is aligned with the input (output n answers input n), as the NAM plugin
// plays it: WaveNet sees zeros before the first sample, the LSTM starts from its stored state after
// half a second of zeros (the plugin's prewarm). Modes:
//   exact      one pass over the whole file: a WaveNet the CPU kernels cover (wavenet_cpu.h)
//              through its module, chunks carrying receptive_field - 1 samples of context
//              (batched, all threads); anything else through the real-time engine (nam_dsp.h) in
//              blocks of `chunk`.
//   stream     the real-time engine in buffers of `chunk` samples, one thread: every model.
//   crossfade  every chunk starts fresh (zero context or initial state) `overlap` samples early,
//              and the overlap is crossfaded linearly into the previous chunk.
#pragma once

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>
#include <string>

#include <memory>
#include <vector>

#include "experiments/amp/conv_modules.h"
#include "experiments/amp/lstm.h"
#include "experiments/amp/nam_file.h"
#include "experiments/amp/nam_wavenet_module.h"

namespace wavetrain::experiments::amp {

struct AmpModel {
  std::string architecture;  // "WaveNet", "LSTM" or "SlimmableContainer"
  NamWaveNet wavenet{nullptr};  // trainable models: one of these
  Lstm lstm{nullptr};
  ConvNetModule convnet{nullptr};  // NAM's ConvNet and Linear (conv_modules.h)
  LinearModule linear{nullptr};
  // A model the trainer does not build (nam_wavenet.h's classic_of() says why): its file as read.
  std::shared_ptr<const NamFileModel> file;
  double sample_rate = 48000;
  bool sample_rate_in_file = true;  // false: an imported file that gave none (none is written back)
  nlohmann::json metadata = nlohmann::json::object();  // null for an imported file that has none
  // The version a .nam file was read with; written back unchanged. Empty for a model trained here,
  // which is written as the oldest version that holds it (nam_min_version).
  std::string nam_version;
  nlohmann::json nam_extra = nlohmann::json::object();  // the file's other top-level keys, kept
  // A WaveNet's config as its file gave it, where the module's spec no longer carries it (a
  // checkpoint written before the module was unified records it apart, as nam.config); null: the
  // spec's own.
  nlohmann::json nam_config;

  bool trainable() const { return wavenet || lstm || convnet || linear; }
  bool is_wavenet() const { return static_cast<bool>(wavenet); }
  // A model with a receptive field (every trainable one but the LSTM, which has state instead).
  bool is_convolutional() const { return wavenet || convnet || linear; }
  // [B][1][L] -> [B][1][L - receptive_field + 1] (convolutional), [B][1][L] (the LSTM)
  at::Tensor forward(const at::Tensor& x);
  torch::nn::Module& module();      // throws for a file-only model
  int64_t receptive_field() const;  // 1 for the LSTM (it has state instead)
  int64_t parameters() const;       // for a file-only model: its weights
  std::vector<at::Tensor> module_parameters() const;
  // The .nam file of this model (what write_nam writes and the real-time engine plays).
  NamFileModel to_nam() const;
};

// architecture "wavenet" (presets standard, lite, feather, nano, a2, a2_small), "lstm" (1x24, 2x8,
// 1x16, 1x12), "convnet" (standard, small) or "linear" (standard, short). For a WaveNet, `activation` (a name the core knows, e.g. LeakyReLU, SiLU) and
// `gating` (none, gated, blended) replace every layer's ("" keeps the preset's).
AmpModel make_amp_model(const std::string& architecture, const std::string& preset, double sample_rate = 48000,
                        const std::string& activation = "", const std::string& gating = "");
// A WaveNet of any spec.
AmpModel wavenet_model_of(const NamWaveNetSpec& spec);

// Atomic (temporary file, then rename); adds today's date to the metadata when it has none.
void write_nam(const std::string& path, const AmpModel& model);
// Any .nam file the NAM plugin's core reads (nam_file.h); throws std::runtime_error naming the file
// and the key or rule that fails.
AmpModel read_nam(const std::string& path);
AmpModel amp_model_of(const NamFileModel& file);

struct ProcessOptions {
  int64_t chunk = 65536;
  std::string mode = "exact";  // exact, stream or crossfade
  int64_t overlap = 4096;      // crossfade mode
  // The NAM plugin's LSTM prewarm (half a second of zeros at reset); false starts from the stored
  // state, as NAM's Python trainer computes the output.
  bool prewarm = true;
  // Tanh as the NAM core's fast approximation (in the LSTM, its sigmoids too): what the NAM plugin
  // plays, since it turns it on. Every mode then runs the real-time engine.
  bool fast_tanh = false;
};

// audio [samples] (mono, float) -> [samples]
at::Tensor process(AmpModel& model, const at::Tensor& audio, const ProcessOptions& options = {});

class NamDsp;

// process() over audio that arrives in pieces (a file read a chunk at a time): the same output,
// sample for sample, for every mode, with memory bounded by the chunk size (exact mode on the
// WaveNet keeps one batch of chunks and the receptive field; crossfade keeps `overlap`
// samples of input and of output to blend), not by the length of the audio.
class AmpStream {
 public:
  AmpStream(AmpModel& model, const ProcessOptions& options);
  ~AmpStream();
  AmpStream(const AmpStream&) = delete;
  AmpStream& operator=(const AmpStream&) = delete;

  // Takes n input samples; appends to `out` the output samples that are final (output i answers
  // input i; the output may lag the input by up to a batch of chunks).
  void push(const float* in, int64_t n, std::vector<float>& out);
  // End of the input: appends the rest of the output.
  void finish(std::vector<float>& out);

 private:
  // Processes what pending_ holds as process() would: whole chunks (whole batches of them for
  // LibTorch); at the end, the rest.
  void drain(bool at_end, std::vector<float>& out);

  AmpModel& model_;
  ProcessOptions options_;
  bool libtorch_ = false;          // exact mode on a WaveNet the CPU kernels cover
  int64_t rf_ = 1, per_batch_ = 1;  // receptive field; chunks per LibTorch batch
  std::unique_ptr<NamFileModel> file_;
  std::unique_ptr<NamDsp> dsp_;
  std::vector<float> pending_;  // input not yet processed
  std::vector<float> context_;  // the receptive field - 1 samples before pending_ (LibTorch), or the
                                // up to `overlap` samples before it (crossfade)
  std::vector<float> held_;     // crossfade: output not yet final (the next chunk blends into it)
  int64_t consumed_ = 0;        // input samples processed so far
  bool finished_ = false;
};

}  // namespace wavetrain::experiments::amp
