// The training loop on toy_regression: it learns the function, a seed reproduces a run bit for
// bit, max_steps stops on the step, and the monitored best checkpoint is the best validation.
#include <gtest/gtest.h>

#include <filesystem>

#include "trainer/checkpoint.h"
#include "trainer/config/compose.h"
#include "trainer/config/yaml_io.h"
#include "trainer/trainer.h"

namespace fs = std::filesystem;

namespace wavetrain {
namespace {

// Runs toy_regression with `overrides` (command-line grammar) on top of a small base config.
FitResult fit(const std::string& name, const std::vector<std::string>& overrides, TrainingState* last = nullptr) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_trainer_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  config::Node tree = config::load_yaml_string(
      "task: toy_regression\n"
      "trainer: {seed: 0, max_epochs: 20, max_steps: -1, batch_size: 32, log_every_n_steps: 50, monitor: '', mode: min}\n"
      "optimizer: {name: adam, lr: 0.01}\n"
      "scheduler: {name: constant, interval: epoch, step_size: 1, gamma: 1.0}\n",
      "test.yaml");
  for (const std::string& o : overrides) config::apply_value_override(tree, o);
  const config::Config cfg(tree);
  const RunDirectory run = RunDirectory::create(dir);
  const DeviceChoice cpu{c10::Device(c10::kCPU), {}};
  FitResult r = Trainer(cfg, run, cpu, AmpPolicy{}).fit();
  if (last) *last = Checkpoint::load((dir / "checkpoints/last.ckpt").string());
  return r;
}

double metric(const Metrics& m, const std::string& name) {
  for (const auto& [k, v] : m)
    if (k == name) return v;
  return NAN;
}

TEST(Trainer, ToyRegressionLearnsTheFunction) {
  TrainingState last;
  const FitResult r = fit("learns", {}, &last);
  EXPECT_LT(metric(r.last, "val/mse"), 1e-3);  // the target's variance over [-2, 2] is about 0.8
  EXPECT_LT(metric(r.last, "val/max_abs_error"), 0.1);
  EXPECT_EQ(r.epochs, 20);
  EXPECT_EQ(r.global_step, 20 * 32);  // 1024 items / batch 32
  EXPECT_EQ(last.global_step, 640);
  EXPECT_EQ(last.epoch, 20);
}

TEST(Trainer, ASeedReproducesTheRunBitForBit) {
  TrainingState a, b, c;
  fit("seed_a", {"trainer.seed=7", "trainer.max_epochs=2"}, &a);
  fit("seed_b", {"trainer.seed=7", "trainer.max_epochs=2"}, &b);
  fit("seed_c", {"trainer.seed=8", "trainer.max_epochs=2"}, &c);
  ASSERT_EQ(a.model.size(), b.model.size());
  bool all_equal_c = true;
  for (size_t i = 0; i < a.model.size(); ++i) {
    EXPECT_TRUE(at::equal(a.model[i].second, b.model[i].second)) << a.model[i].first;
    all_equal_c = all_equal_c && at::equal(a.model[i].second, c.model[i].second);
  }
  EXPECT_FALSE(all_equal_c);
}

TEST(Trainer, MaxStepsStopsOnTheStepAndTheScheduleFollowsSteps) {
  TrainingState last;
  const FitResult r = fit("steps",
                          {"trainer.max_epochs=5", "trainer.max_steps=45", "scheduler.name=step",
                           "scheduler.interval=step", "scheduler.step_size=10", "scheduler.gamma=0.5"},
                          &last);
  EXPECT_EQ(r.global_step, 45);
  EXPECT_EQ(r.epochs, 2);  // 32 steps in epoch 1, 13 in epoch 2
  EXPECT_EQ(last.optimizer.find("param_groups")->items()[0].find("lr")->as_float(), 0.01 * 0.5 * 0.5 * 0.5 * 0.5);
  EXPECT_EQ(last.scheduler.find("count")->as_int(), 45);
}

TEST(Trainer, BestCheckpointFollowsTheMonitor) {
  const FitResult r = fit("best", {"trainer.max_epochs=4", "trainer.monitor=val/mse"});
  ASSERT_FALSE(r.best.empty());
  EXPECT_LE(metric(r.best, "val/mse"), metric(r.last, "val/mse"));
  EXPECT_THROW(fit("bad_monitor", {"trainer.max_epochs=1", "trainer.monitor=val/nope"}), config::ConfigError);
}

}  // namespace
}  // namespace wavetrain
