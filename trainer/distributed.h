// Data-parallel training on PyTorch's c10d: Gloo on CPU, NCCL on CUDA (when this LibTorch has CUDA;
// one NCCL rank has run on an H200, docs/gpu.md). DDP's Reducer is not usable from C++ with Debian's
// LibTorch 1.13 (its headers are not shipped), so wavetrain does what it does itself: parameters
// and buffers are broadcast from rank 0 once, and gradients are averaged with an all-reduce over
// flat buckets (one collective per ~25 MiB instead of one per tensor), either after the backward
// (average) or from the backward's hooks as buckets fill (gradient_overlap.h, start_sum).
//
// Every collective has a timeout, and Gloo fails at once when a peer's socket closes: a rank that
// dies makes the others throw instead of hanging.
#pragma once

#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "trainer/distributed_env.h"

namespace c10d {
class ProcessGroup;
}

namespace wavetrain {

// An error that rank 0 reports as well, so that the other ranks need not say it again (cli/main.cpp
// keeps them quiet when `train trainer.devices=N` started them): a collective or store lookup that
// failed because another rank stopped (PeerLostError), or a resumed checkpoint that does not fit
// the model (every rank reads the same file with the same config).
class RankZeroReportsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class PeerLostError : public RankZeroReportsError {
 public:
  using RankZeroReportsError::RankZeroReportsError;
};

// Throws PeerLostError for a collective `what` that failed with `e` (c10d's message, first line).
[[noreturn]] void collective_failed(const char* what, const std::exception& e);

class ProcessGroup {
 public:
  // Joins the group: rank 0 serves the rendezvous store unless the launcher's agent already does.
  // `device` picks the backend: NCCL for a CUDA device, Gloo otherwise.
  ProcessGroup(const DistributedEnv& env, std::chrono::milliseconds timeout, const at::Device& device);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Overwrites `tensors` with rank 0's values.
  void broadcast_from_rank0(const std::vector<at::Tensor>& tensors);
  // Replaces every tensor with its mean over the ranks, in buckets of at most `bucket_bytes`.
  void average(const std::vector<at::Tensor>& tensors, size_t bucket_bytes = 25u << 20);
  // Starts a sum of `flat` (contiguous, on the group's device) over the ranks in place; the returned
  // function waits for it (and throws PeerLostError if it failed). Collectives pair up across ranks
  // in the order they are started.
  std::function<void()> start_sum(const at::Tensor& flat);
  const at::Device& device() const;
  // The group as c10d's own ProcessGroup, for c10d's Reducer (ddp_reducer.cpp).
  c10::intrusive_ptr<c10d::ProcessGroup> c10d_group() const;
  void barrier();
  // Shares a value through the rendezvous store (rank 0 publishes the run directory, say).
  void set(const std::string& key, const std::string& value);
  std::string get(const std::string& key);  // waits until the key is set, up to the timeout

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace wavetrain
