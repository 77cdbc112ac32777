// Adam with a fused update (fused_adam.h).
#include "trainer/fused_adam.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "trainer/torch_compat.h"

namespace wavetrain {
namespace {

// One parameter's update: its tensors' data and the step's scalars.
struct Update {
  float *p, *m, *v;
  const float* g;
  int64_t n;
  // 1 - beta is taken in double, then rounded, as ATen rounds the scalar it is given: 1 - (float)0.999
  // would be 1.3e-5 off.
  float beta1, one_minus_beta1, beta2, one_minus_beta2, weight_decay, rsqrt_bc2, eps, step_size;
};

bool fusable(const at::Tensor& p, const at::Device& device) {
  return p.device() == device && p.scalar_type() == at::kFloat && p.is_contiguous() && !p.grad().is_sparse() &&
         p.grad().scalar_type() == at::kFloat && p.grad().device() == device;
}

torch::optim::AdamParamState& adam_state(torch::optim::Optimizer& o, const at::Tensor& p) {
  auto& states = o.state();
  const auto key = compat::optimizer_state_key(p);
  if (states.find(key) == states.end()) {  // as Adam::step creates it
    auto s = std::make_unique<torch::optim::AdamParamState>();
    s->step(0);
    s->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
    s->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
    states[key] = std::move(s);
  }
  return static_cast<torch::optim::AdamParamState&>(*states[key]);
}

}  // namespace

at::Tensor FusedAdam::step(LossClosure closure) {
  // The device every parameter with a gradient is on (CPU when none has one).
  at::Device device(at::kCPU);
  for (const auto& group : param_groups())
    for (const at::Tensor& p : group.params())
      if (p.grad().defined()) device = p.device();
  bool all_fusable = device.is_cpu() || device.is_cuda();
  for (const auto& group : param_groups())
    for (const at::Tensor& p : group.params())
      if (p.grad().defined()) all_fusable = all_fusable && fusable(p, device);
  for (const auto& group : param_groups()) all_fusable = all_fusable && !static_cast<const torch::optim::AdamOptions&>(group.options()).amsgrad();
  if (!all_fusable) return Adam::step(closure);

  at::Tensor loss;
  if (closure) {
    c10::AutoGradMode grad(true);
    loss = closure();
  }
  c10::AutoGradMode no_grad(false);
  if (path_ == Path::kAtenKernel || device.is_cuda()) {
    step_with_aten_kernel();
    return loss;
  }
  std::vector<Update> updates;
  std::vector<at::Tensor> contiguous_grads;  // kept alive for the loop
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    for (at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& s = adam_state(*this, p);
      s.step(s.step() + 1);
      const double beta1 = std::get<0>(o.betas()), beta2 = std::get<1>(o.betas());
      const double bc1 = 1 - std::pow(beta1, static_cast<double>(s.step())), bc2 = 1 - std::pow(beta2, static_cast<double>(s.step()));
      contiguous_grads.push_back(p.grad().contiguous());
      updates.push_back({p.data_ptr<float>(), s.exp_avg().data_ptr<float>(), s.exp_avg_sq().data_ptr<float>(),
                         contiguous_grads.back().data_ptr<float>(), p.numel(), static_cast<float>(beta1), static_cast<float>(1 - beta1),
                         static_cast<float>(beta2), static_cast<float>(1 - beta2),
                         static_cast<float>(o.weight_decay()), static_cast<float>(1 / std::sqrt(bc2)), static_cast<float>(o.eps()),
                         static_cast<float>(o.lr() / bc1)});
    }
  }
  // All parameters' elements as one index range: first[i] is where update i starts.
  std::vector<int64_t> first(updates.size() + 1, 0);
  for (size_t i = 0; i < updates.size(); ++i) first[i + 1] = first[i] + updates[i].n;
  at::parallel_for(0, first.back(), 1 << 15, [&](int64_t begin, int64_t end) {
    size_t i = static_cast<size_t>(std::upper_bound(first.begin(), first.end(), begin) - first.begin()) - 1;
    for (int64_t at_ = begin; at_ < end; ++i) {
      const Update& u = updates[i];
      const int64_t lo = at_ - first[i], hi = std::min(end, first[i + 1]) - first[i];
      for (int64_t j = lo; j < hi; ++j) {
        const float g = u.weight_decay != 0 ? u.g[j] + u.weight_decay * u.p[j] : u.g[j];
        const float m = u.m[j] * u.beta1 + u.one_minus_beta1 * g;
        const float v = u.v[j] * u.beta2 + u.one_minus_beta2 * g * g;
        u.m[j] = m;
        u.v[j] = v;
        u.p[j] -= u.step_size * m / (std::sqrt(v) * u.rsqrt_bc2 + u.eps);
      }
      at_ = first[i] + hi;
    }
  });
  return loss;
}

// One at::_fused_adam_ call per (group, step count): the kernel takes the group's hyperparameters as
// scalars and each parameter's step count as a float tensor on the parameters' device, which it
// only reads (bias corrections); the counts are kept, as Adam keeps them, in AdamParamState.
void FusedAdam::step_with_aten_kernel() {
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    std::map<int64_t, std::vector<torch::optim::AdamParamState*>> by_step;
    std::map<int64_t, std::vector<at::Tensor>> params_by_step;
    for (at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& s = adam_state(*this, p);
      s.step(s.step() + 1);
      by_step[s.step()].push_back(&s);
      params_by_step[s.step()].push_back(p);
    }
    for (auto& [step, states] : by_step) {
      const std::vector<at::Tensor>& params = params_by_step[step];
      std::vector<at::Tensor> grads, exp_avgs, exp_avg_sqs;
      for (size_t i = 0; i < params.size(); ++i) {
        grads.push_back(params[i].grad());
        exp_avgs.push_back(states[i]->exp_avg());
        exp_avg_sqs.push_back(states[i]->exp_avg_sq());
      }
      const at::Tensor count = at::full({}, static_cast<double>(step), params[0].options().requires_grad(false));
      const std::vector<at::Tensor> steps(params.size(), count);
      at::_fused_adam_(params, grads, exp_avgs, exp_avg_sqs, /*max_exp_avg_sqs=*/{}, steps, o.lr(), std::get<0>(o.betas()),
                       std::get<1>(o.betas()), o.weight_decay(), o.eps(), /*amsgrad=*/false, /*maximize=*/false);
    }
  }
}

}  // namespace wavetrain
