// Sweeps beyond grids as a user runs them (`wavetrain train -m`): ASHA against the full grid on
// toy_regression, random search's trials, the errors a sweep gives before it writes or submits
// anything, and the stop signal that lets a job save a checkpoint and continue later.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/run_process.h"
#include "trainer/checkpoint.h"

namespace fs = std::filesystem;

namespace {

using Result = wavetrain::testing::ProcessResult;

using wavetrain::testing::wavetrain_in;

fs::path fresh_sweep(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_sweep_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

// step -> train/loss of a run's metrics.csv (the rows that have one).
std::map<int64_t, std::string> train_losses(const fs::path& metrics_csv) {
  std::ifstream in(metrics_csv);
  std::string line;
  std::getline(in, line);
  std::vector<std::string> names;
  std::stringstream header(line);
  for (std::string cell; std::getline(header, cell, ',');) names.push_back(cell);
  const size_t col = static_cast<size_t>(std::find(names.begin(), names.end(), "train/loss") - names.begin());
  std::map<int64_t, std::string> out;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) f.push_back(cell);
    if (col < f.size() && !f[col].empty()) out[std::stoll(f[0])] = f[col];
  }
  return out;
}

std::string lr_of(const nlohmann::json& job) {
  for (const std::string o : job["overrides"])
    if (o.rfind("optimizer.lr=", 0) == 0) return o.substr(13);
  return "";
}

const char* kLrs = "optimizer.lr=0.0001,0.0003,0.001,0.002,0.004,0.008,0.016,0.032,0.064";

TEST(SweepCli, AshaFindsTheGridsBestWithAFractionOfItsStepsAndPromotedTrialsContinueTheirCurves) {
  const fs::path dir = fresh_sweep("asha");
  const std::string common = std::string("train -m task=toy_regression trainer.max_epochs=1000 sweep.objective=val/mse ") + kLrs;
  const Result grid = wavetrain_in(dir, common + " trainer.max_steps=90 run.multirun_dir=grid -j 2");
  ASSERT_EQ(grid.exit_code, 0) << grid.out << grid.err;
  // One worker: ASHA's decisions then depend on the results alone, not on which job ends first.
  const Result asha = wavetrain_in(dir, common + " sweep.strategy=asha sweep.asha.min_resource=10 sweep.asha.max_resource=90 "
                                                 "run.multirun_dir=asha -j 1");
  ASSERT_EQ(asha.exit_code, 0) << asha.out << asha.err;
  EXPECT_NE(asha.out.find("rungs (trainer.max_steps): 10 30 90"), std::string::npos) << asha.out;

  const nlohmann::json g = read_json(dir / "grid/summary.json"), a = read_json(dir / "asha/summary.json");
  int64_t grid_steps = 0, asha_steps = 0;
  std::map<std::string, size_t> grid_job_of_lr;
  for (const auto& j : g["jobs"]) {
    grid_steps += j["steps"].get<int64_t>();
    grid_job_of_lr[lr_of(j)] = j["job"];
  }
  std::map<std::string, int> statuses;
  for (const auto& j : a["jobs"]) {
    asha_steps += j["steps"].get<int64_t>();
    ++statuses[j["status"].get<std::string>()];
  }
  EXPECT_EQ(grid_steps, 9 * 90);
  EXPECT_LE(asha_steps * 100, grid_steps * 40) << "ASHA trained " << asha_steps << " steps, the grid " << grid_steps;
  EXPECT_EQ(statuses["done"] + statuses["stopped"], 9) << a.dump(1);
  EXPECT_GE(statuses["done"], 1);
  EXPECT_GE(statuses["stopped"], 6);

  // The same best: the same learning rate, and the same objective to the bit (the best trial's run,
  // resumed twice, is the grid's uninterrupted run).
  ASSERT_TRUE(g["best_job"].is_number() && a["best_job"].is_number());
  const auto& gb = g["jobs"][g["best_job"].get<size_t>()];
  const auto& ab = a["jobs"][a["best_job"].get<size_t>()];
  EXPECT_EQ(lr_of(ab), lr_of(gb));
  EXPECT_EQ(ab["objective"].get<double>(), gb["objective"].get<double>());

  // Every promoted trial's curve is the grid's curve for its learning rate: no restart, no jump.
  int promoted = 0;
  for (const auto& j : a["jobs"]) {
    if (j["rung"].get<int>() < 1) continue;
    ++promoted;
    const size_t n = j["job"];
    const auto mine = train_losses(dir / "asha" / std::to_string(n) / "metrics.csv");
    const auto whole = train_losses(dir / "grid" / std::to_string(grid_job_of_lr.at(lr_of(j))) / "metrics.csv");
    ASSERT_FALSE(mine.empty());
    EXPECT_EQ(mine.rbegin()->first, j["rung"].get<int>() == 1 ? 30 : 90) << "trial " << n;
    for (const auto& [step, loss] : mine) EXPECT_EQ(loss, whole.at(step)) << "trial " << n << " step " << step;
  }
  EXPECT_GE(promoted, 3);
  EXPECT_TRUE(fs::is_regular_file(dir / "asha/report.html"));
}

TEST(SweepCli, RandomSearchDrawsTheSameTrialsForTheSameSeed) {
  const fs::path dir = fresh_sweep("random");
  const std::string args =
      "train -m --info jobs task=toy_regression sweep.strategy=random sweep.trials=5 trainer.seed=1,2 "
      "'+sweep.space.optimizer.lr=\"loguniform(1e-4,1e-1)\"' '+sweep.space.toy_regression.hidden=\"int(4,64)\"' ";
  const Result a = wavetrain_in(dir, args + "sweep.seed=3"), b = wavetrain_in(dir, args + "sweep.seed=3"),
               c = wavetrain_in(dir, args + "sweep.seed=4");
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  std::istringstream lines(a.out);
  int n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    // ... trainer.seed=S ... optimizer.lr=X toy_regression.hidden=H (the fixed overrides stay in each job)
    std::istringstream words(line);
    std::string seed, lr, hidden;
    for (std::string w; words >> w;) {
      if (w.rfind("trainer.seed=", 0) == 0) seed = w;
      if (w.rfind("optimizer.lr=", 0) == 0) lr = w;
      if (w.rfind("toy_regression.hidden=", 0) == 0) hidden = w;
    }
    EXPECT_TRUE(seed == "trainer.seed=1" || seed == "trainer.seed=2") << line;
    ASSERT_EQ(lr.rfind("optimizer.lr=", 0), 0u) << line;
    const double v = std::stod(lr.substr(13));
    EXPECT_GE(v, 1e-4);
    EXPECT_LE(v, 1e-1);
    ASSERT_EQ(hidden.rfind("toy_regression.hidden=", 0), 0u) << line;
    const int h = std::stoi(hidden.substr(22));
    EXPECT_GE(h, 4);
    EXPECT_LE(h, 64);
  }
  EXPECT_EQ(n, 5);
}

// Each bad sweep exits non-zero with a message naming what is wrong, and writes nothing.
TEST(SweepCli, BadSweepsAreRefusedBeforeAnythingIsWrittenOrSubmitted) {
  const fs::path dir = fresh_sweep("bad");
  const std::string base = "train -m task=toy_regression trainer.max_epochs=1 run.multirun_dir=sweep ";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"sweep.strategy=random '+sweep.space.optimizer.lr=\"uniform(0.1,0.1)\"' sweep.trials=3",
       "sweep.space.optimizer.lr=uniform(0.1,0.1): the range holds no values"},
      {"sweep.strategy=random '+sweep.space.optimizer.lr=\"choice()\"'", "sweep.space.optimizer.lr"},
      {"optimizer.lr=0.1,0.2 sweep.objective=val/msee",
       "sweep.objective='val/msee' is not a metric that task toy_regression reports; it reports: train/loss, val/mse, val/mae"},
      {"optimizer.lr=0.1,0.2 sweep.strategy=asha sweep.asha.max_resource=10", "sweep.strategy=asha needs sweep.objective"},
      {"optimizer.lr=0.1,0.2 sweep.strategy=asha sweep.objective=val/mse", "sweep.asha.max_resource (0) must be >= sweep.asha.min_resource (1)"},
      {"optimizer.lr=0.1,0.2 sweep.strategy=bayes", "sweep.strategy='bayes': expected grid, random or asha"},
      {"optimizer.lr=0.1,0.2 launcher=slurm +launcher.partitionn=gpu",
       "launcher.partitionn (the command line): not an option of the Slurm launcher; did you mean launcher.partition?"},
      {"optimizer.lr=0.1,0.2 launcher=slurm launcher.time=soon", "launcher.time='soon': expected minutes or [D-]HH:MM:SS"},
      {"optimizer.lr=0.1,0.2 launcher=slurm launcher.max_requeue=-1", "launcher.max_requeue must be >= 0"},
  };
  for (const auto& [args, message] : cases) {
    const Result r = wavetrain_in(dir, base + args);
    EXPECT_NE(r.exit_code, 0) << args;
    EXPECT_NE(r.err.find(message), std::string::npos) << args << "\n" << r.err;
    EXPECT_FALSE(fs::exists(dir / "sweep")) << args;
  }
  // No Slurm client on PATH: said before anything is submitted.
  const Result no_sbatch = wavetrain_in(dir, base + "optimizer.lr=0.1,0.2 launcher=slurm", "PATH=/nonexistent");
  EXPECT_NE(no_sbatch.exit_code, 0);
  EXPECT_NE(no_sbatch.err.find("launcher=slurm: sbatch, squeue, scontrol not found on PATH"), std::string::npos) << no_sbatch.err;
  EXPECT_FALSE(fs::exists(dir / "sweep"));
}

// SIGUSR1 (Slurm's warning before a time limit) or SIGTERM during training: the run saves
// last.ckpt, exits with 75 and no result.json, and `trainer.resume=last` then ends with exactly the
// weights of a run that was never stopped.
TEST(SweepCli, AStopSignalSavesACheckpointAndTheResumedRunEqualsAnUninterruptedOne) {
  const fs::path dir = fresh_sweep("signal");
  const std::string common = "train task=toy_regression trainer.max_epochs=1000 trainer.max_steps=2000 trainer.seed=3 ";
  ASSERT_EQ(wavetrain_in(dir, common + "run.dir=whole").exit_code, 0);
  const wavetrain::TrainingState whole = wavetrain::Checkpoint::load((dir / "whole/checkpoints/last.ckpt").string());
  for (const std::string signal : {"USR1", "TERM"}) {
    const std::string run = "stopped_" + signal;
    // Signalled once training is under way (metrics.csv has rows past its header).
    const Result stopped = wavetrain::testing::run_shell(
        "{ cd '" + dir.string() + "' && { '" WAVETRAIN_BINARY "' " + common + "run.dir=" + run + " & pid=$!; " +
        "for i in $(seq 400); do [ \"$(cat '" + (dir / run / "metrics.csv").string() +
        "' 2>/dev/null | wc -l)\" -ge 3 ] && break; sleep 0.05; done; kill -" + signal + " $pid; wait $pid; echo \"exit $?\"; }; }");
    EXPECT_NE(stopped.out.find("exit 75"), std::string::npos) << stopped.out << stopped.err;
    EXPECT_NE(stopped.err.find("stopped by SIG" + signal + " at step "), std::string::npos) << stopped.err;
    EXPECT_FALSE(fs::exists(dir / run / "result.json"));
    const wavetrain::TrainingState saved = wavetrain::Checkpoint::load((dir / run / "checkpoints/last.ckpt").string());
    EXPECT_GT(saved.global_step, 0);
    EXPECT_LT(saved.global_step, 2000) << "the run ended before the signal: make it longer";
    std::ifstream log(dir / run / "wavetrain.log");
    const std::string text((std::istreambuf_iterator<char>(log)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("stopping: SIG" + signal + " received; checkpoint saved at step " + std::to_string(saved.global_step)),
              std::string::npos) << text;

    const Result resumed = wavetrain_in(dir, common + "run.dir=" + run + " trainer.resume=last");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    const wavetrain::TrainingState after = wavetrain::Checkpoint::load((dir / run / "checkpoints/last.ckpt").string());
    EXPECT_EQ(after.global_step, 2000);
    ASSERT_EQ(after.model.size(), whole.model.size());
    for (size_t i = 0; i < whole.model.size(); ++i)
      EXPECT_TRUE(at::equal(after.model[i].second, whole.model[i].second)) << signal << " " << whole.model[i].first;
    EXPECT_EQ(read_json(dir / run / "result.json")["last"]["val/mse"], read_json(dir / "whole/result.json")["last"]["val/mse"]);
  }
}

}  // namespace

namespace {

// `wavetrain report` for any set of run directories (and for a sweep directory), as a user
// compares runs started by hand: one table row per run, the params that differ, the objective.
TEST(SweepCli, ReportComparesRunDirectoriesAndSweepDirectories) {
  const fs::path dir = fresh_sweep("report");
  for (const std::string lr : {"0.001", "0.01", "0.03"})
    ASSERT_EQ(wavetrain_in(dir, "train task=toy_regression trainer.max_epochs=2 trainer.monitor=val/mse optimizer.lr=" + lr +
                                    " run.dir=runs/lr" + lr).exit_code, 0);
  const Result r = wavetrain_in(dir, "report runs/lr0.001 runs/lr0.01 runs/lr0.03 -o compared");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("report: compared/report.html"), std::string::npos) << r.out;
  std::ifstream in(dir / "compared/report.html");
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t rows = 0;
  for (size_t at = html.find("<tr data-job="); at != std::string::npos; at = html.find("<tr data-job=", at + 1)) ++rows;
  EXPECT_EQ(rows, 3u);
  EXPECT_NE(html.find("optimizer.lr"), std::string::npos);
  EXPECT_NE(html.find("val/mse"), std::string::npos);  // the runs' trainer.monitor is the objective
  // The best run is the one with the lowest val/mse in its result.json.
  std::string best;
  double lowest = 1e9;
  for (const std::string lr : {"0.001", "0.01", "0.03"}) {
    const double v = read_json(dir / ("runs/lr" + lr) / "result.json")["best"]["val/mse"];
    if (v < lowest) {
      lowest = v;
      best = lr;
    }
  }
  EXPECT_NE(html.find("id='best-job' data-job='lr" + best + "'"), std::string::npos) << "best: " << best;

  const Result bad = wavetrain_in(dir, "report runs/nothing-here");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("report: 'runs/nothing-here' is not a directory"), std::string::npos) << bad.err;
}

}  // namespace

namespace {

// `wavetrain ARGS` started with SIGUSR1 already pending (blocked, raised, then exec'd: a pending
// signal survives exec), so the stop request is there before the first step: deterministic.
Result wavetrain_with_pending_usr1(const fs::path& dir, const std::string& args) {
  fs::create_directories(dir);
  return wavetrain::testing::run_shell(
      "cd '" + dir.string() + "' && python3 -c 'import os, signal, sys; signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1}); "
      "os.kill(os.getpid(), signal.SIGUSR1); os.execv(sys.argv[1], sys.argv[1:])' '" WAVETRAIN_BINARY "' " + args);
}

std::string log_of(const fs::path& run) {
  std::ifstream in(run / "wavetrain.log");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Where a stop request is honoured: mid-epoch at once; at an epoch's last batch after that epoch's
// validation and checkpoint; at the run's last step not at all (the run ends by itself). Each
// stopped run, resumed, ends exactly as the run never stopped, its result.json complete.
TEST(SweepCli, AStopRequestIsHonouredMidEpochAtAnEpochsEndAndNotAtTheLastStep) {
  const fs::path dir = fresh_sweep("pending");
  const std::string mid = "train task=toy_regression trainer.max_epochs=3 trainer.seed=2 ";
  const Result stopped = wavetrain_with_pending_usr1(dir, mid + "run.dir=mid");
  EXPECT_EQ(stopped.exit_code, 75) << stopped.err;
  EXPECT_EQ(wavetrain::Checkpoint::load((dir / "mid/checkpoints/last.ckpt").string()).global_step, 1);
  ASSERT_EQ(wavetrain_in(dir, mid + "run.dir=mid trainer.resume=last").exit_code, 0);
  ASSERT_EQ(wavetrain_in(dir, mid + "run.dir=mid_whole").exit_code, 0);
  EXPECT_EQ(read_json(dir / "mid/result.json")["last"], read_json(dir / "mid_whole/result.json")["last"]);

  // One batch per epoch: every step is an epoch's last; the stop comes after epoch 1's validation.
  const std::string edge = "train task=toy_regression +toy_regression.train_size=32 trainer.max_epochs=4 trainer.seed=2 ";
  ASSERT_EQ(wavetrain_with_pending_usr1(dir, edge + "run.dir=edge").exit_code, 75);
  const wavetrain::TrainingState saved = wavetrain::Checkpoint::load((dir / "edge/checkpoints/last.ckpt").string());
  EXPECT_EQ(saved.global_step, 1);
  EXPECT_EQ(saved.epoch, 1);  // epoch 1 complete, validated
  EXPECT_NE(log_of(dir / "edge").find("epoch 1 step 1: val/mse="), std::string::npos);
  ASSERT_EQ(wavetrain_in(dir, edge + "run.dir=edge trainer.resume=last").exit_code, 0);
  ASSERT_EQ(wavetrain_in(dir, edge + "run.dir=edge_whole").exit_code, 0);
  EXPECT_EQ(read_json(dir / "edge/result.json")["last"], read_json(dir / "edge_whole/result.json")["last"]);
  EXPECT_TRUE(read_json(dir / "edge/result.json")["last"]["train/loss"].is_number());

  // The run's only step is its last: it ends by itself, with its result.
  const Result last = wavetrain_with_pending_usr1(dir, "train task=toy_regression trainer.max_steps=1 run.dir=last");
  EXPECT_EQ(last.exit_code, 0) << last.err;
  EXPECT_EQ(read_json(dir / "last/result.json")["global_step"], 1);

  // trainer.devices=2: the launcher passes the request on to both ranks, which stop at the same
  // step; the run ends as interrupted, and resumed it equals the two ranks never stopped.
  const std::string ddp = "train task=toy_regression trainer.max_epochs=2 trainer.devices=2 trainer.batch_size=16 ";
  const Result ranks = wavetrain_with_pending_usr1(dir, ddp + "run.dir=ddp");
  EXPECT_EQ(ranks.exit_code, 75) << ranks.err;
  const int64_t at = wavetrain::Checkpoint::load((dir / "ddp/checkpoints/last.ckpt").string()).global_step;
  EXPECT_GT(at, 0);
  EXPECT_LT(at, 64);
  ASSERT_EQ(wavetrain_in(dir, ddp + "run.dir=ddp trainer.resume=last").exit_code, 0);
  ASSERT_EQ(wavetrain_in(dir, ddp + "run.dir=ddp_whole").exit_code, 0);
  EXPECT_EQ(read_json(dir / "ddp/result.json")["last"]["val/mse"], read_json(dir / "ddp_whole/result.json")["last"]["val/mse"]);
}

// A job of a local multirun stopped by a signal exits 75 with its checkpoint; `--resume` continues
// it from there (no fresh attempt), and it ends as if never stopped.
TEST(SweepCli, ResumeContinuesAJobThatAStopSignalEndedFromItsCheckpoint) {
  const fs::path dir = fresh_sweep("resume75");
  const std::string sweep = "train -m task=toy_regression trainer.max_epochs=1000 trainer.max_steps=1500 optimizer.lr=0.001,0.002 "
                            "sweep.objective=val/mse run.multirun_dir=sweep -j 2";
  fs::create_directories(dir);
  const Result first = wavetrain::testing::run_shell(
      "{ cd '" + dir.string() + "' || exit 1; WAVETRAIN_FAULT_STEP_DELAY_MS=2 '" WAVETRAIN_BINARY "' " + sweep + " > launcher.log & pid=$!; " +
      "for i in $(seq 400); do [ \"$(cat sweep/1/metrics.csv 2>/dev/null | wc -l)\" -ge 3 ] && break; sleep 0.05; done; " +
      "pkill -USR1 -f -- 'run[.]dir=.*sweep/1$'; wait $pid; echo \"exit $?\"; cat launcher.log; }");
  EXPECT_NE(first.out.find("exit 1"), std::string::npos) << first.out << first.err;
  EXPECT_NE(first.out.find("[1] STOPPED by a signal after "), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("[0] done in"), std::string::npos) << first.out;
  // The summary agrees with the job's line: interrupted (to be continued), not failed.
  EXPECT_NE(first.out.find("\n1    interrupted  "), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("1 done, 1 interrupted, 0 failed;"), std::string::npos) << first.out;
  EXPECT_EQ(read_json(dir / "sweep/summary.json")["jobs"][1]["status"], "interrupted");
  const int64_t stopped_at = wavetrain::Checkpoint::load((dir / "sweep/1/checkpoints/last.ckpt").string()).global_step;
  EXPECT_LT(stopped_at, 1500);

  const Result resumed = wavetrain_in(dir, "train -m --resume sweep");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_FALSE(fs::exists(dir / "sweep/1.attempt-1"));
  EXPECT_NE(log_of(dir / "sweep/1").find("resumed from "), std::string::npos);
  ASSERT_EQ(wavetrain_in(dir, "train task=toy_regression trainer.max_epochs=1000 trainer.max_steps=1500 optimizer.lr=0.002 run.dir=whole").exit_code, 0);
  EXPECT_EQ(read_json(dir / "sweep/1/result.json")["last"], read_json(dir / "whole/result.json")["last"]);
  EXPECT_EQ(read_json(dir / "sweep/summary.json")["jobs"][1]["status"], "done");
}

}  // namespace
