// The training loop on toy_regression: it learns the function, a seed reproduces a run bit for
// bit, max_steps stops on the step, and the monitored best checkpoint is the best validation.
// Resumed runs: what the progress line reports, max_time and early stopping across sessions, and
// a finished run left as it is.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "trainer/checkpoint.h"
#include "trainer/config/compose.h"
#include "trainer/config/yaml_io.h"
#include "trainer/weights.h"
#include "trainer/trainer.h"

namespace fs = std::filesystem;

namespace wavetrain {
namespace {

// Runs toy_regression with `overrides` (command-line grammar) on top of a small base config.
fs::path run_dir(const std::string& name) {
  return fs::path(::testing::TempDir()) / ("wavetrain_trainer_" + name + "_" + std::to_string(::getpid()));
}

config::Config toy_config(const std::vector<std::string>& overrides) {
  config::Node tree = config::load_yaml_string(
      "task: toy_regression\n"
      "trainer: {seed: 0, max_epochs: 20, max_steps: -1, batch_size: 32, log_every_n_steps: 50, monitor: '', mode: min}\n"
      "optimizer: {name: adam, lr: 0.01}\n"
      "scheduler: {name: constant, interval: epoch, step_size: 1, gamma: 1.0}\n",
      "test.yaml");
  for (const std::string& o : overrides) config::apply_value_override(tree, o);
  return config::Config(tree);
}

FitResult fit(const std::string& name, const std::vector<std::string>& overrides, TrainingState* last = nullptr) {
  const fs::path dir = run_dir(name);
  fs::remove_all(dir);
  const config::Config cfg = toy_config(overrides);
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
  EXPECT_LT(metric(r.last, "val/mae"), 0.02);
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

// The model toy_regression starts from (fit() seeds with trainer.seed=0 before building it).
StateDict initial_weights() {
  at::manual_seed(0);
  std::unique_ptr<Task> task = make_task("toy_regression", config::Config(config::Node::mapping()));
  StateDict sd = module_state_dict(task->model());
  for (auto& [name, t] : sd) t = t.clone();
  return sd;
}

// Ints that size the loop cannot overflow it: accumulating 2^63 - 1 batches is one step per epoch
// on all of them (as Lightning does with a window longer than the epoch); before, the window
// arithmetic overflowed to 0 steps and a run that trained nothing reported "done".
TEST(Trainer, HugeAccumulationIsOneStepPerEpoch) {
  TrainingState last;
  const FitResult r = fit("accumulate_max", {"trainer.max_epochs=3", "+trainer.accumulate_grad_batches=9223372036854775807"}, &last);
  EXPECT_EQ(r.global_step, 3);
  EXPECT_EQ(last.global_step, 3);
  EXPECT_TRUE(std::isfinite(metric(r.last, "train/loss"))) << "no step was trained";
  const FitResult big_batch = fit("batch_max", {"trainer.max_epochs=2", "trainer.batch_size=9223372036854775807"});
  EXPECT_EQ(big_batch.global_step, 2);  // one batch of all 1024 items per epoch
}

// Sizes a task allocates from the config are checked against the memory there is, before
// anything is allocated, with the key in a one-line error.
TEST(Trainer, CheckFitsInMemoryNamesTheKeyAndTheSizes) {
  check_fits_in_memory("k=1", 1e9, "1 byte per item", 2e9);
  try {
    check_fits_in_memory("toy_regression.train_size=1000000000", 4e10, "40 bytes per item", 16.0 * (1 << 30));
    ADD_FAILURE();
  } catch (const config::ConfigError& e) {
    EXPECT_STREQ(e.what(), "toy_regression.train_size=1000000000 needs about 37.3 GiB of memory (40 bytes per item); 16.0 GiB is available");
  }
  try {
    check_fits_in_memory("toy_regression.train_size=9223372036854775807", 40.0 * 9223372036854775807.0, "40 bytes per item", 1e9);
    ADD_FAILURE();
  } catch (const config::ConfigError& e) {
    EXPECT_STREQ(e.what(), "toy_regression.train_size=9223372036854775807 needs about 320 EiB of memory (40 bytes per item); 0.9 GiB is available");
  }
  const double available = available_memory_bytes();
  EXPECT_GT(available, 1e8);       // this machine has some
  EXPECT_LT(available, 1e15);      // and not infinitely much
}

TEST(Trainer, AccumulationEqualsALargerBatch) {
  TrainingState small, large;
  const FitResult a = fit("accumulate", {"trainer.max_epochs=1", "trainer.batch_size=32", "+trainer.accumulate_grad_batches=2",
                                         "optimizer.name=sgd", "optimizer.lr=0.1"}, &small);
  const FitResult b = fit("large_batch", {"trainer.max_epochs=1", "trainer.batch_size=64", "optimizer.name=sgd",
                                          "optimizer.lr=0.1"}, &large);
  EXPECT_EQ(a.global_step, 16);
  EXPECT_EQ(b.global_step, 16);
  for (size_t i = 0; i < small.model.size(); ++i)
    EXPECT_LE((small.model[i].second - large.model[i].second).abs().max().item<double>(), 1e-6) << small.model[i].first;
}

TEST(Trainer, BatchPartsNeedATaskThatAllowsThemAndTheCpu) {
  // toy_regression does not train parts at once: auto gives one part, an explicit count is refused.
  EXPECT_EQ(fit("parts_auto", {"trainer.max_epochs=1", "+trainer.cpu_batch_parts=auto"}).global_step, 32);
  EXPECT_EQ(fit("parts_one", {"trainer.max_epochs=1", "+trainer.cpu_batch_parts=1"}).global_step, 32);
  try {
    fit("parts_two", {"trainer.max_epochs=1", "+trainer.cpu_batch_parts=2"});
    FAIL() << "2 parts for toy_regression";
  } catch (const config::ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("trainer.cpu_batch_parts=2: task toy_regression does not train batch parts in parallel"),
              std::string::npos) << e.what();
  }
  EXPECT_THROW(fit("parts_zero", {"trainer.max_epochs=1", "+trainer.cpu_batch_parts=0"}), config::ConfigError);
}

TEST(Trainer, ClippingByNormAndByValueBoundsTheStep) {
  const StateDict start = initial_weights();
  auto step_of = [&](const TrainingState& s) {
    double sq = 0, max_abs = 0;
    for (size_t i = 0; i < start.size(); ++i) {
      const at::Tensor d = s.model[i].second - start[i].second;
      sq += d.square().sum().item<double>();
      max_abs = std::max(max_abs, d.abs().max().item<double>());
    }
    return std::make_pair(std::sqrt(sq), max_abs);
  };
  TrainingState norm, value;
  fit("clip_norm", {"trainer.max_steps=1", "optimizer.name=sgd", "optimizer.lr=1.0", "+trainer.gradient_clip_val=0.01"},
      &norm);
  fit("clip_value", {"trainer.max_steps=1", "optimizer.name=sgd", "optimizer.lr=1.0", "+trainer.gradient_clip_val=0.001",
                     "+trainer.gradient_clip_algorithm=value"},
      &value);
  EXPECT_NEAR(step_of(norm).first, 0.01, 1e-6);    // the whole gradient scaled to norm 0.01, lr 1
  EXPECT_NEAR(step_of(value).second, 0.001, 1e-7);  // every element clamped to +-0.001 (fp32 weights near 0.5)
}

TEST(Trainer, LimitBatchesAndFastDevRun) {
  EXPECT_EQ(fit("limit_count", {"trainer.max_epochs=2", "+trainer.limit_train_batches=5"}).global_step, 10);
  EXPECT_EQ(fit("limit_fraction", {"trainer.max_epochs=1", "+trainer.limit_train_batches=0.25"}).global_step, 8);
  const FitResult dev = fit("fast_dev_run", {"+trainer.fast_dev_run=true", "+trainer.limit_val_batches=3"});
  EXPECT_EQ(dev.global_step, 1);
  EXPECT_EQ(dev.epochs, 1);
  EXPECT_FALSE(fs::exists(run_dir("fast_dev_run") / "checkpoints/last.ckpt"));
  EXPECT_THROW(fit("limit_bad", {"+trainer.limit_train_batches=1.5"}), config::ConfigError);
}

TEST(Trainer, NonFiniteLossesStopOrAreSkipped) {
  // SGD with a learning rate of 1e30 sends the loss to inf on the next batch.
  const std::vector<std::string> diverge = {"trainer.max_epochs=1", "optimizer.name=sgd", "optimizer.lr=1e30"};
  try {
    fit("nonfinite_stop", diverge);
    FAIL() << "a non-finite loss did not stop the run";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite loss inf at step 1 (epoch 0, batch 1)"), std::string::npos)
        << e.what();
  }
  std::vector<std::string> skip = diverge;
  skip.push_back("+trainer.on_nonfinite=skip");
  const FitResult r = fit("nonfinite_skip", skip);
  EXPECT_LT(r.global_step, 32);  // the non-finite steps were not taken
  EXPECT_GE(r.global_step, 1);
}

TEST(Trainer, NonFiniteGradientsWithAFiniteLossStopOrAreSkipped) {
  // Training item 5's batch gets a NaN gradient and a finite loss (toy_regression.nan_gradient_item).
  const std::vector<std::string> poisoned = {"trainer.max_epochs=1", "+toy_regression.nan_gradient_item=5"};
  try {
    fit("nan_gradient_stop", poisoned);
    FAIL() << "a NaN gradient did not stop the run";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("non-finite gradient at step "), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("with a finite loss; set trainer.on_nonfinite=skip"), std::string::npos) << e.what();
  }
  std::vector<std::string> skip = poisoned;
  skip.push_back("+trainer.on_nonfinite=skip");
  TrainingState last;
  const FitResult r = fit("nan_gradient_skip", skip, &last);
  EXPECT_EQ(r.global_step, 31);  // 32 batches, the one holding item 5 skipped
  for (const auto& [name, weight] : last.model) EXPECT_TRUE(at::isfinite(weight).all().item<bool>()) << name;
}

TEST(Trainer, EarlyStoppingAndMaxTime) {
  const FitResult stopped = fit("early", {"trainer.max_epochs=10", "+trainer.early_stopping={monitor:val/mse,patience:1,"
                                                                   "min_delta:10.0,mode:min}"});
  EXPECT_EQ(stopped.epochs, 2);  // epoch 1 sets the best; epoch 2 does not improve by 10
  EXPECT_EQ(fit("max_time", {"trainer.max_epochs=10", "+trainer.max_time=0.000001"}).global_step, 1);
  EXPECT_EQ(fit("max_time_hms", {"trainer.max_epochs=1", "+trainer.max_time='00:00:01:00'"}).global_step, 32);
  EXPECT_THROW(fit("max_time_bad", {"+trainer.max_time='1:xx'"}), config::ConfigError);
}

int count_lines_with(const fs::path& file, const std::string& needle) {
  std::ifstream in(file);
  int n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(needle) != std::string::npos;
  return n;
}

TEST(Trainer, ValCheckIntervalAsFractionOrSteps) {
  // metrics.csv has one row per validation with val/mse in its 3rd column: ",<number>" after "step,epoch,".
  fit("val_fraction", {"trainer.max_epochs=1", "+trainer.val_check_interval=0.25", "trainer.log_every_n_steps=1000"});
  int rows = count_lines_with(run_dir("val_fraction") / "metrics.csv", ",0,");
  EXPECT_EQ(rows, 4 + 1);  // validations at steps 8, 16, 24, 32, plus the training row of the last step
  fit("val_steps", {"trainer.max_epochs=1", "+trainer.val_check_interval=10", "trainer.log_every_n_steps=1000"});
  std::ifstream csv(run_dir("val_steps") / "metrics.csv");
  std::string text((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
  for (const char* step : {"\n10,0,", "\n20,0,", "\n30,0,"}) EXPECT_NE(text.find(step), std::string::npos) << step << text;
  EXPECT_THROW(fit("val_bad", {"+trainer.val_check_interval=1.5"}), config::ConfigError);
}

TEST(Trainer, TopKAndEveryNEpochsCheckpoints) {
  const FitResult r = fit("top_k", {"trainer.max_epochs=4", "trainer.monitor=val/mse", "+trainer.checkpoint={save_top_k:2,"
                                                                                       "every_n_epochs:2}"});
  std::vector<std::string> top, periodic;
  for (const auto& e : fs::directory_iterator(run_dir("top_k") / "checkpoints")) {
    const std::string name = e.path().filename().string();
    if (name.find("-val_mse=") != std::string::npos) top.push_back(name);
    else if (name.rfind("epoch=", 0) == 0) periodic.push_back(name);
  }
  std::sort(periodic.begin(), periodic.end());
  EXPECT_EQ(periodic, (std::vector<std::string>{"epoch=2-step=64.ckpt", "epoch=4-step=128.ckpt"}));
  ASSERT_EQ(top.size(), 2u);
  // The best of the kept ones is the run's best, and its file loads with that metric.
  const std::string best_value = config::format_float(metric(r.best, "val/mse"));
  EXPECT_TRUE(std::any_of(top.begin(), top.end(), [&](const std::string& n) { return n.find("=" + best_value + ".ckpt") != std::string::npos; }))
      << best_value;
  EXPECT_TRUE(fs::exists(run_dir("top_k") / "checkpoints/best.ckpt"));
}

// One session of the run in `dir`: the first creates it, later ones (with trainer.resume) continue
// it. The trainer's clock is fake, one second further on each reading, so times, rates and
// max_time are the same on any machine; `out` gets what the trainer prints (plain lines).
FitResult session(const fs::path& dir, const std::vector<std::string>& overrides, std::string* out = nullptr) {
  const config::Config cfg = toy_config(overrides);
  const RunDirectory run = cfg.has("trainer.resume") ? RunDirectory::attach(dir) : RunDirectory::create(dir);
  Trainer trainer(cfg, run, DeviceChoice{c10::Device(c10::kCPU), {}}, AmpPolicy{});
  std::ostringstream text;
  trainer.set_output(text, /*terminal=*/false);
  double now = 0;
  trainer.set_clock([&now] { return now += 1.0; });
  FitResult r = trainer.fit();
  if (out) *out = text.str();
  return r;
}

// The progress lines among what the trainer printed.
std::vector<std::string> progress_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.find(" it/s") != std::string::npos) lines.push_back(line);
  return lines;
}

// The number before `unit` in a progress line ("2.50 it/s" -> 2.5), or the ETA in seconds.
double number_before(const std::string& line, const std::string& unit) {
  const size_t end = line.find(unit);
  if (end == std::string::npos) return NAN;
  const size_t begin = line.rfind(' ', end - 1) + 1;
  return std::stod(line.substr(begin, end - begin));
}
double eta_seconds(const std::string& line) {
  const size_t at = line.find(" ETA ");
  if (at == std::string::npos) return NAN;
  int h = 0, m = 0, sec = 0;
  std::sscanf(line.c_str() + at + 5, "%d:%d:%d", &h, &m, &sec);
  return h * 3600.0 + m * 60.0 + sec;
}

// Every file under `dir` with its bytes and modification time.
std::map<std::string, std::pair<std::string, fs::file_time_type>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<std::string, fs::file_time_type>> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    std::ifstream in(e.path(), std::ios::binary);
    files[e.path().string()] = {std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>()),
                                e.last_write_time()};
  }
  return files;
}

TEST(Trainer, AResumedRunsRateCountsOnlyItsOwnSteps) {
  const fs::path dir = run_dir("resume_rate");
  fs::remove_all(dir);
  std::string first, second;
  session(dir, {"trainer.max_epochs=2", "trainer.max_steps=40"}, &first);
  const FitResult r = session(dir, {"trainer.max_epochs=2", "trainer.max_steps=64", "+trainer.resume=last"}, &second);
  EXPECT_EQ(r.global_step, 64);
  // The last line of each session is printed at its end. Both sessions run at about one step per
  // (fake) second; counting the first session's 40 steps in the second's 24 s gave 2.5 times that.
  ASSERT_FALSE(progress_lines(first).empty()) << first;
  ASSERT_FALSE(progress_lines(second).empty()) << second;
  const std::string last_first = progress_lines(first).back(), last_second = progress_lines(second).back();
  EXPECT_NE(last_first.find("step 40/40 "), std::string::npos) << last_first;
  EXPECT_NE(last_second.find("step 64/64 "), std::string::npos) << last_second;
  const double rate_first = number_before(last_first, " it/s"), rate_second = number_before(last_second, " it/s");
  EXPECT_NEAR(rate_second, rate_first, 0.2 * rate_first) << last_first << "\n" << last_second;
  EXPECT_NEAR(number_before(last_second, " items/s"), 32 * rate_second, 0.1 * 32 * rate_second) << last_second;
  // The resume is announced once, in the progress line's terms (epoch 2 is under way).
  const std::string resumed = "resumed from " + (dir / "checkpoints/last.ckpt").string() +
                              " at epoch 2, step 40 (8 batches into the epoch)\n";
  EXPECT_EQ(second.find(resumed), 0u) << second;
  EXPECT_EQ(second.find("resumed from", 1), std::string::npos) << second;
  EXPECT_EQ(first.find("resumed from"), std::string::npos) << first;
}

TEST(Trainer, MaxTimeCountsEverySessionAndCapsTheEta) {
  const fs::path dir = run_dir("resume_max_time");
  fs::remove_all(dir);
  // Each step reads the clock twice (progress line, max_time): 20 s are 10 steps of the 32.
  std::string first;
  const FitResult r1 = session(dir, {"trainer.max_epochs=1", "+trainer.max_time=20"}, &first);
  EXPECT_EQ(r1.global_step, 10);
  ASSERT_FALSE(progress_lines(first).empty()) << first;
  // After step 1, at 1 it/s, the 31 steps left take 31 s, but the time limit comes in 19.
  EXPECT_NE(progress_lines(first)[0].find("(max_time)"), std::string::npos) << first;
  EXPECT_LE(eta_seconds(progress_lines(first)[0]), 20) << first;
  const TrainingState stopped = Checkpoint::load((dir / "checkpoints/last.ckpt").string());
  EXPECT_GE(stopped.train_seconds, 20);

  // The same limit again: the run's time is used up; nothing is trained or written.
  const auto before = snapshot(dir);
  std::string again;
  const FitResult r2 = session(dir, {"trainer.max_epochs=1", "+trainer.max_time=20", "+trainer.resume=last"}, &again);
  EXPECT_EQ(r2.already_finished, "0:00:21 trained of trainer.max_time 0:00:20");
  EXPECT_EQ(r2.global_step, 10);
  EXPECT_EQ(again, "");
  EXPECT_TRUE(snapshot(dir) == before) << "a finished run's files changed";

  // Twice the limit: about 20 s more, and the ETA counts the time the first session used.
  std::string second;
  const FitResult r3 = session(dir, {"trainer.max_epochs=1", "+trainer.max_time=40", "+trainer.resume=last"}, &second);
  EXPECT_GT(r3.global_step, 15);
  EXPECT_LT(r3.global_step, 25);
  ASSERT_FALSE(progress_lines(second).empty()) << second;
  EXPECT_NE(progress_lines(second)[0].find("(max_time)"), std::string::npos) << second;
  EXPECT_LE(eta_seconds(progress_lines(second)[0]), 40 - stopped.train_seconds) << second;
  const TrainingState later = Checkpoint::load((dir / "checkpoints/last.ckpt").string());
  EXPECT_GE(later.train_seconds, 40);
  EXPECT_LT(later.train_seconds, 45);
}

TEST(Trainer, EarlyStoppingGoesOnFromWhereItWasAfterAResume) {
  const fs::path dir = run_dir("resume_early");
  fs::remove_all(dir);
  const std::string stopping = "+trainer.early_stopping={monitor:val/mse,patience:1,min_delta:10.0,mode:min}";
  EXPECT_EQ(session(dir, {"trainer.max_epochs=10", stopping}).epochs, 2);
  const FitResult again = session(dir, {"trainer.max_epochs=10", stopping, "+trainer.resume=last"});
  EXPECT_EQ(again.already_finished,
            "early stopping: val/mse did not improve in 1 validation(s), trainer.early_stopping.patience 1");
  // Patience 3: epoch 2's validation without improvement still counts, so two more stop the run
  // at epoch 4 (a fresh count would take epoch 3's value as the best and stop at 6).
  const FitResult more = session(dir, {"trainer.max_epochs=10", "+trainer.early_stopping={monitor:val/mse,patience:3,"
                                       "min_delta:10.0,mode:min}", "+trainer.resume=last"});
  EXPECT_EQ(more.already_finished, "");
  EXPECT_EQ(more.epochs, 4);
}

TEST(Trainer, DeterministicModeGivesTheSameWeights) {
  TrainingState a, b;
  fit("det_on", {"trainer.max_epochs=1", "+trainer.deterministic=true"}, &a);
  fit("det_off", {"trainer.max_epochs=1"}, &b);
  for (size_t i = 0; i < a.model.size(); ++i) EXPECT_TRUE(at::equal(a.model[i].second, b.model[i].second));
  at::globalContext().setDeterministicAlgorithms(false, false);
}

}  // namespace
}  // namespace wavetrain
