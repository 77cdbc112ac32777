// Checks, dispatch and autograd for the mutual-information recursion (mutual_information.h).
#include "losses/mutual_information.h"

#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>

namespace wavetrain::losses {
namespace {

[[noreturn]] void fail(const std::string& message) {
  throw std::invalid_argument("mutual_information_recursion: " + message);
}

// Shapes and boundaries as k2 requires them; returns the boundary as int64 [B][4] on the CPU.
at::Tensor checked_boundary(const at::Tensor& px, const at::Tensor& py, const std::optional<at::Tensor>& boundary) {
  if (px.dim() != 3) fail("px must be [B][S][T+1] or [B][S][T], got " + c10::str(px.sizes()));
  if (py.dim() != 3) fail("py must be [B][S+1][T], got " + c10::str(py.sizes()));
  const int64_t B = px.size(0), S = px.size(1), T1 = px.size(2), T = py.size(2);
  if (py.size(0) != B || py.size(1) != S + 1)
    fail("py must be [B][S+1][T] = [" + std::to_string(B) + "][" + std::to_string(S + 1) + "][T] for px " +
         c10::str(px.sizes()) + ", got " + c10::str(py.sizes()));
  if (T1 != T && T1 != T + 1)
    fail("px's last dimension must be T+1 (regular) or T (modified) with T = " + std::to_string(T) +
         " from py, got " + std::to_string(T1));
  if (px.scalar_type() != py.scalar_type())
    fail("px and py differ in dtype (" + std::string(c10::toString(px.scalar_type())) + " and " +
         c10::toString(py.scalar_type()) + ")");
  if (!at::isFloatingType(px.scalar_type())) fail("px and py must be floating point");
  if (px.device() != py.device()) fail("px and py are on different devices");
  if (!boundary) {
    at::Tensor all = at::zeros({B, 4}, at::kLong);
    all.select(1, 2).fill_(S);
    all.select(1, 3).fill_(T);
    return all;
  }
  const at::Tensor& b = *boundary;
  if (b.dim() != 2 || b.size(0) != B || b.size(1) != 4)
    fail("boundary must be [B][4] = [" + std::to_string(B) + "][4], got " + c10::str(b.sizes()));
  if (b.scalar_type() != at::kLong) fail("boundary must be int64, got " + std::string(c10::toString(b.scalar_type())));
  const at::Tensor host = b.to(at::kCPU).contiguous();
  const int64_t* v = host.data_ptr<int64_t>();
  for (int64_t i = 0; i < B; ++i) {
    const int64_t sb = v[4 * i], tb = v[4 * i + 1], se = v[4 * i + 2], te = v[4 * i + 3];
    const std::string item = "boundary[" + std::to_string(i) + "] = (" + std::to_string(sb) + ", " + std::to_string(tb) +
                             ", " + std::to_string(se) + ", " + std::to_string(te) + ")";
    if (!(0 <= sb && sb <= se && se <= S)) fail(item + " breaks 0 <= s_begin <= s_end <= S = " + std::to_string(S));
    if (!(0 <= tb && tb <= te && te <= T)) fail(item + " breaks 0 <= t_begin <= t_end <= T = " + std::to_string(T));
  }
  return host;
}

MiImplementation resolve(MiImplementation requested, const at::Device& device) {
  if (requested == MiImplementation::kAuto) {
    if (device.is_cpu()) return MiImplementation::kCpu;
#ifdef WAVETRAIN_LOSSES_WITH_CUDA
    if (device.is_cuda()) return MiImplementation::kCuda;
#endif
    return MiImplementation::kPortable;
  }
  if (requested == MiImplementation::kCpu && !device.is_cpu())
    fail("the CPU implementation was asked for tensors on " + device.str());
  if (requested == MiImplementation::kCuda) {
#ifdef WAVETRAIN_LOSSES_WITH_CUDA
    if (!device.is_cuda()) fail("the CUDA implementation was asked for tensors on " + device.str());
#else
    fail("the CUDA implementation was asked for, but this build has no CUDA");
#endif
  }
  return requested;
}

void run_kernel(MiImplementation which, const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary,
                at::Tensor& scores, at::Tensor& px_grad, at::Tensor& py_grad) {
  switch (which) {
    case MiImplementation::kCpu: return detail::mutual_information_cpu(px, py, boundary, scores, px_grad, py_grad);
#ifdef WAVETRAIN_LOSSES_WITH_CUDA
    case MiImplementation::kCuda:
      return detail::mutual_information_cuda(px, py, boundary.to(px.device()), scores, px_grad, py_grad);
#endif
    default: return detail::mutual_information_portable(px, py, boundary, scores, px_grad, py_grad);
  }
}

// Scores and, when any gradient is wanted, the occupation probabilities, computed together in the
// forward (as k2 does: the backward needs p, which the forward has). The backward only scales them
// by the incoming gradient, into new tensors, so that a second backward sees them unchanged.
struct MutualInformationFunction : public torch::autograd::Function<MutualInformationFunction> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& px,
                                                const at::Tensor& py, const at::Tensor& boundary, bool want_grad,
                                                MiImplementation which) {
    const at::Tensor x = px.contiguous(), y = py.contiguous();
    at::Tensor scores = at::empty({x.size(0)}, x.options());
    at::Tensor px_grad, py_grad;
    const bool grads = want_grad || px.requires_grad() || py.requires_grad();
    if (grads) {
      // The CPU kernel writes every entry; the others write only the boxes' entries.
      px_grad = which == MiImplementation::kCpu ? at::empty_like(x) : at::zeros_like(x);
      py_grad = which == MiImplementation::kCpu ? at::empty_like(y) : at::zeros_like(y);
    }
    run_kernel(which, x, y, boundary, scores, px_grad, py_grad);
    if (!grads) {
      px_grad = at::Tensor();
      py_grad = at::Tensor();
    }
    ctx->save_for_backward({px_grad, py_grad});
    // The outputs px_grad and py_grad never get a gradient; without this, autograd would make a
    // zero tensor of each one's size for every backward (a tenth of the CPU kernel's time).
    ctx->set_materialize_grads(false);
    if (grads) {
      ctx->mark_non_differentiable({px_grad, py_grad});
      return {scores, px_grad, py_grad};
    }
    return {scores};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const at::Tensor scale = grads[0].reshape({-1, 1, 1});
    // d loss / d score is all ones for a summed loss (k2's and icefall's reduction): then the saved
    // occupations are the gradients as they are, and a multiply that reads and writes two tensors of
    // [B][S][T] (a tenth of the CPU kernel's time at (32, 100, 500)) is skipped. Returning the saved
    // tensors is safe: autograd adds into a gradient in place only when nothing else holds it, and
    // this node (until it is released) and any caller of mutual_information_with_grad hold them.
    if (scale.device().is_cpu() && scale.numel() > 0 && at::equal(scale, at::ones_like(scale)))
      return {saved[0], saved[1], at::Tensor(), at::Tensor(), at::Tensor()};
    return {saved[0] * scale, saved[1] * scale, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

MutualInformation compute(const at::Tensor& px, const at::Tensor& py, const std::optional<at::Tensor>& boundary,
                          MiImplementation implementation, bool want_grad) {
  const at::Tensor b = checked_boundary(px, py, boundary);
  const MiImplementation which = resolve(implementation, px.device());
  // Half and bfloat16 run in float32 (the recursion adds hundreds of log-probs); results go back.
  const at::ScalarType type = px.scalar_type();
  const bool lifted = type == at::kHalf || type == at::kBFloat16;
  const at::Tensor x = lifted ? px.to(at::kFloat) : px, y = lifted ? py.to(at::kFloat) : py;
  const torch::autograd::variable_list out = MutualInformationFunction::apply(x, y, b, want_grad, which);
  MutualInformation r;
  r.scores = lifted ? out[0].to(type) : out[0];
  if (want_grad) {
    r.px_grad = lifted ? out[1].to(type) : out[1];
    r.py_grad = lifted ? out[2].to(type) : out[2];
  }
  return r;
}

}  // namespace

at::Tensor mutual_information_recursion(const at::Tensor& px, const at::Tensor& py,
                                        const std::optional<at::Tensor>& boundary, MiImplementation implementation) {
  return compute(px, py, boundary, implementation, false).scores;
}

MutualInformation mutual_information_with_grad(const at::Tensor& px, const at::Tensor& py,
                                               const std::optional<at::Tensor>& boundary,
                                               MiImplementation implementation) {
  return compute(px, py, boundary, implementation, true);
}

}  // namespace wavetrain::losses
