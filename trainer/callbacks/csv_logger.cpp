// csv_logger: RUN/metrics.csv, a row per logged step and per validation (metrics_csv.h). A resumed
// run keeps the rows already there.
#include "trainer/callbacks/builtin.h"
#include "trainer/metrics_csv.h"

namespace wavetrain {
namespace {

class CsvLogger : public Callback {
 public:
  std::string name() const override { return "csv_logger"; }

  void on_fit_start(FitContext& ctx) override {
    if (ctx.writer()) csv_ = std::make_unique<MetricsCsv>(ctx.run.path() / "metrics.csv", /*keep_existing=*/ctx.resuming);
  }

  void on_log_metrics(FitContext& ctx, const Metrics& metrics) override {
    if (csv_) csv_->log(ctx.step, ctx.epoch, metrics);
  }

 private:
  std::unique_ptr<MetricsCsv> csv_;
};

}  // namespace

std::unique_ptr<Callback> make_csv_logger() { return std::make_unique<CsvLogger>(); }

}  // namespace wavetrain
