// Adam with a fused update (fused_adam.h).
#include "trainer/fused_adam.h"

#include <ATen/Parallel.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>

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

bool fusable(const at::Tensor& p) {
  return p.device().is_cpu() && p.scalar_type() == at::kFloat && p.is_contiguous() && !p.grad().is_sparse() &&
         p.grad().scalar_type() == at::kFloat && p.grad().device().is_cpu();
}

}  // namespace

at::Tensor FusedAdam::step(LossClosure closure) {
  bool all_fusable = true;
  for (const auto& group : param_groups())
    for (const at::Tensor& p : group.params())
      if (p.grad().defined()) all_fusable = all_fusable && fusable(p);
  for (const auto& group : param_groups()) all_fusable = all_fusable && !static_cast<const torch::optim::AdamOptions&>(group.options()).amsgrad();
  if (!all_fusable) return Adam::step(closure);

  at::Tensor loss;
  if (closure) {
    c10::AutoGradMode grad(true);
    loss = closure();
  }
  c10::AutoGradMode no_grad(false);
  std::vector<Update> updates;
  std::vector<at::Tensor> contiguous_grads;  // kept alive for the loop
  for (auto& group : param_groups()) {
    const auto& o = static_cast<const torch::optim::AdamOptions&>(group.options());
    for (at::Tensor& p : group.params()) {
      if (!p.grad().defined()) continue;
      auto& states = state();
      const auto key = compat::optimizer_state_key(p);
      if (states.find(key) == states.end()) {  // as Adam::step creates it
        auto s = std::make_unique<torch::optim::AdamParamState>();
        s->step(0);
        s->exp_avg(at::zeros_like(p, at::MemoryFormat::Preserve));
        s->exp_avg_sq(at::zeros_like(p, at::MemoryFormat::Preserve));
        states[key] = std::move(s);
      }
      auto& s = static_cast<torch::optim::AdamParamState&>(*states[key]);
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

}  // namespace wavetrain
