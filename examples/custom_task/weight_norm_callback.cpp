// The weight_norm callback; see weight_norm_callback.h.
#include "weight_norm_callback.h"

#include <torch/torch.h>

#include <cmath>

namespace custom_task {
namespace {

using wavetrain::serialization::Value;

class WeightNorm : public wavetrain::Callback {
 public:
  explicit WeightNorm(double warn_above) : warn_above_(warn_above) {}

  std::string name() const override { return "weight_norm"; }

  void on_train_batch_end(wavetrain::FitContext& ctx, wavetrain::TrainStep& step) override {
    if (!step.log) return;
    double squares = 0;
    for (const at::Tensor& p : ctx.task.model().parameters()) squares += p.detach().pow(2).sum().item<double>();
    const double norm = std::sqrt(squares);
    step.logged.emplace_back("weight_norm", norm);
    if (norm > warn_above_ && !(largest_ > warn_above_))
      ctx.log("weight_norm: " + std::to_string(norm) + " is above weight_norm.warn_above " + std::to_string(warn_above_) +
              " at step " + std::to_string(ctx.step));
    largest_ = std::isnan(largest_) ? norm : std::max(largest_, norm);
  }

  Value state_dict() const override {
    return Value::dict({{Value::string("largest"), std::isnan(largest_) ? Value::none() : Value::floating(largest_)}});
  }
  void load_state_dict(const Value& state) override {
    const Value* largest = state.find("largest");
    largest_ = largest && !largest->is_none() ? largest->as_float() : NAN;
  }

 private:
  const double warn_above_;
  double largest_ = NAN;  // the largest norm logged so far in the run
};

}  // namespace

std::unique_ptr<wavetrain::Callback> make_weight_norm_callback(const wavetrain::config::Config& cfg) {
  return std::make_unique<WeightNorm>(cfg.get_float("weight_norm.warn_above", 100.0));
}

}  // namespace custom_task
