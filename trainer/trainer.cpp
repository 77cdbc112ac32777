// The training loop; see trainer.h.
#include "trainer/trainer.h"

#include <torch/nn/module.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <thread>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <future>
#include <iostream>
#include <nlohmann/json.hpp>

#include "trainer/serialization/atomic_file.h"
#include "trainer/checkpoint.h"
#include "trainer/distributed.h"
#include "trainer/config/yaml_io.h"
#include "trainer/fused_adam.h"
#include "trainer/grad_scaler.h"
#include "trainer/lr_scheduler.h"
#include "trainer/metrics_csv.h"
#include "trainer/stop_signal.h"
#include "trainer/parallel_parts.h"
#include "trainer/progress.h"
#include "trainer/tensorboard.h"
#include "trainer/torch_compat.h"
#include "trainer/weights.h"

namespace wavetrain {
namespace {

// A number that must be finite and >= 0 (a learning rate, a decay, a clipping threshold): NaN and
// infinities are refused here, naming the key and where it was set, instead of deep in LibTorch or
// not at all.
double non_negative(const config::Config& cfg, const std::string& key, double fallback) {
  const double v = cfg.get_float(key, fallback);
  if (!std::isfinite(v) || v < 0)
    throw config::ConfigError(key + "=" + config::format_float(v) + " (" + cfg.value(key).origin().str() +
                              "): expected a finite number >= 0");
  return v;
}

std::unique_ptr<torch::optim::Optimizer> make_optimizer(const config::Config& cfg, std::vector<at::Tensor> params) {
  const std::string name = cfg.get_string("optimizer.name", "adam");
  const double lr = non_negative(cfg, "optimizer.lr", 1e-3);
  const double weight_decay = non_negative(cfg, "optimizer.weight_decay", 0.0);
  if (name == "adam") return std::make_unique<FusedAdam>(params, torch::optim::AdamOptions(lr).weight_decay(weight_decay));
  if (name == "adamw")
    return std::make_unique<torch::optim::AdamW>(params, torch::optim::AdamWOptions(lr).weight_decay(weight_decay));
  if (name == "sgd")
    return std::make_unique<torch::optim::SGD>(
        params, torch::optim::SGDOptions(lr).momentum(non_negative(cfg, "optimizer.momentum", 0.0)).weight_decay(weight_decay));
  throw config::ConfigError("optimizer.name='" + name + "' is not an optimizer: expected adam, adamw or sgd");
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
  return o;
}

// ceil(a / b) for a >= 0, b >= 1, without the overflow of (a + b - 1) / b when b is near 2^63
// (trainer.accumulate_grad_batches=9223372036854775807 made that 0 steps, and a run that trained
// nothing reported "done").
int64_t ceil_div(int64_t a, int64_t b) { return a / b + (a % b != 0 ? 1 : 0); }

// trainer.limit_*_batches: absent or 1.0 = all; an int N = at most N batches; a float f in (0, 1] =
// that fraction of the batches (at least one).
int64_t limited(const config::Config& cfg, const std::string& key, int64_t available) {
  if (!cfg.has(key)) return available;
  const config::Node v = cfg.value(key);
  if (v.kind() == config::Node::Kind::Int) {
    if (v.int_value() < 0) throw config::ConfigError(key + " must be >= 0, got " + v.to_display());
    return std::min(available, v.int_value());
  }
  const double f = config::to_float(v, key);
  if (!(f > 0.0 && f <= 1.0))
    throw config::ConfigError(key + "=" + v.to_display() + ": a fraction must be in (0, 1], a count an int");
  return std::max<int64_t>(1, static_cast<int64_t>(f * static_cast<double>(available)));
}

// trainer.max_time: seconds, or "HH:MM:SS" / "DD:HH:MM:SS"; <= 0 or absent means no limit.
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

// Top-k checkpoints are named epoch=E-step=S-<metric>=<value>.ckpt, the metric's '/' written '_'.
std::string top_k_metric(const std::string& monitor) {
  std::string name = monitor;
  for (char& c : name)
    if (c == '/') c = '_';
  return name;
}

// The top-k checkpoints of `monitor` in `dir`, as earlier attempts of the run left them, up to
// `step`. Those of later steps are of a stretch that the resumed run trains again: removed when
// `remove_later` (they would come back under names of their own), else left out.
std::vector<std::pair<double, std::filesystem::path>> kept_top_k(const std::filesystem::path& dir, const std::string& monitor,
                                                                 int64_t step, bool remove_later) {
  std::vector<std::pair<double, std::filesystem::path>> kept;
  const std::string marker = "-" + top_k_metric(monitor) + "=", suffix = ".ckpt";
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const size_t at = name.rfind(marker);
    if (name.rfind("epoch=", 0) != 0 || at == std::string::npos || name.size() < suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
      continue;
    const std::string value = name.substr(at + marker.size(), name.size() - suffix.size() - at - marker.size());
    char* end = nullptr;
    const double v = std::strtod(value.c_str(), &end);
    const size_t step_at = name.find("-step=");
    if (value.empty() || end != value.c_str() + value.size() || step_at == std::string::npos) continue;
    if (std::strtoll(name.c_str() + step_at + 6, nullptr, 10) > step) {
      if (remove_later) std::filesystem::remove(entry.path(), ec);
      continue;
    }
    kept.emplace_back(v, entry.path());
  }
  return kept;
}

}  // namespace

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
          {"trainer.monitor", Str}, {"trainer.mode", Str}, {"trainer.devices", Int}, {"trainer.dist_timeout", Int},
          {"trainer.device", Str}, {"trainer.cuda_memory_fraction", Num}, {"trainer.precision", Str},
          {"trainer.amp_on_mps", Bool}, {"trainer.threads", Int}, {"trainer.seed", Int},
          {"optimizer.name", Str}, {"optimizer.lr", Num}, {"optimizer.weight_decay", Num}, {"optimizer.momentum", Num},
          {"scheduler.name", Str}, {"scheduler.interval", Str}, {"scheduler.gamma", Num}, {"scheduler.step_size", Int},
          {"scheduler.warmup", Int}, {"scheduler.warmup_start_factor", Num}, {"scheduler.total", Int},
          {"scheduler.min_lr", Num}, {"sweep.strategy", Str}, {"sweep.trials", Int}, {"sweep.seed", Int},
          {"sweep.objective", Str}, {"sweep.mode", Str}, {"sweep.asha.resource", Str}, {"sweep.asha.min_resource", Int},
          {"sweep.asha.max_resource", Int}, {"sweep.asha.eta", Num}, {"run.dir", Str}, {"run.multirun_dir", Str}};
}

std::string resume_checkpoint(const config::Config& cfg, const std::filesystem::path& run_dir) {
  const std::string resume = cfg.get_string("trainer.resume", "");
  if (resume == "last" || resume == "best") return (run_dir / "checkpoints" / (resume + ".ckpt")).string();
  return resume;
}

Metrics evaluate(Task& task, Split split, const at::Device& device, const AmpPolicy& amp, int64_t batch_size,
                 int64_t max_batches) {
  task.model().eval();
  at::NoGradGuard no_grad;
  const int64_t n = task.size(split);
  Metrics sums;
  std::vector<double> weights;  // per metric: the summed weights of its batches (task.metric_weight)
  for (int64_t b = 0; (max_batches < 0 || b < max_batches) && b * batch_size < n; ++b) {
    std::vector<int64_t> indices;
    for (int64_t i = b * batch_size; i < std::min(n, (b + 1) * batch_size); ++i) indices.push_back(i);
    Batch batch = task.make_batch(split, indices, device);
    batch.indices = indices;
    at::Tensor prediction;
    {
      AutocastGuard autocast(amp);
      prediction = task.forward(batch);
    }
    const Metrics m = task.validation_metrics(prediction, batch);
    if (sums.empty())
      for (const auto& [k, v] : m) sums.emplace_back(k, 0.0);
    weights.resize(sums.size(), 0.0);
    for (size_t i = 0; i < m.size() && i < sums.size(); ++i) {
      const double w = task.metric_weight(m[i].first, batch);
      sums[i].second += m[i].second * w;
      weights[i] += w;
    }
  }
  for (size_t i = 0; i < sums.size(); ++i) sums[i].second /= weights[i] > 0 ? weights[i] : 1.0;
  return sums;
}

Trainer::Trainer(const config::Config& cfg, const RunDirectory& run, DeviceChoice device, AmpPolicy amp,
                 ProcessGroup* group)
    : cfg_(cfg),
      run_(run),
      device_(std::move(device)),
      amp_(std::move(amp)),
      group_(group),
      out_(&std::cout),
      terminal_(stdout_is_terminal()),
      now_([] { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }) {}

void Trainer::set_output(std::ostream& out, bool terminal) {
  out_ = &out;
  terminal_ = terminal;
}

FitResult Trainer::fit() {
  const int64_t seed = cfg_.get_int("trainer.seed", 0);
  const int64_t max_epochs = cfg_.get_int("trainer.max_epochs", 10);
  const int64_t max_steps = cfg_.get_int("trainer.max_steps", -1);
  const int64_t batch_size = cfg_.get_int("trainer.batch_size", 32);
  const int64_t log_every = std::max<int64_t>(1, cfg_.get_int("trainer.log_every_n_steps", 10));
  const int64_t every_n_steps = cfg_.get_int("trainer.checkpoint.every_n_steps", 0);
  const int64_t every_n_epochs = cfg_.get_int("trainer.checkpoint.every_n_epochs", 0);
  const int64_t save_top_k = cfg_.get_int("trainer.checkpoint.save_top_k", 1);
  if (cfg_.get_bool("trainer.deterministic", false)) {
    // cuBLAS needs a fixed workspace for reproducible results; it reads this when CUDA starts.
    if (device_.device.is_cuda()) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  }
  const std::string monitor = cfg_.get_string("trainer.monitor", "");
  const std::string mode = cfg_.get_string("trainer.mode", "min");
  const int64_t accumulate = cfg_.get_int("trainer.accumulate_grad_batches", 1);
  const double clip = non_negative(cfg_, "trainer.gradient_clip_val", 0.0);
  const std::string clip_algorithm = cfg_.get_string("trainer.gradient_clip_algorithm", "norm");
  const std::string on_nonfinite = cfg_.get_string("trainer.on_nonfinite", "stop");
  const bool fast_dev_run = cfg_.get_bool("trainer.fast_dev_run", false);
  const double max_time = max_time_seconds(cfg_);
  const std::string stop_monitor = cfg_.get_string("trainer.early_stopping.monitor", "");
  const int64_t patience = cfg_.get_int("trainer.early_stopping.patience", 3);
  const double min_delta = non_negative(cfg_, "trainer.early_stopping.min_delta", 0.0);
  const std::string stop_mode = cfg_.get_string("trainer.early_stopping.mode", "min");
  if (batch_size < 1) throw config::ConfigError("trainer.batch_size must be >= 1");
  if (accumulate < 1) throw config::ConfigError("trainer.accumulate_grad_batches must be >= 1");
  if (clip < 0) throw config::ConfigError("trainer.gradient_clip_val must be >= 0 (0 = no clipping)");
  if (clip_algorithm != "norm" && clip_algorithm != "value")
    throw config::ConfigError("trainer.gradient_clip_algorithm must be norm or value, got '" + clip_algorithm + "'");
  if (on_nonfinite != "skip" && on_nonfinite != "stop")
    throw config::ConfigError("trainer.on_nonfinite must be skip or stop, got '" + on_nonfinite + "'");
  if (stop_mode != "min" && stop_mode != "max")
    throw config::ConfigError("trainer.early_stopping.mode must be min or max, got '" + stop_mode + "'");
  if (max_epochs < 1 && max_steps < 1) throw config::ConfigError("set trainer.max_epochs or trainer.max_steps to a positive value");
  if (mode != "min" && mode != "max") throw config::ConfigError("trainer.mode must be min or max, got '" + mode + "'");

  // A resumed run's state is judged before anything is built or written: a run that is over keeps
  // its record (result.json, metrics.csv, event files, checkpoints) exactly as it is.
  const std::string resume = cfg_.get_string("trainer.resume", "");
  const bool resuming = !resume.empty();
  const std::string resume_path = resume_checkpoint(cfg_, run_.path());
  std::optional<TrainingState> resumed;
  if (resuming) {
    resumed = Checkpoint::load(resume_path);
    if (const std::optional<Finished> finished = finished_at(cfg_, *resumed)) {
      FitResult done;
      done.last = resumed->metrics;
      done.epochs = resumed->epoch;
      done.global_step = resumed->global_step;
      done.already_finished = finished->reason;
      return done;
    }
  }

  at::manual_seed(static_cast<uint64_t>(seed));  // CPU and CUDA generators
  compat::mps_manual_seed(static_cast<uint64_t>(seed));
  std::unique_ptr<Task> task = make_task(cfg_.get_string("task"), cfg_);
  torch::nn::Module& model = task->model();
  model.to(device_.device);
  const int world = group_ ? group_->size() : 1;
  const int rank = group_ ? group_->rank() : 0;
  const bool writer = rank == 0;  // only rank 0 writes anything
  if (group_) {
    std::vector<at::Tensor> state;
    for (auto& [name, t] : module_state_dict(model)) state.push_back(t);
    group_->broadcast_from_rank0(state);
  }
  // True on every rank when it is true on any: decisions that change the flow must agree.
  auto any_rank = [&](bool flag) {
    if (!group_) return flag;
    const at::Tensor t = at::full({1}, flag ? 1.0f : 0.0f);
    group_->average({t});
    return t.item<float>() > 0;
  };
  std::unique_ptr<torch::optim::Optimizer> optimizer = make_optimizer(cfg_, model.parameters());
  std::vector<double> base_lrs;
  for (auto& g : optimizer->param_groups()) base_lrs.push_back(g.options().get_lr());
  LrScheduler scheduler(schedule_options(cfg_), base_lrs);
  GradScaler scaler({65536.0, 2.0, 0.5, 2000, amp_.grad_scaler});

  std::unique_ptr<MetricsCsv> csv;
  std::unique_ptr<TensorBoardWriter> tb;
  if (writer) {
    csv = std::make_unique<MetricsCsv>(run_.path() / "metrics.csv", /*keep_existing=*/resuming);
    tb = std::make_unique<TensorBoardWriter>(run_.path() / "tensorboard");
  }
  auto log_line = [&](const std::string& line) {
    if (writer) run_.log(line);
  };
  const bool terminal = terminal_;
  std::ostream& out = *out_;
  ProgressReporter progress(out, terminal);
  const ThroughputUnit unit = task->throughput_unit();
  const std::filesystem::path ckpt_dir = run_.path() / "checkpoints";
  if (rank == 0) std::filesystem::create_directories(ckpt_dir);

  const int64_t n_train = task->size(Split::Train), n_val = task->size(Split::Validation);
  const int64_t epochs = fast_dev_run ? 1 : max_epochs;
  const int64_t batches =
      fast_dev_run ? 1
                   : limited(cfg_, "trainer.limit_train_batches",
                             world > 1 ? n_train / batch_size / world : ceil_div(n_train, batch_size));
  if (batches < 1)
    throw config::ConfigError("trainer.batch_size=" + std::to_string(batch_size) + " on " + std::to_string(world) +
                              " ranks is larger than the " + std::to_string(n_train) + " training items");
  const int64_t val_batches =
      fast_dev_run ? 1 : limited(cfg_, "trainer.limit_val_batches", ceil_div(n_val, batch_size));
  const int64_t steps_per_epoch = ceil_div(batches, accumulate);
  // epochs x steps must count in 64 bits; beyond that only max_steps can be the limit.
  int64_t epoch_steps = 0;
  const bool epoch_steps_overflow = epochs > 0 && __builtin_mul_overflow(epochs, steps_per_epoch, &epoch_steps);
  if (epoch_steps_overflow && !(max_steps > 0 && !fast_dev_run))
    throw config::ConfigError("trainer.max_epochs=" + std::to_string(max_epochs) + ": " + std::to_string(max_epochs) + " epochs of " +
                              std::to_string(steps_per_epoch) + " steps are more steps than can be counted (2^63 - 1); "
                              "give a smaller number, or a trainer.max_steps");
  const int64_t total_steps = max_steps > 0 && !fast_dev_run
                                  ? (epochs > 0 && !epoch_steps_overflow ? std::min(max_steps, epoch_steps) : max_steps)
                                  : epoch_steps;
  // val_check_interval: a float is a fraction of an epoch's steps, an int a number of global steps.
  int64_t val_every = 0;
  bool val_every_global = false;
  if (cfg_.has("trainer.val_check_interval")) {
    const config::Node v = cfg_.value("trainer.val_check_interval");
    if (v.kind() == config::Node::Kind::Int) {
      if (v.int_value() < 1) throw config::ConfigError("trainer.val_check_interval must be >= 1 as a step count");
      val_every = v.int_value();
      val_every_global = true;
    } else {
      const double f = config::to_float(v, "trainer.val_check_interval");
      if (!(f > 0.0 && f <= 1.0))
        throw config::ConfigError("trainer.val_check_interval=" + v.to_display() + ": a fraction must be in (0, 1]");
      if (f < 1.0) val_every = std::max<int64_t>(1, static_cast<int64_t>(f * static_cast<double>(steps_per_epoch)));
    }
  }
  log_line("training " + cfg_.get_string("task") + ": " + std::to_string(n_train) + " items, " + std::to_string(batches) +
           " batches of " + std::to_string(batch_size) + " per epoch, " + std::to_string(total_steps) + " steps");

  FitResult result;
  double best_value = NAN;
  int64_t step = 0;
  int64_t start_step = 0;  // where this session started: its rates count only its own steps
  int64_t items = 0;       // training items this session
  int64_t skipped_steps = 0;
  // Seconds the training loop waited for its batches (made in line, or the prefetch not yet ready).
  double data_wait_seconds = 0;
  const bool prefetch = task->prefetch_batches();
  const int64_t parts = batch_parts(cfg_, device_.device, *task);
  if (parts > 1)
    log_line("training each batch as " + std::to_string(parts) + " parts at once, one per thread (trainer.cpu_batch_parts)");
  std::vector<at::Tensor> trainable;
  for (const at::Tensor& p : model.parameters())
    if (p.requires_grad()) trainable.push_back(p);
  const double start = now_();
  auto elapsed = [&] { return now_() - start; };  // this session's
  // trainer.max_time bounds the run, not one session: earlier sessions' time counts (Lightning's
  // Timer does the same), so a resumed run stops when the total is reached.
  double earlier_seconds = 0;
  auto run_seconds = [&] { return earlier_seconds + elapsed(); };
  double stop_best = NAN;
  int64_t stop_wait = 0;
  std::string stopped_early;  // why early stopping ended the run ("patience", "nonfinite")
  double last_loss = NAN;
  auto progress_state = [&](int64_t epoch, double loss) {
    ProgressState p;
    p.epoch = epoch;
    p.max_epochs = epochs;
    p.step = step;
    p.total_steps = total_steps;
    p.steps_this_session = step - start_step;
    p.elapsed_s = elapsed();
    if (max_time > 0) p.time_left_s = std::max(0.0, max_time - earlier_seconds - p.elapsed_s);
    p.loss = loss;
    p.units_this_session = static_cast<double>(items) * unit.per_item;
    p.unit = unit.unit;
    return p;
  };

  // The config every checkpoint records, with what the task derived from its data.
  config::Node recorded_tree = cfg_.tree();
  task->add_to_recorded_config(recorded_tree);
  const std::string recorded_config = config::to_yaml(recorded_tree);
  // Everything needed to continue exactly: `batch_in_epoch` batches of `epoch` are done.
  auto capture = [&](int64_t epoch, int64_t batch_in_epoch, const Metrics& metrics) {
    TrainingState state;
    state.model = module_state_dict(model);
    state.optimizer = optimizer_state(*optimizer);
    state.scheduler = serialization::Value::dict(
        {{serialization::Value::string("name"), serialization::Value::string(scheduler.options().name)},
         {serialization::Value::string("count"), serialization::Value::integer(scheduler.count())}});
    if (scaler.enabled()) state.scaler = scaler.state();
    state.epoch = epoch;
    state.batch_in_epoch = batch_in_epoch;
    state.global_step = step;
    state.rng = capture_rng();
    state.config_yaml = recorded_config;
    state.metrics = metrics;
    if (!std::isnan(best_value)) state.metrics.emplace_back("best/" + monitor, best_value);
    state.train_seconds = run_seconds();
    if (!stop_monitor.empty()) state.early_stopping = {stop_monitor, stop_best, stop_wait, stopped_early};
    return state;
  };

  int64_t start_epoch = 0, start_batch = 0;
  if (resumed) {
    const TrainingState& state = *resumed;
    const std::string& path = resume_path;
    try {
      load_state_dict(model, state.model, /*strict=*/true, path);
      load_optimizer_state(*optimizer, state.optimizer, path);
    } catch (const std::exception& e) {
      if (rank != 0) throw RankZeroReportsError(e.what());  // the same file and config on every rank
      throw;
    }
    if (const serialization::Value* count = state.scheduler.is_none() ? nullptr : state.scheduler.find("count"))
      scheduler.set_count(*optimizer, count->as_int());
    if (state.scaler && scaler.enabled()) scaler.load_state(*state.scaler);
    restore_rng(state.rng);
    start_epoch = state.epoch;
    start_batch = state.batch_in_epoch;
    step = state.global_step;
    start_step = step;
    best_value = find_metric(state.metrics, "best/" + monitor);
    // result.json's best metrics outlive the interruption: they are the ones best.ckpt was saved with
    // (its validation metrics, without the training loss and the running best).
    if (!monitor.empty() && writer && !std::isnan(best_value) && std::filesystem::exists(ckpt_dir / "best.ckpt"))
      for (const auto& [name, value] : Checkpoint::load((ckpt_dir / "best.ckpt").string()).metrics)
        if (name != "train/loss" && name.rfind("best/", 0) != 0) result.best.emplace_back(name, value);
    earlier_seconds = state.train_seconds;
    // Early stopping goes on counting from where it was, unless it now watches something else.
    if (!stop_monitor.empty() && state.early_stopping.monitor == stop_monitor) {
      stop_best = state.early_stopping.best;
      stop_wait = state.early_stopping.wait;
    }
    // Epochs as the progress line counts them (1-based, the one under way).
    std::string line = "resumed from " + path + " at epoch " + std::to_string(start_epoch + 1) + ", step " +
                       std::to_string(step);
    if (start_batch > 0) line += " (" + std::to_string(start_batch) + " batches into the epoch)";
    if (max_time > 0) line += "; " + format_duration(earlier_seconds) + " of trainer.max_time " + format_duration(max_time) + " used";
    log_line(line);
    if (writer) out << line << "\n" << std::flush;
    resumed.reset();  // the weights are in the model now
  }
  // Fault injection for the resume tests: the process kills itself (SIGKILL, no cleanup) right
  // after this optimizer step and any checkpoint due at it.
  const char* kill_env = std::getenv("WAVETRAIN_FAULT_KILL_AT_STEP");
  const int64_t kill_at_step = kill_env ? std::atoll(kill_env) : -1;
  const char* kill_rank_env = std::getenv("WAVETRAIN_FAULT_KILL_RANK");  // only this rank, if set
  const int kill_rank = kill_rank_env ? std::atoi(kill_rank_env) : -1;
  // And a pause after every optimizer step, which makes a short run last long enough for the
  // launcher tests to stop it on the way (a real Slurm's time-limit signal) without changing a number.
  const char* delay_env = std::getenv("WAVETRAIN_FAULT_STEP_DELAY_MS");
  const int step_delay_ms = delay_env ? std::atoi(delay_env) : 0;

  bool stop = false;
  int interrupted_by = 0;  // the stop signal that ended this session
  const StopSignalScope stop_scope;  // SIGTERM now stops the loop at a step instead of the process
  int64_t last_validation_step = -1;
  std::vector<std::pair<double, std::filesystem::path>> top_k;  // best first
  const auto better = [&](double a, double b) { return mode == "min" ? a < b : a > b; };
  // A resumed run goes on with the top-k files that earlier attempts kept, so that it keeps k in all.
  if (resuming && writer && !monitor.empty() && save_top_k > 0) {
    top_k = kept_top_k(ckpt_dir, monitor, step, resume == "last");
    std::stable_sort(top_k.begin(), top_k.end(), [&](const auto& a, const auto& b) { return better(a.first, b.first); });
  }

  // Validation over the whole split (each batch weighted by its size), then what hangs on it:
  // logs, the monitored best and top-k checkpoints, early stopping. `consumed` batches of `epoch`
  // are done when it runs (mid-epoch with val_check_interval).
  auto validate = [&](int64_t epoch, int64_t consumed, double loss_value) {
    const Metrics val = evaluate(*task, Split::Validation, device_.device, amp_, batch_size, val_batches);
    model.train();
    last_validation_step = step;
    if (writer) csv->log(step, epoch, val);
    if (writer) {
      for (const auto& [k, v] : val) tb->add_scalar(k, v, step);
      tb->flush();
    }
    result.last = val;
    result.last.emplace_back("train/loss", loss_value);

    // Early stopping is decided first so that the checkpoints below carry its state; its log
    // lines follow the metrics line.
    std::string stop_line;
    if (!stop_monitor.empty()) {
      const double v = find_metric(val, stop_monitor);
      if (!std::isfinite(v)) {
        stop_line = "early stopping: " + stop_monitor + " is " + config::format_float(v) + " at step " + std::to_string(step);
        stopped_early = "nonfinite";
      } else if (std::isnan(stop_best) || (stop_mode == "min" ? v < stop_best - min_delta : v > stop_best + min_delta)) {
        stop_best = v;
        stop_wait = 0;
      } else if (++stop_wait >= patience) {
        stop_line = "early stopping: " + stop_monitor + " did not improve by more than " + config::format_float(min_delta) +
                    " for " + std::to_string(patience) + " validations";
        stopped_early = "patience";
      }
      stop = stop || !stopped_early.empty();
    }

    if (!monitor.empty() && !fast_dev_run) {
      const double v = find_metric(val, monitor);
      if (std::isnan(v))
        throw config::ConfigError("trainer.monitor='" + monitor + "' is not a validation metric of this task");
      const bool new_best = std::isnan(best_value) || better(v, best_value);
      if (new_best) {
        best_value = v;
        result.best = val;
      }
      const bool enters_top_k = save_top_k > 0 && (static_cast<int64_t>(top_k.size()) < save_top_k || better(v, top_k.back().first));
      if (new_best || enters_top_k) {
        const TrainingState state = capture(consumed >= batches ? epoch + 1 : epoch, consumed >= batches ? 0 : consumed, result.last);
        if (new_best && writer) Checkpoint::save((ckpt_dir / "best.ckpt").string(), state);
        if (enters_top_k) {
          const std::filesystem::path file = ckpt_dir / ("epoch=" + std::to_string(epoch + 1) + "-step=" + std::to_string(step) +
                                                         "-" + top_k_metric(monitor) + "=" + config::format_float(v) + ".ckpt");
          if (writer) Checkpoint::save(file.string(), state);
          // A resumed run that repeats a step an earlier attempt saved writes the same file again.
          top_k.erase(std::remove_if(top_k.begin(), top_k.end(), [&](const auto& e) { return e.second == file; }), top_k.end());
          top_k.emplace_back(v, file);
          std::stable_sort(top_k.begin(), top_k.end(), [&](const auto& a, const auto& b) { return better(a.first, b.first); });
          while (static_cast<int64_t>(top_k.size()) > save_top_k) {
            if (writer) std::filesystem::remove(top_k.back().second);
            top_k.pop_back();
          }
        }
      }
    }
    std::string line = "epoch " + std::to_string(epoch + 1) + " step " + std::to_string(step) + ":";
    for (const auto& [k, v] : val) line += " " + k + "=" + config::format_float(v);
    log_line(line);
    if (!terminal && writer) out << line << "\n";
    if (!stop_line.empty()) log_line(stop_line);
  };
  for (int64_t epoch = start_epoch; (epochs < 1 || epoch < epochs) && !stop; ++epoch) {
    model.train();
    const std::vector<int64_t> order = task->train_order(epoch, seed, batch_size);
    if (static_cast<int64_t>(order.size()) != n_train)
      throw std::logic_error("task " + cfg_.get_string("task") + ": train_order gave " + std::to_string(order.size()) +
                             " items for a training split of " + std::to_string(n_train));
    // This rank's slice of global batch b (one slice per rank, in rank order).
    const auto indices_of = [&](int64_t b) {
      const int64_t first = (b * world + rank) * batch_size;
      return std::vector<int64_t>(order.begin() + first, order.begin() + std::min(n_train, first + batch_size));
    };
    // A batch as the parts it trains in (one part unless trainer.cpu_batch_parts cuts it).
    const auto make_parts = [&task, &device = device_.device, parts](const std::vector<int64_t>& indices) {
      std::vector<Batch> out;
      for (std::vector<int64_t>& part : cut_into_parts(indices, parts)) {
        out.push_back(task->make_batch(Split::Train, part, device));
        out.back().indices = std::move(part);
      }
      return out;
    };
    // With a task that allows it, batch b + 1 is made on a second thread while batch b trains.
    std::future<std::vector<Batch>> ahead;
    int64_t ahead_number = -1;
    double loss_value = NAN;
    bool window_bad = false;  // a non-finite loss in this accumulation window (no scaler to catch it)
    int64_t consumed = epoch == start_epoch ? start_batch : 0;  // batches of this epoch done
    for (int64_t b = consumed; b < batches && step < total_steps && !stop; ++b) {
      // Gradients of `accumulate` batches are summed before one optimizer step; each loss is divided
      // by the window's size, so the step equals one on a batch that many times larger.
      const int64_t window_start = b - b % accumulate;
      const int64_t window = std::min(accumulate, batches - window_start);
      if (b == window_start) optimizer->zero_grad();
      // Measured with the real clock, not now_ (which tests replace with one that ticks per reading).
      const auto wait_start = std::chrono::steady_clock::now();
      std::vector<Batch> batch_parts = ahead_number == b ? ahead.get() : make_parts(indices_of(b));
      data_wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
      if (prefetch && b + 1 < batches) {
        ahead_number = b + 1;
        ahead = std::async(std::launch::async, [&make_parts, next = indices_of(b + 1)] { return make_parts(next); });
      }
      for (Batch& part : batch_parts) {
        part.step = step;
        items += part.size;
      }
      Metrics logged;
      at::Tensor loss;  // defined when the batch trained as one part
      if (batch_parts.size() == 1) {
        Batch& batch = batch_parts[0];
        at::Tensor prediction;
        {
          AutocastGuard autocast(amp_);
          prediction = task->forward(batch);
        }
        loss = task->loss(prediction, batch, logged);  // fp32, outside autocast
        loss_value = loss.item<double>();
      } else {
        // The parts at once; their gradients are added to .grad here (parallel_parts.h).
        const PartsResult r = train_parts(*task, batch_parts, trainable, amp_, scaler,
                                          1.0 / static_cast<double>(window * static_cast<int64_t>(batch_parts.size())),
                                          next_random_seed());
        loss_value = r.finite ? r.loss : NAN;
        logged = r.logged;
      }
      if (!std::isfinite(loss_value) && !scaler.enabled()) {
        const std::string where = "non-finite loss " + config::format_float(loss_value) + " at step " +
                                  std::to_string(step) + " (epoch " + std::to_string(epoch) + ", batch " +
                                  std::to_string(b) + ")";
        if (on_nonfinite == "stop") throw std::runtime_error(where + "; set trainer.on_nonfinite=skip to skip such steps");
        log_line("warning: " + where + ": step skipped");
        window_bad = true;
      } else if (loss.defined()) {
        scaler.scale(loss / static_cast<double>(window)).backward();
      }
      if (b + 1 < window_start + window) continue;  // more batches to accumulate

      if (group_) {
        window_bad = any_rank(window_bad);  // a rank that skips makes every rank skip
        std::vector<at::Tensor> grads;
        for (const at::Tensor& p : model.parameters())
          if (p.grad().defined()) grads.push_back(p.grad());
        group_->average(grads);
      }

      if (window_bad) {  // with a scaler, its step() skips non-finite gradients by itself
        window_bad = false;
        ++skipped_steps;
        consumed = b + 1;
        continue;
      }
      if (clip > 0) {
        scaler.unscale_(*optimizer);  // clip the true gradients, not the scaled ones
        if (clip_algorithm == "norm") torch::nn::utils::clip_grad_norm_(model.parameters(), clip);
        else torch::nn::utils::clip_grad_value_(model.parameters(), clip);
      }
      scaler.step(*optimizer);
      scaler.update();
      ++step;
      consumed = b + 1;
      if (scheduler.options().interval == "step") scheduler.step(*optimizer);
      // Not at the last step: the run's end saves after its final validation, and a checkpoint at
      // max_steps from before it would make a resume after a crash here see a finished run.
      if (every_n_steps > 0 && step % every_n_steps == 0 && step < total_steps && !fast_dev_run)
        if (writer) Checkpoint::save((ckpt_dir / "last.ckpt").string(), capture(epoch, consumed, result.last));
      if (step == kill_at_step && (kill_rank < 0 || kill_rank == rank)) std::raise(SIGKILL);
      if (step_delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step_delay_ms));
      if (step % log_every == 0 || step == total_steps) {
        logged.insert(logged.begin(), {"train/loss", loss_value});
        logged.emplace_back("lr", optimizer->param_groups()[0].options().get_lr());
        if (writer) csv->log(step, epoch, logged);
        if (writer)
          for (const auto& [k, v] : logged) tb->add_scalar(k, v, step);
      }
      last_loss = loss_value;
      if (writer) progress.update(progress_state(epoch, loss_value));
      const int64_t steps_in_epoch = ceil_div(consumed, accumulate);
      if (val_every > 0 && consumed < batches &&
          (val_every_global ? step % val_every == 0 : steps_in_epoch % val_every == 0))
        validate(epoch, consumed, loss_value);
      if (max_time > 0 && any_rank(run_seconds() >= max_time)) {
        log_line("stopping: trainer.max_time (" + config::format_float(max_time) + " s) reached at step " +
                 std::to_string(step));
        stop = true;
      }
      // A stop request (stop_signal.h): every rank stops after the same step. After the epoch's last
      // batch it waits for the epoch's validation and checkpoint (below); after the run's last step
      // it is not needed: the run ends by itself.
      if (step < total_steps && consumed < batches && any_rank(stop_signal_received() != 0)) {
        interrupted_by = stop_signal_received() ? stop_signal_received() : SIGUSR1;  // another rank's request
        stop = true;
        break;
      }
    }
    if (interrupted_by != 0) {
      // The state after the last step: a resume runs what remains of the epoch.
      if (writer) Checkpoint::save((ckpt_dir / "last.ckpt").string(), capture(epoch, consumed, result.last));
      any_rank(false);  // a barrier: no rank ends before rank 0 has saved
      log_line(std::string("stopping: ") + stop_signal_name(interrupted_by) + " received; checkpoint saved at step " +
               std::to_string(step) + " (continue with trainer.resume=last)");
      result.interrupted_by = interrupted_by;
      result.epochs = epoch + 1;  // the epoch under way
      result.global_step = step;
      break;
    }

    if (last_validation_step != step || step == 0) validate(epoch, consumed, loss_value);
    if (scheduler.options().interval == "epoch") scheduler.step(*optimizer);
    result.epochs = epoch + 1;
    result.global_step = step;

    // An epoch cut short (max_steps, max_time) is recorded as such, so a resume finishes it.
    const bool epoch_done = consumed >= batches;
    const TrainingState state = capture(epoch_done ? epoch + 1 : epoch, epoch_done ? 0 : consumed, result.last);
    if (!fast_dev_run) {
      if (writer) Checkpoint::save((ckpt_dir / "last.ckpt").string(), state);
      if (epoch_done && every_n_epochs > 0 && (epoch + 1) % every_n_epochs == 0)
        if (writer) Checkpoint::save((ckpt_dir / ("epoch=" + std::to_string(epoch + 1) + "-step=" + std::to_string(step) + ".ckpt")).string(),
                         state);
    }
    if (step >= total_steps) break;
    // A stop request at the epoch's end: its checkpoint is the one just saved.
    if (!stop && !fast_dev_run && any_rank(stop_signal_received() != 0)) {
      interrupted_by = stop_signal_received() ? stop_signal_received() : SIGUSR1;
      any_rank(false);  // a barrier: no rank ends before rank 0 has saved
      log_line(std::string("stopping: ") + stop_signal_name(interrupted_by) + " received; checkpoint saved at step " +
               std::to_string(step) + " (continue with trainer.resume=last)");
      result.interrupted_by = interrupted_by;
      break;
    }
  }
  if (skipped_steps > 0) log_line(std::to_string(skipped_steps) + " steps skipped for non-finite losses");
  if (prefetch && step > start_step) {
    char line[160];
    std::snprintf(line, sizeof line, "data: the training loop waited %.2f s for batches (%.1f%% of %.1f s)", data_wait_seconds,
                  100 * data_wait_seconds / std::max(1e-9, elapsed()), elapsed());
    log_line(line);
  }
  // The last line shows where the run ended, not where the last timed redraw happened to be.
  if (writer && step > start_step) progress.update(progress_state(result.epochs - 1, last_loss), /*force=*/true);
  progress.finish();
  if (!writer || interrupted_by != 0) return result;  // result.json is for a run that ended by itself

  nlohmann::json j;
  j["last"] = to_json(result.last);
  if (!result.best.empty()) j["best"] = to_json(result.best);
  j["epochs"] = result.epochs;
  j["global_step"] = result.global_step;
  j["skipped_steps"] = skipped_steps;
  if (!fast_dev_run) j["checkpoints"]["last"] = (ckpt_dir / "last.ckpt").string();
  if (!result.best.empty()) j["checkpoints"]["best"] = (ckpt_dir / "best.ckpt").string();
  j["seconds"] = elapsed();
  j["data_wait_seconds"] = data_wait_seconds;
  write_file_atomic((run_.path() / "result.json").string(), j.dump(2) + "\n");
  return result;
}

}  // namespace wavetrain
