// toy_regression: a small MLP learns y = sin(2x) + 0.5x on x in [-2, 2]. Small enough to train in a
// second on a CPU, real enough to check that a run learns (tests assert the validation error), and
// the task that the docs and the multirun tests use.
//
// Config (all optional): toy_regression.{train_size: 1024, val_size: 256, hidden: 32, noise: 0.0}
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <algorithm>
#include <cmath>

#include "trainer/task.h"

namespace wavetrain {
namespace {

at::Tensor target_function(const at::Tensor& x) { return at::sin(2 * x) + 0.5 * x; }

class ToyRegression : public Task {
 public:
  explicit ToyRegression(const config::Config& cfg) {
    const int64_t train_size = cfg.get_int("toy_regression.train_size", 1024);
    const int64_t val_size = cfg.get_int("toy_regression.val_size", 256);
    const int64_t hidden = cfg.get_int("toy_regression.hidden", 32);
    const double noise = cfg.get_float("toy_regression.noise", 0.0);
    // For the tests of trainer.on_nonfinite: a batch holding this training item gets a NaN gradient
    // while its loss stays finite (as an operator's backward can at a point its forward handles).
    nan_gradient_item_ = cfg.get_int("toy_regression.nan_gradient_item", -1);
    if (train_size < 1 || val_size < 1 || hidden < 1)
      throw config::ConfigError("toy_regression: train_size, val_size and hidden must be >= 1");
    // Checked before anything is allocated (the sizes were once passed straight to LibTorch, which
    // failed with a backtrace, or to the OOM killer). A training item costs its x and y (8 bytes),
    // the temporaries that make them (about 24) and its place in each epoch's order (8); a
    // validation item about 24; the model about 6 floats per weight (weights, gradients, Adam's
    // two moments, temporaries), hidden^2 of them in the middle layer.
    const double available = available_memory_bytes();
    check_fits_in_memory("toy_regression.train_size=" + std::to_string(train_size), 40.0 * static_cast<double>(train_size),
                         "40 bytes per item", available);
    check_fits_in_memory("toy_regression.val_size=" + std::to_string(val_size), 24.0 * static_cast<double>(val_size),
                         "24 bytes per item", available);
    const double weights = static_cast<double>(hidden) * static_cast<double>(hidden + 4);
    check_fits_in_memory("toy_regression.hidden=" + std::to_string(hidden), 24.0 * weights, "24 bytes per weight", available);
    check_fits_in_memory("toy_regression: train_size, val_size and hidden", 40.0 * static_cast<double>(train_size) +
                         24.0 * static_cast<double>(val_size) + 24.0 * weights, "together", available);
    // The data does not depend on the run's seed: runs with different seeds see the same problem.
    at::Generator data_rng = at::detail::createCPUGenerator(1234);
    train_x_ = at::rand({train_size, 1}, data_rng) * 4 - 2;
    train_y_ = target_function(train_x_) + noise * at::randn({train_size, 1}, data_rng);
    val_x_ = at::linspace(-2, 2, val_size).unsqueeze(1);
    val_y_ = target_function(val_x_);
    model_ = torch::nn::Sequential(torch::nn::Linear(1, hidden), torch::nn::Tanh(), torch::nn::Linear(hidden, hidden),
                                   torch::nn::Tanh(), torch::nn::Linear(hidden, 1));
  }

  torch::nn::Module& model() override { return *model_; }

  int64_t size(Split split) const override { return (split == Split::Train ? train_x_ : val_x_).size(0); }

  Batch make_batch(Split split, const std::vector<int64_t>& indices, const at::Device& device) override {
    const at::Tensor idx = at::tensor(indices, at::kLong);
    const at::Tensor& x = split == Split::Train ? train_x_ : val_x_;
    const at::Tensor& y = split == Split::Train ? train_y_ : val_y_;
    return {x.index_select(0, idx).to(device), y.index_select(0, idx).to(device), static_cast<int64_t>(indices.size())};
  }

  at::Tensor forward(const Batch& batch) override { return model_->forward(batch.input); }

  at::Tensor loss(const at::Tensor& prediction, const Batch& batch, Metrics& logged) override {
    at::Tensor l = at::mse_loss(prediction.to(at::kFloat), batch.target);
    logged.emplace_back("train/mse", l.item<double>());
    if (std::find(batch.indices.begin(), batch.indices.end(), nan_gradient_item_) != batch.indices.end())
      l = l + at::sqrt(prediction.to(at::kFloat).sum() * 0);  // adds 0; its gradient is inf x 0 = NaN
    return l;
  }

  Metrics validation_metrics(const at::Tensor& prediction, const Batch& batch) override {
    const at::Tensor err = prediction.to(at::kFloat) - batch.target;
    // Means only: the trainer averages batch metrics weighted by batch size, which a max would not survive.
    return {{"val/mse", err.square().mean().item<double>()}, {"val/mae", err.abs().mean().item<double>()}};
  }

 private:
  at::Tensor train_x_, train_y_, val_x_, val_y_;
  torch::nn::Sequential model_{nullptr};
  int64_t nan_gradient_item_ = -1;
};

}  // namespace

std::unique_ptr<Task> make_toy_regression(const config::Config& cfg) { return std::make_unique<ToyRegression>(cfg); }

}  // namespace wavetrain
