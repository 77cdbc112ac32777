// Losses for audio regression (amp modeling), as the NAM trainer and auraloss define them.
//
//   mse        mean((p - t)^2)
//   esr        per item mean((p - t)^2) / mean(t^2), averaged over the batch (NAM's ESR); a silent
//              target would divide by zero, so the denominator is at least 1e-8 (a silent target
//              then gives ESR = 1e8 * error power, large but finite)
//   dc_loss    mse of the per-item means
//   pre_emphasis(x, c)  x[n] - c x[n-1] for n >= 1 (length T - 1, as NAM applies it before its MRSTFT)
//   CombinedLoss  a weighted sum of these and the multi-resolution STFT loss (stft_loss.h)
//
// Tensors are [batch, channels, samples] or [batch, samples]; the last dimension is time.
// Everything is computed in fp32 or fp64 and outside autocast, whatever the caller runs under.
#pragma once

#include <ATen/ATen.h>

#include "losses/stft_loss.h"

#include <string>
#include <utility>
#include <vector>

namespace wavetrain::losses {

at::Tensor mse(const at::Tensor& pred, const at::Tensor& target);
at::Tensor esr(const at::Tensor& pred, const at::Tensor& target);
at::Tensor dc_loss(const at::Tensor& pred, const at::Tensor& target);
at::Tensor pre_emphasis(const at::Tensor& x, double coefficient);

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

  // The shortest signal every term accepts (1, or with mrstft more than half its largest FFT, one
  // more with pre-emphasis, which drops a sample), and why, for an error that names the setting:
  // "mrstft's largest FFT (2048) after pre_emphasis".
  int64_t min_length() const;
  std::string min_length_reason() const;

 private:
  double mse_ = 0, esr_ = 0, dc_ = 0, mrstft_ = 0;
  double pre_emphasis_ = 0;  // 0: none
  MultiResolutionStftLoss mrstft_loss_;
};

}  // namespace wavetrain::losses
