// The reducer engine of gradient_sync.h: c10d::Reducer, the C++ engine under PyTorch's
// DistributedDataParallel, driven the way DDP's Python wrapper drives it; and the choice of engine.
//
// What the Reducer does, and wavetrain relies on (c10d's reducer.cpp, 2.11):
// - it hooks each parameter's gradient accumulator; a hook that fires while it expects hooks (from
//   prepare_for_backward until the step's end) copies the accumulated .grad, divided by the world
//   size, into its bucket's flat tensor; a full bucket is all-reduced (sum) in bucket order;
// - when the last bucket has been launched it queues a callback on the autograd engine that waits
//   for every bucket and copies the means back into .grad, so the backward returns with them;
// - rebuild_buckets(), called before the second step's backward, re-buckets the parameters in the
//   order their gradients came in (rank 0's order, broadcast);
// - with find_unused_parameters, prepare_for_backward walks the graph from the loss: parameters not
//   in it count as ready at once, and one unused on every rank keeps its .grad untouched. Without
//   it, a parameter that gets no gradient leaves the step unfinished (check_finalized throws).
#include "trainer/gradient_sync.h"

#include <stdexcept>

#include "trainer/distributed.h"
#include "trainer/gradient_overlap.h"
#include "trainer/torch_compat.h"

#if WAVETRAIN_HAS_C10D_REDUCER
#include <gloo/common/error.h>
#include <torch/csrc/distributed/c10d/logger.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <algorithm>
#include <unordered_map>
#endif

namespace wavetrain {

#if WAVETRAIN_HAS_C10D_REDUCER

namespace {

class ReducerGradientSync : public GradientSync {
 public:
  ReducerGradientSync(ProcessGroup& group, std::vector<at::Tensor> params, const std::vector<std::string>& names,
                      const GradientSyncOptions& o)
      : params_(std::move(params)), find_unused_(o.find_unused_parameters) {
    if (params_.empty()) throw std::invalid_argument("trainer.ddp_engine=reducer: the model has no trainable parameters");
    // Buckets as DDP's constructor makes them: over the parameters in registration order, the first
    // bucket capped at 1 MiB (unless unused parameters are searched for), then the list reversed so
    // that the last layers, whose gradients come first, are in bucket 0.
    const size_t first = std::min<size_t>(o.bucket_bytes, static_cast<size_t>(c10d::kDefaultFirstBucketBytes));
    const std::vector<size_t> limits = find_unused_ ? std::vector<size_t>{o.bucket_bytes} : std::vector<size_t>{first, o.bucket_bytes};
    auto [indices, per_bucket_limits] = c10d::compute_bucket_assignment_by_size(params_, limits, std::vector<bool>(params_.size(), false));
    std::reverse(indices.begin(), indices.end());
    std::reverse(per_bucket_limits.begin(), per_bucket_limits.end());
    buckets_ = static_cast<int64_t>(indices.size());
    std::unordered_map<size_t, std::string> index_names;
    for (size_t i = 0; i < names.size() && i < params_.size(); ++i) index_names[i] = names[i];
    reducer_ = std::make_shared<c10d::Reducer>(
        params_, std::move(indices), group.c10d_group(), std::vector<bool>(params_.size(), false),
        static_cast<int64_t>(o.bucket_bytes), find_unused_, /*gradient_as_bucket_view=*/false, std::move(index_names),
        static_cast<int64_t>(first), /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
        std::vector<int64_t>(per_bucket_limits.begin(), per_bucket_limits.end()));
    // The Reducer reports through a Logger (a weak pointer it dereferences in some paths).
    logger_ = std::make_shared<c10d::Logger>(reducer_);
    reducer_->set_logger(logger_);
  }

  void arm() override {
    armed_ = true;
    backward_ran_ = false;
    try {
      reducer_->prepare_for_forward();
      reducer_->rebuild_buckets();  // after the first step: a broadcast of rank 0's bucket order
    } catch (const c10::DistError& e) {
      collective_failed("bucket rebuild", e);
    }
  }

  void backward(const at::Tensor& loss) override {
    if (!armed_) return loss.backward();
    reducer_->prepare_for_backward(find_unused_ ? std::vector<at::Tensor>{loss} : std::vector<at::Tensor>{});
    backward_ran_ = true;
    run_backward(loss);
  }

  void finish() override {
    if (!armed_) return;
    armed_ = false;
    if (!backward_ran_) {
      // A rank that skipped the window's last backward (a non-finite loss) still has to launch every
      // bucket, in order, with the others. A backward of zero times each parameter marks each one
      // ready and adds zeros to .grad (the trainer then skips the step on every rank anyway). With
      // find_unused_parameters, parameters without a gradient yet stay out of it, as unused.
      at::Tensor zero;
      for (const at::Tensor& p : params_) {
        if (find_unused_ && !p.grad().defined()) continue;
        const at::Tensor term = p.sum() * 0;
        zero = zero.defined() ? zero + term : term;
      }
      if (!zero.defined()) zero = params_.front().sum() * 0;
      reducer_->prepare_for_backward(find_unused_ ? std::vector<at::Tensor>{zero} : std::vector<at::Tensor>{});
      run_backward(zero);
    }
    try {
      reducer_->check_finalized();
    } catch (const c10::Error& e) {
      // Every rank runs the same model, so every rank finds this; rank 0 says it.
      std::string msg = e.what_without_backtrace();
      throw RankZeroReportsError(
          "trainer.ddp_engine=reducer: some parameters got no gradient in this step, and c10d's Reducer waits for "
          "every one (set trainer.ddp_find_unused_parameters=true, or trainer.ddp_engine=hooks, for a model with "
          "parameters the loss does not always use). c10d: " + msg.substr(0, msg.find('\n')));
    }
  }

  const char* engine() const override { return "reducer"; }
  int64_t buckets() const override { return buckets_; }

 private:
  // The backward, with the Reducer's collectives waited for in the autograd engine's final callback:
  // a peer that stopped surfaces here, as Gloo's I/O error (a lost connection, a timeout) or c10d's
  // distributed error (NCCL).
  static void run_backward(const at::Tensor& loss) {
    try {
      loss.backward();
    } catch (const ::gloo::Exception& e) {
      collective_failed("gradient all-reduce", e);
    } catch (const c10::DistError& e) {
      collective_failed("gradient all-reduce", e);
    }
  }

  std::vector<at::Tensor> params_;
  bool find_unused_ = false;
  int64_t buckets_ = 0;
  bool armed_ = false, backward_ran_ = false;
  std::shared_ptr<c10d::Reducer> reducer_;
  std::shared_ptr<c10d::Logger> logger_;
};

}  // namespace

bool c10d_reducer_built() { return true; }

#else

bool c10d_reducer_built() { return false; }

#endif

std::string gradient_sync_engine_problem(const std::string& engine) {
  if (engine != "auto" && engine != "reducer" && engine != "hooks") return "expected auto, reducer (c10d's, in builds that ship it) or hooks";
  if (engine == "reducer" && !c10d_reducer_built())
    return "this build's LibTorch " + compat::torch_version() +
           " does not ship c10d's Reducer headers (the PyPI torch 2.11+ build does); use auto or hooks";
  return "";
}

std::unique_ptr<GradientSync> make_gradient_sync(ProcessGroup& group, std::vector<at::Tensor> params,
                                                 std::vector<std::string> names, const GradientSyncOptions& options) {
  if (const std::string problem = gradient_sync_engine_problem(options.engine); !problem.empty())
    throw std::invalid_argument("trainer.ddp_engine=" + options.engine + ": " + problem);
#if WAVETRAIN_HAS_C10D_REDUCER
  if (options.engine != "hooks") return std::make_unique<ReducerGradientSync>(group, std::move(params), names, options);
#endif
  static_cast<void>(names);  // the hooks engine names no parameter in its errors
  return std::make_unique<OverlappedGradientAverage>(group, std::move(params), options.bucket_bytes);
}

}  // namespace wavetrain
