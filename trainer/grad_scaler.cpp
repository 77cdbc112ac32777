// The gradient scaler; see grad_scaler.h for the protocol.
#include "trainer/grad_scaler.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/optim/optimizer.h>

#include <cmath>
#include <stdexcept>

namespace wavetrain {
namespace {

// True when ATen has a kernel for `op` on `device`'s backend (the fused path), false when the
// composite path must be used (Debian's 1.13 registers these ops for CUDA only).
bool has_kernel(const char* op, const at::Device& device) {
  const auto handle = c10::Dispatcher::singleton().findSchema({op, ""});
  if (!handle) return false;
  const c10::DispatchKey key = c10::computeDispatchKey(c10::nullopt, c10::nullopt, device);
  return handle->hasKernelForDispatchKey(key);
}

// found_inf = max(found_inf, any(!isfinite(g))) and g *= inv_scale, for every gradient.
void unscale_composite(std::vector<at::Tensor>& grads, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  for (at::Tensor& g : grads) {
    const at::Tensor bad = at::logical_not(at::isfinite(g)).any().to(found_inf.scalar_type());
    found_inf.copy_(at::maximum(found_inf, bad.to(found_inf.device())));
    g.mul_(inv_scale.to(g.device()).to(g.scalar_type()));
  }
}

// The update rule of _amp_update_scale_, on the host.
void update_composite(at::Tensor& scale, at::Tensor& tracker, const at::Tensor& found_inf, double growth,
                      double backoff, int64_t interval) {
  if (found_inf.item<float>() > 0) {
    scale.mul_(backoff);
    tracker.zero_();
    return;
  }
  const int64_t successful = tracker.item<int>() + 1;
  if (successful == interval) {
    const float grown = scale.item<float>() * static_cast<float>(growth);
    if (std::isfinite(grown)) scale.fill_(grown);
    tracker.zero_();
  } else {
    tracker.fill_(successful);
  }
}

}  // namespace

GradScaler::GradScaler(GradScalerOptions options) : options_(options) {
  if (!(options_.growth_factor > 1.0)) throw std::invalid_argument("GradScaler: growth_factor must be > 1");
  if (!(options_.backoff_factor > 0.0 && options_.backoff_factor < 1.0))
    throw std::invalid_argument("GradScaler: backoff_factor must be in (0, 1)");
  if (options_.growth_interval < 1) throw std::invalid_argument("GradScaler: growth_interval must be >= 1");
}

void GradScaler::lazy_init(const at::Device& device) {
  if (scale_.defined()) {
    if (scale_.device() != device) {
      scale_ = scale_.to(device);
      growth_tracker_ = growth_tracker_.to(device);
    }
    return;
  }
  scale_ = at::full({}, options_.init_scale, at::TensorOptions().dtype(at::kFloat).device(device));
  growth_tracker_ = at::zeros({}, at::TensorOptions().dtype(at::kInt).device(device));
}

at::Tensor GradScaler::scale(const at::Tensor& loss) {
  if (!options_.enabled) return loss;
  lazy_init(loss.device());
  return loss * scale_.to(loss.scalar_type());
}

void GradScaler::unscale_(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) return;
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::Unscaled)
    throw std::logic_error("GradScaler::unscale_() was already called on this optimizer since the last update()");
  if (state.stage == Stage::Stepped) throw std::logic_error("GradScaler::unscale_() was called after step()");
  if (!scale_.defined()) throw std::logic_error("GradScaler::unscale_() before any scale(): nothing was scaled");

  // Python computes 1/scale in double, then rounds to float.
  const at::Tensor inv_scale = scale_.to(at::kDouble).reciprocal().to(at::kFloat);
  state.found_inf = at::zeros({}, scale_.options().dtype(at::kFloat));

  // Gradients grouped by (device, dtype): the fused kernel takes one such list at a time.
  std::map<std::pair<std::string, at::ScalarType>, std::vector<at::Tensor>> groups;
  for (auto& group : optimizer.param_groups())
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (p.grad().scalar_type() == at::kHalf)
        throw std::logic_error("GradScaler: attempting to unscale fp16 gradients; keep parameters in fp32");
      groups[{p.grad().device().str(), p.grad().scalar_type()}].push_back(p.grad());
    }
  for (auto& [key, grads] : groups) {
    const at::Device device = grads.front().device();
    if (has_kernel("aten::_amp_foreach_non_finite_check_and_unscale_", device)) {
      at::Tensor found = at::zeros({}, at::TensorOptions().dtype(at::kFloat).device(device));
      at::_amp_foreach_non_finite_check_and_unscale_(grads, found, inv_scale.to(device));
      state.found_inf.copy_(at::maximum(state.found_inf, found.to(state.found_inf.device())));
    } else {
      unscale_composite(grads, state.found_inf, inv_scale);
    }
  }
  state.stage = Stage::Unscaled;
}

bool GradScaler::step(torch::optim::Optimizer& optimizer) {
  if (!options_.enabled) {
    optimizer.step();
    return true;
  }
  PerOptimizer& state = per_optimizer_[&optimizer];
  if (state.stage == Stage::Stepped) throw std::logic_error("GradScaler::step() was already called since the last update()");
  if (state.stage == Stage::Ready) unscale_(optimizer);
  state.stage = Stage::Stepped;
  if (state.found_inf.item<float>() > 0) return false;  // a gradient was inf/NaN: skip this step
  optimizer.step();
  return true;
}

void GradScaler::update() {
  if (!options_.enabled) return;
  at::Tensor found_inf;
  for (auto& [opt, state] : per_optimizer_) {
    if (!state.found_inf.defined()) continue;
    found_inf = found_inf.defined() ? found_inf + state.found_inf : state.found_inf.clone();
  }
  if (!found_inf.defined()) throw std::logic_error("GradScaler::update(): no inf checks were recorded before it");
  if (has_kernel("aten::_amp_update_scale_", scale_.device())) {
    at::_amp_update_scale_(scale_, growth_tracker_, found_inf, options_.growth_factor, options_.backoff_factor,
                           options_.growth_interval);
  } else {
    update_composite(scale_, growth_tracker_, found_inf, options_.growth_factor, options_.backoff_factor,
                     options_.growth_interval);
  }
  per_optimizer_.clear();
}

double GradScaler::get_scale() const { return scale_.defined() ? scale_.item<float>() : options_.init_scale; }
int64_t GradScaler::growth_tracker() const { return growth_tracker_.defined() ? growth_tracker_.item<int>() : 0; }

GradScalerState GradScaler::state() const { return {get_scale(), growth_tracker()}; }

void GradScaler::load_state(const GradScalerState& s) {
  const at::Device device = scale_.defined() ? scale_.device() : at::Device(at::kCPU);
  scale_ = at::full({}, s.scale, at::TensorOptions().dtype(at::kFloat).device(device));
  growth_tracker_ = at::full({}, s.growth_tracker, at::TensorOptions().dtype(at::kInt).device(device));
}

bool GradScaler::fused_kernels_on(const at::Device& device) {
  return has_kernel("aten::_amp_foreach_non_finite_check_and_unscale_", device) &&
         has_kernel("aten::_amp_update_scale_", device);
}

}  // namespace wavetrain
