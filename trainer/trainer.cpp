// The training loop; see trainer.h.
#include "trainer/trainer.h"

#include <torch/nn/module.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>

#include "trainer/atomic_file.h"
#include "trainer/checkpoint.h"
#include "trainer/config/yaml_io.h"
#include "trainer/grad_scaler.h"
#include "trainer/lr_scheduler.h"
#include "trainer/metrics_csv.h"
#include "trainer/progress.h"
#include "trainer/tensorboard.h"
#include "trainer/weights.h"

namespace wavetrain {
namespace {

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const config::Config& cfg, std::vector<at::Tensor> params) {
  const std::string name = cfg.get_string("optimizer.name", "adam");
  const double lr = cfg.get_float("optimizer.lr", 1e-3);
  const double weight_decay = cfg.get_float("optimizer.weight_decay", 0.0);
  if (name == "adam") return std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(lr).weight_decay(weight_decay));
  if (name == "adamw")
    return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(lr).weight_decay(weight_decay));
  if (name == "sgd")
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(lr).momentum(cfg.get_float("optimizer.momentum", 0.0)).weight_decay(weight_decay));
  throw config::ConfigError("optimizer.name='" + name + "' is not an optimizer: expected adam, adamw or sgd");
}

LrScheduleOptions schedule_options(const config::Config& cfg) {
  LrScheduleOptions o;
  o.name = cfg.get_string("scheduler.name", o.name);
  o.interval = cfg.get_string("scheduler.interval", o.interval);
  o.gamma = cfg.get_float("scheduler.gamma", o.gamma);
  o.step_size = cfg.get_int("scheduler.step_size", o.step_size);
  o.warmup = cfg.get_int("scheduler.warmup", o.warmup);
  o.warmup_start_factor = cfg.get_float("scheduler.warmup_start_factor", o.warmup_start_factor);
  o.total = cfg.get_int("scheduler.total", o.total);
  o.min_lr = cfg.get_float("scheduler.min_lr", o.min_lr);
  return o;
}

// The item order of one epoch, from (seed, epoch) alone.
std::vector<int64_t> epoch_order(int64_t size, int64_t seed, int64_t epoch) {
  at::Generator g = at::detail::createCPUGenerator(static_cast<uint64_t>(seed) * 1000003u + static_cast<uint64_t>(epoch));
  const at::Tensor perm = at::randperm(size, g, at::kLong);
  return std::vector<int64_t>(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + size);
}

nlohmann::json to_json(const Metrics& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : m) j[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  return j;
}

double find_metric(const Metrics& m, const std::string& name) {
  for (const auto& [k, v] : m)
    if (k == name) return v;
  return NAN;
}

}  // namespace

Trainer::Trainer(const config::Config& cfg, const RunDirectory& run, DeviceChoice device, AmpPolicy amp)
    : cfg_(cfg), run_(run), device_(std::move(device)), amp_(std::move(amp)) {}

FitResult Trainer::fit() {
  const int64_t seed = cfg_.get_int("trainer.seed", 0);
  const int64_t max_epochs = cfg_.get_int("trainer.max_epochs", 10);
  const int64_t max_steps = cfg_.get_int("trainer.max_steps", -1);
  const int64_t batch_size = cfg_.get_int("trainer.batch_size", 32);
  const int64_t log_every = std::max<int64_t>(1, cfg_.get_int("trainer.log_every_n_steps", 10));
  const std::string monitor = cfg_.get_string("trainer.monitor", "");
  const std::string mode = cfg_.get_string("trainer.mode", "min");
  if (batch_size < 1) throw config::ConfigError("trainer.batch_size must be >= 1");
  if (max_epochs < 1 && max_steps < 1) throw config::ConfigError("set trainer.max_epochs or trainer.max_steps to a positive value");
  if (mode != "min" && mode != "max") throw config::ConfigError("trainer.mode must be min or max, got '" + mode + "'");

  at::manual_seed(static_cast<uint64_t>(seed));
  std::unique_ptr<Task> task = make_task(cfg_.get_string("task"), cfg_);
  torch::nn::Module& model = task->model();
  model.to(device_.device);
  std::unique_ptr<torch::optim::Optimizer> optimizer = make_optimizer(cfg_, model.parameters());
  std::vector<double> base_lrs;
  for (auto& g : optimizer->param_groups()) base_lrs.push_back(g.options().get_lr());
  LrScheduler scheduler(schedule_options(cfg_), base_lrs);
  GradScaler scaler({65536.0, 2.0, 0.5, 2000, amp_.grad_scaler});

  MetricsCsv csv(run_.path() / "metrics.csv");
  TensorBoardWriter tb(run_.path() / "tensorboard");
  const bool terminal = stdout_is_terminal();
  ProgressReporter progress(std::cout, terminal);
  const std::filesystem::path ckpt_dir = run_.path() / "checkpoints";
  std::filesystem::create_directories(ckpt_dir);

  const int64_t n_train = task->size(Split::Train), n_val = task->size(Split::Validation);
  const int64_t batches = (n_train + batch_size - 1) / batch_size;
  const int64_t total_steps = max_steps > 0 ? (max_epochs > 0 ? std::min(max_steps, max_epochs * batches) : max_steps)
                                            : max_epochs * batches;
  run_.log("training " + cfg_.get_string("task") + ": " + std::to_string(n_train) + " items, " + std::to_string(batches) +
           " batches of " + std::to_string(batch_size) + " per epoch, " + std::to_string(total_steps) + " steps");

  FitResult result;
  double best_value = NAN;
  int64_t step = 0;
  int64_t samples = 0;
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };

  for (int64_t epoch = 0; max_epochs < 1 || epoch < max_epochs; ++epoch) {
    model.train();
    const std::vector<int64_t> order = epoch_order(n_train, seed, epoch);
    double loss_value = NAN;
    for (int64_t b = 0; b < batches && step < total_steps; ++b) {
      const std::vector<int64_t> indices(order.begin() + b * batch_size,
                                         order.begin() + std::min(n_train, (b + 1) * batch_size));
      const Batch batch = task->make_batch(Split::Train, indices, device_.device);
      at::Tensor prediction;
      {
        AutocastGuard autocast(amp_);
        prediction = task->forward(batch);
      }
      Metrics logged;
      const at::Tensor loss = task->loss(prediction, batch, logged);  // fp32, outside autocast
      loss_value = loss.item<double>();
      if (!std::isfinite(loss_value) && !scaler.enabled())
        throw std::runtime_error("non-finite loss " + std::to_string(loss_value) + " at step " + std::to_string(step) +
                                 " (epoch " + std::to_string(epoch) + ", batch " + std::to_string(b) + ")");
      optimizer->zero_grad();
      scaler.scale(loss).backward();
      scaler.step(*optimizer);
      scaler.update();
      ++step;
      samples += batch.size;
      if (scheduler.options().interval == "step") scheduler.step(*optimizer);
      if (step % log_every == 0 || step == total_steps) {
        logged.insert(logged.begin(), {"train/loss", loss_value});
        logged.emplace_back("lr", optimizer->param_groups()[0].options().get_lr());
        csv.log(step, epoch, logged);
        for (const auto& [k, v] : logged) tb.add_scalar(k, v, step);
      }
      progress.update({epoch, max_epochs, step, total_steps, step, elapsed(), loss_value, samples});
    }

    // Validation over the whole split, each batch weighted by its size.
    model.eval();
    Metrics val;
    {
      at::NoGradGuard no_grad;
      std::vector<int64_t> all(static_cast<size_t>(n_val));
      for (int64_t i = 0; i < n_val; ++i) all[static_cast<size_t>(i)] = i;
      for (int64_t b = 0; b * batch_size < n_val; ++b) {
        const std::vector<int64_t> indices(all.begin() + b * batch_size, all.begin() + std::min(n_val, (b + 1) * batch_size));
        const Batch batch = task->make_batch(Split::Validation, indices, device_.device);
        at::Tensor prediction;
        {
          AutocastGuard autocast(amp_);
          prediction = task->forward(batch);
        }
        const Metrics m = task->validation_metrics(prediction, batch);
        if (val.empty())
          for (const auto& [k, v] : m) val.emplace_back(k, 0.0);
        for (size_t i = 0; i < m.size() && i < val.size(); ++i)
          val[i].second += m[i].second * static_cast<double>(batch.size) / static_cast<double>(n_val);
      }
    }
    csv.log(step, epoch, val);
    for (const auto& [k, v] : val) tb.add_scalar(k, v, step);
    tb.flush();
    if (scheduler.options().interval == "epoch") scheduler.step(*optimizer);

    result.last = val;
    result.last.emplace_back("train/loss", loss_value);
    result.epochs = epoch + 1;
    result.global_step = step;

    TrainingState state;
    state.model = module_state_dict(model);
    state.optimizer = optimizer_state(*optimizer);
    state.scheduler = serialization::Value::dict(
        {{serialization::Value::string("name"), serialization::Value::string(scheduler.options().name)},
         {serialization::Value::string("count"), serialization::Value::integer(scheduler.count())}});
    if (scaler.enabled()) state.scaler = scaler.state();
    state.epoch = epoch + 1;
    state.global_step = step;
    state.rng = capture_rng();
    state.config_yaml = config::to_yaml(cfg_.tree());
    state.metrics = result.last;
    Checkpoint::save((ckpt_dir / "last.ckpt").string(), state);
    if (!monitor.empty()) {
      const double v = find_metric(val, monitor);
      if (std::isnan(v))
        throw config::ConfigError("trainer.monitor='" + monitor + "' is not a validation metric of this task");
      if (std::isnan(best_value) || (mode == "min" ? v < best_value : v > best_value)) {
        best_value = v;
        result.best = val;
        Checkpoint::save((ckpt_dir / "best.ckpt").string(), state);
      }
    }
    std::string line = "epoch " + std::to_string(epoch + 1) + " step " + std::to_string(step) + ":";
    for (const auto& [k, v] : val) line += " " + k + "=" + config::format_float(v);
    run_.log(line);
    if (!terminal) std::cout << line << "\n";
    if (step >= total_steps) break;
  }
  progress.finish();

  nlohmann::json j;
  j["last"] = to_json(result.last);
  if (!result.best.empty()) j["best"] = to_json(result.best);
  j["epochs"] = result.epochs;
  j["global_step"] = result.global_step;
  j["checkpoints"]["last"] = (ckpt_dir / "last.ckpt").string();
  if (!result.best.empty()) j["checkpoints"]["best"] = (ckpt_dir / "best.ckpt").string();
  j["seconds"] = elapsed();
  write_file_atomic((run_.path() / "result.json").string(), j.dump(2) + "\n");
  return result;
}

}  // namespace wavetrain
