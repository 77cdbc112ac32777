// early_stopping: trainer.early_stopping.{monitor, patience, min_delta, mode}. After each
// validation: a non-finite value of the monitored metric stops the run at once; a value that does
// not beat the best by more than min_delta counts toward patience, and `patience` of them in a row
// stop it. Its progress (best, wait, why it stopped) is the checkpoint's `early_stopping` entry, so
// a resumed run stops where an uninterrupted one would (and finished_at() sees a run it ended).
#include "trainer/callbacks/builtin.h"

namespace wavetrain {
namespace {

class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(const FitOptions& o) : monitor_(o.stop_monitor), mode_(o.stop_mode), patience_(o.patience), min_delta_(o.min_delta) {}

  std::string name() const override { return "early_stopping"; }

  void on_validation_end(FitContext& ctx, const Metrics& metrics) override {
    if (monitor_.empty()) return;
    double v = NAN;
    for (const auto& [k, value] : metrics)
      if (k == monitor_) v = value;
    if (!std::isfinite(v)) {
      ctx.log("early stopping: " + monitor_ + " is " + config::format_float(v) + " at step " + std::to_string(ctx.step));
      stopped_ = "nonfinite";
    } else if (std::isnan(best_) || (mode_ == "min" ? v < best_ - min_delta_ : v > best_ + min_delta_)) {
      best_ = v;
      wait_ = 0;
    } else if (++wait_ >= patience_) {
      ctx.log("early stopping: " + monitor_ + " did not improve by more than " + config::format_float(min_delta_) + " for " +
              std::to_string(patience_) + " validations");
      stopped_ = "patience";
    }
    ctx.stop = ctx.stop || !stopped_.empty();
  }

  void on_save_checkpoint(const FitContext& ctx, TrainingState& state) const override {
    (void)ctx;
    if (!monitor_.empty()) state.early_stopping = {monitor_, best_, wait_, stopped_};
  }

  void on_load_checkpoint(FitContext& ctx, const TrainingState& state) override {
    (void)ctx;
    // It goes on counting from where it was, unless it now watches something else.
    if (!monitor_.empty() && state.early_stopping.monitor == monitor_) {
      best_ = state.early_stopping.best;
      wait_ = state.early_stopping.wait;
    }
  }

 private:
  const std::string monitor_, mode_;
  const int64_t patience_;
  const double min_delta_;
  double best_ = NAN;
  int64_t wait_ = 0;
  std::string stopped_;  // "patience" or "nonfinite" once it stopped the run
};

}  // namespace

std::unique_ptr<Callback> make_early_stopping(const FitOptions& options) { return std::make_unique<EarlyStopping>(options); }

}  // namespace wavetrain
