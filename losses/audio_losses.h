// Losses for audio regression (amp modeling), as the NAM trainer and auraloss define them.
//
//   mse        mean((p - t)^2)
//   esr        per item mean((p - t)^2) / mean(t^2), averaged over the batch (NAM's ESR); a silent
//              target would divide by zero, so the denominator is at least 1e-8 (a silent target
//              then gives ESR = 1e8 * error power, large but finite)
//   dc_loss    mse of the per-item means
//   pre_emphasis(x, c)  x[n] - c x[n-1] for n >= 1 (length T - 1, as NAM applies it before its MRSTFT)
//
// Tensors are [batch, channels, samples] or [batch, samples]; the last dimension is time.
// Everything is computed in fp32 or fp64 and outside autocast, whatever the caller runs under.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <utility>
#include <vector>

namespace wavetrain::losses {

at::Tensor mse(const at::Tensor& pred, const at::Tensor& target);
at::Tensor esr(const at::Tensor& pred, const at::Tensor& target);
at::Tensor dc_loss(const at::Tensor& pred, const at::Tensor& target);
at::Tensor pre_emphasis(const at::Tensor& x, double coefficient);

// auraloss's STFTLoss: a centred, reflect-padded STFT with a Hann window (cached per length, device
// and dtype); magnitude
// sqrt(clamp(re^2 + im^2, eps)); spectral convergence ||Y - X||_F / ||Y||_F over the whole batch;
// log-magnitude L1; linear-magnitude L1; phase MSE (atan2), computed only when its weight is > 0.
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

 private:
  std::vector<StftLossOptions> resolutions_;
};

// A weighted sum of the losses above, built from name: weight pairs as a config gives them, e.g.
// {mse: 1.0, mrstft: 2.0e-4, pre_emphasis: 0.85} (NAM's WaveNet training loss). Names: mse, esr,
// dc, mrstft; `pre_emphasis` is not a weight but the coefficient applied to both signals before
// the MRSTFT term only, as NAM does. Zero weights are skipped (no work is done for them).
class CombinedLoss {
 public:
  // Throws std::invalid_argument naming an unknown term (and listing the known ones) or a negative weight.
  explicit CombinedLoss(const std::vector<std::pair<std::string, double>>& terms);

  // The total, and each weighted term's unweighted value in `parts` ("mse", "mrstft", ...) when given.
  at::Tensor operator()(const at::Tensor& pred, const at::Tensor& target,
                        std::vector<std::pair<std::string, double>>* parts = nullptr) const;

 private:
  double mse_ = 0, esr_ = 0, dc_ = 0, mrstft_ = 0;
  double pre_emphasis_ = 0;  // 0: none
  MultiResolutionStftLoss mrstft_loss_;
};

}  // namespace wavetrain::losses
