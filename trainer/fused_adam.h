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
//
// On CUDA the same update is ATen's multi-tensor kernel (at::_fused_adam_, what Python's
// torch.optim.Adam(fused=True) runs): a handful of launches a step instead of about seven per
// parameter, which on an H200 made the amp WaveNet's training step launch-bound. Its step counts
// are device tensors; parameters that share a count share one.
//
// Anything else (other dtypes, sparse gradients, mixed devices, amsgrad) takes torch::optim::Adam's
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

  // Which update runs: kAuto takes the CPU loop for CPU parameters and ATen's fused kernel for CUDA
  // ones. Tests force kAtenKernel on CPU parameters (LibTorch 2.4+ has that kernel on the CPU too).
  enum class Path { kAuto, kAtenKernel };
  void set_path(Path path) { path_ = path; }

 private:
  void step_with_aten_kernel();
  Path path_ = Path::kAuto;
};

}  // namespace wavetrain
