// tensorboard: RUN/tensorboard/, a scalar per logged metric at its step (tensorboard.h); the file is
// flushed after every validation, so TensorBoard shows a run as it trains.
#include "trainer/callbacks/builtin.h"
#include "trainer/tensorboard.h"

namespace wavetrain {
namespace {

class TensorBoardLogger : public Callback {
 public:
  std::string name() const override { return "tensorboard"; }

  void on_fit_start(FitContext& ctx) override {
    if (ctx.writer()) writer_ = std::make_unique<TensorBoardWriter>(ctx.run.path() / "tensorboard");
  }

  void on_log_metrics(FitContext& ctx, const Metrics& metrics) override {
    if (writer_)
      for (const auto& [k, v] : metrics) writer_->add_scalar(k, v, ctx.step);
  }

  void on_validation_end(FitContext& ctx, const Metrics& metrics) override {
    (void)ctx, (void)metrics;
    if (writer_) writer_->flush();
  }

 private:
  std::unique_ptr<TensorBoardWriter> writer_;
};

}  // namespace

std::unique_ptr<Callback> make_tensorboard_logger() { return std::make_unique<TensorBoardLogger>(); }

}  // namespace wavetrain
