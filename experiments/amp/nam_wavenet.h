// The WaveNet of .nam files 0.5 to 0.7, every option the NAM plugin's core implements, as read from
// and written to a file's "config". No LibTorch: the real-time engine (wavenet_dsp.h) runs it, the
// trainable module (nam_wavenet_module.h) trains it.
//
// A layer array (C channels, bottleneck B, condition c of `condition_size` channels):
//   z = rechannel(input)                                    1x1, no bias
//   per layer (kernel k_i, dilation d_i):
//     a   = conv(FiLM_conv_pre(z))  (+ FiLM_conv_post)      dilated, bias, groups_input; M outputs
//     a  += mixer(FiLM_mixin_pre(c)) (+ FiLM_mixin_post)    1x1, no bias, groups_input_mixin
//     a   = FiLM_act_pre(a)
//     p   = activation(a)                                   none: f(a), M = B
//                                                           gated: f(a1) g(a2), M = 2B
//                                                           blended: g(a2) f(a1) + (1 - g(a2)) a1
//     p   = FiLM_act_post(p)                                [B]
//     z  += layer1x1(p) (+ FiLM)   or  z += p (no layer1x1, B = C)
//     head_sum += head1x1(p) (+ FiLM)  or  += p
//   head_out = head_rechannel(head_sum)                     kernel head_kernel, bias if head_bias
// The next array takes z as its input and starts its head_sum from head_out. The model's output is
// head_scale x the last head_out. FiLM(x; c) = x * s + t with [s; t] = 1x1(c) (bias, groups; t
// only when `shift`). The condition is the model's input, or the output of `condition_dsp`, a
// WaveNet run on the input.
//
// Weights, in the file's order: per array the rechannel, per layer conv (weight [M][C/g][k], bias),
// mixer, layer1x1 (weight, bias), head1x1 (weight, bias), the active FiLMs in the order of FilmSite
// (weight, bias), then the head rechannel (weight [H][in][head_kernel], bias); head_scale last.
// condition_dsp's weights are its own (in its nested file).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "experiments/amp/wavenet_config.h"

namespace wavetrain::experiments::amp {

// An element-wise function and its parameters. Names as the core spells them.
struct ActivationSpec {
  std::string type = "Tanh";
  // LeakyReLU: negative_slope; Hardtanh: min_val, max_val; LeakyHardtanh: min_val, max_val,
  // min_slope, max_slope; PReLU: one slope per channel (a single slope is repeated).
  std::vector<double> params;
  bool operator==(const ActivationSpec& o) const { return type == o.type && params == o.params; }
};
std::vector<std::string> activation_names();  // every type the reader takes
// From "Tanh" or {"type": "LeakyReLU", "negative_slope": 0.02}; `where` names the key in errors.
ActivationSpec activation_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json activation_to_json(const ActivationSpec& a);

enum class Gating { None, Gated, Blended };

enum FilmSite { kConvPre, kConvPost, kMixinPre, kMixinPost, kActivationPre, kActivationPost, kLayer1x1Post, kHead1x1Post, kFilmSites };
const char* film_key(int site);  // "conv_pre_film", ...
struct FilmSpec {
  bool active = false, shift = true;
  int64_t groups = 1;
};

struct NamLayerSpec {
  int64_t kernel_size = 3, dilation = 1;
  ActivationSpec activation;
  Gating gating = Gating::None;
  ActivationSpec secondary{"Sigmoid", {}};  // the gate's function (gated, blended)
};

struct NamLayerArraySpec {
  int64_t input_size = 1, condition_size = 1, channels = 16, bottleneck = 16;
  int64_t head_size = 1, head_kernel = 1, head_dilation = 1;
  bool head_bias = true;
  int64_t groups_input = 1, groups_input_mixin = 1;
  bool layer1x1 = true;
  int64_t layer1x1_groups = 1;
  bool head1x1 = false;
  int64_t head1x1_out = 0, head1x1_groups = 1;
  std::array<FilmSpec, kFilmSites> film{};
  std::vector<int64_t> slimmable_channels;  // allowed channel counts; empty: not slimmable
  std::vector<NamLayerSpec> layers;

  int64_t mid() const { return bottleneck; }  // activation output channels
  int64_t head_in() const { return head1x1 ? head1x1_out : bottleneck; }
};

struct NamFileModel;  // nam_file.h: a whole nested file (condition_dsp)

// The optional head after the layer arrays ("head" in the config): per stage y = conv_i(f(y)),
// causal, bias, widths last head_size -> channels -> ... -> out_channels.
struct NamPostHeadSpec {
  int64_t channels = 1, out_channels = 1;
  std::vector<int64_t> kernel_sizes;
  ActivationSpec activation;
};

struct NamWaveNetSpec {
  std::vector<NamLayerArraySpec> arrays;
  std::optional<NamPostHeadSpec> post_head;
  double head_scale = 0.02;
  std::shared_ptr<const NamFileModel> condition_dsp;  // null: the condition is the input
  // The config object as a file gave it: written back as it was (spellings, keys the core ignores),
  // with only condition_dsp's nested model (and its weights) regenerated. Null for a spec made or
  // changed here, which is written from the fields.
  nlohmann::json source;
  // Written with 0.6+ spellings (head object, kernel_sizes, per-layer lists); a 0.5.x file's config,
  // or a model trained here, is written with 0.5 spellings wherever they can say everything.
  bool new_style = false;

  int64_t output_channels() const { return post_head ? post_head->out_channels : arrays.empty() ? 0 : arrays.back().head_size; }
};

// The most history values (sum of channels x (kernel - 1) x dilation) a file may ask the real-time
// engine to keep: 2^26 floats, 256 MB (a standard WaveNet keeps 49,104).
inline constexpr int64_t kNamStateLimit = int64_t{1} << 26;
// The most signal rows in all layers (each layer's channels; the engine keeps a block of each): 8,192
// (a standard WaveNet has 240, A2 184); with 8,192-sample blocks that bounds the engine near 1 GB.
inline constexpr int64_t kNamRowsLimit = 8192;
// The deepest nesting of models in a file (a condition_dsp's condition_dsp, ...).
inline constexpr int kNamNestingLimit = 4;

// The parser checks every key, type and size (kWaveNetLimits) and names what fails, e.g.
// "layers[1].gating_mode[2]: 'maybe' is not one of none, gated, blended".
NamWaveNetSpec nam_wavenet_from_json(const nlohmann::json& config, const std::string& version, int depth = 0);
nlohmann::json nam_wavenet_to_json(const NamWaveNetSpec& spec);
int64_t nam_wavenet_weight_count(const NamWaveNetSpec& spec);  // head_scale included; not condition_dsp's
// 1 + the history each array needs (conv taps and the head rechannel's), condition_dsp's included.
int64_t nam_receptive_field(const NamWaveNetSpec& spec);
// Whether the model needs 0.6+ features (the oldest version that reads it: "0.5.4" or "0.6.0").
std::string nam_wavenet_min_version(const NamWaveNetSpec& spec);

// What keeps a layer array from the plain form that the classic config and the CPU training
// kernels share (channels = bottleneck, no groups, a layer1x1, no head1x1, FiLM or slimming), as
// "has a bottleneck", ...; empty when nothing does.
std::string plain_array_problem(const NamLayerArraySpec& a);
// The spec as a classic (0.5.x) config (wavenet_config.h), or nullopt with the reason in *why.
std::optional<WaveNetConfig> classic_of(const NamWaveNetSpec& spec, std::string* why = nullptr);
NamWaveNetSpec nam_of(const WaveNetConfig& config);

}  // namespace wavetrain::experiments::amp
