// lr_monitor (named in `callbacks: [lr_monitor]`; Lightning's LearningRateMonitor): the learning
// rate of every parameter group at every logged step, as `lr-<group>` in metrics.csv and
// TensorBoard (the group's name from Task::param_groups: `lr-model` for the default single group).
// lr_monitor.log_momentum: true also logs `momentum-<group>`: SGD's momentum, Adam's and AdamW's
// beta1.
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include "trainer/callbacks/builtin.h"

namespace wavetrain {
namespace {

class LrMonitor : public Callback {
 public:
  explicit LrMonitor(bool log_momentum) : log_momentum_(log_momentum) {}

  std::string name() const override { return "lr_monitor"; }

  void on_train_batch_end(FitContext& ctx, TrainStep& step) override {
    if (!step.log) return;
    auto& groups = ctx.optimizer.param_groups();
    for (size_t i = 0; i < groups.size(); ++i) {
      const std::string group = i < ctx.param_groups.size() && !ctx.param_groups[i].name.empty()
                                    ? ctx.param_groups[i].name
                                    : "group" + std::to_string(i);
      step.logged.emplace_back("lr-" + group, groups[i].options().get_lr());
      if (!log_momentum_) continue;
      const torch::optim::OptimizerOptions& o = groups[i].options();
      if (const auto* sgd = dynamic_cast<const torch::optim::SGDOptions*>(&o))
        step.logged.emplace_back("momentum-" + group, sgd->momentum());
      else if (const auto* adamw = dynamic_cast<const torch::optim::AdamWOptions*>(&o))
        step.logged.emplace_back("momentum-" + group, std::get<0>(adamw->betas()));
      else if (const auto* adam = dynamic_cast<const torch::optim::AdamOptions*>(&o))
        step.logged.emplace_back("momentum-" + group, std::get<0>(adam->betas()));
    }
  }

 private:
  const bool log_momentum_;
};

}  // namespace

std::unique_ptr<Callback> make_lr_monitor(const config::Config& cfg) {
  return std::make_unique<LrMonitor>(cfg.get_bool("lr_monitor.log_momentum", false));
}

}  // namespace wavetrain
