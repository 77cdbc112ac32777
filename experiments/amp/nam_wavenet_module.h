// Any .nam WaveNet (nam_wavenet.h) as a trainable LibTorch module, the only one the trainer builds:
// NAM's presets, A2, gated and blended layers, every activation, bottlenecks, groups, head1x1,
// FiLM, head kernels, a condition_dsp (trained with it), a head after the arrays. Two execution
// paths, one set of parameters: on the CPU in float32, the hand-written forward and backward of
// wavenet_cpu.h for every spec its kernels cover (kernel_net_of: NAM's four presets, A2, and any
// ungated Tanh, Sigmoid, ReLU or LeakyReLU net without FiLM or groups); LibTorch's ops everywhere else
// (any device, any dtype, autocast, double backward, and the specs the kernels do not cover).
//
// forward() is the whole-signal computation with valid convolutions, every signal aligned at its
// end as NAM's trainer aligns them: [B][1][L] -> [B][outputs][L - receptive_field + 1]; it equals
// the real-time engine (wavenet_dsp.h) on the same weights, which the tests hold it to. Semantics
// follow the plugin's core where it differs from NAM's trainer (no layer1x1: z passes unchanged;
// the FiLM after layer1x1 acts in blended layers only), so a trained model plays as trained.
//
// Parameters are registered in the file's weight order; export_weights() concatenates them and
// appends head_scale (a constant, not trained, as in NAM). PReLU slopes are constants too.
#pragma once

#include <torch/nn/module.h>

#include <array>
#include <memory>
#include <optional>

#include <string>
#include <vector>

#include "experiments/amp/nam_wavenet.h"
#include "experiments/amp/wavenet_config.h"
#include "experiments/amp/wavenet_cpu.h"
#include "trainer/weights.h"

namespace wavetrain::experiments::amp {

// A .nam activation on a LibTorch tensor ([B][C][L]; PReLU's slopes per channel).
at::Tensor activate(const ActivationSpec& a, const at::Tensor& x);

class NamWaveNetImpl : public torch::nn::Module, public RenamesOldState {
 public:
  // Weights start like PyTorch's Conv1d (uniform, +-1/sqrt(fan_in)); a condition_dsp gets its
  // own module, with the weights of its nested file.
  explicit NamWaveNetImpl(NamWaveNetSpec spec);

  at::Tensor forward(const at::Tensor& x);
  int64_t receptive_field() const { return nam_receptive_field(spec_); }
  const NamWaveNetSpec& spec() const { return spec_; }
  // This model's .nam weights (not its condition_dsp's: those are in condition_dsp_file()).
  std::vector<float> export_weights() const;
  void import_weights(const std::vector<float>& weights);
  // The spec with condition_dsp's nested file carrying the trained weights.
  NamWaveNetSpec exported_spec() const;
  // The parameters in the file's order (export_weights() without head_scale).
  const std::vector<at::Tensor>& ordered_parameters() const { return order_; }
  // The weight the plugin scales the output by (the last of export_weights()).
  double head_scale() const;
  // The spec as NAM's classic config (wavenet_config.h: one kernel size and activation per array,
  // no .nam 0.6+ options), with head_scale() as its head_scale; nullopt when it is not one.
  std::optional<WaveNetConfig> classic_config() const;

  // Whether forward() may take the hand-written CPU path (wavenet_cpu.h) where the spec and input
  // allow it; on by default. Off: LibTorch's ops throughout. cpu_kernels_cover(): whether the spec
  // is one the kernels compute (kernel_net_of).
  void set_cpu_kernels(bool on) { cpu_kernels_ = on; }
  bool cpu_kernels_cover() const { return kernels_.has_value(); }

  // Checkpoints written before this module was the only one name the classic WaveNet's
  // parameters ("layers0_layer3_input_mixer.weight"): they load under today's names
  // ("array0_layer3_mixer_weight"), and get this module's head_scale, which they did not hold.
  StateDict renamed_old_state(const StateDict& state) const override;

 private:
  struct Conv {
    at::Tensor weight, bias;  // bias undefined when the conv has none
    int64_t dilation = 1, groups = 1;
  };
  struct Film {
    bool active = false, shift = true;
    Conv conv;
  };
  struct Layer {
    Conv conv, mixer, layer1x1, head1x1;
    std::array<Film, kFilmSites> film;
  };
  struct Array {
    Conv rechannel, head_rechannel;
    std::vector<Layer> layers;
  };
  Conv make_conv(const std::string& name, int64_t in, int64_t out, int64_t kernel, int64_t dilation, int64_t groups, bool bias);
  at::Tensor run(const Conv& c, const at::Tensor& x) const;
  at::Tensor film(const Film& f, const at::Tensor& x, const at::Tensor& c) const;

  NamWaveNetSpec spec_;
  at::Tensor head_scale_;  // the last weight: a buffer (saved with the state), not trained
  std::vector<Array> arrays_;
  std::vector<Conv> post_head_;
  std::vector<at::Tensor> order_;  // every parameter, in the file's order
  std::shared_ptr<NamWaveNetImpl> condition_;
  std::optional<KernelNet> kernels_;  // the CPU kernels' form of spec_, where they cover it
  bool cpu_kernels_ = true;
};
TORCH_MODULE(NamWaveNet);

// Presets beyond NAM's four classic ones (wavenet_config.h): "a2" (NAM's A2: one array of
// 8 channels, 23 layers with kernels 6 and 15, LeakyReLU, a head kernel of 16; receptive field 6,347
// samples) and "a2_small" (the same with 3 channels).
std::vector<std::string> nam_wavenet_preset_names();
NamWaveNetSpec nam_wavenet_preset(const std::string& name);
// A preset with every layer's activation and gating replaced ("" keeps the preset's): for
// model.activation and model.gating.
void set_activation(NamWaveNetSpec& spec, const std::string& activation, const std::string& gating);

}  // namespace wavetrain::experiments::amp
