// Audio losses; definitions in audio_losses.h.
#include "losses/audio_losses.h"

#include <stdexcept>
#include <string>

#include "losses/loss_common.h"

namespace wavetrain::losses {
namespace {

using detail::check_pair;
using detail::Fp32Region;
using detail::full_precision;

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

int64_t CombinedLoss::min_length() const {
  if (mrstft_ == 0) return 1;
  return mrstft_loss_.largest_fft_size() / 2 + 1 + (pre_emphasis_ != 0 ? 1 : 0);
}

std::string CombinedLoss::min_length_reason() const {
  if (mrstft_ == 0) return "";
  return "mrstft's largest FFT (" + std::to_string(mrstft_loss_.largest_fft_size()) + ")" +
         (pre_emphasis_ != 0 ? " after pre_emphasis (one sample fewer)" : "");
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
