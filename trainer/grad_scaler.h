// Gradient scaling for fp16 training, with the semantics of Python's torch.amp.GradScaler
// (LibTorch ships none). The loss is multiplied by a large scale before backward so that small fp16
// gradients do not flush to zero; gradients are divided by it again before the optimizer step.
//
//   scaler.scale(loss).backward();
//   scaler.unscale_(opt);          // optional: before gradient clipping
//   scaler.step(opt);              // skipped when any gradient is inf or NaN
//   scaler.update();               // inf seen: scale *= backoff; else after growth_interval clean
//                                  // steps in a row: scale *= growth (if the result is finite)
//
// The unscale and update run through ATen's _amp_foreach_non_finite_check_and_unscale_ and
// _amp_update_scale_ when the dispatcher has kernels for the tensors' backend (CUDA; CPU from
// PyTorch 2.x), and through plain tensor ops otherwise (Debian's 1.13 has no CPU kernels).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <map>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace wavetrain {

struct GradScalerOptions {
  double init_scale = 65536.0;
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;
  bool enabled = true;
};

// What a checkpoint keeps.
struct GradScalerState {
  double scale = 65536.0;
  int64_t growth_tracker = 0;
};

class GradScaler {
 public:
  explicit GradScaler(GradScalerOptions options = {});

  // loss * scale (the scale moves to the loss's device on first use). Identity when disabled.
  at::Tensor scale(const at::Tensor& loss);

  // Divides the optimizer's gradients by the scale in place and records whether any was inf/NaN.
  // At most once per optimizer between update() calls, and not after step().
  void unscale_(torch::optim::Optimizer& optimizer);

  // Unscales if not done yet, then steps the optimizer unless a gradient was not finite.
  // Returns true if the optimizer stepped.
  bool step(torch::optim::Optimizer& optimizer);

  // Adjusts the scale from this iteration's inf checks (all optimizers) and resets them.
  void update();

  double get_scale() const;
  int64_t growth_tracker() const;
  bool enabled() const { return options_.enabled; }
  const GradScalerOptions& options() const { return options_; }

  GradScalerState state() const;
  void load_state(const GradScalerState& s);

  // True when ATen has both fused kernels for `device`'s backend, so unscale_ and update use them:
  // CUDA in every version, the CPU from PyTorch 2.3 (pytorch#109281).
  static bool fused_kernels_on(const at::Device& device);

 private:
  enum class Stage { Ready, Unscaled, Stepped };
  struct PerOptimizer {
    Stage stage = Stage::Ready;
    at::Tensor found_inf;  // float scalar on the scale's device: > 0 if any gradient was inf/NaN
  };

  void lazy_init(const at::Device& device);

  GradScalerOptions options_;
  at::Tensor scale_;           // float32 scalar
  at::Tensor growth_tracker_;  // int32 scalar
  std::map<const torch::optim::Optimizer*, PerOptimizer> per_optimizer_;
};

}  // namespace wavetrain
