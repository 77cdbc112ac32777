// Adam with one pass over all parameters per step: torch::optim::Adam's algorithm, options and
// per-parameter state (so checkpoints, and PyTorch reading them, see an Adam), with a fused update.
//
// Why: torch::optim::Adam runs about seven tensor operators per parameter; with a small model that
// is hundreds of operators a step, each starting ATen's thread team, which with the passive OpenMP
// wait policy (docs/threads.md) means waking a sleeping thread each time: 17 ms of a 130 ms ASR
// step with LibTorch 2.11. Here every parameter's update runs in one parallel loop: one wake-up.
//
// Per element, as PyTorch's Adam (amsgrad off): with t the parameter's step count after this one,
//   g += weight_decay x p;  m = beta1 m + (1 - beta1) g;  v = beta2 v + (1 - beta2) g^2
//   p -= lr / (1 - beta1^t) x m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
// in float, like ATen's in-place operators (results agree with torch::optim::Adam to rounding).
// Parameters that are not float32 contiguous CPU tensors, and amsgrad, take torch::optim::Adam's
// own step.
#pragma once

#include <torch/optim/adam.h>

#include <vector>

namespace wavetrain {

class FusedAdam : public torch::optim::Adam {
 public:
  FusedAdam(std::vector<at::Tensor> params, torch::optim::AdamOptions options) : Adam(std::move(params), options) {}
  FusedAdam(std::vector<torch::optim::OptimizerParamGroup> groups, torch::optim::AdamOptions options)
      : Adam(std::move(groups), options) {}
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace wavetrain
