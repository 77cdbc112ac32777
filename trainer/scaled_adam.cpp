// ScaledAdam (scaled_adam.h).
#include "trainer/scaled_adam.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace wavetrain {
namespace {

using serialization::Value;

bool is_scalar(const at::Tensor& p) { return p.numel() == 1; }

// The RMS of a tensor, as a 0-dim tensor of its dtype.
at::Tensor rms(const at::Tensor& p) { return p.pow(2).mean().sqrt(); }

Value::Entry entry(const std::string& key, Value v) { return {Value::string(key), std::move(v)}; }

const Value& field(const Value& v, const std::string& key, const std::string& where) {
  const Value* f = v.find(key);
  if (!f) throw std::runtime_error(where + ": no '" + key + "'");
  return *f;
}

}  // namespace

void ScaledAdamOptions::validate() const {
  const auto require = [](bool ok, const std::string& what) {
    if (!ok) throw std::invalid_argument("optimizer." + what);
  };
  require(lr() >= 0, "lr must be >= 0");
  require(beta1() >= 0 && beta1() < 1, "beta1 must be in [0, 1)");
  require(beta2() > 0 && beta2() < 1, "beta2 must be in (0, 1)");
  require(beta1() <= beta2(), "beta1 must be <= beta2 (icefall's rule)");
  require(scalar_lr_scale() > 0, "scalar_lr_scale must be > 0");
  require(eps() > 0, "eps must be > 0");
  require(param_min_rms() > 0 && param_min_rms() < param_max_rms(), "param_min_rms must be > 0 and < param_max_rms");
  require(scalar_max() > 0, "scalar_max must be > 0");
  require(size_update_period() >= 1 && size_update_period() <= 1000000, "size_update_period must be in [1, 1000000]");
  require(clipping_update_period() >= 1 && clipping_update_period() <= 1000000, "clipping_update_period must be in [1, 1000000]");
}

ScaledAdam::ScaledAdam(std::vector<torch::optim::OptimizerParamGroup> groups, ScaledAdamOptions defaults)
    : Optimizer(std::move(groups), std::make_unique<ScaledAdamOptions>(defaults)) {
  defaults.validate();
  for (const auto& g : param_groups()) static_cast<const ScaledAdamOptions&>(g.options()).validate();
  states_.resize(param_groups().size());
  groups_.resize(param_groups().size());
  last_clipping_scales_.assign(param_groups().size(), 1.0);
}

// icefall's _get_clipping_scale: the factor this step's gradients are multiplied by.
double ScaledAdam::clipping_scale(size_t gi) {
  const auto& group = param_groups()[gi];
  const auto& o = static_cast<const ScaledAdamOptions&>(group.options());
  std::vector<ParamState>& states = states_[gi];
  if (o.clipping_scale() <= 0 || states.empty() || states[0].step == 0) return 1.0;
  const int64_t step = states[0].step;
  GroupState& g = groups_[gi];
  double sumsq = 0;
  for (size_t i = 0; i < group.params().size(); ++i) {
    const at::Tensor& p = group.params()[i];
    if (!p.grad().defined()) continue;  // a zero gradient adds nothing
    const at::Tensor grad = p.grad().to(at::kDouble);
    if (is_scalar(p)) sumsq += grad.pow(2).sum().item<double>() * o.scalar_lr_scale() * o.scalar_lr_scale();
    else sumsq += (grad * states[i].param_rms.to(at::kDouble)).pow(2).sum().item<double>();
  }
  const double norm = std::sqrt(sumsq);
  const int64_t period = o.clipping_update_period();
  if (!g.model_norms.defined()) g.model_norms = at::zeros({period}, at::kDouble);
  g.model_norms[step % period] = norm;
  // icefall's early estimates: steps 10, 20, 40 (those below the period), from the norms so far.
  const bool early = (step == 10 || step == 20 || step == 40) && step < period;
  if (step % period == 0 || early) {
    at::Tensor sorted = std::get<0>(g.model_norms.sort());
    if (early) sorted = sorted.narrow(0, period - step, step);  // the last `step`: the largest
    const int64_t n = sorted.numel();
    const double median = sorted[std::min(n - 1, (n / 4) * 2)].item<double>();
    if (std::isnan(median)) throw std::runtime_error("scaled_adam: too many gradients were not finite (the median norm is NaN)");
    g.threshold = o.clipping_scale() * median * (early ? 2.0 : 1.0);
    g.num_clipped = 0;
  }
  if (!g.threshold) return 1.0;
  double scale = std::min(1.0, *g.threshold / (norm + 1e-20));
  if (std::isnan(scale)) scale = 0.0;
  if (scale < 1.0) ++g.num_clipped;
  return scale;
}

// icefall's momentum_step(scaling_step(basic_step(...))): the change to p, with the state updated.
at::Tensor ScaledAdam::update(const ScaledAdamOptions& o, const at::Tensor& p, const at::Tensor& grad, ParamState& s) {
  const bool scalar = is_scalar(p);
  const int64_t t = s.step;
  // basic_step: Adam's second moment only.
  if (!s.exp_avg_sq.defined()) s.exp_avg_sq = at::zeros_like(p);
  s.exp_avg_sq.mul_(o.beta2()).addcmul_(grad, grad, 1 - o.beta2());
  const double correction = 1 - std::pow(o.beta2(), static_cast<double>(t + 1));
  const at::Tensor v = correction < 0.99 ? s.exp_avg_sq * (1.0 / correction) : s.exp_avg_sq;
  at::Tensor delta = grad * (-(scalar ? o.lr() * o.scalar_lr_scale() : o.lr())) / (v.sqrt() + o.eps());
  if (!scalar) {
    // scaling_step: the step in proportion to the parameter's RMS, and the RMS's own step.
    const int64_t period = o.size_update_period();
    if (!s.param_rms.defined()) {
      s.param_rms = rms(p);
      s.scale_exp_avg_sq = at::zeros_like(s.param_rms);
      s.scale_grads = at::zeros({period}, p.options());
    }
    s.scale_grads[t % period] = (p * grad).sum();
    const bool size_step = t % period == period - 1;
    if (size_step) s.param_rms.copy_(rms(p));
    delta.mul_(s.param_rms.clamp_min(o.param_min_rms()));
    if (size_step && t > 0) {
      const double beta2_corr = std::pow(o.beta2(), static_cast<double>(period));
      s.scale_exp_avg_sq.mul_(beta2_corr).add_(s.scale_grads.pow(2).mean(), 1 - beta2_corr);
      const int64_t size_steps = (t + 1) / period;
      const double bias = 1 - std::pow(beta2_corr, static_cast<double>(size_steps));
      at::Tensor scale_step =
          s.scale_grads.sum() * (-o.lr() * o.scalar_lr_scale() * std::sqrt(bias)) / (s.scale_exp_avg_sq.sqrt() + o.eps());
      scale_step = at::where(s.param_rms < o.param_min_rms(), at::zeros_like(scale_step), scale_step);
      scale_step = scale_step.clamp(-0.1, 0.1);
      scale_step = at::minimum(scale_step, (o.param_max_rms() - s.param_rms) / s.param_rms);
      delta.add_(p * scale_step);
    }
  }
  // momentum_step: beta1 momentum on the change itself, without bias correction.
  if (!s.delta.defined()) s.delta = at::zeros_like(p);
  s.delta.mul_(o.beta1()).add_(delta, 1 - o.beta1());
  return s.delta;
}

at::Tensor ScaledAdam::step(LossClosure closure) {
  at::Tensor loss;
  if (closure) {
    c10::AutoGradMode enable(true);
    loss = closure();
  }
  c10::AutoGradMode no_grad(false);
  for (size_t gi = 0; gi < param_groups().size(); ++gi) {
    auto& group = param_groups()[gi];
    const auto& o = static_cast<const ScaledAdamOptions&>(group.options());
    std::vector<ParamState>& states = states_[gi];
    if (states.size() != group.params().size()) states.resize(group.params().size());
    const double clip = clipping_scale(gi);
    last_clipping_scales_[gi] = clip;
    for (size_t i = 0; i < group.params().size(); ++i) {
      at::Tensor& p = group.params()[i];
      at::Tensor grad = p.grad().defined() ? p.grad() : at::zeros_like(p);
      if (clip == 0.0 && p.grad().defined()) p.grad().zero_();  // not finite: icefall drops the step's gradients
      if (clip != 1.0) grad = grad * clip;
      p.add_(update(o, p.detach(), grad, states[i]));
      if (is_scalar(p)) p.clamp_(-o.scalar_max(), o.scalar_max());
      ++states[i].step;
    }
  }
  return loss;
}

Value ScaledAdam::state_value() {
  std::vector<Value> groups;
  for (size_t gi = 0; gi < param_groups().size(); ++gi) {
    std::vector<Value> params;
    for (const ParamState& s : states_[gi]) {
      const auto tensor = [](const at::Tensor& t) { return t.defined() ? Value::tensor(t) : Value::none(); };
      params.push_back(Value::dict({entry("step", Value::integer(s.step)), entry("exp_avg_sq", tensor(s.exp_avg_sq)),
                                    entry("delta", tensor(s.delta)), entry("param_rms", tensor(s.param_rms)),
                                    entry("scale_grads", tensor(s.scale_grads)),
                                    entry("scale_exp_avg_sq", tensor(s.scale_exp_avg_sq))}));
    }
    const GroupState& g = groups_[gi];
    groups.push_back(Value::dict({entry("lr", Value::floating(param_groups()[gi].options().get_lr())),
                                  entry("model_norms", g.model_norms.defined() ? Value::tensor(g.model_norms) : Value::none()),
                                  entry("model_norm_threshold", g.threshold ? Value::floating(*g.threshold) : Value::none()),
                                  entry("num_clipped", Value::integer(g.num_clipped)), entry("params", Value::list(std::move(params)))}));
  }
  return Value::dict({entry("param_groups", Value::list(std::move(groups)))});
}

void ScaledAdam::load_state_value(const Value& state, const std::string& source) {
  const std::string where = source + ": optimizer (scaled_adam)";
  const std::vector<Value>& groups = field(state, "param_groups", where).items();
  if (groups.size() != param_groups().size())
    throw std::runtime_error(where + " has " + std::to_string(groups.size()) + " parameter groups, the run " +
                             std::to_string(param_groups().size()));
  std::vector<std::vector<ParamState>> states(groups.size());
  std::vector<GroupState> group_states(groups.size());
  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const auto& params = param_groups()[gi].params();
    const std::vector<Value>& saved = field(groups[gi], "params", where).items();
    if (saved.size() != params.size())
      throw std::runtime_error(where + " group " + std::to_string(gi) + " has " + std::to_string(saved.size()) + " parameters, the run " +
                               std::to_string(params.size()));
    for (size_t i = 0; i < saved.size(); ++i) {
      const std::string at_param = where + " group " + std::to_string(gi) + " parameter " + std::to_string(i);
      const auto tensor = [&](const char* name, std::optional<at::IntArrayRef> shape) {
        const Value& v = field(saved[i], name, at_param);
        if (v.kind() == Value::Kind::None) return at::Tensor();
        const at::Tensor& t = v.as_tensor();
        if (shape && !t.sizes().equals(*shape))
          throw std::runtime_error(at_param + ": '" + name + "' has shape " + c10::str(t.sizes()) + ", the parameter " + c10::str(*shape));
        return t.to(params[i].device(), params[i].scalar_type()).clone();
      };
      ParamState s;
      s.step = field(saved[i], "step", at_param).as_int();
      s.exp_avg_sq = tensor("exp_avg_sq", params[i].sizes());
      s.delta = tensor("delta", params[i].sizes());
      s.param_rms = tensor("param_rms", std::nullopt);
      s.scale_grads = tensor("scale_grads", std::nullopt);
      s.scale_exp_avg_sq = tensor("scale_exp_avg_sq", std::nullopt);
      states[gi].push_back(std::move(s));
    }
    const Value& norms = field(groups[gi], "model_norms", where);
    if (norms.kind() != Value::Kind::None) group_states[gi].model_norms = norms.as_tensor().to(at::kDouble).clone();
    const Value& threshold = field(groups[gi], "model_norm_threshold", where);
    if (threshold.kind() != Value::Kind::None) group_states[gi].threshold = threshold.as_float();
    group_states[gi].num_clipped = field(groups[gi], "num_clipped", where).as_int();
    param_groups()[gi].options().set_lr(field(groups[gi], "lr", where).as_float());
  }
  states_ = std::move(states);
  groups_ = std::move(group_states);
}

}  // namespace wavetrain
