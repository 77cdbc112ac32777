// Waveform augmentation for ASR training (asr.augment.*): what a model trained on clean, tightly cut
// synthetic speech has never heard and real input has. Applied to a training utterance (16 kHz,
// float [-1, 1]) in this order, each step with its own probability:
//   speed perturbation (0.9 / 1.0 / 1.1, libsoxr; in asr_task.cpp)
//   band limit   down to 8 or 11.025 kHz and back (libsoxr): telephone and old recordings, whose
//                upper band is empty
//   reverb       a synthetic room: the utterance convolved with an impulse response of a direct
//                path and exponentially decaying Gaussian noise, RT60 uniform in [rt60_min, rt60_max]
//   silence      leading silence uniform in [0, silence_max_seconds], trailing in [0, a third of
//                it]: the model learns to wait, and to emit nothing, where nobody speaks
//   noise        at an SNR uniform in [snr_min, snr_max] dB against the speech's power: white, brown,
//                babble (other training utterances summed) or, with noise_dir, the user's recordings
//   gain         uniform in [gain_min_db, gain_max_db], then scaled down if it would clip
// and where the features are made (asr_task.cpp):
//   vtlp         vocal tract length perturbation: the mel triangles warped by a factor uniform in
//                [vtlp_min, vtlp_max] (Kaldi's VTLN warp, data/fbank.h), so the formants of the
//                few recorded training speakers move as another speaker's would
// Every draw comes from a generator seeded by (seed, epoch, item), so a batch is the same whatever
// the thread count and wherever a run was resumed.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace wavetrain::experiments::asr {

struct WaveAugmentOptions {
  double band_limit_prob = 0.0;
  double reverb_prob = 0.0, rt60_min = 0.2, rt60_max = 0.8;
  double silence_prob = 0.0, silence_max_seconds = 1.5;
  double noise_prob = 0.0, snr_min = 5, snr_max = 30;
  std::vector<std::string> noise_types = {"white", "brown", "babble"};  // and "dir" with noise_dir
  std::string noise_dir;  // WAV/FLAC files (any rate, mixed to mono), searched recursively
  double gain_prob = 0.0, gain_min_db = -15, gain_max_db = 6;
  double vtlp_prob = 0.0, vtlp_min = 0.9, vtlp_max = 1.1;  // a feature warp: not in any() or apply()

  // From asr.augment.* (absent keys keep the defaults above, which are all off). Throws
  // config::ConfigError naming the key for a probability outside [0, 1], an empty or reversed
  // range, an unknown noise type, or a noise_dir without audio.
  static WaveAugmentOptions from(const config::Config& cfg);
  bool any() const { return band_limit_prob > 0 || reverb_prob > 0 || silence_prob > 0 || noise_prob > 0 || gain_prob > 0; }
};

// The utterance's VTLN warp factor for its features: 1 (no warp) with probability 1 - vtlp_prob,
// else uniform in [vtlp_min, vtlp_max]. seed: the utterance's (seed_of(seed, epoch, item, ...)).
double vtlp_factor(const WaveAugmentOptions& options, uint64_t seed);

// Returns `count` samples of another utterance for babble: item `pick` of the training split.
using UtteranceSource = std::function<at::Tensor(uint64_t pick)>;

class WaveAugmenter {
 public:
  // Loads noise_dir's files (all of them, resampled to 16 kHz) when "dir" is a noise type.
  explicit WaveAugmenter(WaveAugmentOptions options);
  // audio: float32 [samples] at 16 kHz. seed: the utterance's (seed_of(seed, epoch, item, ...)).
  // others: where babble comes from (may be empty: babble is then white noise).
  at::Tensor apply(const at::Tensor& audio, uint64_t seed, const UtteranceSource& others) const;
  const WaveAugmentOptions& options() const { return options_; }

 private:
  WaveAugmentOptions options_;
  std::vector<at::Tensor> noise_files_;  // float32 [samples] at 16 kHz
};

// The pieces, public for tests. A room's impulse response at 16 kHz: 1 at t = 0, then Gaussian
// noise under exp(-6.9 t / rt60) (60 dB down at rt60) from 2.5 ms on, `length` = 1.2 x rt60.
at::Tensor room_impulse_response(double rt60_seconds, uint64_t seed);
// `audio` convolved with `response` (the output as long as the input: the tail is cut).
at::Tensor convolve(const at::Tensor& audio, const at::Tensor& response);
// Noise of `n` samples from `seed`: white, brown, or babble (3-5 of `others` summed; white
// without `others`).
at::Tensor make_noise(const std::string& type, int64_t n, uint64_t seed, const UtteranceSource& others);
// `noise` (any length; looped or cut to audio's) added to `audio` at `snr_db` against the power of
// `audio`'s loud part (frames within 30 dB of its loudest, so that padded silence does not count).
at::Tensor add_noise(const at::Tensor& audio, const at::Tensor& noise, double snr_db);

}  // namespace wavetrain::experiments::asr
