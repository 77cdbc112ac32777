// Gradient averaging overlapped with the backward pass (trainer.ddp_engine=hooks; gradient_sync.h):
// a bucket's all-reduce starts as soon as the backward pass has produced every gradient in it, while
// autograd goes on computing the rest, instead of all buckets after the whole backward
// (ProcessGroup::average, trainer.ddp_overlap=false).
// This is what DDP's Reducer does (ddp_reducer.cpp); the Reducer's headers are not shipped with
// Debian's LibTorch 1.13, so there wavetrain does it with a hook on each parameter.
//
// Buckets: one dtype per bucket, at most `bucket_bytes` each, the same on every rank, so every rank
// issues the same collectives in the same order: bucket k is launched only after buckets 0..k-1, as
// the Reducer does, whatever order the hooks fire in. For the first step the parameters go in
// reverse registration order (a model's last layers get their gradients first); after it, as the
// Reducer rebuilds its buckets, in the order rank 0's gradients came in, with the parameters that
// got none (unused ones, which would hold back every bucket after theirs) last.
//
// Per step:
//   arm()     before the last backward of an accumulation window (earlier backwards only accumulate);
//   (hooks)   a hook sees the gradient g about to be added to .grad; the bucket gets .grad + g (the
//             window's sum), and launches when full;
//   finish()  after the backward: a parameter whose hook did not fire (unused this step, or a
//             backward skipped for a non-finite loss) contributes its .grad as it stands (zeros when
//             it has none); the remaining buckets launch, all are awaited, and each parameter that
//             has a .grad gets the mean over the ranks. The result equals ProcessGroup::average's.
//
// Not armed, the hooks do nothing (trainer.cpu_batch_parts trains parts on threads through their own
// gradients: the trainer then averages after the backward instead).
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <memory>
#include <vector>

#include "trainer/gradient_sync.h"

namespace wavetrain {

class ProcessGroup;

class OverlappedGradientAverage : public GradientSync {
 public:
  // `params`: the trainable parameters (requires_grad), on the group's device.
  OverlappedGradientAverage(ProcessGroup& group, std::vector<at::Tensor> params, size_t bucket_bytes = 25u << 20);
  ~OverlappedGradientAverage() override;
  OverlappedGradientAverage(const OverlappedGradientAverage&) = delete;
  OverlappedGradientAverage& operator=(const OverlappedGradientAverage&) = delete;

  void arm() override;
  void backward(const at::Tensor& loss) override { loss.backward(); }
  void finish() override;
  const char* engine() const override { return "hooks"; }
  int64_t buckets() const override;
  // Buckets launched from hooks during the last armed backward (the rest waited for finish()).
  int64_t launched_during_backward() const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // shared with the hooks, which may outlive nothing but need it
};

}  // namespace wavetrain
