// Callbacks and plugins through the binary, as a user's project uses them: a plugin's callback
// sees the hooks in the documented order, keeps its state in the checkpoint across a kill and a
// resume, hears of an error; the built-in lr_monitor logs every group's rate; and each kind of bad
// plugin is one clear error that writes nothing. (examples/custom_task, built against an installed
// prefix, is tests/example_project.sh.)
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tests/run_process.h"
#include "trainer/checkpoint.h"

namespace fs = std::filesystem;

namespace {

using wavetrain::testing::wavetrain_in;

fs::path fresh_plugin_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_plugin_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string plugin_file(const std::string& name) {
  return std::string(WAVETRAIN_TEST_PLUGIN_DIR) + "/libwavetrain_test_" + name + ".so";
}

std::vector<std::string> lines_of(const fs::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// metrics.csv as its header's columns and its rows' cells (each row as wide as the header).
struct PluginTestCsv {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  size_t column(const std::string& name) const { return std::find(columns.begin(), columns.end(), name) - columns.begin(); }
};
PluginTestCsv read_plugin_test_csv(const fs::path& file) {
  PluginTestCsv csv;
  const std::vector<std::string> lines = lines_of(file);
  const auto cells_of = [](const std::string& line) {
    std::vector<std::string> cells;
    std::stringstream ls(line);
    for (std::string c; std::getline(ls, c, ',');) cells.push_back(c);
    return cells;
  };
  if (lines.empty()) return csv;
  csv.columns = cells_of(lines[0]);
  for (size_t i = 1; i < lines.size(); ++i) {
    csv.rows.push_back(cells_of(lines[i]));
    csv.rows.back().resize(csv.columns.size());
  }
  return csv;
}

// toy_regression: 64 items in batches of 16 = 4 steps an epoch; the recorder callback writes to `log`.
std::string recorded_run(const fs::path& log, const std::string& more) {
  return "train task=toy_regression +toy_regression.train_size=64 +toy_regression.val_size=16 trainer.batch_size=16 "
         "trainer.log_every_n_steps=2 plugins=[" + plugin_file("recorder_plugin") + "] callbacks=[recorder] +recorder.file=" +
         log.string() + " " + more;
}

TEST(Callbacks, APluginsCallbackSeesEveryHookInOrder) {
  const fs::path dir = fresh_plugin_dir("order");
  const auto r = wavetrain_in(dir, recorded_run(dir / "hooks.txt", "trainer.max_epochs=2 trainer.val_check_interval=0.5 run.dir=run"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> expected = {
      "epoch=0 step=0 fit_start steps_seen=0",
      "epoch=0 step=0 train_epoch_start",
      "epoch=0 step=1 train_batch_end",
      "epoch=0 step=2 train_batch_end log",
      "epoch=0 step=2 log_metrics train/loss",
      "epoch=0 step=2 log_metrics val/mse",  // val_check_interval=0.5: mid-epoch, after step 2
      "epoch=0 step=2 validation_end val/mse",
      "epoch=0 step=3 train_batch_end",
      "epoch=0 step=4 train_batch_end log",
      "epoch=0 step=4 log_metrics train/loss",
      "epoch=0 step=4 log_metrics val/mse",  // the epoch's end
      "epoch=0 step=4 validation_end val/mse",
      "epoch=0 step=4 train_epoch_end",
      "epoch=1 step=4 train_epoch_start",
      "epoch=1 step=5 train_batch_end",
      "epoch=1 step=6 train_batch_end log",
      "epoch=1 step=6 log_metrics train/loss",
      "epoch=1 step=6 log_metrics val/mse",
      "epoch=1 step=6 validation_end val/mse",
      "epoch=1 step=7 train_batch_end",
      "epoch=1 step=8 train_batch_end log",
      "epoch=1 step=8 log_metrics train/loss",
      "epoch=1 step=8 log_metrics val/mse",
      "epoch=1 step=8 validation_end val/mse",
      "epoch=1 step=8 train_epoch_end",
      "epoch=1 step=8 fit_end steps_seen=8",
  };
  EXPECT_EQ(lines_of(dir / "hooks.txt"), expected);
}

TEST(Callbacks, AStateSurvivesAKillAndTheResumedRunGoesOnFromIt) {
  const fs::path dir = fresh_plugin_dir("state");
  // Killed right after step 6 and its checkpoint (every 3 steps: the one at step 6).
  const auto killed = wavetrain_in(dir, recorded_run(dir / "first.txt", "trainer.max_epochs=3 trainer.checkpoint.every_n_steps=3 run.dir=run"),
                                   "WAVETRAIN_FAULT_KILL_AT_STEP=6");
  ASSERT_NE(killed.exit_code, 0);
  const wavetrain::TrainingState saved = wavetrain::Checkpoint::load((dir / "run/checkpoints/last.ckpt").string());
  ASSERT_EQ(saved.global_step, 6);
  ASSERT_EQ(saved.callbacks.size(), 1u);
  EXPECT_EQ(saved.callbacks[0].first, "recorder");
  EXPECT_EQ(saved.callbacks[0].second.find("steps_seen")->as_int(), 6);
  const auto resumed = wavetrain_in(dir, recorded_run(dir / "second.txt", "trainer.max_epochs=3 trainer.checkpoint.every_n_steps=3 "
                                                                           "trainer.resume=last run.dir=run"));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const std::vector<std::string> second = lines_of(dir / "second.txt");
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(second.front(), "epoch=1 step=6 fit_start steps_seen=6");  // restored before on_fit_start
  EXPECT_EQ(second.back(), "epoch=2 step=12 fit_end steps_seen=12");   // as an uninterrupted run's
  // A run without a stateful callback writes no `callbacks` entry (its files are as before).
  const auto plain = wavetrain_in(dir, "train task=toy_regression +toy_regression.train_size=64 trainer.batch_size=16 "
                                       "trainer.max_epochs=1 run.dir=plain");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  const auto info = wavetrain_in(dir, "ckpt info plain/checkpoints/last.ckpt");
  EXPECT_EQ(info.out.find("callbacks"), std::string::npos) << info.out;
}

TEST(Callbacks, ATasksOwnOptimizerKeepsItsStateAcrossAKill) {
  const fs::path dir = fresh_plugin_dir("optimizer");
  const std::string run = "train task=decaying_sgd_toy +toy_regression.train_size=64 trainer.batch_size=16 optimizer.lr=0.05 "
                          "trainer.max_epochs=3 trainer.checkpoint.every_n_steps=3 plugins=[" + plugin_file("recorder_plugin") + "] ";
  ASSERT_EQ(wavetrain_in(dir, run + "run.dir=straight").exit_code, 0);
  ASSERT_NE(wavetrain_in(dir, run + "run.dir=killed", "WAVETRAIN_FAULT_KILL_AT_STEP=6").exit_code, 0);
  const wavetrain::TrainingState at_kill = wavetrain::Checkpoint::load((dir / "killed/checkpoints/last.ckpt").string());
  EXPECT_EQ(at_kill.optimizer.find("type")->as_string(), "decaying_sgd");
  EXPECT_EQ(at_kill.optimizer.find("state")->find("steps")->as_int(), 6);
  const auto resumed = wavetrain_in(dir, run + "trainer.resume=last run.dir=killed");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const wavetrain::TrainingState a = wavetrain::Checkpoint::load((dir / "straight/checkpoints/last.ckpt").string());
  const wavetrain::TrainingState b = wavetrain::Checkpoint::load((dir / "killed/checkpoints/last.ckpt").string());
  EXPECT_EQ(b.optimizer.find("state")->find("steps")->as_int(), 12);
  ASSERT_EQ(a.model.size(), b.model.size());
  for (size_t i = 0; i < a.model.size(); ++i) EXPECT_TRUE(a.model[i].second.equal(b.model[i].second)) << a.model[i].first;
  // Another task's optimizer does not take this state: refused, naming both.
  const auto other = wavetrain_in(dir, "train task=toy_regression +toy_regression.train_size=64 trainer.batch_size=16 trainer.max_epochs=4 "
                                       "trainer.resume=" + (dir / "straight/checkpoints/last.ckpt").string() + " run.dir=other");
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_NE(other.err.find("optimizer state is for decaying_sgd, but the run uses adam"), std::string::npos) << other.err;
}

TEST(Callbacks, OnTwoRanksACallbacksStopOnOneRankStopsBothAndRankZeroSavesItsState) {
  const fs::path dir = fresh_plugin_dir("ranks");
  // Rank 1 alone asks to stop after step 3 of 8: both ranks stop there (a rank that went on alone
  // would wait forever for the other in its next gradient average).
  const auto r = wavetrain_in(dir, recorded_run(dir / "hooks.txt", "trainer.max_epochs=2 trainer.devices=2 trainer.batch_size=8 "
                                                                     "+recorder.stop_at_step=3 +recorder.stop_rank=1 run.dir=run"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> hooks = lines_of(dir / "hooks.txt");
  for (const char* rank : {"rank=0", "rank=1"}) {
    EXPECT_EQ(std::count(hooks.begin(), hooks.end(), std::string(rank) + " epoch=0 step=3 fit_end steps_seen=3"), 1) << rank;
    EXPECT_EQ(std::count_if(hooks.begin(), hooks.end(), [&](const std::string& l) {
                return l.rfind(rank, 0) == 0 && l.find("train_batch_end") != std::string::npos;
              }),
              3)
        << rank;
  }
  const wavetrain::TrainingState saved = wavetrain::Checkpoint::load((dir / "run/checkpoints/last.ckpt").string());
  EXPECT_EQ(saved.global_step, 3);
  ASSERT_EQ(saved.callbacks.size(), 1u);
  EXPECT_EQ(saved.callbacks[0].second.find("steps_seen")->as_int(), 3);
}

TEST(Callbacks, OnExceptionHearsOfTheErrorThatEndsTheRun) {
  const fs::path dir = fresh_plugin_dir("exception");
  const auto r = wavetrain_in(dir, recorded_run(dir / "hooks.txt", "trainer.max_epochs=1 trainer.monitor=val/nothing run.dir=run"));
  ASSERT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("trainer.monitor='val/nothing' is not a validation metric of this task"), std::string::npos) << r.err;
  const std::vector<std::string> hooks = lines_of(dir / "hooks.txt");
  ASSERT_FALSE(hooks.empty());
  EXPECT_EQ(hooks.back(), "epoch=0 step=4 exception trainer.monitor='val/nothing' is not a validation metric of this task");
}

TEST(Callbacks, LrMonitorLogsEveryGroupsRateAndMomentum) {
  const fs::path dir = fresh_plugin_dir("lr");
  const auto r = wavetrain_in(dir, "train task=toy_regression +toy_regression.train_size=64 trainer.batch_size=16 trainer.max_epochs=2 "
                                   "trainer.log_every_n_steps=1 optimizer.name=sgd optimizer.lr=0.1 optimizer.momentum=0.9 "
                                   "scheduler.name=step scheduler.step_size=3 scheduler.gamma=0.5 scheduler.interval=step "
                                   "callbacks=[lr_monitor] lr_monitor.log_momentum=true run.dir=run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const PluginTestCsv csv = read_plugin_test_csv(dir / "run/metrics.csv");
  const size_t lr = csv.column("lr"), group_lr = csv.column("lr-model"), momentum = csv.column("momentum-model");
  ASSERT_LT(group_lr, csv.columns.size());
  ASSERT_LT(momentum, csv.columns.size());
  int rows = 0;
  for (const std::vector<std::string>& cells : csv.rows) {
    if (cells[group_lr].empty()) continue;  // a validation row
    ++rows;
    const int64_t step = std::stoll(cells[0]);
    EXPECT_EQ(cells[group_lr], cells[lr]);
    EXPECT_DOUBLE_EQ(std::stod(cells[group_lr]), 0.1 * std::pow(0.5, step / 3)) << "step " << step;
    EXPECT_EQ(cells[momentum], "0.9");
  }
  EXPECT_EQ(rows, 8);
}

TEST(Callbacks, LrMonitorFollowsEdenAcrossEpochs) {
  const fs::path dir = fresh_plugin_dir("eden");
  const auto r = wavetrain_in(dir, "train task=toy_regression +toy_regression.train_size=64 trainer.batch_size=16 trainer.max_epochs=2 "
                                   "trainer.log_every_n_steps=1 optimizer.name=sgd optimizer.lr=0.1 scheduler.name=eden "
                                   "scheduler.interval=step scheduler.lr_batches=4 scheduler.lr_epochs=1.5 scheduler.warmup=2 "
                                   "scheduler.warmup_start_factor=0.5 callbacks=[lr_monitor] run.dir=run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // icefall's Eden at steps 1..8 (4 an epoch; the epoch term 0 then 1), computed in Python from its formula.
  const std::vector<double> expected = {0.07387185907581785, 0.09457416090031759, 0.08944271909999159, 0.08408964152537146,
                                        0.0720956100042889,  0.06793662204867575, 0.06425049024655523, 0.06100034457014365};
  const PluginTestCsv csv = read_plugin_test_csv(dir / "run/metrics.csv");
  const size_t lr = csv.column("lr-model");
  ASSERT_LT(lr, csv.columns.size());
  std::vector<double> seen;
  for (const std::vector<std::string>& cells : csv.rows)
    if (!cells[lr].empty()) seen.push_back(std::stod(cells[lr]));
  ASSERT_EQ(seen.size(), expected.size());
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_NEAR(seen[i], expected[i], 1e-15) << "step " << i + 1;
}

TEST(Plugins, EachBadPluginIsOneErrorNamingTheFileAndNothingIsWritten) {
  const fs::path dir = fresh_plugin_dir("bad");
  struct Case {
    std::string plugin, expected;
  };
  const std::vector<Case> cases = {
      {(dir / "missing.so").string(), "plugin " + (dir / "missing.so").string() + ": no such file"},
      {plugin_file("not_a_plugin"), "plugin " + plugin_file("not_a_plugin") + ": not a wavetrain plugin (it defines no wavetrain_plugin_info"},
      {plugin_file("other_version_plugin"), "plugin " + plugin_file("other_version_plugin") + ": built against wavetrain 0.0.1, LibTorch "},
      {plugin_file("clashing_plugin"),
       "plugin " + plugin_file("clashing_plugin") + ": registers task 'toy_regression', already registered by wavetrain or an earlier plugin"},
      {(dir / "text.so").string(), "plugin " + (dir / "text.so").string() + ": cannot be loaded ("},
      {plugin_file("load_time_registration_plugin"),
       "plugin " + plugin_file("load_time_registration_plugin") + ": registers tasks or callbacks while it loads"},
      // Linked against another build's libraries: refused before it is loaded (two LibTorch builds
      // in one process crash in their static initialisers).
      {plugin_file("other_torch_cpu_plugin"), "plugin " + plugin_file("other_torch_cpu_plugin") +
                                                  ": built against another LibTorch (it needs libtorch_cpu.so.9.9, and this wavetrain runs on "},
      {plugin_file("other_wavetrain_trainer_plugin"),
       "plugin " + plugin_file("other_wavetrain_trainer_plugin") +
           ": built against another wavetrain (it needs libwavetrain_trainer.so.0.0.9, and this wavetrain runs on "},
  };
  std::ofstream(dir / "text.so") << "not an ELF file\n";
  for (const Case& c : cases) {
    const auto r = wavetrain_in(dir, "train task=toy_regression plugins=[" + c.plugin + "] run.dir=run");
    EXPECT_EQ(r.exit_code, 1) << c.plugin;
    EXPECT_NE(r.err.find(c.expected), std::string::npos) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;  // one line
    EXPECT_FALSE(fs::exists(dir / "run")) << c.plugin;
  }
  // The same from a config file, and for eval: a checkpoint whose recorded plugin is gone.
  const auto unknown = wavetrain_in(dir, "train task=toy_regression callbacks=[recorder] run.dir=run");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("unknown callback 'recorder'. Known callbacks: lr_monitor"), std::string::npos) << unknown.err;
  const auto builtin = wavetrain_in(dir, "train task=toy_regression callbacks=[timer] run.dir=run");
  EXPECT_EQ(builtin.exit_code, 1);
  EXPECT_NE(builtin.err.find("'timer' is built in: every run has it (configured by trainer.*)"), std::string::npos) << builtin.err;
  EXPECT_FALSE(fs::exists(dir / "run"));
}

TEST(Plugins, ARunRecordsItsPluginsAbsoluteAndEvalLoadsThemFromAnywhere) {
  const fs::path dir = fresh_plugin_dir("eval");
  fs::copy_file(plugin_file("recorder_plugin"), dir / "librecorder.so");
  const auto r = wavetrain_in(dir, "train task=toy_regression +toy_regression.train_size=32 trainer.batch_size=16 trainer.max_epochs=1 "
                                   "plugins=[librecorder.so] callbacks=[recorder] +recorder.file=hooks.txt run.dir=run");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const wavetrain::TrainingState saved = wavetrain::Checkpoint::load((dir / "run/checkpoints/last.ckpt").string());
  EXPECT_NE(saved.config_yaml.find("- " + (dir / "librecorder.so").string()), std::string::npos) << saved.config_yaml;
  const auto eval = wavetrain_in(dir / "elsewhere", "eval " + (dir / "run").string());
  EXPECT_EQ(eval.exit_code, 0) << eval.err;
  fs::remove(dir / "librecorder.so");
  const auto gone = wavetrain_in(dir / "elsewhere", "eval " + (dir / "run").string());
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("plugin " + (dir / "librecorder.so").string() + ": no such file"), std::string::npos) << gone.err;
}

}  // namespace
