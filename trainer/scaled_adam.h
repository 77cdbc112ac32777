// ScaledAdam (optimizer.name=scaled_adam): the optimizer of icefall's Zipformer recipes (Povey et
// al., "Zipformer", ICLR 2024, section 4), equal to the definition in icefall's
// egs/librispeech/ASR/zipformer/optim.py on the same inputs (tests/python/scaled_adam_reference.py
// is an independent Python statement of it; ScaledAdam.EqualsThePythonReference compares).
//
// Per parameter p (a scalar: numel 1; otherwise a tensor, with r = its RMS, remeasured every
// size_update_period steps), at its step t (0-based), with g its gradient:
//   v = beta2 v + (1 - beta2) g^2;  v' = v / (1 - beta2^(t+1)) while that divisor is < 0.99, else v
//   d = -lr' g / (sqrt(v') + eps)        lr' = lr x scalar_lr_scale for scalars, lr for tensors
//   tensors: d *= max(r, param_min_rms); and every size_update_period steps (t % P == P - 1,
//     t > 0) the scale of p takes a step of its own, an Adam step on sum(p * g) over the period:
//       s = beta2^P s + (1 - beta2^P) mean_k(c_k^2),  c_k = sum(p * g) at each step of the period
//       step = -lr x scalar_lr_scale x sqrt(1 - beta2^(P (t+1)/P)) x sum_k c_k / (sqrt(s) + eps),
//       0 where r < param_min_rms, clamped to [-0.1, 0.1] and to at most (param_max_rms - r) / r;
//       d += step x p
//   m = beta1 m + (1 - beta1) d  (no bias correction);  p += m;  scalars clamped to +-scalar_max.
// Gradient clipping (clipping_scale > 0), per parameter group: the norm of the gradients, each
// tensor's scaled by its r (scalars' by scalar_lr_scale), is recorded every step; at steps 10, 20,
// 40 and every clipping_update_period (100) the threshold becomes clipping_scale x the median of the
// recorded norms (x 2 at the early steps); a step whose norm is above it has its gradients scaled
// down to it (and zeroed if the norm is not finite).
//
// A parameter without a gradient is updated as if its gradient were zero (as icefall does). State
// (per parameter: step, exp_avg_sq, delta, param_rms, scale_grads, scale_exp_avg_sq; per group:
// the clipping record) goes into checkpoints (CheckpointedOptimizer) and resumes exactly.
#pragma once

#include <torch/optim/optimizer.h>

#include <optional>
#include <string>
#include <vector>

#include "trainer/checkpoint.h"

namespace wavetrain {

struct ScaledAdamOptions : public torch::optim::OptimizerCloneableOptions<ScaledAdamOptions> {
  ScaledAdamOptions(double lr = 0.045) : lr_(lr) {}
  TORCH_ARG(double, lr);
  TORCH_ARG(double, clipping_scale) = 2.0;  // <= 0: no clipping
  TORCH_ARG(double, beta1) = 0.9;
  TORCH_ARG(double, beta2) = 0.98;
  TORCH_ARG(double, scalar_lr_scale) = 0.1;
  TORCH_ARG(double, eps) = 1e-8;
  TORCH_ARG(double, param_min_rms) = 1e-5;
  TORCH_ARG(double, param_max_rms) = 3.0;
  TORCH_ARG(double, scalar_max) = 10.0;
  TORCH_ARG(int64_t, size_update_period) = 4;
  TORCH_ARG(int64_t, clipping_update_period) = 100;

 public:
  double get_lr() const override { return lr(); }
  void set_lr(const double lr) override { this->lr(lr); }
  // Throws std::invalid_argument naming the option (as its optimizer.* key) and the rule.
  void validate() const;
};

class ScaledAdam : public torch::optim::Optimizer, public CheckpointedOptimizer {
 public:
  ScaledAdam(std::vector<torch::optim::OptimizerParamGroup> groups, ScaledAdamOptions defaults);
  at::Tensor step(LossClosure closure = nullptr) override;

  std::string type() const override { return "scaled_adam"; }
  serialization::Value state_value() override;
  void load_state_value(const serialization::Value& state, const std::string& source) override;

  // The gradient scale of each group's last step (1: not clipped), for logs and tests.
  const std::vector<double>& last_clipping_scales() const { return last_clipping_scales_; }

 private:
  struct ParamState {
    int64_t step = 0;
    at::Tensor exp_avg_sq, delta;                           // like the parameter
    at::Tensor param_rms, scale_grads, scale_exp_avg_sq;    // tensors only: [], [P], []
  };
  struct GroupState {
    at::Tensor model_norms;  // [clipping_update_period]
    std::optional<double> threshold;
    int64_t num_clipped = 0;
  };
  double clipping_scale(size_t group_index);
  at::Tensor update(const ScaledAdamOptions& o, const at::Tensor& p, const at::Tensor& grad, ParamState& s);

  std::vector<std::vector<ParamState>> states_;  // [group][parameter]
  std::vector<GroupState> groups_;
  std::vector<double> last_clipping_scales_;
};

}  // namespace wavetrain
