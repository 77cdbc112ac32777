// A test plugin: the `recorder` callback writes every hook call it gets, one line each, to the
// file recorder.file, and keeps the number of optimizer steps it has seen as its checkpoint state
// (plugin_test.cpp reads both). Built against the build tree, loaded with plugins=[...].
#include <fstream>

#include "trainer/callback.h"
#include "trainer/plugin.h"

namespace {

using wavetrain::FitContext;
using wavetrain::Metrics;
using wavetrain::serialization::Value;

class Recorder : public wavetrain::Callback {
 public:
  explicit Recorder(const std::string& file) : out_(file, std::ios::app) {}
  std::string name() const override { return "recorder"; }

  void on_fit_start(FitContext& ctx) override { line(ctx, "fit_start steps_seen=" + std::to_string(steps_seen_)); }
  void on_train_epoch_start(FitContext& ctx) override { line(ctx, "train_epoch_start"); }
  void on_train_batch_end(FitContext& ctx, wavetrain::TrainStep& step) override {
    ++steps_seen_;
    line(ctx, std::string("train_batch_end") + (step.log ? " log" : ""));
  }
  void on_log_metrics(FitContext& ctx, const Metrics& m) override { line(ctx, "log_metrics " + m.front().first); }
  void on_validation_end(FitContext& ctx, const Metrics& m) override { line(ctx, "validation_end " + m.front().first); }
  void on_train_epoch_end(FitContext& ctx) override { line(ctx, "train_epoch_end"); }
  void on_interrupt(FitContext& ctx, bool mid_epoch) override { line(ctx, std::string("interrupt") + (mid_epoch ? " mid_epoch" : "")); }
  void on_fit_end(FitContext& ctx) override { line(ctx, "fit_end steps_seen=" + std::to_string(steps_seen_)); }
  void on_exception(FitContext& ctx, const std::exception& e) override { line(ctx, std::string("exception ") + e.what()); }

  Value state_dict() const override { return Value::dict({{Value::string("steps_seen"), Value::integer(steps_seen_)}}); }
  void load_state_dict(const Value& state) override { steps_seen_ = state.find("steps_seen")->as_int(); }

 private:
  void line(const FitContext& ctx, const std::string& what) {
    out_ << "epoch=" << ctx.epoch << " step=" << ctx.step << " " << what << "\n" << std::flush;
  }
  std::ofstream out_;
  int64_t steps_seen_ = 0;
};

void register_recorder() {
  static const wavetrain::CallbackRegistration recorder(
      "recorder", [](const wavetrain::config::Config& cfg) { return std::make_unique<Recorder>(cfg.get_string("recorder.file")); },
      {"recorder.*"});
}

}  // namespace

WAVETRAIN_PLUGIN(register_recorder);
