// The Slurm launcher (launcher=slurm) against a real Slurm: a single-node cluster of Debian's
// slurmctld, slurmd and munge on loopback, started for these tests by tests/slurm/local_cluster.sh
// (the ctest fixture `slurm`) in WAVETRAIN_SLURM_CLUSTER. Labelled `slurm`; `ctest -LE slurm`
// leaves them out where Slurm cannot run. Each test runs `wavetrain train -m` as a user would and
// checks what the jobs left in their run directories against the same jobs run locally.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
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

fs::path cluster() {
  const char* dir = std::getenv("WAVETRAIN_SLURM_CLUSTER");
  return dir ? fs::path(dir) : fs::path();
}

// Skips (or fails where clients are required) without a running cluster.
#define REQUIRE_CLUSTER()                                                                                         \
  WAVETRAIN_REQUIRE_CLIENT(!cluster().empty() && fs::exists(cluster() / "env.sh"),                              \
                           "no local Slurm cluster (the ctest fixture slurm_cluster_start did not start one)")

fs::path fresh(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_slurm_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

// `wavetrain ARGS` in `dir` with the cluster's environment; `before` runs first in the same shell.
Result wavetrain_on_cluster(const fs::path& dir, const std::string& args, const std::string& before = "") {
  return wavetrain::testing::run_shell("{ . '" + (cluster() / "env.sh").string() + "'; cd '" + dir.string() + "' || exit 1; " + before +
                                       " '" WAVETRAIN_BINARY "' " + args + "; }");
}

Result wavetrain_here(const fs::path& dir, const std::string& args) {
  return wavetrain::testing::run_shell("cd '" + dir.string() + "' && '" WAVETRAIN_BINARY "' " + args);
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// A requeued job waits for its begin time (about two minutes); a cluster's admin can let it start
// at once, and so does this loop, in the background of the test's shell, while the sweep runs.
// It releases a job only when it was already waiting at the previous poll, a second or more after
// the requeue: slurmctld revokes the job's credential at the requeue, and slurmd refuses a launch
// whose credential was made in that same second ("Job credential revoked"; the job then ended
// FAILED, and the test failed now and then under load).
const std::string kStartRequeuedJobsAtOnce =
    "( before=''; while sleep 1; do "
    "waiting=$(squeue --me --noheader --array --format='%i %r' | awk '$2 == \"BeginTime\" {print $1}'); "
    "for id in $waiting; do case \" $before \" in *\" $id \"*) scontrol update JobId=\"$id\" StartTime=now;; esac; done; "
    "before=$(echo $waiting); done ) >/dev/null 2>&1 & watcher=$!; "
    "trap 'kill $watcher' EXIT; ";

TEST(Slurm, AnArrayOfFourThrottledToTwoGivesTheResultsOfTheLocalLauncher) {
  REQUIRE_CLUSTER();
  const fs::path dir = fresh("array");
  const std::string sweep = "train -m task=toy_regression trainer.max_epochs=2 trainer.threads=1 sweep.objective=val/mse "
                            "optimizer.lr=0.001,0.003,0.01,0.03 ";
  const auto start = std::chrono::steady_clock::now();
  const Result slurm = wavetrain_on_cluster(dir, sweep + "launcher=slurm launcher.array_parallelism=2 launcher.time=10 "
                                                         "run.multirun_dir=slurm");
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(slurm.exit_code, 0) << slurm.out << slurm.err;
  EXPECT_NE(slurm.out.find("Launching 4 jobs, 2 at a time, slurm launcher"), std::string::npos) << slurm.out;
  EXPECT_NE(read_text(dir / "slurm/slurm/array-0.sbatch").find("#SBATCH --array=0,1,2,3%2\n"), std::string::npos);
  const Result local = wavetrain_here(dir, sweep + "run.multirun_dir=local -j 2");
  ASSERT_EQ(local.exit_code, 0) << local.err;

  const nlohmann::json s = read_json(dir / "slurm/summary.json"), l = read_json(dir / "local/summary.json");
  ASSERT_EQ(s["jobs"].size(), 4u);
  EXPECT_EQ(s["launcher"], "slurm");
  std::vector<std::pair<double, int>> events;  // (time, +1 start / -1 end) of each job's run
  double run_seconds = 0;
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(s["jobs"][i]["status"], "done") << i;
    // The results come from the jobs' run directories, and equal the local launcher's.
    EXPECT_EQ(s["jobs"][i]["objective"], l["jobs"][i]["objective"]) << i;
    EXPECT_TRUE(s["jobs"][i]["launcher"]["slurm_job"].get<std::string>().find("_" + std::to_string(i)) != std::string::npos);
    const nlohmann::json status = read_json(dir / "slurm/jobs" / (std::to_string(i) + ".status.json"));
    EXPECT_EQ(status["state"], "ended");
    events.emplace_back(status["started_at"].get<double>(), 1);
    events.emplace_back(status["ended_at"].get<double>(), -1);
    run_seconds += status["seconds"].get<double>();
  }
  std::sort(events.begin(), events.end());  // an end before a start at the same instant
  int running = 0, most = 0;
  for (const auto& [t, d] : events) most = std::max(most, running += d);
  EXPECT_LE(most, 2);
  EXPECT_GE(most, 1);
  std::cout << "4 jobs through Slurm, 2 at a time: " << wall << " s in all, " << run_seconds << " s of job run time\n";
}

TEST(Slurm, AFailedJobIsNamedAndTheOthersAreKept) {
  REQUIRE_CLUSTER();
  const fs::path dir = fresh("failed");
  // hidden=0 is refused by the task, so job 1 fails while jobs 0 and 2 train.
  const Result r = wavetrain_on_cluster(dir, "train -m launcher=slurm task=toy_regression trainer.max_epochs=1 trainer.threads=1 "
                                             "+toy_regression.hidden=8,0,16 run.multirun_dir=sweep sweep.objective=val/mse");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("[1] FAILED with exit code 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("toy_regression: train_size, val_size and hidden must be >= 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("2 done, 1 failed"), std::string::npos) << r.out;
  const nlohmann::json s = read_json(dir / "sweep/summary.json");
  EXPECT_EQ(s["jobs"][1]["status"], "failed");
  EXPECT_NE(s["jobs"][1]["error"].get<std::string>().find("hidden must be >= 1"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "sweep/0/result.json"));
  EXPECT_TRUE(fs::exists(dir / "sweep/2/result.json"));
  EXPECT_NE(read_text(dir / "sweep/report.html").find("hidden must be &gt;= 1"), std::string::npos);
}

// A job that would outlast its time limit (1 minute; each optimizer step is held 15 ms, so the
// 4000 steps take a minute and more) gets SIGUSR1 before the limit, saves last.ckpt, requeues
// itself and continues; it ends with the weights of the same run trained without a stop.
TEST(Slurm, APluginsTaskAndCallbackRunInArrayJobs) {
  REQUIRE_CLUSTER();
  const fs::path dir = fresh("plugin");
  // The test plugin's task (an optimizer of its own) and callback (its state in the checkpoint),
  // loaded by each array task's `wavetrain sweep-job` from the overrides it was given.
  const std::string plugin = std::string(WAVETRAIN_TEST_PLUGIN_DIR) + "/libwavetrain_test_recorder_plugin.so";
  const Result r = wavetrain_on_cluster(dir, "train -m launcher=slurm task=decaying_sgd_toy trainer.max_epochs=1 trainer.threads=1 "
                                             "plugins=[" + plugin + "] callbacks=[recorder] +recorder.file=hooks.txt "
                                             "+toy_regression.hidden=8,16 run.multirun_dir=sweep");
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* job : {"0", "1"}) {
    const wavetrain::TrainingState s = wavetrain::Checkpoint::load((dir / "sweep" / job / "checkpoints/last.ckpt").string());
    EXPECT_EQ(s.optimizer.find("type")->as_string(), "decaying_sgd") << job;
    ASSERT_EQ(s.callbacks.size(), 1u) << job;
    EXPECT_EQ(s.callbacks[0].first, "recorder");
    EXPECT_EQ(s.callbacks[0].second.find("steps_seen")->as_int(), s.global_step) << job;
  }
}

TEST(Slurm, AJobPastItsTimeLimitIsRequeuedAndEndsAsAnUninterruptedRun) {
  REQUIRE_CLUSTER();
  const fs::path dir = fresh("requeue");
  const std::string run = "train task=toy_regression trainer.max_epochs=1000 trainer.max_steps=4000 trainer.threads=1 trainer.seed=4 ";
  const Result r = wavetrain_on_cluster(dir, "train -m " + run.substr(6) + "launcher=slurm launcher.time=1 launcher.signal_delay_s=50 "
                                             "launcher.max_requeue=10 run.multirun_dir=sweep",
                                        kStartRequeuedJobsAtOnce + "WAVETRAIN_FAULT_STEP_DELAY_MS=15 ");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json status = read_json(dir / "sweep/jobs/0.status.json");
  EXPECT_EQ(status["state"], "ended");
  EXPECT_GE(status["restarts"].get<int>(), 1) << status.dump();
  const std::string log = read_text(dir / "sweep/logs/0.log");
  EXPECT_NE(log.find("saved its checkpoint; requeueing"), std::string::npos) << log;
  EXPECT_NE(read_text(dir / "sweep/0/wavetrain.log").find("stopping: SIGUSR1 received; checkpoint saved at step"), std::string::npos);
  EXPECT_NE(r.out.find("(requeued "), std::string::npos) << r.out;

  ASSERT_EQ(wavetrain_here(dir, run + "run.dir=whole").exit_code, 0);
  const wavetrain::TrainingState whole = wavetrain::Checkpoint::load((dir / "whole/checkpoints/last.ckpt").string());
  const wavetrain::TrainingState after = wavetrain::Checkpoint::load((dir / "sweep/0/checkpoints/last.ckpt").string());
  EXPECT_EQ(after.global_step, 4000);
  ASSERT_EQ(after.model.size(), whole.model.size());
  for (size_t i = 0; i < whole.model.size(); ++i) EXPECT_TRUE(at::equal(after.model[i].second, whole.model[i].second)) << whole.model[i].first;
  EXPECT_EQ(read_json(dir / "sweep/0/result.json")["last"]["val/mse"], read_json(dir / "whole/result.json")["last"]["val/mse"]);
}

TEST(Slurm, TwoTasksPerNodeTrainAsTwoDataParallelRanks) {
  REQUIRE_CLUSTER();
  const fs::path dir = fresh("ddp");
  const std::string run = "task=toy_regression trainer.max_epochs=1 trainer.batch_size=16 trainer.threads=1 ";
  const Result r = wavetrain_on_cluster(dir, "train -m " + run + "launcher=slurm launcher.tasks_per_node=2 run.multirun_dir=sweep");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(read_text(dir / "sweep/slurm/array-0.sbatch").find("#SBATCH --ntasks-per-node=2\n"), std::string::npos);
  EXPECT_NE(read_text(dir / "sweep/0/wavetrain.log").find("distributed: 2 ranks (slurm)"), std::string::npos)
      << read_text(dir / "sweep/0/wavetrain.log");
  // The same two ranks started by wavetrain itself on this machine train the same model.
  ASSERT_EQ(wavetrain_here(dir, "train " + run + "trainer.devices=2 run.dir=local").exit_code, 0);
  EXPECT_EQ(read_json(dir / "sweep/0/result.json")["last"]["val/mse"], read_json(dir / "local/result.json")["last"]["val/mse"]);
}

// The target: 16 ASHA trials through Slurm, every trial accounted for, the report showing them.
TEST(Slurm, AshaOfSixteenTrialsAccountsForEveryTrial) {
  REQUIRE_CLUSTER();
  const fs::path dir = fresh("asha");
  const auto start = std::chrono::steady_clock::now();
  const Result r = wavetrain_on_cluster(
      dir, "train -m task=toy_regression trainer.max_epochs=1000 trainer.threads=1 sweep.strategy=asha sweep.trials=16 "
           "'+sweep.space.optimizer.lr=\"loguniform(1e-4,1e-1)\"' sweep.objective=val/mse sweep.asha.min_resource=10 "
           "sweep.asha.max_resource=90 launcher=slurm launcher.array_parallelism=2 run.multirun_dir=sweep");
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const nlohmann::json s = read_json(dir / "sweep/summary.json");
  ASSERT_EQ(s["jobs"].size(), 16u);
  std::map<std::string, int> statuses;
  int launches = 0;
  for (const auto& j : s["jobs"]) {
    ++statuses[j["status"].get<std::string>()];
    launches += j["rung"].get<int>() + 1;
  }
  EXPECT_EQ(statuses["done"] + statuses["stopped"] + statuses["failed"], 16) << s.dump(1);
  EXPECT_GE(statuses["done"], 1);
  EXPECT_EQ(statuses["failed"], 0);
  const std::string report = read_text(dir / "sweep/report.html");
  EXPECT_EQ(count(report, "<tr data-job="), 16u);
  std::cout << "ASHA, 16 trials, " << launches << " runs through Slurm: " << wall << " s; " << statuses["done"] << " done, "
            << statuses["stopped"] << " stopped\n";
}

// The launcher is killed (SIGKILL) while its array runs on; the cluster finishes the jobs, and
// `--resume` takes them over: every job done, none run twice.
TEST(Slurm, AKilledLauncherLosesNoJobAndResumeRunsNoneTwice) {
  REQUIRE_CLUSTER();
  const fs::path dir = fresh("killed");
  const Result killed = wavetrain_on_cluster(
      dir, "train -m task=toy_regression trainer.max_epochs=1000 trainer.max_steps=200 trainer.threads=1 sweep.objective=val/mse "
           "optimizer.lr=0.001,0.003,0.01,0.03 launcher=slurm launcher.array_parallelism=1 run.multirun_dir=sweep > launcher.log 2>&1 & "
           "pid=$!; for i in $(seq 600); do grep -q '\\] done in' launcher.log 2>/dev/null && break; sleep 0.1; done; kill -9 $pid; "
           "wait $pid; echo \"exit $?\"; true",
      "export WAVETRAIN_FAULT_STEP_DELAY_MS=10; ");
  EXPECT_NE(killed.out.find("exit 137"), std::string::npos) << killed.out << killed.err << read_text(dir / "launcher.log");
  const Result resumed = wavetrain_on_cluster(dir, "train -m --resume sweep");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("still on the cluster, watched again"), std::string::npos) << resumed.out;
  const nlohmann::json s = read_json(dir / "sweep/summary.json");
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(s["jobs"][i]["status"], "done") << i;
    EXPECT_EQ(count(read_text(dir / "sweep/logs" / (std::to_string(i) + ".log")), "wavetrain sweep-job: job " + std::to_string(i) + " ("), 1u)
        << "job " << i << " ran more than once";
  }
}

}  // namespace
