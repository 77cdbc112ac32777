// model_checkpoint: the checkpoints of a run, in RUN/checkpoints/ (checkpoint.h for the format):
//
//   last.ckpt      after every epoch (its state at the epoch's end), every trainer.checkpoint.
//                  every_n_steps steps, and when a stop signal ends a session mid-epoch
//   best.ckpt      at every validation that improves trainer.monitor (by trainer.mode)
//   epoch=E-step=S-<monitor>=<value>.ckpt   the trainer.checkpoint.save_top_k best validations
//   epoch=E-step=S.ckpt                     every trainer.checkpoint.every_n_epochs epochs
//
// fast_dev_run saves none of them; only rank 0 captures and saves. Its state, the best monitored value so far, is the checkpoint
// metric `best/<monitor>`, where result.json's readers and older checkpoints have it.
#include <algorithm>
#include <filesystem>

#include "trainer/callbacks/builtin.h"

namespace wavetrain {
namespace {

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

using TopK = std::vector<std::pair<double, std::filesystem::path>>;  // best first

// The top-k checkpoints of `monitor` in `dir`, as earlier attempts of the run left them, up to
// `step`. Those of later steps are of a stretch that the resumed run trains again: removed when
// `remove_later` (they would come back under names of their own), else left out.
TopK kept_top_k(const std::filesystem::path& dir, const std::string& monitor, int64_t step, bool remove_later) {
  TopK kept;
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

class ModelCheckpoint : public Callback {
 public:
  explicit ModelCheckpoint(const FitOptions& o) : o_(o) {}

  std::string name() const override { return "model_checkpoint"; }

  void on_load_checkpoint(FitContext& ctx, const TrainingState& state) override {
    best_ = find_metric(state.metrics, "best/" + o_.monitor);
    // result.json's best metrics outlive the interruption: they are the ones best.ckpt was saved
    // with (its validation metrics, without the training loss and the running best).
    const std::filesystem::path best = dir(ctx) / "best.ckpt";
    if (!o_.monitor.empty() && ctx.writer() && !std::isnan(best_) && std::filesystem::exists(best))
      for (const auto& [name, value] : Checkpoint::load(best.string()).metrics)
        if (name != "train/loss" && name.rfind("best/", 0) != 0) ctx.result.best.emplace_back(name, value);
  }

  void on_fit_start(FitContext& ctx) override {
    if (ctx.rank == 0) std::filesystem::create_directories(dir(ctx));
    // A resumed run goes on with the top-k files that earlier attempts kept, so that it keeps k in all.
    if (ctx.resuming && ctx.writer() && !o_.monitor.empty() && o_.save_top_k > 0) {
      top_k_ = kept_top_k(dir(ctx), o_.monitor, ctx.step, o_.resume == "last");
      sort_top_k();
    }
  }

  void on_save_checkpoint(const FitContext& ctx, TrainingState& state) const override {
    (void)ctx;
    if (!std::isnan(best_)) state.metrics.emplace_back("best/" + o_.monitor, best_);
  }

  void on_train_batch_end(FitContext& ctx, TrainStep& step) override {
    (void)step;
    // Not at the last step: the run's end saves after its final validation, and a checkpoint at
    // max_steps from before it would make a resume after a crash here see a finished run.
    if (ctx.writer() && o_.every_n_steps > 0 && ctx.step % o_.every_n_steps == 0 && ctx.step < ctx.total_steps && !o_.fast_dev_run)
      save(ctx, "last.ckpt", ctx.capture(ctx.epoch, ctx.batch_in_epoch, ctx.result.last));
  }

  void on_validation_end(FitContext& ctx, const Metrics& metrics) override {
    if (o_.monitor.empty() || o_.fast_dev_run) return;
    const double v = find_metric(metrics, o_.monitor);
    if (std::isnan(v)) throw config::ConfigError("trainer.monitor='" + o_.monitor + "' is not a validation metric of this task");
    const bool new_best = std::isnan(best_) || better(v, best_);
    if (new_best) {
      best_ = v;
      ctx.result.best = metrics;
    }
    const bool enters_top_k = o_.save_top_k > 0 && (static_cast<int64_t>(top_k_.size()) < o_.save_top_k || better(v, top_k_.back().first));
    if (!ctx.writer() || (!new_best && !enters_top_k)) return;
    // A validation at the epoch's end is the state of the next epoch's start.
    const bool epoch_done = ctx.batch_in_epoch >= ctx.batches;
    const TrainingState state = ctx.capture(epoch_done ? ctx.epoch + 1 : ctx.epoch, epoch_done ? 0 : ctx.batch_in_epoch, ctx.result.last);
    if (new_best) save(ctx, "best.ckpt", state);
    if (!enters_top_k) return;
    const std::string file = "epoch=" + std::to_string(ctx.epoch + 1) + "-step=" + std::to_string(ctx.step) + "-" +
                             top_k_metric(o_.monitor) + "=" + config::format_float(v) + ".ckpt";
    save(ctx, file, state);
    // A resumed run that repeats a step an earlier attempt saved writes the same file again.
    const std::filesystem::path path = dir(ctx) / file;
    top_k_.erase(std::remove_if(top_k_.begin(), top_k_.end(), [&](const auto& e) { return e.second == path; }), top_k_.end());
    top_k_.emplace_back(v, path);
    sort_top_k();
    while (static_cast<int64_t>(top_k_.size()) > o_.save_top_k) {
      if (ctx.writer()) std::filesystem::remove(top_k_.back().second);
      top_k_.pop_back();
    }
  }

  void on_train_epoch_end(FitContext& ctx) override {
    if (o_.fast_dev_run || !ctx.writer()) return;
    // An epoch cut short (max_steps, max_time) is recorded as such, so a resume finishes it.
    const bool epoch_done = ctx.batch_in_epoch >= ctx.batches;
    const TrainingState state =
        ctx.capture(epoch_done ? ctx.epoch + 1 : ctx.epoch, epoch_done ? 0 : ctx.batch_in_epoch, ctx.result.last);
    save(ctx, "last.ckpt", state);
    if (epoch_done && o_.every_n_epochs > 0 && (ctx.epoch + 1) % o_.every_n_epochs == 0)
      save(ctx, "epoch=" + std::to_string(ctx.epoch + 1) + "-step=" + std::to_string(ctx.step) + ".ckpt", state);
  }

  void on_interrupt(FitContext& ctx, bool mid_epoch) override {
    // The state after the last step: a resume runs what remains of the epoch.
    if (mid_epoch && ctx.writer()) save(ctx, "last.ckpt", ctx.capture(ctx.epoch, ctx.batch_in_epoch, ctx.result.last));
  }

 private:
  static std::filesystem::path dir(const FitContext& ctx) { return ctx.run.path() / "checkpoints"; }
  bool better(double a, double b) const { return o_.mode == "min" ? a < b : a > b; }
  void sort_top_k() {
    std::stable_sort(top_k_.begin(), top_k_.end(), [&](const auto& a, const auto& b) { return better(a.first, b.first); });
  }
  static void save(const FitContext& ctx, const std::string& file, const TrainingState& state) {
    if (ctx.writer()) Checkpoint::save((dir(ctx) / file).string(), state);
  }

  const FitOptions& o_;
  double best_ = NAN;
  TopK top_k_;
};

}  // namespace

std::unique_ptr<Callback> make_model_checkpoint(const FitOptions& options) { return std::make_unique<ModelCheckpoint>(options); }

}  // namespace wavetrain
