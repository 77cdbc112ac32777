// `wavetrain train` as a user runs it: introspection, errors with exit codes, run directories,
// and a multirun whose jobs are real `wavetrain train` processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <fstream>
#include <map>

#include "tests/run_process.h"
#include "trainer/config/yaml_io.h"
#include "trainer/checkpoint.h"
#include "trainer/gradient_sync.h"
#include "trainer/serialization/torch_file.h"

namespace fs = std::filesystem;

namespace {

const std::string kBasic = std::string(WAVETRAIN_TEST_DATA) + "/configs/basic";

using Result = wavetrain::testing::ProcessResult;

// Runs wavetrain in `dir` (created if needed) with `args`; `env` is "NAME=value ..." for it.
using wavetrain::testing::wavetrain_in;

fs::path fresh_cli(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_cli_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

TEST(CliTrain, CfgJobPrintsTheComposedConfig) {
  const Result r = wavetrain_in(fresh_cli("cfg"), "train -cd " + kBasic + " --cfg job model=lstm trainer.max_epochs=3");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "model:\n  name: lstm\n  hidden: 24\noptimizer:\n  lr: 0.004\n  betas:\n    - 0.9\n    - 0.999\n"
            "trainer:\n  max_epochs: 3\n  max_steps: -1\n  lr: ${optimizer.lr}\nname: run_${model.name}\n");
  const Result resolved = wavetrain_in(fresh_cli("cfg"), "train --config-dir " + kBasic + " --cfg job --resolve");
  EXPECT_NE(resolved.out.find("  lr: 0.004\nname: run_wavenet\n"), std::string::npos) << resolved.out;
}

TEST(CliTrain, InfoDefaultsShowsTheTree) {
  const Result r = wavetrain_in(fresh_cli("info"), "train -cd " + kBasic + " --info defaults model/encoder=big");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("    model/encoder/big  (package: model.encoder, " + kBasic + "/model/encoder/big.yaml)\n"),
            std::string::npos)
      << r.out;
}

TEST(CliTrain, ErrorsArePrintedWholeWithANonZeroExit) {
  const Result r = wavetrain_in(fresh_cli("err"), "train -cd " + kBasic + " trainer.max_epoch=3");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "wavetrain: error: Could not override 'trainer.max_epoch'. To append to your config use "
            "+trainer.max_epoch=...\nDid you mean trainer.max_epochs?\n");
  const Result sweep = wavetrain_in(fresh_cli("err"), "train -cd " + kBasic + " trainer.lr=1,2");
  EXPECT_EQ(sweep.exit_code, 1);
  EXPECT_NE(sweep.err.find("Add -m to run one job per value"), std::string::npos) << sweep.err;
  const Result grammar = wavetrain_in(fresh_cli("err"), "train -cd " + kBasic + " 'a=[1,2'");
  EXPECT_EQ(grammar.exit_code, 1);
  EXPECT_NE(grammar.err.find("Error parsing override 'a=[1,2'"), std::string::npos) << grammar.err;
  const Result missing = wavetrain_in(fresh_cli("err"), "train");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("Missing mandatory value: task (set to ??? in "), std::string::npos) << missing.err;
}

// Integers that size a loop, a process count or an allocation: huge values are refused with the
// key (and for toy_regression's sizes, the memory they need) in one line, exit 1, no backtrace and
// no run directory left half-made by an allocation failure.
TEST(CliTrain, HugeIntegersAreRefusedNamingTheKey) {
  const fs::path dir = fresh_cli("huge_ints");
  const std::string big = "9223372036854775807";
  const std::pair<std::string, std::string> refused[] = {
      {"trainer.devices=" + big, "trainer.devices=" + big + " (the command line) is too large: at most 4096"},
      {"trainer.dist_timeout=" + big, "trainer.dist_timeout=" + big + " (the command line) is too large: at most 31536000"},
      {"trainer.cpu_batch_parts=" + big, "trainer.cpu_batch_parts=" + big + " (the command line) is too large: at most 1024"},
      {"+toy_regression.train_size=" + big, "toy_regression.train_size=" + big + " needs about 320 EiB of memory (40 bytes per item); "},
      {"+toy_regression.val_size=2147483648", "toy_regression.val_size=2147483648 needs about 48.0 GiB of memory (24 bytes per item); "},
      {"+toy_regression.hidden=4294967296", "toy_regression.hidden=4294967296 needs about "},
  };
  int n = 0;
  for (const auto& [override_text, message] : refused) {
    // `ulimit -v` bounds what is available, so that the sizes are refused on a machine of any size.
    const Result r = wavetrain::testing::run_shell("cd '" + dir.string() + "' 2>/dev/null || mkdir -p '" + dir.string() + "' && cd '" +
                                                   dir.string() + "' && ulimit -v 16000000 && '" WAVETRAIN_BINARY "' train task=toy_regression "
                                                   "trainer.max_epochs=1 run.dir=r" + std::to_string(n++) + " " + override_text);
    EXPECT_EQ(r.exit_code, 1) << override_text << "\n" << r.err;
    EXPECT_NE(r.err.find("wavetrain: error: " + message), std::string::npos) << override_text << "\n" << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), r.err.find("run directory") == std::string::npos ? 1 : 2) << r.err;
  }
  // train_size=10^9 took so long that it looked hung: 37 GiB is more than 16 GB.
  const Result billion = wavetrain::testing::run_shell("cd '" + dir.string() + "' && ulimit -v 16000000 && '" WAVETRAIN_BINARY
                                                       "' train task=toy_regression run.dir=b +toy_regression.train_size=1000000000");
  EXPECT_EQ(billion.exit_code, 1);
  EXPECT_NE(billion.err.find("toy_regression.train_size=1000000000 needs about 37.3 GiB of memory (40 bytes per item); "), std::string::npos)
      << billion.err;
}

TEST(CliTrain, ARunLeavesItsConfigLogsMetricsCheckpointAndResult) {
  const fs::path dir = fresh_cli("rundir");
  const Result r = wavetrain_in(dir, "train task=toy_regression trainer.seed=3 trainer.max_epochs=2 run.dir=out/r");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const wavetrain::config::Node composed = wavetrain::config::load_yaml_file((dir / "out/r/.wavetrain/config.yaml").string());
  EXPECT_EQ(composed.find_path("trainer.seed")->int_value(), 3);
  const wavetrain::config::Node overrides =
      wavetrain::config::load_yaml_file((dir / "out/r/.wavetrain/overrides.yaml").string());
  EXPECT_EQ(overrides.items().size(), 4u);
  for (const char* f : {".wavetrain/config.resolved.yaml", "wavetrain.log", "metrics.csv", "result.json",
                        "checkpoints/last.ckpt"})
    EXPECT_TRUE(fs::exists(dir / "out/r" / f)) << f;
  EXPECT_EQ(fs::begin(fs::directory_iterator(dir / "out/r/tensorboard"))->path().filename().string().rfind(
                "events.out.tfevents.", 0),
            0u);
  std::ifstream result(dir / "out/r/result.json");
  const std::string json((std::istreambuf_iterator<char>(result)), std::istreambuf_iterator<char>());
  EXPECT_NE(json.find("\"global_step\": 64"), std::string::npos) << json;  // 2 epochs x 1024 / 32
  EXPECT_NE(json.find("\"val/mse\""), std::string::npos) << json;

  // An unknown task fails before anything is written.
  const Result unknown = wavetrain_in(dir, "train task=nothing_yet run.dir=out/u");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err, "wavetrain: error: Unknown task 'nothing_yet'. Known tasks: amp, asr, toy_regression\n");
  EXPECT_FALSE(fs::exists(dir / "out/u"));
}

TEST(CliTrain, DeviceAndPrecisionAreRecordedWithTheirWarnings) {
  const fs::path dir = fresh_cli("environment");
  const Result r = wavetrain_in(dir, "train task=toy_regression trainer.max_epochs=1 trainer.precision=16-mixed "
                                     "trainer.device=cpu run.dir=r");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: precision 16-mixed is not available on cpu (CPU autocast is bfloat16); using "
                       "bf16-mixed\n"),
            std::string::npos)
      << r.err;
  const wavetrain::config::Node env = wavetrain::config::load_yaml_file((dir / "r/.wavetrain/environment.yaml").string());
  EXPECT_EQ(env.find("device")->string_value(), "cpu");
  EXPECT_EQ(env.find("amp")->string_value(), "cpu: bf16 autocast (precision 16-mixed)");
  EXPECT_FALSE(env.find("grad_scaler")->bool_value());
  EXPECT_EQ(env.find("warnings")->items().size(), 1u);
  std::ifstream log(dir / "r/wavetrain.log");
  const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("] device cpu; cpu: bf16 autocast (precision 16-mixed); "), std::string::npos) << text;
  EXPECT_NE(text.find("] warning: precision 16-mixed is not available on cpu"), std::string::npos) << text;

  const fs::path bad_dir = fresh_cli("environment_bad");
  const Result bad = wavetrain_in(bad_dir, "train task=toy_regression trainer.precision=8 run.dir=r2");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("trainer.precision='8' is not a precision: expected 32, 16-mixed or bf16-mixed"),
            std::string::npos)
      << bad.err;
  EXPECT_FALSE(fs::exists(bad_dir / "r2"));  // nothing written for a run that cannot start
}

TEST(CliTrain, CudaMemoryFractionIsCheckedAndIgnoredOffCuda) {
  const fs::path dir = fresh_cli("memfrac");
  const Result ok = wavetrain_in(dir, "train task=toy_regression trainer.max_epochs=1 trainer.device=cpu "
                                      "trainer.cuda_memory_fraction=0.5 run.dir=r");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.err.find("warning: a CUDA memory fraction was set but the device is cpu; it is ignored"),
            std::string::npos)
      << ok.err;
  const Result bad = wavetrain_in(dir, "train task=toy_regression trainer.cuda_memory_fraction=2 run.dir=r2");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad.err, "wavetrain: error: trainer.cuda_memory_fraction: CUDA memory fraction must be in (0, 1], got 2\n");
  EXPECT_FALSE(fs::exists(dir / "r2"));
}

TEST(CliTrain, MultirunOnToyRegressionWithAFailingJobAndResume) {
  // hidden=0 is refused by the task, so job 1 fails while jobs 0 and 2 train.
  const fs::path dir = fresh_cli("multirun");
  const Result r = wavetrain_in(dir, "train -m -j 2 task=toy_regression trainer.max_epochs=1 "
                                     "+toy_regression.hidden=8,0,16 run.multirun_dir=sweep sweep.objective=val/mse");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("Launching 3 jobs, 2 at a time, local launcher, in sweep"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[1] FAILED with exit code 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("toy_regression: train_size, val_size and hidden must be >= 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[0] done in "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[2] done in "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 done, 1 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("best (min val/mse): job "), std::string::npos) << r.out;
  const wavetrain::config::Node job2 = wavetrain::config::load_yaml_file((dir / "sweep/2/.wavetrain/config.yaml").string());
  EXPECT_EQ(job2.find_path("toy_regression.hidden")->int_value(), 16);
  std::ifstream csv(dir / "sweep/summary.csv");
  const std::string summary((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
  EXPECT_NE(summary.find("last.val/mse"), std::string::npos) << summary;

  const Result resumed = wavetrain_in(dir, "train --resume sweep");
  EXPECT_EQ(resumed.exit_code, 1);  // job 1 fails again: its overrides have not changed
  EXPECT_NE(resumed.out.find("Launching 1 job (2 already done)"), std::string::npos) << resumed.out;
  EXPECT_TRUE(fs::exists(dir / "sweep/1.attempt-1"));
}

TEST(CliTrain, AKilledRunResumesToBitwiseIdenticalWeights) {
  const fs::path dir = fresh_cli("resume");
  const std::string common =
      "train task=toy_regression trainer.max_epochs=3 trainer.seed=5 trainer.checkpoint.every_n_steps=7 ";
  ASSERT_EQ(wavetrain_in(dir, common + "run.dir=whole").exit_code, 0);
  const wavetrain::TrainingState whole = wavetrain::Checkpoint::load((dir / "whole/checkpoints/last.ckpt").string());
  EXPECT_EQ(whole.global_step, 96);  // 3 epochs of 32 steps

  // Killed at step 45 (mid-epoch 2; last checkpoint at step 42) and at step 33 (last checkpoint
  // at the end of epoch 1), each then resumed from its last checkpoint.
  for (const int kill_at : {45, 33}) {
    const std::string run = "killed_" + std::to_string(kill_at);
    const Result killed = wavetrain_in(dir, common + "run.dir=" + run, "WAVETRAIN_FAULT_KILL_AT_STEP=" + std::to_string(kill_at));
    EXPECT_EQ(killed.exit_code, 128 + 9) << "expected death by SIGKILL (the shell reports 128 + 9); " << killed.err;
    const Result resumed = wavetrain_in(dir, common + "run.dir=" + run + " trainer.resume=last");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    const wavetrain::TrainingState after = wavetrain::Checkpoint::load((dir / run / "checkpoints/last.ckpt").string());
    EXPECT_EQ(after.global_step, 96);
    ASSERT_EQ(after.model.size(), whole.model.size());
    for (size_t i = 0; i < whole.model.size(); ++i)
      EXPECT_TRUE(at::equal(after.model[i].second, whole.model[i].second)) << run << " " << whole.model[i].first;
    // What the first attempt wrote is still there: its metrics rows and its config record.
    std::ifstream csv(dir / run / "metrics.csv");
    const std::string rows((std::istreambuf_iterator<char>(csv)), std::istreambuf_iterator<char>());
    EXPECT_NE(rows.find("\n10,0,"), std::string::npos) << rows;
    EXPECT_TRUE(fs::exists(dir / run / ".wavetrain/config.yaml"));
    EXPECT_TRUE(fs::exists(dir / run / ".wavetrain/resume-1/config.yaml"));
  }
}

// Input that was once silently ignored: a package on a value key (Hydra refuses it), wrong types
// in the trainer's and the data loader's keys whatever the task reads, a device that is not one
// (named with its key and file), and trainer.threads, which was never applied. Each error comes
// before a run directory is made.
TEST(CliTrain, IgnoredInputIsRefusedBeforeTheRunStarts) {
  const fs::path dir = fresh_cli("ignored_input");
  fs::create_directories(dir / "c/experiment");
  std::ofstream(dir / "c/experiment/threads.yaml") << "# @package _global_\ntask: toy_regression\ntrainer:\n  threads: \"\u00e9\u2026\"\n";
  std::ofstream(dir / "c/experiment/device.yaml") << "# @package _global_\ntask: toy_regression\ntrainer:\n  device: 1.5\n";
  const std::pair<std::string, std::string> refused[] = {
      {"task=toy_regression trainer.max_steps@x=1",
       "Override trainer.max_steps@x=1 looks like a config group override, but config group 'trainer.max_steps' does not exist."},
      {"task=toy_regression data.workers=abc", "Value 'abc' could not be converted to int (data.workers, from the command line)"},
      {"task=toy_regression optimizer.lr=fast", "Value 'fast' could not be converted to float (optimizer.lr, from the command line)"},
      // amp.burn_in is the LSTM's; a WaveNet run does not read it, but it is checked all the same.
      {"+experiment=amp amp.data=none.h5 amp.burn_in=long", "Value 'long' could not be converted to int (amp.burn_in, from the command line)"},
      {"task=toy_regression +decoding.beam=wide", "Value 'wide' could not be converted to int (decoding.beam, from the command line)"},
      // Checked before the run directory (and before the capture is read).
      {"+experiment=amp amp.data=none.h5 amp.segment=1024",
       "amp.segment=1024 (the command line) is too short for the loss: amp.loss.mrstft's largest FFT (2048) after pre_emphasis (one "
       "sample fewer) needs segments of at least 1026 samples"},
      {"-cd c +experiment=threads", "Value '\u00e9\u2026' could not be converted to int (trainer.threads, from c/experiment/threads.yaml:4)"},
      {"-cd c +experiment=device",
       "trainer.device=1.5 (c/experiment/device.yaml:4): Unknown device '1.5'. Expected one of: auto, cpu, cuda, cuda:N, mps"},
  };
  for (const auto& [args, message] : refused) {
    const Result r = wavetrain_in(dir, "train run.dir=never " + args);
    EXPECT_EQ(r.exit_code, 1) << args;
    EXPECT_EQ(r.err, "wavetrain: error: " + message + "\n") << args;
    EXPECT_FALSE(fs::exists(dir / "never")) << args;
  }
  // trainer.threads is applied (WAVETRAIN_THREADS, which would win, unset).
  for (const char* threads : {"1", "2"}) {
    const std::string run = std::string("threads_") + threads;
    const Result r = wavetrain_in(dir, "train task=toy_regression trainer.max_epochs=1 trainer.threads=" + std::string(threads) +
                                           " run.dir=" + run, "-u WAVETRAIN_THREADS");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    std::ifstream log(dir / run / "wavetrain.log");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("; " + std::string(threads) + " CPU threads"), std::string::npos) << text;
  }
}

// A run killed before its first checkpoint has nothing to resume: each attempt says so and how to
// start over, exits 1, and leaves the run directory as it was (no resume-N record).
TEST(CliTrain, ResumingARunWithoutACheckpointSaysHowToStartOver) {
  const fs::path dir = fresh_cli("resume_nothing");
  const std::string common = "train task=toy_regression trainer.max_epochs=3 run.dir=early ";
  const Result killed = wavetrain_in(dir, common, "WAVETRAIN_FAULT_KILL_AT_STEP=3");  // epoch 1 has 32 steps
  ASSERT_EQ(killed.exit_code, 128 + 9) << killed.err;
  ASSERT_FALSE(fs::exists(dir / "early/checkpoints/last.ckpt"));
  for (int attempt = 0; attempt < 2; ++attempt) {
    const Result r = wavetrain_in(dir, common + "trainer.resume=last");
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err, "wavetrain: error: Nothing to resume in run 'early': it stopped before its first checkpoint (there is no "
                     "early/checkpoints/last.ckpt). Start it over: the same command without trainer.resume makes a new run beside "
                     "it (or remove 'early' first to reuse its name)\n");
  }
  EXPECT_FALSE(fs::exists(dir / "early/.wavetrain/resume-1"));
  const Result best = wavetrain_in(dir, common + "trainer.resume=best");
  EXPECT_EQ(best.exit_code, 1);
  EXPECT_NE(best.err.find("Nothing to resume in run 'early'"), std::string::npos) << best.err;
  // A run with a last checkpoint but no best one (no trainer.monitor) is told to resume from last.
  ASSERT_EQ(wavetrain_in(dir, "train task=toy_regression trainer.max_epochs=1 run.dir=unranked").exit_code, 0);
  const Result unranked = wavetrain_in(dir, "train task=toy_regression trainer.max_epochs=2 run.dir=unranked trainer.resume=best");
  EXPECT_EQ(unranked.exit_code, 1);
  EXPECT_EQ(unranked.err, "wavetrain: error: Cannot resume run 'unranked' from its best checkpoint: there is no "
                          "unranked/checkpoints/best.ckpt (no validation has ranked one yet, or trainer.monitor is not set); "
                          "continue with trainer.resume=last\n");
  EXPECT_FALSE(fs::exists(dir / "unranked/.wavetrain/resume-1"));
  // As the message says: without trainer.resume the run starts over beside it.
  const Result again = wavetrain_in(dir, common);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("this run writes to 'early_1'"), std::string::npos) << again.err;
}

// Every file under `dir` (the run's record, checkpoints, event files) with its bytes and time.
std::map<std::string, std::pair<std::string, fs::file_time_type>> snapshot(const fs::path& dir) {
  std::map<std::string, std::pair<std::string, fs::file_time_type>> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    std::string bytes;
    if (e.is_regular_file()) {
      std::ifstream in(e.path(), std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    }
    files[e.path().string()] = {bytes, e.last_write_time()};
  }
  return files;
}

TEST(CliTrain, ResumingAFinishedRunChangesNothingAndARaisedLimitContinues) {
  const fs::path dir = fresh_cli("resume_finished");
  const std::string common = "train task=toy_regression trainer.max_epochs=3 trainer.seed=5 ";
  ASSERT_EQ(wavetrain_in(dir, common + "run.dir=r trainer.max_steps=40").exit_code, 0);
  const auto before = snapshot(dir / "r");

  const Result again = wavetrain_in(dir, common + "run.dir=r trainer.max_steps=40 trainer.resume=last");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.err, "run r is already complete: step 40 of trainer.max_steps 40; nothing to do "
                       "(raise trainer.max_steps to train further)\n");
  EXPECT_EQ(again.out, "");
  // result.json, metrics.csv, the event file, the checkpoints, the log: all as they were, and no
  // .wavetrain/resume-1/ either.
  EXPECT_TRUE(snapshot(dir / "r") == before) << "resuming a finished run changed its files";

  const Result more = wavetrain_in(dir, common + "run.dir=r trainer.max_steps=60 trainer.resume=last");
  ASSERT_EQ(more.exit_code, 0) << more.err;
  EXPECT_EQ(more.out.find("resumed from r/checkpoints/last.ckpt at epoch 2, step 40 (8 batches into the epoch)\n"), 0u)
      << more.out;
  EXPECT_EQ(more.out.find("resumed from", 1), std::string::npos) << more.out;
  EXPECT_EQ(wavetrain::Checkpoint::load((dir / "r/checkpoints/last.ckpt").string()).global_step, 60);
  std::ifstream result(dir / "r/result.json");
  const nlohmann::json j = nlohmann::json::parse(result);
  EXPECT_EQ(j["global_step"], 60);
  EXPECT_TRUE(j["last"]["train/loss"].is_number()) << j.dump();

  // Ended by max_epochs (3 epochs are 96 steps): the same.
  ASSERT_EQ(wavetrain_in(dir, common + "run.dir=r trainer.max_steps=-1 trainer.resume=last").exit_code, 0);
  const auto ended = snapshot(dir / "r");
  const Result epochs = wavetrain_in(dir, common + "run.dir=r trainer.max_steps=-1 trainer.resume=last");
  ASSERT_EQ(epochs.exit_code, 0) << epochs.err;
  EXPECT_EQ(epochs.err, "run r is already complete: epoch 3 of trainer.max_epochs 3; nothing to do "
                        "(raise trainer.max_epochs to train further)\n");
  EXPECT_TRUE(snapshot(dir / "r") == ended);

  // Killed at its last step, before the final validation and result.json: not finished, so the
  // resume does both (a step checkpoint at max_steps would have looked finished).
  const std::string periodic = common + "run.dir=k trainer.max_steps=42 trainer.checkpoint.every_n_steps=7 ";
  EXPECT_EQ(wavetrain_in(dir, periodic, "WAVETRAIN_FAULT_KILL_AT_STEP=42").exit_code, 128 + 9);
  const Result finish = wavetrain_in(dir, periodic + "trainer.resume=last");
  ASSERT_EQ(finish.exit_code, 0) << finish.err;
  EXPECT_EQ(finish.err.find("already complete"), std::string::npos) << finish.err;
  std::ifstream finished(dir / "k/result.json");
  EXPECT_EQ(nlohmann::json::parse(finished)["global_step"], 42);
}

TEST(CliEval, ReproducesTheRunsValidationAndWritesItBeside) {
  const fs::path dir = fresh_cli("eval");
  ASSERT_EQ(wavetrain_in(dir, "train task=toy_regression trainer.max_epochs=2 run.dir=r").exit_code, 0);
  const Result r = wavetrain_in(dir, "eval r");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("r/checkpoints/last.ckpt (step 64), split val:"), std::string::npos) << r.out;
  auto read_json = [](const fs::path& p) {
    std::ifstream in(p);
    return nlohmann::json::parse(in);
  };
  const nlohmann::json eval = read_json(dir / "r/eval-1.json");
  const nlohmann::json result = read_json(dir / "r/result.json");
  EXPECT_EQ(eval["metrics"]["val/mse"].get<double>(), result["last"]["val/mse"].get<double>());  // same model, same data
  const Result train_split = wavetrain_in(dir, "eval r/checkpoints/last.ckpt --split train trainer.batch_size=256");
  ASSERT_EQ(train_split.exit_code, 0) << train_split.err;
  EXPECT_TRUE(fs::exists(dir / "r/eval-2.json"));
  EXPECT_EQ(read_json(dir / "r/eval-2.json")["split"], "train");
  const Result missing = wavetrain_in(dir, "eval nowhere.ckpt");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "wavetrain: error: nowhere.ckpt: cannot open: No such file or directory\n");
}

TEST(CliDistributed, TwoRanksWithBatchBMatchOneRankWithBatch2B) {
  const fs::path dir = fresh_cli("ddp");
  const std::string common = "train task=toy_regression trainer.max_epochs=1 optimizer.name=sgd optimizer.lr=0.1 ";
  const Result two = wavetrain_in(dir, common + "trainer.devices=2 trainer.batch_size=16 run.dir=two");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  EXPECT_NE(two.err.find("starting 2 ranks on 127.0.0.1:"), std::string::npos) << two.err;
  ASSERT_EQ(wavetrain_in(dir, common + "trainer.batch_size=32 run.dir=one").exit_code, 0);
  const wavetrain::TrainingState a = wavetrain::Checkpoint::load((dir / "two/checkpoints/last.ckpt").string());
  const wavetrain::TrainingState b = wavetrain::Checkpoint::load((dir / "one/checkpoints/last.ckpt").string());
  EXPECT_EQ(a.global_step, 32);
  EXPECT_EQ(b.global_step, 32);
  ASSERT_EQ(a.model.size(), b.model.size());
  for (size_t i = 0; i < a.model.size(); ++i) {
    EXPECT_EQ(a.model[i].first, b.model[i].first);  // rank 0's checkpoint: no `module.` prefix
    EXPECT_LE((a.model[i].second - b.model[i].second).abs().max().item<double>(), 1e-5) << a.model[i].first;
  }
  // Only rank 0 wrote: one event file, one log.
  int event_files = 0;
  for (const auto& e : fs::directory_iterator(dir / "two/tensorboard")) event_files += e.is_regular_file();
  EXPECT_EQ(event_files, 1);
}

// The gradient averaging of trainer.ddp_overlap (on by default) by either engine (c10d's Reducer where
// this build has it, wavetrain's hooks) and the average after the backward give the same weights, bit
// for bit, also with accumulation windows: with two ranks (a + b) / 2 = a / 2 + b / 2 exactly.
TEST(CliDistributed, OverlappedAndAfterwardAveragingGiveTheSameWeights) {
  const fs::path dir = fresh_cli("ddp_overlap");
  const std::string common = "train task=toy_regression trainer.max_epochs=1 trainer.devices=2 trainer.batch_size=8 "
                             "trainer.accumulate_grad_batches=2 optimizer.name=adam optimizer.lr=0.01 ";
  const Result after = wavetrain_in(dir, common + "trainer.ddp_overlap=false run.dir=after");
  ASSERT_EQ(after.exit_code, 0) << after.err;
  const wavetrain::TrainingState b = wavetrain::Checkpoint::load((dir / "after/checkpoints/last.ckpt").string());
  std::vector<std::string> engines = {"hooks"};
  if (wavetrain::c10d_reducer_built()) engines.push_back("reducer");
  for (const std::string& engine : engines) {
    const Result overlapped = wavetrain_in(dir, common + "trainer.ddp_engine=" + engine + " run.dir=" + engine);
    ASSERT_EQ(overlapped.exit_code, 0) << overlapped.err;
    std::ifstream log_file(dir / engine / "wavetrain.log");
    const std::string log((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
    EXPECT_NE(log.find(engine == "reducer" ? "averaged during the backward by c10d's Reducer" : "averaged during the backward by wavetrain's gradient hooks"),
              std::string::npos) << log;
    const wavetrain::TrainingState a = wavetrain::Checkpoint::load((dir / engine / "checkpoints/last.ckpt").string());
    EXPECT_EQ(a.global_step, 32);  // 64 global batches of 2 x 8, two to a step
    ASSERT_EQ(a.model.size(), b.model.size());
    for (size_t i = 0; i < a.model.size(); ++i) EXPECT_TRUE(at::equal(a.model[i].second, b.model[i].second)) << engine << ": " << a.model[i].first;
  }
  // An engine that is not one is a config error naming the key and where it was set, said once.
  const Result unknown = wavetrain_in(dir, common + "trainer.ddp_engine=fast run.dir=unknown");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_EQ(unknown.err, "wavetrain: error: trainer.ddp_engine=fast (the command line): expected auto, reducer (c10d's, in "
                         "builds that ship it) or hooks\n");
  EXPECT_FALSE(fs::exists(dir / "unknown"));
  // Asking for the Reducer in a build without it is a config error naming the key.
  if (!wavetrain::c10d_reducer_built()) {
    const Result no = wavetrain_in(dir, common + "trainer.ddp_engine=reducer run.dir=no");
    EXPECT_EQ(no.exit_code, 1);
    EXPECT_EQ(no.err.rfind("wavetrain: error: trainer.ddp_engine=reducer (the command line): this build's LibTorch", 0), 0u) << no.err;
    EXPECT_EQ(no.err.find("rank 1"), std::string::npos) << no.err;  // said once, before any rank started
  }
}

// A resume that fails with trainer.devices=2 says why once: from the launcher before any rank
// starts (no run directory there), or from rank 0 (a checkpoint that does not fit the model) with
// rank 1 quiet, not a second error or rank 1's lost connection to rank 0.
TEST(CliDistributed, AFailedResumeWithTwoRanksSaysWhyOnce) {
  const fs::path dir = fresh_cli("ddp_resume_error");
  const std::string common = "train task=toy_regression trainer.devices=2 trainer.batch_size=16 trainer.max_epochs=1 ";
  const Result nowhere = wavetrain_in(dir, common + "run.dir=nowhere trainer.resume=last");
  EXPECT_EQ(nowhere.exit_code, 1);
  EXPECT_EQ(nowhere.err, "wavetrain: error: Cannot resume in 'nowhere': it is not a wavetrain run directory (no .wavetrain/config.yaml)\n");
  ASSERT_EQ(wavetrain_in(dir, common + "run.dir=r").exit_code, 0);
  const Result misfit = wavetrain_in(dir, common + "trainer.max_epochs=2 run.dir=r trainer.resume=last +toy_regression.hidden=16");
  EXPECT_EQ(misfit.exit_code, 1);
  size_t errors = 0;
  for (size_t at = misfit.err.find("wavetrain: error:"); at != std::string::npos; at = misfit.err.find("wavetrain: error:", at + 1)) ++errors;
  EXPECT_EQ(errors, 1u) << misfit.err;
  EXPECT_NE(misfit.err.find("wavetrain: error: r/checkpoints/last.ckpt does not fit the model:"), std::string::npos) << misfit.err;
  EXPECT_EQ(misfit.err.find("distributed"), std::string::npos) << misfit.err;
}

TEST(CliDistributed, ARankThatDiesMakesTheOtherExitWithAnError) {
  const fs::path dir = fresh_cli("ddp_kill");
  const auto start = std::chrono::steady_clock::now();
  const Result r = wavetrain_in(dir, "train task=toy_regression trainer.devices=2 trainer.batch_size=16 "
                                     "trainer.max_epochs=50 trainer.dist_timeout=30 run.dir=k",
                                "WAVETRAIN_FAULT_KILL_AT_STEP=5 WAVETRAIN_FAULT_KILL_RANK=1");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("rank 1 was killed by signal 9"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("distributed gradient all-reduce failed (another rank stopped or is unreachable)"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("rank 0 exited with code 1"), std::string::npos) << r.err;
  EXPECT_LT(seconds, 30.0);  // bounded: no hang until the collective timeout
}

TEST(CliTrain, InfoJobsListsASweepInOrder) {
  const Result r = wavetrain_in(fresh_cli("jobs"), "train -cd " + kBasic +
                                                   " --info jobs 'zip(trainer.lr=[0.1,0.2],trainer.max_epochs=[1,2])' "
                                                   "'model=glob(*)'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out,
            "trainer.lr=0.1 trainer.max_epochs=1 model=lstm\n"
            "trainer.lr=0.1 trainer.max_epochs=1 model=wavenet\n"
            "trainer.lr=0.2 trainer.max_epochs=2 model=lstm\n"
            "trainer.lr=0.2 trainer.max_epochs=2 model=wavenet\n");
}

// Writes configs/<name> files under `dir` for -cd configs (so that messages name configs/...).
void write_configs(const fs::path& dir, const std::vector<std::pair<std::string, std::string>>& files) {
  fs::create_directories(dir / "configs");
  for (const auto& [name, text] : files) std::ofstream(dir / "configs" / name) << text;
}

std::string nested(const std::string& open, const std::string& inner, const std::string& close, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += open;
  s += inner;
  for (size_t i = 0; i < n; ++i) s += close;
  return s;
}

// Hostile configs and overrides (issue 14) are plain errors: exit code 1 and a message, no crash.
// Before, a defaults cycle and a 100,000-link interpolation chain overflowed the stack, a file
// nested 10,000 deep failed with yaml-cpp's "bad file", and an override nested 10,000 deep ran.
TEST(CliTrain, DefaultsCycleIsAnErrorNotACrash) {
  const fs::path dir = fresh_cli("defaults_cycle");
  write_configs(dir, {{"a.yaml", "defaults:\n  - b\n"}, {"b.yaml", "defaults:\n  - a\n"}});
  const Result r = wavetrain_in(dir, "train -cd configs -cn a task=toy_regression");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err,
            "wavetrain: error: Defaults cycle: configs/a.yaml -> configs/b.yaml -> configs/a.yaml (the defaults list at "
            "configs/b.yaml:2 includes a file that is already being read)\n");
}

TEST(CliTrain, DeepNestingIsAnErrorNotACrash) {
  const fs::path dir = fresh_cli("deep_nesting");
  write_configs(dir, {{"deep.yaml", "task: toy_regression\na: " + nested("[", "", "]", 10000) + "\n"}});
  const Result file = wavetrain_in(dir, "train -cd configs -cn deep");
  EXPECT_EQ(file.exit_code, 1) << file.err;
  EXPECT_EQ(file.err, "wavetrain: error: configs/deep.yaml:2: nests deeper than 256 dicts and lists (the limit)\n");
  const Result list = wavetrain_in(dir, "train task=toy_regression '++a=" + nested("[", "", "]", 10000) + "'");
  EXPECT_EQ(list.exit_code, 1) << list.err;
  EXPECT_NE(list.err.find("(20004 characters): more than 256 nested lists and dicts (the limit) at position 260\n"),
            std::string::npos)
      << list.err.substr(0, 500);
  const Result dict = wavetrain_in(dir, "train task=toy_regression '++a=" + nested("{a:", "1", "}", 10000) + "'");
  EXPECT_EQ(dict.exit_code, 1) << dict.err;
  EXPECT_NE(dict.err.find("(40005 characters): more than 256 nested lists and dicts (the limit) at position 772\n"),
            std::string::npos)
      << dict.err.substr(0, 500);
  EXPECT_FALSE(fs::exists(dir / "outputs"));
}

TEST(CliTrain, LongInterpolationChainIsAnErrorNotACrash) {
  const fs::path dir = fresh_cli("interpolation_chain");
  std::string chain = "task: ${a0}\n";
  for (int i = 0; i < 100000; ++i) chain += "a" + std::to_string(i) + ": ${a" + std::to_string(i + 1) + "}\n";
  chain += "a100000: toy_regression\n";
  write_configs(dir, {{"chain.yaml", chain}});
  const Result r = wavetrain_in(dir, "train -cd configs -cn chain");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.err,
            "wavetrain: error: Interpolation nests more than 512 levels deep (the limit, counting each reference "
            "followed and each dict or list entered): task -> a0 -> a1 -> ... (507 more) -> a509 -> a510 -> a511 (at "
            "configs/chain.yaml:513)\n");
}

TEST(CliTrain, DidYouMeanFindsTheKeyAtAnyDepth) {
  const Result seed = wavetrain_in(fresh_cli("did_you_mean"), "train seed=3");
  EXPECT_EQ(seed.exit_code, 1);
  EXPECT_EQ(seed.err, "wavetrain: error: Could not override 'seed'. To append to your config use +seed=...\n"
                      "Did you mean one of: sweep.seed, trainer.seed?\n");
  const Result amp = wavetrain_in(fresh_cli("did_you_mean"), "train +experiment=amp segmnt=8");
  EXPECT_EQ(amp.exit_code, 1);
  EXPECT_EQ(amp.err, "wavetrain: error: Could not override 'segmnt'. To append to your config use +segmnt=...\n"
                     "Did you mean amp.segment?\n");
}

}  // namespace

namespace {

TEST(CliCkpt, InfoOnAStateDictAndOnAMissingFile) {
  const fs::path dir = fresh_cli("ckpt");
  fs::create_directories(dir);
  wavetrain::serialization::save_torch_file(
      (dir / "w.pt").string(), wavetrain::serialization::from_state_dict({{"fc.weight", at::zeros({2, 3})}}));
  const Result r = wavetrain_in(dir, "ckpt info w.pt");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("w.pt: PyTorch state dict\n  fc.weight"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Float     [2, 3]"), std::string::npos) << r.out;
  const Result missing = wavetrain_in(dir, "ckpt info nope.ckpt");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_EQ(missing.err, "wavetrain: error: nope.ckpt: cannot open: No such file or directory\n");
}

}  // namespace
