// timer: trainer.max_time, the training time of the whole run (Lightning's Timer): earlier
// sessions' time counts (the checkpoint's train_seconds), so a resumed run stops when the total is
// reached. It asks the run to stop after the step at which the time is up; the epoch's validation
// and last.ckpt follow as at any end. Every rank stops after the same step.
#include "trainer/callbacks/builtin.h"

namespace wavetrain {
namespace {

class Timer : public Callback {
 public:
  explicit Timer(double max_time) : max_time_(max_time) {}

  std::string name() const override { return "timer"; }

  void on_train_batch_end(FitContext& ctx, TrainStep& step) override {
    (void)step;
    if (max_time_ > 0 && ctx.any_rank(ctx.run_seconds() >= max_time_)) {
      ctx.log("stopping: trainer.max_time (" + config::format_float(max_time_) + " s) reached at step " + std::to_string(ctx.step));
      ctx.stop = true;
    }
  }

 private:
  const double max_time_;
};

}  // namespace

std::unique_ptr<Callback> make_timer(const FitOptions& options) { return std::make_unique<Timer>(options.max_time); }

}  // namespace wavetrain
