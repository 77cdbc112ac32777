// progress_bar: the progress line while training (progress.h) and one line per validation,
//   epoch 3 step 120: val/loss=0.0123 val/esr=0.0456
// in the run's log and, when the console is not a terminal, on it (a terminal has the bar).
#include <algorithm>
#include <ostream>

#include "trainer/callbacks/builtin.h"
#include "trainer/progress.h"

namespace wavetrain {
namespace {

class ProgressBar : public Callback {
 public:
  std::string name() const override { return "progress_bar"; }

  void on_fit_start(FitContext& ctx) override { progress_ = std::make_unique<ProgressReporter>(ctx.out, ctx.terminal); }

  void on_train_batch_end(FitContext& ctx, TrainStep& step) override {
    (void)step;
    if (ctx.writer()) progress_->update(state(ctx));
  }

  void on_validation_end(FitContext& ctx, const Metrics& metrics) override {
    std::string line = "epoch " + std::to_string(ctx.epoch + 1) + " step " + std::to_string(ctx.step) + ":";
    for (const auto& [k, v] : metrics) line += " " + k + "=" + config::format_float(v);
    ctx.log(line);
    if (!ctx.terminal && ctx.writer()) ctx.out << line << "\n";
  }

  void on_fit_end(FitContext& ctx) override {
    // The last line shows where the run ended, not where the last timed redraw happened to be.
    if (ctx.writer() && ctx.step > ctx.start_step) progress_->update(state(ctx), /*force=*/true);
    progress_->finish();
  }

  void on_exception(FitContext& ctx, const std::exception& error) override {
    (void)ctx, (void)error;
    if (progress_) progress_->finish();  // the error starts on a line of its own
  }

 private:
  static ProgressState state(const FitContext& ctx) {
    ProgressState p;
    p.epoch = ctx.epoch;
    p.max_epochs = ctx.epochs;
    p.step = ctx.step;
    p.total_steps = ctx.total_steps;
    p.steps_this_session = ctx.step - ctx.start_step;
    p.elapsed_s = ctx.elapsed();
    if (ctx.options.max_time > 0) p.time_left_s = std::max(0.0, ctx.options.max_time - ctx.earlier_seconds - p.elapsed_s);
    p.loss = ctx.loss;
    p.units_this_session = static_cast<double>(ctx.items) * ctx.unit.per_item;
    p.unit = ctx.unit.unit;
    return p;
  }

  std::unique_ptr<ProgressReporter> progress_;
};

}  // namespace

std::unique_ptr<Callback> make_progress_bar() { return std::make_unique<ProgressBar>(); }

}  // namespace wavetrain
