// Spectral losses as auraloss defines them: the STFT loss, its mel-scaled variant and the
// multi-resolution STFT loss (the mean over resolutions).
//
// How it is computed. The STFT of prediction and target is taken in one pass outside autograd,
// and the gradient with respect to the prediction is written out: the gradient of each term with
// respect to the magnitudes, then through the magnitude to re/im, an inverse one-sided DFT per
// frame (irfft), the window, overlap-add and the reflect padding folded back onto the signal. On
// the CPU the per-bin work is one fused loop and the FFTs of different items run on different
// threads; in float32, where the CPU has AVX2, the FFTs are data::FrameFft's (8 frames at once),
// whose float32 gradient is as accurate as auraloss's but not bitwise equal to it (stft_loss.cpp,
// frame_spectra). Differentiating at::stft instead (its as_strided backward, a c2c inverse FFT,
// a backward per elementwise op) was no faster than Python. The autograd form is kept for the phase term
// (w_phs > 0) and for a target that requires a gradient, and tests compare the two.
// docs/losses.md has the measurements.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace wavetrain::losses {

// auraloss's STFTLoss: a centred, reflect-padded STFT with a periodic Hann window (cached per
// length, device and dtype); magnitude sqrt(clamp(re^2 + im^2, eps)); spectral convergence
// ||Y - X||_F / ||Y||_F over the whole batch; log-magnitude L1; linear-magnitude L1; phase MSE
// (atan2, never `angle`), computed only when its weight is > 0.
// Signals are [..., samples]; every leading dimension is a batch dimension. Computed in fp32
// (half/bfloat16 inputs are lifted) or fp64, outside autocast.
struct StftLossOptions {
  int64_t fft_size = 1024;
  int64_t hop_size = 256;
  int64_t win_length = 1024;
  double w_sc = 1.0;
  double w_log_mag = 1.0;
  double w_lin_mag = 0.0;
  double w_phs = 0.0;
  double eps = 1e-8;
  // Mel-scaled variant (auraloss's MelSTFTLoss): magnitudes pass through `mel_bins` Slaney mel
  // filters (librosa's defaults) for `sample_rate` before the loss terms; 0 = linear frequency.
  int64_t mel_bins = 0;
  double sample_rate = 0;
};

struct StftLossTerms {
  at::Tensor loss;
  at::Tensor sc;       // undefined when its weight is 0
  at::Tensor log_mag;
  at::Tensor lin_mag;
  at::Tensor phase;
};

StftLossTerms stft_loss(const at::Tensor& pred, const at::Tensor& target, const StftLossOptions& options = {});

// The same loss differentiated by autograd through at::stft: the reference the hand-written
// gradient is tested against, and the path stft_loss takes for the phase term.
StftLossTerms stft_loss_autograd(const at::Tensor& pred, const at::Tensor& target, const StftLossOptions& options = {});

// Slaney-style mel filterbank (librosa.filters.mel with htk=False, norm="slaney"), float64,
// [n_mels, fft_size / 2 + 1]: triangles between mel points spaced evenly on the Slaney scale
// (linear below 1 kHz, logarithmic above), each scaled to unit area (2 / bandwidth in Hz).
at::Tensor mel_filterbank(int64_t fft_size, int64_t n_mels, double sample_rate, double f_min = 0.0, double f_max = -1.0);

// auraloss's MultiResolutionSTFTLoss: the mean of STFT losses over resolutions, by default
// fft [1024, 2048, 512], hop [120, 240, 50], window [600, 1200, 240].
class MultiResolutionStftLoss {
 public:
  MultiResolutionStftLoss();  // auraloss's defaults
  explicit MultiResolutionStftLoss(std::vector<StftLossOptions> resolutions);

  at::Tensor operator()(const at::Tensor& pred, const at::Tensor& target) const;
  // The terms of each resolution, for logging and tests.
  std::vector<StftLossTerms> terms(const at::Tensor& pred, const at::Tensor& target) const;
  // The largest fft_size: signals must be longer than half of it (reflect padding).
  int64_t largest_fft_size() const;

 private:
  std::vector<StftLossOptions> resolutions_;
};

}  // namespace wavetrain::losses
