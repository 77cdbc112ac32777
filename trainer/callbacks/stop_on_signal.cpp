// stop_on_signal: a SIGUSR1 or SIGTERM (stop_signal.h) ends the session after the step under way,
// every rank after the same one. Mid-epoch, model_checkpoint (just before it) saves last.ckpt
// of that step; at an epoch's end the epoch's own last.ckpt is the one. The run then exits with
// kExitInterrupted and writes no result.json; trainer.resume=last continues it exactly. After the
// run's last step a signal changes nothing: the run ends by itself.
#include <csignal>
#include <optional>

#include "trainer/callbacks/builtin.h"
#include "trainer/stop_signal.h"

namespace wavetrain {
namespace {

class StopOnSignal : public Callback {
 public:
  std::string name() const override { return "stop_on_signal"; }

  // From here until the run is over (the callbacks live until result.json is written), SIGTERM
  // asks the loop to stop instead of ending the process.
  void on_fit_start(FitContext& ctx) override {
    (void)ctx;
    scope_.emplace();
  }

  void on_train_batch_end(FitContext& ctx, TrainStep& step) override {
    (void)step;
    // After the epoch's last batch it waits for the epoch's validation and checkpoint.
    if (ctx.step < ctx.total_steps && ctx.batch_in_epoch < ctx.batches) check(ctx);
  }

  void on_train_epoch_end(FitContext& ctx) override {
    if (!ctx.stop && !ctx.options.fast_dev_run && ctx.step < ctx.total_steps) check(ctx);
  }

  void on_interrupt(FitContext& ctx, bool mid_epoch) override {
    (void)mid_epoch;
    ctx.any_rank(false);  // a barrier: no rank ends before rank 0 has saved
    ctx.log(std::string("stopping: ") + stop_signal_name(ctx.interrupted_by) + " received; checkpoint saved at step " +
            std::to_string(ctx.step) + " (continue with trainer.resume=last)");
  }

 private:
  static void check(FitContext& ctx) {
    if (ctx.any_rank(stop_signal_received() != 0))
      ctx.interrupted_by = stop_signal_received() ? stop_signal_received() : SIGUSR1;  // else another rank's request
  }

  std::optional<StopSignalScope> scope_;
};

}  // namespace

std::unique_ptr<Callback> make_stop_on_signal() { return std::make_unique<StopOnSignal>(); }

}  // namespace wavetrain
