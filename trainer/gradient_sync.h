// Gradient averaging over the ranks from inside the backward pass, by one of two engines:
//   reducer  c10d's Reducer, the engine of PyTorch's DistributedDataParallel (trainer/ddp_reducer.cpp;
//            LibTorch builds that ship its headers: the PyPI 2.x wheel);
//   hooks    wavetrain's own gradient hooks (trainer/gradient_overlap.h; every build).
// Both bucket the gradients (the first bucket at most 1 MiB, then `bucket_bytes`), launch a bucket's
// all-reduce once the backward has made every gradient in it, in bucket order, and rebuild the
// buckets after the first step in the order rank 0's gradients came in.
//
// Per accumulation window (the trainer's calls; earlier backwards of the window only accumulate):
//   arm()            before the forward of the window's last batch;
//   backward(loss)   that batch's backward (any other backward: plain loss.backward() is the same);
//   finish()         after it, also on a rank that skipped that backward for a non-finite loss (its
//                    collectives still pair with the others'); then every parameter that has a
//                    gradient holds the mean over the ranks of the window's sums.
// A collective that fails because a peer stopped throws PeerLostError (distributed.h).
#pragma once

#include <ATen/ATen.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace wavetrain {

class ProcessGroup;

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual void arm() = 0;
  virtual void backward(const at::Tensor& loss) = 0;
  virtual void finish() = 0;
  virtual const char* engine() const = 0;  // "reducer" or "hooks"
  virtual int64_t buckets() const = 0;
};

struct GradientSyncOptions {
  std::string engine = "auto";  // trainer.ddp_engine: auto (reducer where built), reducer, hooks
  size_t bucket_bytes = 25u << 20;
  // trainer.ddp_find_unused_parameters, as DDP's find_unused_parameters: the reducer looks through
  // each step's graph for parameters the loss does not use (without it, such a parameter is an
  // error at the end of the step). The hooks engine always handles them.
  bool find_unused_parameters = false;
};

// True when this build has the reducer engine.
bool c10d_reducer_built();

// What is wrong with `engine` as a trainer.ddp_engine in this build (not a name, or the reducer where
// it is not built); empty when it can be used.
std::string gradient_sync_engine_problem(const std::string& engine);

// `params`: the trainable parameters, on the group's device; `names`: theirs, for error messages
// (may be empty). Throws std::invalid_argument for an engine with a problem (above).
std::unique_ptr<GradientSync> make_gradient_sync(ProcessGroup& group, std::vector<at::Tensor> params,
                                                 std::vector<std::string> names, const GradientSyncOptions& options);

}  // namespace wavetrain
