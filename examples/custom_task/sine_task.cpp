// The sine_fit task; see sine_task.h. It shows the parts of the Task contract (trainer/task.h) a
// new experiment needs, and two optional ones: parameter groups with their own learning rate, and
// metrics of its own at each epoch's end.
#include "sine_task.h"

#include <torch/torch.h>

#include <cmath>

namespace custom_task {
namespace {

using wavetrain::Batch;
using wavetrain::Metrics;
using wavetrain::Split;

struct SineNetImpl : torch::nn::Module {
  explicit SineNetImpl(int64_t hidden)
      : body(register_module("body", torch::nn::Linear(1, hidden))), head(register_module("head", torch::nn::Linear(hidden, 1))) {}
  at::Tensor forward(const at::Tensor& x) { return head->forward(torch::tanh(body->forward(x))); }
  torch::nn::Linear body, head;
};
TORCH_MODULE(SineNet);

class SineTask : public wavetrain::Task {
 public:
  explicit SineTask(const wavetrain::config::Config& cfg)
      : net_(cfg.get_int("sine_fit.hidden", 16)), head_lr_(cfg.get_float("sine_fit.head_lr", 0.0)) {
    const int64_t n_train = cfg.get_int("sine_fit.train_size", 256), n_val = cfg.get_int("sine_fit.val_size", 64);
    if (n_train < 1 || n_val < 1) throw wavetrain::config::ConfigError("sine_fit.train_size and val_size must be >= 1");
    // The data is a pure function of the seed: a resumed run sees the same points.
    at::Generator g = at::detail::createCPUGenerator(static_cast<uint64_t>(cfg.get_int("trainer.seed", 0)) + 17);
    const double noise = cfg.get_float("sine_fit.noise", 0.01);
    for (auto [n, x, y] : {std::tuple{n_train, &train_x_, &train_y_}, std::tuple{n_val, &val_x_, &val_y_}}) {
      *x = (at::rand({n, 1}, g) * 2 - 1) * M_PI;
      *y = at::sin(*x) + noise * at::randn({n, 1}, g);
    }
  }

  torch::nn::Module& model() override { return *net_; }
  int64_t size(Split split) const override { return (split == Split::Train ? train_x_ : val_x_).size(0); }

  Batch make_batch(Split split, const std::vector<int64_t>& indices, const at::Device& device) override {
    const at::Tensor index = at::tensor(indices, at::kLong);
    Batch b;
    b.input = (split == Split::Train ? train_x_ : val_x_).index_select(0, index).to(device);
    b.target = (split == Split::Train ? train_y_ : val_y_).index_select(0, index).to(device);
    b.size = static_cast<int64_t>(indices.size());
    return b;
  }

  at::Tensor forward(const Batch& batch) override { return net_->forward(batch.input); }

  at::Tensor loss(const at::Tensor& prediction, const Batch& batch, Metrics& logged) override {
    const at::Tensor mse = at::mse_loss(prediction.to(at::kFloat), batch.target);
    epoch_loss_sum_ += mse.item<double>() * static_cast<double>(batch.size);
    epoch_items_ += batch.size;
    (void)logged;
    return mse;
  }

  Metrics validation_metrics(const at::Tensor& prediction, const Batch& batch) override {
    const at::Tensor error = (prediction.to(at::kFloat) - batch.target).abs();
    return {{"val/loss", error.pow(2).mean().item<double>()}, {"val/max_error", error.max().item<double>()}};
  }

  // Two groups: the hidden layer at optimizer.lr, the output layer at sine_fit.head_lr when set.
  // Their learning rates are logged as lr-body and lr-head by the lr_monitor callback.
  std::vector<wavetrain::ParamGroup> param_groups() override {
    wavetrain::ParamGroup body{"body", net_->body->parameters(), std::nullopt, std::nullopt};
    wavetrain::ParamGroup head{"head", net_->head->parameters(), std::nullopt, std::nullopt};
    if (head_lr_ > 0) head.lr = head_lr_;
    return {body, head};
  }

  // The mean training loss over the epoch's batches, logged at the epoch's end.
  Metrics train_epoch_metrics(int64_t epoch) override {
    (void)epoch;
    const double mean = epoch_items_ > 0 ? epoch_loss_sum_ / static_cast<double>(epoch_items_) : NAN;
    epoch_loss_sum_ = 0;
    epoch_items_ = 0;
    return {{"train/epoch_loss", mean}};
  }

 private:
  SineNet net_;
  double head_lr_;
  at::Tensor train_x_, train_y_, val_x_, val_y_;
  double epoch_loss_sum_ = 0;
  int64_t epoch_items_ = 0;
};

}  // namespace

std::unique_ptr<wavetrain::Task> make_sine_task(const wavetrain::config::Config& cfg) { return std::make_unique<SineTask>(cfg); }

}  // namespace custom_task
