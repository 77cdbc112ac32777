// A test plugin (plugin_test.cpp), built against the build tree and loaded with plugins=[...]:
//   recorder             a callback that writes every hook call it gets, one line each, to the file
//                        recorder.file, and keeps the number of optimizer steps it has seen as its
//                        checkpoint state; with recorder.stop_at_step=N it asks the run to stop
//                        there, on rank recorder.stop_rank only when that is set
//   decaying_sgd_toy     toy_regression trained by an optimizer of the task's own (Task::make_optimizer):
//                        SGD whose rate decays with its own step count, which must come back on
//                        resume (CheckpointedOptimizer) for the resumed run to equal a straight one
#include <torch/nn/module.h>
#include <torch/optim/sgd.h>

#include <fstream>

#include "trainer/callback.h"
#include "trainer/plugin.h"

namespace {

using wavetrain::FitContext;
using wavetrain::Metrics;
using wavetrain::serialization::Value;

class Recorder : public wavetrain::Callback {
 public:
  Recorder(const std::string& file, int64_t stop_at_step, int64_t stop_rank)
      : out_(file, std::ios::app), stop_at_step_(stop_at_step), stop_rank_(stop_rank) {}
  std::string name() const override { return "recorder"; }

  void on_fit_start(FitContext& ctx) override { line(ctx, "fit_start steps_seen=" + std::to_string(steps_seen_)); }
  void on_train_epoch_start(FitContext& ctx) override { line(ctx, "train_epoch_start"); }
  void on_train_batch_end(FitContext& ctx, wavetrain::TrainStep& step) override {
    ++steps_seen_;
    line(ctx, std::string("train_batch_end") + (step.log ? " log" : ""));
    if (ctx.step == stop_at_step_ && (stop_rank_ < 0 || ctx.rank == stop_rank_)) ctx.stop = true;
  }
  void on_log_metrics(FitContext& ctx, const Metrics& m) override { line(ctx, "log_metrics " + m.front().first); }
  void on_validation_end(FitContext& ctx, const Metrics& m) override { line(ctx, "validation_end " + m.front().first); }
  void on_train_epoch_end(FitContext& ctx) override { line(ctx, "train_epoch_end"); }
  void on_interrupt(FitContext& ctx, bool mid_epoch) override { line(ctx, std::string("interrupt") + (mid_epoch ? " mid_epoch" : "")); }
  void on_fit_end(FitContext& ctx) override { line(ctx, "fit_end steps_seen=" + std::to_string(steps_seen_)); }
  void on_exception(FitContext& ctx, const std::exception& e) override { line(ctx, std::string("exception ") + e.what()); }

  Value state_dict() const override { return Value::dict({{Value::string("steps_seen"), Value::integer(steps_seen_)}}); }
  void load_state_dict(const Value& state) override { steps_seen_ = state.find("steps_seen")->as_int(); }

 private:
  void line(const FitContext& ctx, const std::string& what) {
    out_ << (ctx.world > 1 ? "rank=" + std::to_string(ctx.rank) + " " : "") << "epoch=" << ctx.epoch << " step=" << ctx.step
         << " " << what << "\n" << std::flush;
  }
  std::ofstream out_;
  const int64_t stop_at_step_, stop_rank_;
  int64_t steps_seen_ = 0;
};

// lr / (1 + steps / 4): the rate depends on state only the optimizer has.
class DecayingSgd : public torch::optim::SGD, public wavetrain::CheckpointedOptimizer {
 public:
  explicit DecayingSgd(std::vector<torch::optim::OptimizerParamGroup> groups, double lr)
      : SGD(std::move(groups), torch::optim::SGDOptions(lr)), base_lr_(lr) {}
  at::Tensor step(LossClosure closure = nullptr) override {
    for (auto& g : param_groups()) g.options().set_lr(base_lr_ / (1.0 + static_cast<double>(steps_) / 4.0));
    ++steps_;
    return SGD::step(closure);
  }
  std::string type() const override { return "decaying_sgd"; }
  Value state_value() override { return Value::dict({{Value::string("steps"), Value::integer(steps_)}}); }
  void load_state_value(const Value& state, const std::string& source) override {
    const Value* steps = state.find("steps");
    if (!steps) throw std::runtime_error(source + ": decaying_sgd state without steps");
    steps_ = steps->as_int();
  }

 private:
  double base_lr_;
  int64_t steps_ = 0;
};

// toy_regression, with the optimizer above: every other call goes to the built-in task.
class DecayingSgdToy : public wavetrain::Task {
 public:
  explicit DecayingSgdToy(const wavetrain::config::Config& cfg) : toy_(wavetrain::make_task("toy_regression", cfg)) {}
  torch::nn::Module& model() override { return toy_->model(); }
  int64_t size(wavetrain::Split split) const override { return toy_->size(split); }
  wavetrain::Batch make_batch(wavetrain::Split split, const std::vector<int64_t>& indices, const at::Device& device) override {
    return toy_->make_batch(split, indices, device);
  }
  at::Tensor forward(const wavetrain::Batch& batch) override { return toy_->forward(batch); }
  at::Tensor loss(const at::Tensor& prediction, const wavetrain::Batch& batch, Metrics& logged) override {
    return toy_->loss(prediction, batch, logged);
  }
  Metrics validation_metrics(const at::Tensor& prediction, const wavetrain::Batch& batch) override {
    return toy_->validation_metrics(prediction, batch);
  }
  std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<wavetrain::ParamGroup>& groups,
                                                          const wavetrain::config::Config& cfg) override {
    std::vector<torch::optim::OptimizerParamGroup> torch_groups;
    for (const wavetrain::ParamGroup& g : groups) torch_groups.emplace_back(g.params);
    return std::make_unique<DecayingSgd>(std::move(torch_groups), cfg.get_float("optimizer.lr", 0.1));
  }

 private:
  std::unique_ptr<wavetrain::Task> toy_;
};

void register_recorder() {
  static const wavetrain::TaskRegistration task(
      "decaying_sgd_toy", [](const wavetrain::config::Config& cfg) { return std::make_unique<DecayingSgdToy>(cfg); },
      {"toy_regression.*"});
  static const wavetrain::CallbackRegistration recorder(
      "recorder",
      [](const wavetrain::config::Config& cfg) {
        return std::make_unique<Recorder>(cfg.get_string("recorder.file"), cfg.get_int("recorder.stop_at_step", -1),
                                          cfg.get_int("recorder.stop_rank", -1));
      },
      {"recorder.*"});
}

}  // namespace

WAVETRAIN_PLUGIN(register_recorder);
