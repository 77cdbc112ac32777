// The loop's settings; see fit_options.h.
#include "trainer/fit_options.h"

#include <torch/nn/module.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>

#include "trainer/fused_adam.h"
#include "trainer/gradient_sync.h"
#include "trainer/progress.h"
#include "trainer/scaled_adam.h"
#include "trainer/task.h"

namespace wavetrain {
namespace {

BatchLimit batch_limit(const config::Config& cfg, const std::string& key) {
  BatchLimit limit;
  if (!cfg.has(key)) return limit;
  const config::Node v = cfg.value(key);
  if (v.kind() == config::Node::Kind::Int) {
    if (v.int_value() < 0) throw config::ConfigError(key + " must be >= 0, got " + v.to_display());
    limit.count = v.int_value();
    return limit;
  }
  limit.fraction = config::to_float(v, key);
  if (!(limit.fraction > 0.0 && limit.fraction <= 1.0))
    throw config::ConfigError(key + "=" + v.to_display() + ": a fraction must be in (0, 1], a count an int");
  return limit;
}

LrScheduleOptions schedule_options(const config::Config& cfg) {
  LrScheduleOptions o;
  o.name = cfg.get_string("scheduler.name", o.name);
  o.interval = cfg.get_string("scheduler.interval", o.interval);
  o.gamma = non_negative(cfg, "scheduler.gamma", o.gamma);
  o.step_size = cfg.get_int("scheduler.step_size", o.step_size);
  o.warmup = cfg.get_int("scheduler.warmup", o.warmup);
  o.warmup_start_factor = non_negative(cfg, "scheduler.warmup_start_factor", o.warmup_start_factor);
  o.total = cfg.get_int("scheduler.total", o.total);
  o.min_lr = non_negative(cfg, "scheduler.min_lr", o.min_lr);
  o.lr_batches = non_negative(cfg, "scheduler.lr_batches", o.lr_batches);
  o.lr_epochs = non_negative(cfg, "scheduler.lr_epochs", o.lr_epochs);
  return o;
}

}  // namespace

int64_t BatchLimit::of(int64_t available) const {
  if (count >= 0) return std::min(available, count);
  if (fraction >= 1.0) return available;
  return std::max<int64_t>(1, static_cast<int64_t>(fraction * static_cast<double>(available)));
}

double non_negative(const config::Config& cfg, const std::string& key, double fallback) {
  const double v = cfg.get_float(key, fallback);
  if (!std::isfinite(v) || v < 0)
    throw config::ConfigError(key + "=" + config::format_float(v) + " (" + cfg.value(key).origin().str() +
                              "): expected a finite number >= 0");
  return v;
}

double max_time_seconds(const config::Config& cfg) {
  if (!cfg.has("trainer.max_time")) return 0;
  const config::Node v = cfg.value("trainer.max_time");
  if (v.kind() != config::Node::Kind::String) return config::to_float(v, "trainer.max_time");
  double total = 0;
  int parts = 0;
  std::string text = v.string_value();
  for (size_t start = 0; start <= text.size(); ++parts) {
    const size_t colon = std::min(text.find(':', start), text.size());
    const std::string part = text.substr(start, colon - start);
    if (part.empty() || part.find_first_not_of("0123456789") != std::string::npos)
      throw config::ConfigError("trainer.max_time='" + text + "': expected seconds, HH:MM:SS or DD:HH:MM:SS");
    total = total * (parts == 1 && std::count(text.begin(), text.end(), ':') == 3 ? 24 : 60) + std::stod(part);
    start = colon + 1;
  }
  if (parts != 3 && parts != 4)
    throw config::ConfigError("trainer.max_time='" + text + "': expected seconds, HH:MM:SS or DD:HH:MM:SS");
  return total;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const config::Config& cfg, const std::vector<ParamGroup>& groups) {
  const std::string name = cfg.get_string("optimizer.name", "adam");
  const double lr = non_negative(cfg, "optimizer.lr", 1e-3);
  const double weight_decay = non_negative(cfg, "optimizer.weight_decay", 0.0);
  // One torch::optim group per task group, with the group's own lr and decay where it sets them.
  auto torch_groups = [&](auto defaults) {
    std::vector<torch::optim::OptimizerParamGroup> out;
    for (const ParamGroup& g : groups) {
      auto options = std::make_unique<decltype(defaults)>(defaults);
      options->lr(g.lr.value_or(lr));
      options->weight_decay(g.weight_decay.value_or(weight_decay));
      out.emplace_back(g.params, std::move(options));
    }
    return out;
  };
  if (name == "adam") {
    const auto defaults = torch::optim::AdamOptions(lr).weight_decay(weight_decay);
    return std::make_unique<FusedAdam>(torch_groups(defaults), defaults);
  }
  if (name == "adamw") {
    const auto defaults = torch::optim::AdamWOptions(lr).weight_decay(weight_decay);
    return std::make_unique<torch::optim::AdamW>(torch_groups(defaults), defaults);
  }
  if (name == "sgd") {
    const auto defaults =
        torch::optim::SGDOptions(lr).momentum(non_negative(cfg, "optimizer.momentum", 0.0)).weight_decay(weight_decay);
    return std::make_unique<torch::optim::SGD>(torch_groups(defaults), defaults);
  }
  if (name == "scaled_adam") {
    // icefall's ScaledAdam: the step scales with each tensor's size, so there is no weight decay.
    if (weight_decay > 0) throw config::ConfigError("optimizer.weight_decay must be 0 with optimizer.name=scaled_adam (it has none)");
    for (const ParamGroup& g : groups)
      if (g.weight_decay.value_or(0.0) > 0)
        throw config::ConfigError("parameter group '" + g.name + "' sets a weight decay; optimizer.name=scaled_adam has none");
    const std::string k = "optimizer.scaled_adam.";
    ScaledAdamOptions defaults(lr);
    defaults.clipping_scale(cfg.get_float(k + "clipping_scale", defaults.clipping_scale()))
        .beta1(cfg.get_float(k + "beta1", defaults.beta1()))
        .beta2(cfg.get_float(k + "beta2", defaults.beta2()))
        .scalar_lr_scale(cfg.get_float(k + "scalar_lr_scale", defaults.scalar_lr_scale()))
        .eps(cfg.get_float(k + "eps", defaults.eps()))
        .param_min_rms(cfg.get_float(k + "param_min_rms", defaults.param_min_rms()))
        .param_max_rms(cfg.get_float(k + "param_max_rms", defaults.param_max_rms()))
        .scalar_max(cfg.get_float(k + "scalar_max", defaults.scalar_max()))
        .size_update_period(cfg.get_int(k + "size_update_period", defaults.size_update_period()))
        .clipping_update_period(cfg.get_int(k + "clipping_update_period", defaults.clipping_update_period()));
    try {
      defaults.validate();
    } catch (const std::invalid_argument& e) {
      throw config::ConfigError(std::string(e.what()).replace(0, 10, k));
    }
    std::vector<torch::optim::OptimizerParamGroup> out;
    for (const ParamGroup& g : groups) {
      auto options = std::make_unique<ScaledAdamOptions>(defaults);
      options->lr(g.lr.value_or(lr));
      out.emplace_back(g.params, std::move(options));
    }
    return std::make_unique<ScaledAdam>(std::move(out), defaults);
  }
  throw config::ConfigError("optimizer.name='" + name + "' is not an optimizer: expected adam, adamw, sgd or scaled_adam");
}

FitOptions FitOptions::from(const config::Config& cfg) {
  FitOptions o;
  o.seed = cfg.get_int("trainer.seed", 0);
  o.max_epochs = cfg.get_int("trainer.max_epochs", 10);
  o.max_steps = cfg.get_int("trainer.max_steps", -1);
  o.batch_size = cfg.get_int("trainer.batch_size", 32);
  o.log_every = std::max<int64_t>(1, cfg.get_int("trainer.log_every_n_steps", 10));
  o.every_n_steps = cfg.get_int("trainer.checkpoint.every_n_steps", 0);
  o.every_n_epochs = cfg.get_int("trainer.checkpoint.every_n_epochs", 0);
  o.save_top_k = cfg.get_int("trainer.checkpoint.save_top_k", 1);
  o.deterministic = cfg.get_bool("trainer.deterministic", false);
  o.ddp_overlap = cfg.get_bool("trainer.ddp_overlap", true);
  o.ddp_bucket_mb = cfg.get_float("trainer.ddp_bucket_mb", 25);
  if (!(o.ddp_bucket_mb > 0 && o.ddp_bucket_mb <= 4096))
    throw config::ConfigError("trainer.ddp_bucket_mb=" + config::format_float(o.ddp_bucket_mb) + " (" +
                              cfg.value("trainer.ddp_bucket_mb").origin().str() + "): expected MiB in (0, 4096]");
  o.ddp_engine = cfg.get_string("trainer.ddp_engine", "auto");
  if (const std::string problem = gradient_sync_engine_problem(o.ddp_engine); !problem.empty())
    throw config::ConfigError("trainer.ddp_engine=" + o.ddp_engine + " (" + cfg.value("trainer.ddp_engine").origin().str() + "): " + problem);
  o.ddp_find_unused_parameters = cfg.get_bool("trainer.ddp_find_unused_parameters", false);
  o.monitor = cfg.get_string("trainer.monitor", "");
  o.mode = cfg.get_string("trainer.mode", "min");
  o.accumulate = cfg.get_int("trainer.accumulate_grad_batches", 1);
  o.clip = non_negative(cfg, "trainer.gradient_clip_val", 0.0);
  o.clip_algorithm = cfg.get_string("trainer.gradient_clip_algorithm", "norm");
  o.on_nonfinite = cfg.get_string("trainer.on_nonfinite", "stop");
  o.fast_dev_run = cfg.get_bool("trainer.fast_dev_run", false);
  o.max_time = max_time_seconds(cfg);
  o.stop_monitor = cfg.get_string("trainer.early_stopping.monitor", "");
  o.patience = cfg.get_int("trainer.early_stopping.patience", 3);
  o.min_delta = non_negative(cfg, "trainer.early_stopping.min_delta", 0.0);
  o.stop_mode = cfg.get_string("trainer.early_stopping.mode", "min");
  if (o.batch_size < 1) throw config::ConfigError("trainer.batch_size must be >= 1");
  if (o.accumulate < 1) throw config::ConfigError("trainer.accumulate_grad_batches must be >= 1");
  if (o.clip_algorithm != "norm" && o.clip_algorithm != "value")
    throw config::ConfigError("trainer.gradient_clip_algorithm must be norm or value, got '" + o.clip_algorithm + "'");
  if (o.on_nonfinite != "skip" && o.on_nonfinite != "stop")
    throw config::ConfigError("trainer.on_nonfinite must be skip or stop, got '" + o.on_nonfinite + "'");
  if (o.stop_mode != "min" && o.stop_mode != "max")
    throw config::ConfigError("trainer.early_stopping.mode must be min or max, got '" + o.stop_mode + "'");
  if (o.max_epochs < 1 && o.max_steps < 1)
    throw config::ConfigError("set trainer.max_epochs or trainer.max_steps to a positive value");
  if (o.mode != "min" && o.mode != "max") throw config::ConfigError("trainer.mode must be min or max, got '" + o.mode + "'");
  o.resume = cfg.get_string("trainer.resume", "");
  o.task = cfg.get_string("task");
  o.schedule = schedule_options(cfg);
  o.limit_train = batch_limit(cfg, "trainer.limit_train_batches");
  o.limit_val = batch_limit(cfg, "trainer.limit_val_batches");
  if (cfg.has("trainer.val_check_interval")) {
    const config::Node v = cfg.value("trainer.val_check_interval");
    if (v.kind() == config::Node::Kind::Int) {
      if (v.int_value() < 1) throw config::ConfigError("trainer.val_check_interval must be >= 1 as a step count");
      o.val_every_steps = v.int_value();
    } else {
      o.val_every_fraction = config::to_float(v, "trainer.val_check_interval");
      if (!(o.val_every_fraction > 0.0 && o.val_every_fraction <= 1.0))
        throw config::ConfigError("trainer.val_check_interval=" + v.to_display() + ": a fraction must be in (0, 1]");
    }
  }
  return o;
}

std::optional<Finished> finished_at(const config::Config& cfg, const TrainingState& state) {
  // fast_dev_run ignores the counters; a resume under it is not a continuation to judge.
  if (cfg.get_bool("trainer.fast_dev_run", false)) return std::nullopt;
  const int64_t max_epochs = cfg.get_int("trainer.max_epochs", 10);
  const int64_t max_steps = cfg.get_int("trainer.max_steps", -1);
  const double max_time = max_time_seconds(cfg);
  if (max_steps > 0 && state.global_step >= max_steps)
    return Finished{"step " + std::to_string(state.global_step) + " of trainer.max_steps " + std::to_string(max_steps),
                    "trainer.max_steps"};
  // `epoch` counts the epochs done when batch_in_epoch is 0, and is the epoch under way otherwise.
  if (max_epochs > 0 && state.epoch >= max_epochs)
    return Finished{"epoch " + std::to_string(state.epoch) + " of trainer.max_epochs " + std::to_string(max_epochs),
                    "trainer.max_epochs"};
  if (max_time > 0 && state.train_seconds >= max_time)
    return Finished{format_duration(state.train_seconds) + " trained of trainer.max_time " + format_duration(max_time),
                    "trainer.max_time"};
  const EarlyStoppingState& es = state.early_stopping;
  if (!es.stopped.empty() && es.monitor == cfg.get_string("trainer.early_stopping.monitor", "")) {
    if (es.stopped == "nonfinite") return Finished{"early stopping: " + es.monitor + " was not finite", ""};
    const int64_t patience = cfg.get_int("trainer.early_stopping.patience", 3);
    if (es.wait >= patience)
      return Finished{"early stopping: " + es.monitor + " did not improve in " + std::to_string(es.wait) +
                          " validation(s), trainer.early_stopping.patience " + std::to_string(patience),
                      "trainer.early_stopping.patience"};
  }
  return std::nullopt;
}

std::vector<config::KeySpec> trainer_config_keys() {
  using config::ValueType;
  const ValueType Int = ValueType::Int, Num = ValueType::Number, Str = ValueType::String, Bool = ValueType::Bool,
                  Any = ValueType::Scalar;
  return {{"trainer.max_epochs", Int}, {"trainer.max_steps", Int}, {"trainer.max_time", Any}, {"trainer.batch_size", Int},
          {"trainer.accumulate_grad_batches", Int}, {"trainer.cpu_batch_parts", Any}, {"trainer.gradient_clip_val", Num},
          {"trainer.gradient_clip_algorithm", Str}, {"trainer.limit_train_batches", Num}, {"trainer.limit_val_batches", Num},
          {"trainer.fast_dev_run", Bool}, {"trainer.on_nonfinite", Str}, {"trainer.early_stopping.monitor", Str},
          {"trainer.early_stopping.patience", Int}, {"trainer.early_stopping.min_delta", Num},
          {"trainer.early_stopping.mode", Str}, {"trainer.log_every_n_steps", Int}, {"trainer.val_check_interval", Num},
          {"trainer.deterministic", Bool}, {"trainer.checkpoint.every_n_steps", Int},
          {"trainer.checkpoint.every_n_epochs", Int}, {"trainer.checkpoint.save_top_k", Int}, {"trainer.resume", Str},
          {"trainer.monitor", Str}, {"trainer.mode", Str}, {"trainer.devices", Int}, {"trainer.dist_timeout", Int}, {"trainer.ddp_overlap", Bool}, {"trainer.ddp_bucket_mb", Num},
          {"trainer.ddp_engine", Str}, {"trainer.ddp_find_unused_parameters", Bool},
          {"trainer.device", Str}, {"trainer.cuda_memory_fraction", Num}, {"trainer.precision", Str},
          {"trainer.amp_on_mps", Bool}, {"trainer.threads", Int}, {"trainer.seed", Int},
          {"optimizer.name", Str}, {"optimizer.lr", Num}, {"optimizer.weight_decay", Num}, {"optimizer.momentum", Num},
          {"optimizer.scaled_adam.clipping_scale", Num}, {"optimizer.scaled_adam.beta1", Num}, {"optimizer.scaled_adam.beta2", Num},
          {"optimizer.scaled_adam.scalar_lr_scale", Num}, {"optimizer.scaled_adam.eps", Num},
          {"optimizer.scaled_adam.param_min_rms", Num}, {"optimizer.scaled_adam.param_max_rms", Num},
          {"optimizer.scaled_adam.scalar_max", Num}, {"optimizer.scaled_adam.size_update_period", Int},
          {"optimizer.scaled_adam.clipping_update_period", Int},
          {"scheduler.name", Str}, {"scheduler.interval", Str}, {"scheduler.gamma", Num}, {"scheduler.step_size", Int},
          {"scheduler.warmup", Int}, {"scheduler.warmup_start_factor", Num}, {"scheduler.total", Int},
          {"scheduler.min_lr", Num}, {"scheduler.lr_batches", Num}, {"scheduler.lr_epochs", Num}, {"sweep.strategy", Str}, {"sweep.trials", Int}, {"sweep.seed", Int},
          {"sweep.objective", Str}, {"sweep.mode", Str}, {"sweep.asha.resource", Str}, {"sweep.asha.min_resource", Int},
          {"sweep.asha.max_resource", Int}, {"sweep.asha.eta", Num}, {"run.dir", Str}, {"run.multirun_dir", Str}};
}

std::string resume_checkpoint(const config::Config& cfg, const std::filesystem::path& run_dir) {
  const std::string resume = cfg.get_string("trainer.resume", "");
  if (resume == "last" || resume == "best") return (run_dir / "checkpoints" / (resume + ".ckpt")).string();
  return resume;
}

// The Task defaults that build on the optimizer's side (task.h).
std::vector<ParamGroup> Task::param_groups() {
  ParamGroup all;
  all.name = "model";
  all.params = model().parameters();
  return {all};
}

std::unique_ptr<torch::optim::Optimizer> Task::make_optimizer(const std::vector<ParamGroup>& groups, const config::Config& cfg) {
  (void)groups, (void)cfg;
  return nullptr;
}

}  // namespace wavetrain
