// Dropout whose mask comes from a counter-based hash instead of ATen's bernoulli_.
//
// Why: ATen's CPU bernoulli_ was the second-largest cost of the transducer's training step after
// the matrix products (14% of a single-threaded step, profiled with PyTorch 2.11). Here each
// element's keep/drop is a hash of (seed, element index): one cheap pass, vectorisable, and the
// same mask whichever thread makes which part of it. The seed comes from next_random_seed()
// (trainer/parallel_parts.h): the default CPU generator, or the batch part's own stream when parts
// of a batch train at once, so runs stay reproducible and resume exactly.
//
// Semantics are torch.nn.Dropout's: in training, each element is zeroed with probability p and the
// rest are scaled by 1 / (1 - p); in evaluation, or with p = 0, the input is returned. Off the CPU
// (CUDA, MPS) it is ATen's dropout.
#pragma once

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

namespace wavetrain::experiments {

// The mask: float32 [numel] on the CPU, 1 / (1 - p) where kept and 0 where dropped; element j is
// dropped when the hash of (seed, j), as a uniform 32-bit number, is below p x 2^32.
at::Tensor dropout_mask(int64_t numel, double p, uint64_t seed);

// x in training mode (see above). p in [0, 1).
at::Tensor dropout(const at::Tensor& x, double p);

class DropoutImpl : public torch::nn::Module {
 public:
  explicit DropoutImpl(double p);
  at::Tensor forward(const at::Tensor& x);
  double p() const { return p_; }

 private:
  double p_;
};
TORCH_MODULE(Dropout);

}  // namespace wavetrain::experiments
