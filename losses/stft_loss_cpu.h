// Internal to losses/: the CPU loops of the STFT loss's per-bin work (stft_loss.cpp uses them):
// the magnitudes and sums of the forward, and the per-bin chain of the backward.
#pragma once

#include <ATen/ATen.h>

namespace wavetrain::losses::detail {

// The CPU form of the forward's per-bin part (no mel filters): magnitudes of prediction and target
// and the sums the terms need, in three passes per thread instead of about ten tensor ops. Sums
// run in 8 fixed lanes per row (so the compiler may vectorise them) and rows are added in double.
struct MagnitudeSums {
  double sq_diff = 0, sq_target = 0, abs_diff = 0;  // sum (x - y)^2, sum y^2, sum |x - y|
};

// Magnitudes x, y [items][frames][bins] of the two halves of `spectra` (prediction, then target),
// and their sums.
MagnitudeSums magnitudes_cpu(const at::Tensor& spectra, int64_t items, double eps, at::Tensor& x, at::Tensor& y);

// The CPU form of the per-bin part of the backward, one pass instead of about ten tensor ops
// (the loss terms without mel filters). For bin z = (re, im) of the prediction, magnitudes x of
// the prediction and y of the target:
//   g = sc (x - y) + log_mag sgn(x - y) / x + lin_mag sgn(x - y)     d loss / d x
//   s = g / x where x is above the eps floor, else 0; halved for the inner bins (signal_gradient)
//   out = s (re, im)
// sgn(x - y) stands for sgn(log x - log y): log is increasing.
struct BinGradient {
  double sc = 0, log_mag = 0, lin_mag = 0;  // upstream gradient times the term's weight (and 1/count)
  double floor = 0;                         // sqrt(eps) as the magnitudes hold it
};

// The complex [items][frames][bins] input of signal_gradient (inner bins already halved).
at::Tensor bin_gradient_cpu(const at::Tensor& spectra, const at::Tensor& x, const at::Tensor& y, const BinGradient& k,
                            int64_t fft_size);

}  // namespace wavetrain::losses::detail
