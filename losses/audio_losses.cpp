// Audio losses; definitions in audio_losses.h.
#include "losses/audio_losses.h"

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <mutex>
#include <stdexcept>
#include <tuple>

namespace wavetrain::losses {
namespace {

// Autocast off for the duration (the same dispatch keys in every LibTorch version), and half or
// bfloat16 inputs lifted to fp32: spectral losses are not accurate in 16 bits.
struct Fp32Region {
  c10::impl::ExcludeDispatchKeyGuard no_autocast{c10::autocast_dispatch_keyset};
};

at::Tensor full_precision(const at::Tensor& x) {
  const at::ScalarType t = x.scalar_type();
  return (t == at::kHalf || t == at::kBFloat16) ? x.to(at::kFloat) : x;
}

void check_pair(const at::Tensor& pred, const at::Tensor& target, const char* what) {
  if (!pred.sizes().equals(target.sizes()))
    throw std::invalid_argument(std::string(what) + ": prediction " + c10::str(pred.sizes()) + " and target " +
                                c10::str(target.sizes()) + " differ in shape");
  if (pred.dim() < 1 || pred.size(-1) < 1) throw std::invalid_argument(std::string(what) + ": empty signal");
}

// Constant tensors of the STFT losses (windows, mel filterbanks), made once per description,
// device and dtype: the losses run every step.
at::Tensor cached_constant(const std::string& what, const at::TensorOptions& options,
                           const std::function<at::Tensor()>& make) {
  static std::mutex mutex;
  static std::map<std::string, at::Tensor> cache;
  const std::string key = what + "|" + options.device().str() + "|" + std::string(options.dtype().name());
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  return cache[key] = make().to(options);
}

// The Hann window is computed in float32 and then converted, as auraloss's is (its window buffer is
// created in the default dtype): a float64 window moves float64 losses ~1e-9 away from auraloss's.
at::Tensor hann_window(int64_t length, const at::TensorOptions& options) {
  return cached_constant("hann " + std::to_string(length), options,
                         [&] { return at::hann_window(length, /*periodic=*/true, at::TensorOptions().dtype(at::kFloat)); });
}

// Slaney's mel scale: linear (3 mel per 200 Hz) up to 1 kHz, logarithmic above.
double hz_to_mel(double hz) {
  const double min_log_hz = 1000.0, min_log_mel = 15.0, log_step = std::log(6.4) / 27.0;
  return hz < min_log_hz ? 3.0 * hz / 200.0 : min_log_mel + std::log(hz / min_log_hz) / log_step;
}
double mel_to_hz(double mel) {
  const double min_log_hz = 1000.0, min_log_mel = 15.0, log_step = std::log(6.4) / 27.0;
  return mel < min_log_mel ? 200.0 * mel / 3.0 : min_log_hz * std::exp(log_step * (mel - min_log_mel));
}

at::Tensor cached_filterbank(const StftLossOptions& o, const at::TensorOptions& options) {
  return cached_constant("mel " + std::to_string(o.fft_size) + " " + std::to_string(o.mel_bins) + " " +
                             std::to_string(o.sample_rate),
                         options, [&] { return mel_filterbank(o.fft_size, o.mel_bins, o.sample_rate); });
}

// Per-item mean over everything but the batch dimension.
at::Tensor per_item_mean(const at::Tensor& x) { return x.reshape({x.size(0), -1}).mean(1); }

}  // namespace

at::Tensor mse(const at::Tensor& pred, const at::Tensor& target) {
  check_pair(pred, target, "mse");
  Fp32Region fp32;
  return (full_precision(pred) - full_precision(target)).square().mean();
}

at::Tensor esr(const at::Tensor& pred, const at::Tensor& target) {
  check_pair(pred, target, "esr");
  Fp32Region fp32;
  const at::Tensor p = full_precision(pred), t = full_precision(target);
  const at::Tensor error = per_item_mean((p - t).square());
  const at::Tensor power = per_item_mean(t.square()).clamp_min(1e-8);  // a silent target stays finite
  return (error / power).mean();
}

at::Tensor dc_loss(const at::Tensor& pred, const at::Tensor& target) {
  check_pair(pred, target, "dc_loss");
  Fp32Region fp32;
  return (per_item_mean(full_precision(pred)) - per_item_mean(full_precision(target))).square().mean();
}

at::Tensor pre_emphasis(const at::Tensor& x, double coefficient) {
  const int64_t n = x.size(-1);
  if (n < 2) throw std::invalid_argument("pre_emphasis: a signal needs at least 2 samples");
  return x.narrow(-1, 1, n - 1) - coefficient * x.narrow(-1, 0, n - 1);
}

StftLossTerms stft_loss(const at::Tensor& pred, const at::Tensor& target, const StftLossOptions& o) {
  check_pair(pred, target, "stft_loss");
  if (o.win_length > o.fft_size) throw std::invalid_argument("stft_loss: win_length is larger than fft_size");
  Fp32Region fp32;
  const at::Tensor p = full_precision(pred), t = full_precision(target);
  const int64_t samples = p.size(-1);
  // Prediction and target get separate STFTs. One STFT of both concatenated saves a call, but
  // then autograd differentiates the target half too: measured 1.6-1.9x slower (bench/mrstft.sh).
  const at::Tensor window = hann_window(o.win_length, p.options());
  auto spectrum = [&](const at::Tensor& x) {
    return at::stft(x.reshape({-1, samples}), o.fft_size, o.hop_size, o.win_length, window, /*center=*/true,
                    /*pad_mode=*/"reflect", /*normalized=*/false, /*onesided=*/true, /*return_complex=*/true);
  };
  const at::Tensor xs = spectrum(p), ys = spectrum(t);
  auto magnitude = [&](const at::Tensor& s) { return (at::real(s).square() + at::imag(s).square()).clamp_min(o.eps).sqrt(); };
  at::Tensor x_mag = magnitude(xs), y_mag = magnitude(ys);
  if (o.mel_bins > 0) {
    const at::Tensor fb = cached_filterbank(o, x_mag.options());
    x_mag = at::matmul(fb, x_mag);
    y_mag = at::matmul(fb, y_mag);
  }
  const int64_t items = x_mag.size(0);
  const at::Tensor spec = at::cat({xs, ys}, 0), re = at::real(spec), im = at::imag(spec);
  StftLossTerms terms;
  at::Tensor loss = at::zeros({}, x_mag.options());
  if (o.w_sc != 0) {
    terms.sc = at::frobenius_norm(y_mag - x_mag) / at::frobenius_norm(y_mag);
    loss = loss + o.w_sc * terms.sc;
  }
  if (o.w_log_mag != 0) {
    terms.log_mag = (x_mag.log() - y_mag.log()).abs().mean();
    loss = loss + o.w_log_mag * terms.log_mag;
  }
  if (o.w_lin_mag != 0) {
    terms.lin_mag = (x_mag - y_mag).abs().mean();
    loss = loss + o.w_lin_mag * terms.lin_mag;
  }
  if (o.w_phs != 0) {  // only here: the phase needs atan2, which not every backend has
    const at::Tensor phase = at::atan2(im, re);
    terms.phase = (phase.narrow(0, 0, items) - phase.narrow(0, items, items)).square().mean();
    loss = loss + o.w_phs * terms.phase;
  }
  terms.loss = loss;
  return terms;
}

at::Tensor mel_filterbank(int64_t fft_size, int64_t n_mels, double sample_rate, double f_min, double f_max) {
  if (fft_size < 2 || n_mels < 1 || !(sample_rate > 0))
    throw std::invalid_argument("mel_filterbank: needs fft_size >= 2, n_mels >= 1 and a positive sample_rate");
  if (f_max <= 0) f_max = sample_rate / 2.0;
  const int64_t n_freqs = fft_size / 2 + 1;
  std::vector<double> mel_hz(static_cast<size_t>(n_mels + 2));
  const double lo = hz_to_mel(f_min), hi = hz_to_mel(f_max);
  for (int64_t i = 0; i < n_mels + 2; ++i)
    mel_hz[static_cast<size_t>(i)] = mel_to_hz(lo + (hi - lo) * static_cast<double>(i) / static_cast<double>(n_mels + 1));
  at::Tensor fb = at::zeros({n_mels, n_freqs}, at::kDouble);
  double* w = fb.data_ptr<double>();
  for (int64_t m = 0; m < n_mels; ++m) {
    const double left = mel_hz[static_cast<size_t>(m)], centre = mel_hz[static_cast<size_t>(m + 1)],
                 right = mel_hz[static_cast<size_t>(m + 2)];
    const double area = 2.0 / (right - left);  // Slaney normalisation: every filter has unit area
    for (int64_t k = 0; k < n_freqs; ++k) {
      const double f = sample_rate / 2.0 * static_cast<double>(k) / static_cast<double>(n_freqs - 1);
      const double rise = (f - left) / (centre - left), fall = (right - f) / (right - centre);
      w[m * n_freqs + k] = std::max(0.0, std::min(rise, fall)) * area;
    }
  }
  return fb;
}

MultiResolutionStftLoss::MultiResolutionStftLoss()
    : MultiResolutionStftLoss({{1024, 120, 600}, {2048, 240, 1200}, {512, 50, 240}}) {}

MultiResolutionStftLoss::MultiResolutionStftLoss(std::vector<StftLossOptions> resolutions)
    : resolutions_(std::move(resolutions)) {
  if (resolutions_.empty()) throw std::invalid_argument("MultiResolutionStftLoss: no resolution given");
}

std::vector<StftLossTerms> MultiResolutionStftLoss::terms(const at::Tensor& pred, const at::Tensor& target) const {
  std::vector<StftLossTerms> out;
  for (const StftLossOptions& r : resolutions_) out.push_back(stft_loss(pred, target, r));
  return out;
}

at::Tensor MultiResolutionStftLoss::operator()(const at::Tensor& pred, const at::Tensor& target) const {
  at::Tensor sum;
  for (const StftLossTerms& t : terms(pred, target)) sum = sum.defined() ? sum + t.loss : t.loss;
  return sum / static_cast<double>(resolutions_.size());
}

CombinedLoss::CombinedLoss(const std::vector<std::pair<std::string, double>>& terms) {
  for (const auto& [name, value] : terms) {
    if (name == "pre_emphasis") {
      if (!(value >= 0.0 && value < 1.0))
        throw std::invalid_argument("loss.pre_emphasis=" + std::to_string(value) + ": the coefficient must be in [0, 1)");
      pre_emphasis_ = value;
      continue;
    }
    if (value < 0.0) throw std::invalid_argument("loss." + name + "=" + std::to_string(value) + ": a weight must be >= 0");
    if (name == "mse") mse_ = value;
    else if (name == "esr") esr_ = value;
    else if (name == "dc") dc_ = value;
    else if (name == "mrstft") mrstft_ = value;
    else throw std::invalid_argument("loss." + name + " is not a loss term. Known: mse, esr, dc, mrstft, pre_emphasis");
  }
  if (mse_ == 0 && esr_ == 0 && dc_ == 0 && mrstft_ == 0)
    throw std::invalid_argument("loss: every weight is 0; give at least one of mse, esr, dc, mrstft");
}

at::Tensor CombinedLoss::operator()(const at::Tensor& pred, const at::Tensor& target,
                                    std::vector<std::pair<std::string, double>>* parts) const {
  at::Tensor total;
  auto add = [&](const char* name, double weight, const at::Tensor& value) {
    total = total.defined() ? total + weight * value : weight * value;
    if (parts) parts->emplace_back(name, value.item<double>());
  };
  if (mse_ != 0) add("mse", mse_, mse(pred, target));
  if (esr_ != 0) add("esr", esr_, esr(pred, target));
  if (dc_ != 0) add("dc", dc_, dc_loss(pred, target));
  if (mrstft_ != 0) {
    if (pre_emphasis_ != 0) add("mrstft", mrstft_, mrstft_loss_(pre_emphasis(pred, pre_emphasis_), pre_emphasis(target, pre_emphasis_)));
    else add("mrstft", mrstft_, mrstft_loss_(pred, target));
  }
  return total;
}

}  // namespace wavetrain::losses
