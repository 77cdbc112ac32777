// The training loop; see trainer.h. Everything around the loop (checkpoints, early stopping,
// progress, logs, max_time, stop signals) is a callback (callback.h, callbacks/).
#include "trainer/trainer.h"

#include <torch/nn/module.h>
#include <torch/nn/utils/clip_grad.h>
#include <torch/optim/optimizer.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <iostream>
#include <nlohmann/json.hpp>

#include "trainer/ahead_thread.h"
#include "trainer/callbacks/builtin.h"
#include "trainer/config/yaml_io.h"
#include "trainer/grad_scaler.h"
#include "trainer/lr_scheduler.h"
#include "trainer/gradient_sync.h"
#include "trainer/parallel_parts.h"
#include "trainer/progress.h"
#include "trainer/serialization/atomic_file.h"
#include "trainer/torch_compat.h"
#include "trainer/weights.h"

namespace wavetrain {
namespace {

nlohmann::json to_json(const Metrics& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [k, v] : m) j[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
  return j;
}

}  // namespace

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

namespace {

// One fit: the run's parts, built in the constructor, and the loop over them (run()).
class FitLoop {
 public:
  FitLoop(const config::Config& cfg, const FitOptions& o, const RunDirectory& run, const at::Device& device,
          const AmpPolicy& amp, ProcessGroup* group, std::ostream& out, bool terminal, std::function<double()> now)
      : cfg_(cfg), o_(o), device_(device), amp_(amp), group_(group), now_(std::move(now)),
        task_(make_task(o.task, cfg)),
        model_(task_->model()),
        // On the device, with rank 0's weights, before the optimizer sees the parameters.
        groups_((model_.to(device), broadcast_weights(group, model_), task_->param_groups())),
        optimizer_(make_run_optimizer()),
        scheduler_(o.schedule, base_lrs(*optimizer_)),
        scaler_({65536.0, 2.0, 0.5, 2000, amp.grad_scaler}),
        callbacks_(make_run_callbacks(o, make_configured_callbacks(cfg))),
        ctx_(cfg, o, run, *task_, *optimizer_, groups_, result_, out, terminal) {
    ctx_.rank = group ? group->rank() : 0;
    ctx_.world = group ? group->size() : 1;
    ctx_.resuming = !o.resume.empty();
    ctx_.unit = task_->throughput_unit();
    ctx_.any_rank = [this](bool flag) { return any_rank(flag); };
    ctx_.log = [this, &run](const std::string& line) {
      if (ctx_.writer()) run.log(line);
    };
    ctx_.log_metrics = [this](const Metrics& m) { each(&Callback::on_log_metrics, m); };
    ctx_.capture = [this](int64_t epoch, int64_t batch_in_epoch, const Metrics& m) { return capture(epoch, batch_in_epoch, m); };
    // The config every checkpoint records, with what the task derived from its data.
    config::Node recorded = cfg.tree();
    task_->add_to_recorded_config(recorded);
    recorded_config_ = config::to_yaml(recorded);
    configured_callbacks_ = !configured_callback_names(cfg).empty();
    size_epochs();
  }

  // Trains from `resumed` (a checkpoint's state) or from the start, and returns what result.json
  // records; the callbacks' on_exception hooks see any error on the way out.
  FitResult run(std::optional<TrainingState> resumed, const std::string& resume_path) {
    const double start = now_();
    ctx_.elapsed = [this, start] { return now_() - start; };
    try {
      if (resumed) restore(*resumed, resume_path);
      resumed.reset();  // the weights are in the model now
      each(&Callback::on_fit_start);
      for (int64_t epoch = start_epoch_; (ctx_.epochs < 1 || epoch < ctx_.epochs) && !ctx_.stop; ++epoch) {
        ctx_.epoch = epoch;
        ctx_.batch_in_epoch = epoch == start_epoch_ ? start_batch_ : 0;
        model_.train();
        scheduler_.set_epoch(*optimizer_, epoch);  // eden's epoch term; the others ignore it
        each(&Callback::on_train_epoch_start);
        const double loss = train_epoch();
        const bool mid_epoch = ctx_.batch_in_epoch < ctx_.batches && ctx_.step < ctx_.total_steps;
        if (ctx_.interrupted_by && mid_epoch) {
          each(&Callback::on_interrupt, /*mid_epoch=*/true);
          result_.epochs = epoch + 1;  // the epoch under way
          break;
        }
        if (last_validation_step_ != ctx_.step || ctx_.step == 0) validate(loss);
        if (scheduler_.options().interval == "epoch") scheduler_.step(*optimizer_);
        result_.epochs = epoch + 1;
        if (const Metrics m = task_->train_epoch_metrics(epoch); !m.empty()) ctx_.log_metrics(m);
        each(&Callback::on_train_epoch_end);  // last.ckpt of the epoch
        if (ctx_.step >= ctx_.total_steps) {  // over by itself: a stop request changes nothing now
          ctx_.interrupted_by = 0;
          break;
        }
        if (ctx_.interrupted_by) {  // at the epoch's end: its last.ckpt was just saved
          each(&Callback::on_interrupt, /*mid_epoch=*/false);
          break;
        }
      }
      result_.global_step = ctx_.step;
      result_.interrupted_by = ctx_.interrupted_by;
      if (skipped_steps_ > 0) ctx_.log(std::to_string(skipped_steps_) + " steps skipped for non-finite losses or gradients");
      if (task_->prefetch_batches() && ctx_.step > ctx_.start_step) {
        char line[160];
        std::snprintf(line, sizeof line, "data: the training loop waited %.2f s for batches (%.1f%% of %.1f s)",
                      data_wait_seconds_, 100 * data_wait_seconds_ / std::max(1e-9, ctx_.elapsed()), ctx_.elapsed());
        ctx_.log(line);
      }
      each(&Callback::on_fit_end);
    } catch (const std::exception& e) {
      each(&Callback::on_exception, e);
      throw;
    }
    return result_;
  }

  double seconds() const { return ctx_.elapsed(); }
  double data_wait_seconds() const { return data_wait_seconds_; }
  int64_t skipped_steps() const { return skipped_steps_; }

 private:
  // The batches of one epoch from ctx_.batch_in_epoch on, until the epoch, total_steps, a stop or a
  // stop signal ends it. Returns the last batch's loss.
  double train_epoch() {
    const int64_t epoch = ctx_.epoch, batches = ctx_.batches, accumulate = o_.accumulate;
    order_ = task_->train_order(epoch, o_.seed, o_.batch_size);
    if (static_cast<int64_t>(order_.size()) != n_train_)
      throw std::logic_error("task " + o_.task + ": train_order gave " + std::to_string(order_.size()) +
                             " items for a training split of " + std::to_string(n_train_));
    // With a task that allows it, batch b + 1 is made on a second thread while batch b trains. A
    // batch being made when the loop leaves early (stop, error) is waited for, not abandoned.
    std::future<std::vector<Batch>> ahead;
    struct WaitAtExit {
      std::future<std::vector<Batch>>& f;
      ~WaitAtExit() {
        if (f.valid()) f.wait();
      }
    } wait_at_exit{ahead};
    int64_t ahead_number = -1;
    double loss = NAN;
    bool window_bad = false;  // a non-finite loss in this accumulation window (no scaler to catch it)
    for (int64_t b = ctx_.batch_in_epoch; b < batches && ctx_.step < ctx_.total_steps && !ctx_.stop; ++b) {
      // Gradients of `accumulate` batches are summed before one optimizer step; each loss is divided
      // by the window's size, so the step equals one on a batch that many times larger.
      const int64_t window_start = b - b % accumulate;
      const int64_t window = std::min(accumulate, batches - window_start);
      if (b == window_start) optimizer_->zero_grad();
      // Measured with the real clock, not now_ (which tests replace with one that ticks per reading).
      const auto wait_start = std::chrono::steady_clock::now();
      std::vector<Batch> parts = ahead_number == b ? ahead.get() : make_parts(b);
      data_wait_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - wait_start).count();
      if (task_->prefetch_batches() && b + 1 < batches) {
        ahead_number = b + 1;
        if (!ahead_thread_) ahead_thread_ = std::make_unique<AheadThread<std::vector<Batch>>>();
        ahead = ahead_thread_->submit([this, b] { return make_parts(b + 1); });
      }
      Metrics logged;
      if (sync_ && b + 1 == window_start + window) sync_->arm();  // the window's last backward
      loss = forward_backward(parts, window, logged);
      if (!std::isfinite(loss) && !scaler_.enabled()) {
        const std::string where = "non-finite loss " + config::format_float(loss) + " at step " + std::to_string(ctx_.step) +
                                  " (epoch " + std::to_string(epoch) + ", batch " + std::to_string(b) + ")";
        if (o_.on_nonfinite == "stop") throw std::runtime_error(where + "; set trainer.on_nonfinite=skip to skip such steps");
        ctx_.log("warning: " + where + ": step skipped");
        window_bad = true;
      }
      if (b + 1 < window_start + window) continue;  // more batches to accumulate

      ctx_.batch_in_epoch = b + 1;
      if (!optimizer_step(window_bad)) {  // skipped: every rank had a non-finite loss in the window
        window_bad = false;
        continue;
      }
      ctx_.loss = loss;
      TrainStep step{loss, std::move(logged), ctx_.step % o_.log_every == 0 || ctx_.step == ctx_.total_steps};
      if (step.log) {
        step.logged.insert(step.logged.begin(), {"train/loss", loss});
        step.logged.emplace_back("lr", optimizer_->param_groups()[0].options().get_lr());
      }
      each(&Callback::on_train_batch_end, step);
      // The built-in callbacks stop every rank at the same step; a configured one might ask on one
      // rank only, and the ranks must not part (their next collectives would not pair).
      if (group_ && configured_callbacks_) ctx_.stop = any_rank(ctx_.stop);
      if (step.log) ctx_.log_metrics(step.logged);
      const int64_t steps_in_epoch = ceil_div(ctx_.batch_in_epoch, accumulate);
      if (val_every_ > 0 && ctx_.batch_in_epoch < batches &&
          (val_every_global_ ? ctx_.step % val_every_ == 0 : steps_in_epoch % val_every_ == 0))
        validate(loss);
      // stop_on_signal, after this step's validation if one was due; at the epoch's last batch or
      // the run's last step it is handled at the epoch's end instead.
      if (ctx_.interrupted_by && ctx_.batch_in_epoch < batches && ctx_.step < ctx_.total_steps) break;
    }
    return loss;
  }

  // The forward and backward of one batch (its parts at once with trainer.cpu_batch_parts): the
  // loss, with what the task logs for it; the gradients are added to .grad.
  double forward_backward(std::vector<Batch>& parts, int64_t window, Metrics& logged) {
    for (Batch& part : parts) {
      part.step = ctx_.step;
      ctx_.items += part.size;
    }
    if (parts.size() > 1) {  // parallel_parts.h
      const PartsResult r = train_parts(*task_, parts, trainable_, amp_, scaler_,
                                        1.0 / static_cast<double>(window * static_cast<int64_t>(parts.size())), next_random_seed());
      logged = r.logged;
      return r.finite ? r.loss : NAN;
    }
    at::Tensor prediction;
    {
      AutocastGuard autocast(amp_);
      prediction = task_->forward(parts[0]);
    }
    const at::Tensor loss = task_->loss(prediction, parts[0], logged);  // fp32, outside autocast
    const double value = loss.item<double>();
    if (std::isfinite(value) || scaler_.enabled()) {
      const at::Tensor scaled = scaler_.scale(loss / static_cast<double>(window));
      if (sync_) sync_->backward(scaled);  // gradient_sync.h: buckets averaged as the backward makes them
      else scaled.backward();
    }
    return value;
  }

  // The end of an accumulation window: gradients averaged over the ranks, clipped, and the step.
  // False when the window is skipped for a non-finite loss on any rank (with a scaler, its step()
  // skips non-finite gradients by itself).
  bool optimizer_step(bool window_bad) {
    if (sync_) {
      // The buckets' collectives first (most started during the backward), then the agreement: the
      // same order on every rank, also on one that skipped its backward.
      sync_->finish();
      window_bad = any_rank(window_bad);
    } else if (group_) {
      window_bad = any_rank(window_bad);  // a rank that skips makes every rank skip
      std::vector<at::Tensor> grads;
      for (const at::Tensor& p : model_.parameters())
        if (p.grad().defined()) grads.push_back(p.grad());
      group_->average(grads, bucket_bytes());
    }
    if (window_bad) {
      ++skipped_steps_;
      return false;
    }
    // A finite loss can still come with a non-finite gradient (an operator's backward at a point its
    // forward handles: ATen's CTC loss of an utterance too long for its frames, masked out of the
    // loss, gave NaN gradients). One such step makes every weight NaN, and the run would go on
    // without learning. The gradient scaler checks for itself; without it, the gradients are checked
    // here (after DDP's averaging, so every rank decides alike) and on_nonfinite applies.
    if (!scaler_.enabled() && !gradients_finite()) {
      const std::string where = "non-finite gradient at step " + std::to_string(ctx_.step) + " (epoch " +
                                std::to_string(ctx_.epoch) + ", batch " + std::to_string(ctx_.batch_in_epoch - 1) +
                                ") with a finite loss";
      if (o_.on_nonfinite == "stop") throw std::runtime_error(where + "; set trainer.on_nonfinite=skip to skip such steps");
      ctx_.log("warning: " + where + ": step skipped");
      ++skipped_steps_;
      return false;
    }
    if (o_.clip > 0) {
      scaler_.unscale_(*optimizer_);  // clip the true gradients, not the scaled ones
      if (o_.clip_algorithm == "norm") torch::nn::utils::clip_grad_norm_(model_.parameters(), o_.clip);
      else torch::nn::utils::clip_grad_value_(model_.parameters(), o_.clip);
    }
    scaler_.step(*optimizer_);
    scaler_.update();
    ++ctx_.step;
    if (scheduler_.options().interval == "step") scheduler_.step(*optimizer_);
    return true;
  }

  // Whether every gradient is finite, with one read from the device for all of them.
  bool gradients_finite() {
    at::Tensor all;
    for (const at::Tensor& p : model_.parameters()) {
      if (!p.grad().defined()) continue;
      const at::Tensor finite = at::isfinite(p.grad()).all();
      all = all.defined() ? all.logical_and(finite) : finite;
    }
    return !all.defined() || all.item<bool>();
  }

  // Validation over the split (each batch weighted as the task says), logged, then the callbacks'
  // on_validation_end (the validation line, early stopping, best and top-k checkpoints).
  void validate(double train_loss) {
    const Metrics val = evaluate(*task_, Split::Validation, device_, amp_, o_.batch_size, val_batches_);
    model_.train();
    last_validation_step_ = ctx_.step;
    result_.last = val;
    result_.last.emplace_back("train/loss", train_loss);
    ctx_.log_metrics(val);
    each(&Callback::on_validation_end, val);
  }

  // A batch as the parts it trains in (one part unless trainer.cpu_batch_parts cuts it): this
  // rank's slice of global batch b (one slice per rank, in rank order).
  std::vector<Batch> make_parts(int64_t b) const {
    const int64_t first = (b * ctx_.world + ctx_.rank) * o_.batch_size;
    const std::vector<int64_t> indices(order_.begin() + first, order_.begin() + std::min(n_train_, first + o_.batch_size));
    std::vector<Batch> out;
    for (std::vector<int64_t>& part : cut_into_parts(indices, parts_)) {
      out.push_back(task_->make_batch(Split::Train, part, device_));
      out.back().indices = std::move(part);
    }
    return out;
  }

  // Everything needed to continue exactly: `batch_in_epoch` batches of `epoch` are done.
  TrainingState capture(int64_t epoch, int64_t batch_in_epoch, const Metrics& metrics) const {
    TrainingState state;
    state.model = module_state_dict(model_);
    state.optimizer = optimizer_state(*optimizer_);
    state.scheduler = serialization::Value::dict(
        {{serialization::Value::string("name"), serialization::Value::string(scheduler_.options().name)},
         {serialization::Value::string("count"), serialization::Value::integer(scheduler_.count())}});
    if (scaler_.enabled()) state.scaler = scaler_.state();
    state.epoch = epoch;
    state.batch_in_epoch = batch_in_epoch;
    state.global_step = ctx_.step;
    state.rng = capture_rng();
    state.config_yaml = recorded_config_;
    state.metrics = metrics;
    state.train_seconds = ctx_.run_seconds();
    for (const std::unique_ptr<Callback>& c : callbacks_) c->on_save_checkpoint(ctx_, state);
    return state;
  }

  // A resumed run: the model, optimizer, schedule, scaler and RNG as the checkpoint has them, then
  // the callbacks' own state.
  void restore(const TrainingState& state, const std::string& path) {
    try {
      load_state_dict(model_, state.model, /*strict=*/true, path);
      load_optimizer_state(*optimizer_, state.optimizer, path);
    } catch (const std::exception& e) {
      if (ctx_.rank != 0) throw RankZeroReportsError(e.what());  // the same file and config on every rank
      throw;
    }
    scheduler_.set_epoch(*optimizer_, state.epoch);
    if (const serialization::Value* count = state.scheduler.is_none() ? nullptr : state.scheduler.find("count"))
      scheduler_.set_count(*optimizer_, count->as_int());
    if (state.scaler && scaler_.enabled()) scaler_.load_state(*state.scaler);
    restore_rng(state.rng);
    ctx_.epoch = start_epoch_ = state.epoch;
    ctx_.batch_in_epoch = start_batch_ = state.batch_in_epoch;
    ctx_.step = ctx_.start_step = state.global_step;
    ctx_.earlier_seconds = state.train_seconds;
    for (const std::unique_ptr<Callback>& c : callbacks_) c->on_load_checkpoint(ctx_, state);
    // Epochs as the progress line counts them (1-based, the one under way).
    std::string line = "resumed from " + path + " at epoch " + std::to_string(start_epoch_ + 1) + ", step " +
                       std::to_string(ctx_.step);
    if (start_batch_ > 0) line += " (" + std::to_string(start_batch_) + " batches into the epoch)";
    if (o_.max_time > 0)
      line += "; " + format_duration(ctx_.earlier_seconds) + " of trainer.max_time " + format_duration(o_.max_time) + " used";
    ctx_.log(line);
    if (ctx_.writer()) ctx_.out << line << "\n" << std::flush;
  }

  // The epoch's batches, steps and validation batches, the run's total steps, and when validation
  // runs within an epoch; logged as the run's first line.
  void size_epochs() {
    const int64_t world = ctx_.world, batch_size = o_.batch_size;
    n_train_ = task_->size(Split::Train);
    const int64_t n_val = task_->size(Split::Validation);
    ctx_.epochs = o_.fast_dev_run ? 1 : o_.max_epochs;
    ctx_.batches = o_.fast_dev_run ? 1 : o_.limit_train.of(world > 1 ? n_train_ / batch_size / world : ceil_div(n_train_, batch_size));
    if (ctx_.batches < 1)
      throw config::ConfigError("trainer.batch_size=" + std::to_string(batch_size) + " on " + std::to_string(world) +
                                " ranks is larger than the " + std::to_string(n_train_) + " training items");
    val_batches_ = o_.fast_dev_run ? 1 : o_.limit_val.of(ceil_div(n_val, batch_size));
    const int64_t steps_per_epoch = ceil_div(ctx_.batches, o_.accumulate);
    // epochs x steps must count in 64 bits; beyond that only max_steps can be the limit.
    int64_t epoch_steps = 0;
    const bool overflow = ctx_.epochs > 0 && __builtin_mul_overflow(ctx_.epochs, steps_per_epoch, &epoch_steps);
    const bool by_steps = o_.max_steps > 0 && !o_.fast_dev_run;
    if (overflow && !by_steps)
      throw config::ConfigError("trainer.max_epochs=" + std::to_string(o_.max_epochs) + ": " + std::to_string(o_.max_epochs) +
                                " epochs of " + std::to_string(steps_per_epoch) +
                                " steps are more steps than can be counted (2^63 - 1); give a smaller number, or a trainer.max_steps");
    ctx_.total_steps = by_steps ? (ctx_.epochs > 0 && !overflow ? std::min(o_.max_steps, epoch_steps) : o_.max_steps) : epoch_steps;
    // val_check_interval: an int is a number of global steps, a fraction one of an epoch's steps.
    val_every_global_ = o_.val_every_steps > 0;
    val_every_ = val_every_global_ ? o_.val_every_steps
                 : o_.val_every_fraction < 1.0
                     ? std::max<int64_t>(1, static_cast<int64_t>(o_.val_every_fraction * static_cast<double>(steps_per_epoch)))
                     : 0;
    ctx_.log("training " + o_.task + ": " + std::to_string(n_train_) + " items, " + std::to_string(ctx_.batches) + " batches of " +
             std::to_string(batch_size) + " per epoch, " + std::to_string(ctx_.total_steps) + " steps");
    parts_ = batch_parts(cfg_, device_, *task_);
    if (parts_ > 1)
      ctx_.log("training each batch as " + std::to_string(parts_) + " parts at once, one per thread (trainer.cpu_batch_parts)");
    std::vector<std::string> names;
    for (const auto& p : model_.named_parameters())
      if (p.value().requires_grad()) {
        trainable_.push_back(p.value());
        names.push_back(p.key());
      }
    // Gradient averaging overlapped with the backward (gradient_sync.h); batch parts train through
    // their own gradients, so with parts the average runs after the backward.
    if (group_ && o_.ddp_overlap && parts_ == 1) {
      GradientSyncOptions sync;
      sync.engine = o_.ddp_engine;
      sync.bucket_bytes = bucket_bytes();
      sync.find_unused_parameters = o_.ddp_find_unused_parameters;
      sync_ = make_gradient_sync(*group_, trainable_, names, sync);
      ctx_.log(std::string("gradients averaged during the backward by ") +
               (std::string(sync_->engine()) == "reducer" ? "c10d's Reducer (DDP's engine)" : "wavetrain's gradient hooks") + ", " +
               std::to_string(sync_->buckets()) + " buckets of at most " + config::format_float(o_.ddp_bucket_mb) + " MiB");
    }
  }

  size_t bucket_bytes() const { return static_cast<size_t>(o_.ddp_bucket_mb * (1 << 20)); }

  // Every rank starts from rank 0's weights.
  static void broadcast_weights(ProcessGroup* group, torch::nn::Module& model) {
    if (!group) return;
    std::vector<at::Tensor> state;
    for (auto& [name, t] : module_state_dict(model)) state.push_back(t);
    group->broadcast_from_rank0(state);
  }

  std::unique_ptr<torch::optim::Optimizer> make_run_optimizer() {
    std::unique_ptr<torch::optim::Optimizer> own = task_->make_optimizer(groups_, cfg_);
    return own ? std::move(own) : make_optimizer(cfg_, groups_);
  }
  static std::vector<double> base_lrs(torch::optim::Optimizer& optimizer) {
    std::vector<double> lrs;
    for (auto& g : optimizer.param_groups()) lrs.push_back(g.options().get_lr());
    return lrs;
  }

  // True on every rank when it is true on any.
  bool any_rank(bool flag) const {
    if (!group_) return flag;
    const at::Tensor t = at::full({1}, flag ? 1.0f : 0.0f);
    group_->average({t});
    return t.item<float>() > 0;
  }

  // Calls one hook of every callback, in order.
  template <typename... Hook, typename... Args>
  void each(void (Callback::*hook)(FitContext&, Hook...), Args&&... args) {
    for (const std::unique_ptr<Callback>& c : callbacks_) ((*c).*hook)(ctx_, args...);
  }

  const config::Config& cfg_;
  const FitOptions& o_;
  const at::Device device_;
  const AmpPolicy& amp_;
  ProcessGroup* group_;
  std::function<double()> now_;
  std::unique_ptr<Task> task_;
  torch::nn::Module& model_;
  std::vector<ParamGroup> groups_;
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  LrScheduler scheduler_;
  GradScaler scaler_;
  std::vector<std::unique_ptr<Callback>> callbacks_;
  FitResult result_;
  FitContext ctx_;
  std::string recorded_config_;
  std::vector<at::Tensor> trainable_;  // for the batch parts' own gradients
  std::unique_ptr<GradientSync> sync_;  // with several ranks and trainer.ddp_overlap
  std::vector<int64_t> order_;         // the epoch's item order
  int64_t n_train_ = 0, val_batches_ = 0, parts_ = 1;
  int64_t val_every_ = 0;
  bool val_every_global_ = false;
  bool configured_callbacks_ = false;  // callbacks: [...] names some
  int64_t start_epoch_ = 0, start_batch_ = 0;  // where a resumed run starts
  int64_t last_validation_step_ = -1;
  int64_t skipped_steps_ = 0;
  double data_wait_seconds_ = 0;  // the loop waited for its batches (made in line, or the prefetch not ready)
  // Makes the next batch (ahead_thread.h: one thread for the whole fit, not one per batch). Last, so
  // that it ends, after the job it is running, before the members that job reads.
  std::unique_ptr<AheadThread<std::vector<Batch>>> ahead_thread_;
};

}  // namespace

FitResult Trainer::fit() {
  const FitOptions options = FitOptions::from(cfg_);
  if (options.deterministic) {
    // cuBLAS needs a fixed workspace for reproducible results; it reads this when CUDA starts.
    if (device_.device.is_cuda()) setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  }
  // A resumed run's state is judged before anything is built or written: a run that is over keeps
  // its record (result.json, metrics.csv, event files, checkpoints) exactly as it is.
  const std::string resume_path = resume_checkpoint(cfg_, run_.path());
  std::optional<TrainingState> resumed;
  if (!options.resume.empty()) {
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
  at::manual_seed(static_cast<uint64_t>(options.seed));  // CPU and CUDA generators
  compat::mps_manual_seed(static_cast<uint64_t>(options.seed));
  FitLoop loop(cfg_, options, run_, device_.device, amp_, group_, *out_, terminal_, now_);
  const FitResult result = loop.run(std::move(resumed), resume_path);
  if ((group_ && group_->rank() != 0) || result.interrupted_by != 0) return result;  // result.json: a run that ended by itself

  const std::filesystem::path ckpt_dir = run_.path() / "checkpoints";
  nlohmann::json j;
  j["last"] = to_json(result.last);
  if (!result.best.empty()) j["best"] = to_json(result.best);
  j["epochs"] = result.epochs;
  j["global_step"] = result.global_step;
  j["skipped_steps"] = loop.skipped_steps();
  if (!options.fast_dev_run) j["checkpoints"]["last"] = (ckpt_dir / "last.ckpt").string();
  if (!result.best.empty()) j["checkpoints"]["best"] = (ckpt_dir / "best.ckpt").string();
  j["seconds"] = loop.seconds();
  j["data_wait_seconds"] = loop.data_wait_seconds();
  write_file_atomic((run_.path() / "result.json").string(), j.dump(2) + "\n");
  return result;
}

}  // namespace wavetrain
