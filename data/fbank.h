// Kaldi-compatible log-mel filterbank features (torchaudio.compliance.kaldi.fbank's definition and
// options), SpecAugment masks and global mean/variance normalisation. Everything here runs on the
// CPU: features are computed where the audio is, and only the finished features move to a device.
//
// Per frame (frame_length ms every frame_shift ms): optional dither (Gaussian, scaled), DC offset
// removal, log energy (raw, before pre-emphasis and window, or after them), pre-emphasis
// x[j] -= c x[max(0, j-1)], the window, zero padding to a power of two, |FFT|^2 (or |FFT|), mel
// triangles on the scale 1127 ln(1 + f/700) between low_freq and high_freq (<= 0: an offset from
// Nyquist), log with a floor of float32's epsilon. snip_edges=false centres frames and reflects the
// signal at both ends as Kaldi does ([2, 1, 0 | 0, 1, 2 ...]).
//
// torchaudio's defaults are used here; Kaldi's own differ in two places, dither (1.0 in Kaldi) and
// energy_floor (0.0 in Kaldi): FbankOptions::kaldi() gives those.
//
// VTLN warping (vtln_warp != 1) moves the mel triangles along the frequency axis with Kaldi's
// piecewise-linear warp: F(f) = f / vtln_warp between two inflection points set by vtln_low and
// vtln_high, and straight lines from there to F(low_freq) = low_freq and F(high_freq) = high_freq,
// so the band's ends stay where they are. A factor above 1 moves the triangles down in frequency: a
// formant then shows where a higher one would unwarped, as with a shorter vocal tract. Training draws a factor per utterance (vocal tract
// length perturbation, Jaitly and Hinton 2013): the voices a model hears vary in formant positions
// more than the training speakers do.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace wavetrain::data {

struct FbankOptions {
  double blackman_coeff = 0.42;
  double dither = 0.0;
  double energy_floor = 1.0;
  double frame_length = 25.0;  // ms
  double frame_shift = 10.0;   // ms
  double high_freq = 0.0;      // Hz; <= 0 is an offset from Nyquist
  bool htk_compat = false;     // energy as the last column instead of the first
  double low_freq = 20.0;
  double min_duration = 0.0;   // s; shorter waveforms give no frames
  int num_mel_bins = 23;
  double preemphasis_coefficient = 0.97;
  bool raw_energy = true;
  bool remove_dc_offset = true;
  bool round_to_power_of_two = true;
  double sample_frequency = 16000.0;
  bool snip_edges = true;
  bool subtract_mean = false;
  bool use_energy = false;
  bool use_log_fbank = true;
  bool use_power = true;
  double vtln_low = 100.0;     // Hz: the warp's lower inflection point (for a factor of 1)
  double vtln_high = -500.0;   // Hz; < 0 is an offset from Nyquist: its upper inflection point
  double vtln_warp = 1.0;      // the warp factor; 1 = no warp
  std::string window_type = "povey";  // povey, hanning, hamming, rectangular, blackman

  static FbankOptions kaldi();  // Kaldi's compute-fbank-feats defaults: dither 1, energy_floor 0
  // Throws std::invalid_argument naming the option and the rule.
  void validate() const;
  int64_t window_size() const;   // samples per frame
  int64_t window_shift() const;  // samples between frames
  int64_t padded_window_size() const;
  int64_t num_frames(int64_t num_samples) const;
  int64_t num_features() const { return num_mel_bins + (use_energy ? 1 : 0); }
};

// waveform [samples] (or [1][samples]) as float32 values in whatever scale the caller uses
// (Kaldi's convention is int16 range). Returns float32 [frames][num_features]. `generator` draws
// the dither noise (the default CPU generator when none is given).
at::Tensor fbank(const at::Tensor& waveform, const FbankOptions& options = {},
                 std::optional<at::Generator> generator = std::nullopt);

// Several utterances, in parallel over them.
std::vector<at::Tensor> fbank(const std::vector<at::Tensor>& waveforms, const FbankOptions& options = {});
// The same, each utterance's dither drawn from its own CPU generator seeded by dither_seeds[i], so
// a batch's features do not depend on the batch around them or on the thread count; with
// vtln_warps (empty, or one per waveform) utterance i's features are warped by vtln_warps[i].
std::vector<at::Tensor> fbank(const std::vector<at::Tensor>& waveforms, const FbankOptions& options,
                              const std::vector<uint64_t>& dither_seeds, const std::vector<double>& vtln_warps = {});

// The stages of one frame (snip_edges=true, no dither), for tests against torchaudio's: the raw
// samples, after DC removal, the raw log energy, after pre-emphasis, after the window, and the
// float64 power (or magnitude) spectrum [padded / 2 + 1].
struct FbankFrameStages {
  std::vector<double> raw, after_dc, after_preemphasis, windowed;
  double raw_log_energy = 0;
  at::Tensor power_spectrum;
};
FbankFrameStages fbank_frame_stages(const at::Tensor& waveform, const FbankOptions& options, int64_t frame);

// The mel filterbank fbank uses: float64 [num_mel_bins][padded_window_size / 2] (Kaldi's
// triangles, warped by vtln_warp, without the Nyquist column) and the centre frequencies in Hz.
std::pair<at::Tensor, at::Tensor> kaldi_mel_banks(const FbankOptions& options);

// The frame window: float64 [window_size].
at::Tensor kaldi_window(const FbankOptions& options);

// SpecAugment (Park et al. 2019) without time warping: `freq_masks` bands of up to
// `freq_mask_width` bins and `time_masks` spans of up to min(time_mask_width, time_mask_ratio x
// frames) frames, each width uniform in [0, max], set to `mask_value`. Returns a masked copy.
struct SpecAugmentOptions {
  int freq_masks = 2;
  int freq_mask_width = 27;
  int time_masks = 2;
  int time_mask_width = 100;
  double time_mask_ratio = 1.0;
  double mask_value = 0.0;
};
at::Tensor spec_augment(const at::Tensor& features, const SpecAugmentOptions& options, at::Generator& generator);

// Global mean and variance normalisation: statistics accumulated over a training split (in
// float64), then (x - mean) / std per feature dimension.
class GlobalCmvn {
 public:
  void accumulate(const at::Tensor& features);  // [frames][dims]
  // Finishes the statistics; std is floored at `std_floor`. Throws if nothing was accumulated.
  void finalize(double std_floor = 1e-5);
  at::Tensor apply(const at::Tensor& features) const;
  bool ready() const { return mean_.defined(); }
  const at::Tensor& mean() const { return mean_; }  // float64 [dims]
  const at::Tensor& std() const { return std_; }
  int64_t frames() const { return count_; }
  static GlobalCmvn from(const at::Tensor& mean, const at::Tensor& std);

 private:
  at::Tensor sum_, sum_sq_, mean_, std_;
  int64_t count_ = 0;
};

}  // namespace wavetrain::data
