// Kills, stale files and silent values, as issue 21's audit found them: a killed launcher leaves no
// live child; a killed and resumed sweep runs each job once and keeps every finished result; a kill
// inside a checkpoint save leaves no temporary after the resumed run; top-k survives a resume; a
// taken run.dir is announced; a config key that nothing reads is refused; values that would be
// trained on silently (NaN learning rates, step counts past 64 bits) are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "tests/run_process.h"
#include "trainer/checkpoint.h"
#include "trainer/serialization/atomic_file.h"
#include "trainer/sweep/run_directory.h"

namespace fs = std::filesystem;

namespace {

using Result = wavetrain::testing::ProcessResult;

using wavetrain::testing::wavetrain_in;

// Runs `script` with bash in `dir`.
Result shell_in(const fs::path& dir, const std::string& script) {
  fs::create_directories(dir);
  return wavetrain::testing::run_shell("cd '" + dir.string() + "' && bash -c '" + script + "'");
}

fs::path fresh_reliability(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_reliability_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json reliability_json(const fs::path& p) { return nlohmann::json::parse(read_text(p)); }

std::set<std::string> files_in(const fs::path& dir, const std::string& prefix) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind(prefix, 0) == 0) names.insert(e.path().filename().string());
  return names;
}

// The launcher of trainer.devices=2, killed with SIGKILL or SIGTERM while its ranks train: no rank
// is alive 2 s later (they die with it; SIGTERM lets them save the checkpoint first).
TEST(Reliability, RanksDieWithTheirLauncher) {
  const fs::path dir = fresh_reliability("ranks");
  for (const std::string signal : {"KILL", "TERM"}) {
    const std::string run = "ranks_" + signal + "_" + std::to_string(::getpid());
    const Result r = shell_in(dir,
        "WAVETRAIN_FAULT_STEP_DELAY_MS=20 \"" WAVETRAIN_BINARY "\" train task=toy_regression trainer.devices=2 trainer.max_epochs=1000 "
        "run.dir=" + run + " >/dev/null 2>&1 & pid=$!; "
        "alive() { pgrep -c -f \"^" WAVETRAIN_BINARY " train .*run.dir=" + run + "\"; }; "
        "for i in $(seq 300); do [ $(alive) -ge 3 ] && [ -f " + run + "/metrics.csv ] && break; sleep 0.05; done; "
        "kill -" + signal + " $pid; wait $pid; sleep 2; echo alive $(alive)");
    EXPECT_NE(r.out.find("alive 0"), std::string::npos) << signal << ": " << r.out << r.err;
    if (signal == "TERM") {
      EXPECT_TRUE(fs::exists(dir / run / "checkpoints/last.ckpt"));
    }
  }
}

// A local multirun's launcher killed (SIGKILL) while one job has finished and another trains: the
// running job dies with it (its checkpoint saved), and `--resume` keeps the finished job's result,
// continues the other from its checkpoint, runs the last one, and starts nothing twice.
TEST(Reliability, AKilledSweepResumesEachJobExactlyOnce) {
  const fs::path dir = fresh_reliability("sweep");
  const std::string sweep = "sweep_" + std::to_string(::getpid());
  const Result killed = shell_in(dir,
      "WAVETRAIN_FAULT_STEP_DELAY_MS=5 \"" WAVETRAIN_BINARY "\" train -m task=toy_regression trainer.max_epochs=1000 "
      "trainer.max_steps=40,800,60 run.multirun_dir=" + sweep + " -j 2 > launcher.log 2>&1 & pid=$!; "
      "for i in $(seq 400); do grep -q \"\\[0\\] done\" launcher.log && [ -f " + sweep + "/1/metrics.csv ] && break; sleep 0.05; done; "
      "kill -KILL $pid; wait $pid; sleep 2; echo alive $(pgrep -c -f \"^" WAVETRAIN_BINARY " train .*run.dir=.*" + sweep + "/\")");
  ASSERT_NE(killed.out.find("alive 0"), std::string::npos) << killed.out << read_text(dir / "launcher.log");
  const fs::path s = dir / sweep;
  ASSERT_TRUE(fs::exists(s / "0/result.json")) << read_text(dir / "launcher.log");
  ASSERT_TRUE(fs::exists(s / "1/checkpoints/last.ckpt"));
  EXPECT_FALSE(fs::exists(s / "1/result.json"));
  const auto finished_at = fs::last_write_time(s / "0/result.json");

  const Result resumed = wavetrain_in(dir, "train -m --resume " + sweep);
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  EXPECT_NE(resumed.out.find("(1 already done)"), std::string::npos) << resumed.out;
  EXPECT_EQ(fs::last_write_time(s / "0/result.json"), finished_at);
  EXPECT_NE(read_text(s / "1/wavetrain.log").find("resumed from "), std::string::npos);
  for (const auto& e : fs::directory_iterator(s))
    EXPECT_EQ(e.path().filename().string().find(".attempt-"), std::string::npos) << "restarted: " << e.path();
  const nlohmann::json summary = reliability_json(s / "summary.json");
  const int64_t steps[] = {40, 800, 60};
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(summary["jobs"][j]["status"], "done") << j;
    EXPECT_EQ(reliability_json(s / std::to_string(j) / "result.json")["global_step"], steps[j]) << j;
  }
  // summary.csv has one `seconds` column (the job's wall time), whatever result.json holds.
  const std::string header = read_text(s / "summary.csv").substr(0, read_text(s / "summary.csv").find('\n'));
  size_t columns = 0;
  std::stringstream cells(header);
  for (std::string c; std::getline(cells, c, ',');) columns += c == "seconds" ? 1 : 0;
  EXPECT_EQ(columns, 1u) << header;
}

// SIGTERM to a local multirun's launcher stops the sweep in order: the running jobs save their
// checkpoints and stop, the queued one stays pending, the launcher exits 75, and --resume ends them all.
TEST(Reliability, ASweepStoppedBySigtermStopsItsJobsInOrder) {
  const fs::path dir = fresh_reliability("sigterm");
  const Result stopped = shell_in(dir,
      "WAVETRAIN_FAULT_STEP_DELAY_MS=5 \"" WAVETRAIN_BINARY "\" train -m task=toy_regression trainer.max_epochs=1000 "
      "trainer.max_steps=600 trainer.seed=1,2,3 run.multirun_dir=sweep -j 2 > launcher.log 2>&1 & pid=$!; "
      "for i in $(seq 400); do [ -f sweep/0/metrics.csv ] && [ -f sweep/1/metrics.csv ] && break; sleep 0.05; done; "
      "kill -TERM $pid; wait $pid; echo \"exit $?\"");
  EXPECT_NE(stopped.out.find("exit 75"), std::string::npos) << stopped.out << read_text(dir / "launcher.log");
  EXPECT_NE(read_text(dir / "launcher.log").find("stop requested (SIGTERM): the running jobs save their checkpoints and stop"),
            std::string::npos) << read_text(dir / "launcher.log");
  const nlohmann::json summary = reliability_json(dir / "sweep/summary.json");
  EXPECT_EQ(summary["jobs"][0]["status"], "running");
  EXPECT_EQ(summary["jobs"][1]["status"], "running");
  EXPECT_EQ(summary["jobs"][2]["status"], "pending");
  EXPECT_TRUE(fs::exists(dir / "sweep/0/checkpoints/last.ckpt"));
  EXPECT_FALSE(fs::exists(dir / "sweep/2"));
  const Result resumed = wavetrain_in(dir, "train -m --resume sweep");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.out << resumed.err;
  for (int j = 0; j < 3; ++j) EXPECT_EQ(reliability_json(dir / ("sweep/" + std::to_string(j)) / "result.json")["global_step"], 600) << j;
  EXPECT_NE(read_text(dir / "sweep/0/wavetrain.log").find("resumed from "), std::string::npos);
}

// A resumed sweep whose job is still run by a process that outlived its launcher waits for it (the
// job's directory is locked) instead of moving it aside and starting it again, and keeps its result.
TEST(Reliability, ResumeWaitsForALiveJobAndKeepsWhatItFinished) {
  const fs::path dir = fresh_reliability("orphan");
  ASSERT_EQ(wavetrain_in(dir, "train -m task=toy_regression trainer.max_steps=30 trainer.seed=1,2 run.multirun_dir=sweep").exit_code, 0);
  // As a launcher killed at once would leave it: job 1 "running", its run started over by a process
  // of its own (that, unlike a launcher's child, does not die with anything). Its steps are slowed
  // so that it is still running when the resume looks: 7.5 s. With 3 s the test failed once under a
  // parallel ctest (the output was lost); the likely cause is the resume's start-up outlasting it.
  nlohmann::json summary = reliability_json(dir / "sweep/summary.json");
  summary["jobs"][1]["status"] = "running";
  std::ofstream(dir / "sweep/summary.json") << summary.dump(2);
  fs::remove_all(dir / "sweep/1");
  const Result r = shell_in(dir,
      "WAVETRAIN_FAULT_STEP_DELAY_MS=250 \"" WAVETRAIN_BINARY "\" train task=toy_regression trainer.max_steps=30 trainer.seed=2 "
      "run.dir=sweep/1 > orphan.log 2>&1 & "
      "for i in $(seq 200); do [ -f sweep/1/metrics.csv ] && break; sleep 0.05; done; "
      "\"" WAVETRAIN_BINARY "\" train -m --resume sweep; echo \"exit $?\"");
  EXPECT_NE(r.out.find("[1] is still running in sweep/1 (pid "), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("[1] finished while no launcher watched it: its result.json is kept"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exit 0"), std::string::npos) << r.out << r.err;
  EXPECT_FALSE(fs::exists(dir / "sweep/1.attempt-1"));
  EXPECT_FALSE(fs::exists(dir / "sweep/1/.wavetrain/resume-1")) << "the finished job was run again";
  EXPECT_EQ(reliability_json(dir / "sweep/summary.json")["jobs"][1]["status"], "done");
  EXPECT_EQ(reliability_json(dir / "sweep/summary.json")["jobs"][1]["steps"], 30);
  // A run that a live process holds cannot be resumed by another.
  const Result held = shell_in(dir,
      "WAVETRAIN_FAULT_STEP_DELAY_MS=150 \"" WAVETRAIN_BINARY "\" train task=toy_regression trainer.max_steps=40 run.dir=held > /dev/null 2>&1 & "
      "for i in $(seq 200); do [ -f held/metrics.csv ] && break; sleep 0.05; done; "
      "\"" WAVETRAIN_BINARY "\" train task=toy_regression trainer.max_steps=80 run.dir=held trainer.resume=last; echo \"exit $?\"; wait");
  EXPECT_NE(held.err.find("Cannot resume in 'held': another wavetrain process (pid "), std::string::npos) << held.err;
  EXPECT_NE(held.out.find("exit 1"), std::string::npos) << held.out;
}

// Killed while writing last.ckpt: the full-size temporary it leaves is gone once the run resumes,
// and the resumed run ends with the files (top-k included) of a run that was never interrupted.
TEST(Reliability, AKillInsideASaveLeavesNoTemporaryAndTopKSurvivesTheResume) {
  const fs::path dir = fresh_reliability("save");
  const std::string common = "train task=toy_regression trainer.max_epochs=6 trainer.monitor=val/mse "
                             "trainer.checkpoint.save_top_k=2 optimizer.lr=0.003 ";
  ASSERT_EQ(wavetrain_in(dir, common + "run.dir=whole").exit_code, 0);
  const std::set<std::string> kept = files_in(dir / "whole/checkpoints", "epoch=");
  ASSERT_EQ(kept.size(), 2u);

  const Result killed = wavetrain_in(dir, common + "run.dir=killed", "WAVETRAIN_FAULT_KILL_IN_WRITE=last.ckpt:4");
  EXPECT_EQ(killed.exit_code, 128 + 9) << "expected death by SIGKILL (the shell reports 128 + 9); " << killed.err;
  std::set<std::string> temporaries;
  for (const auto& e : fs::directory_iterator(dir / "killed/checkpoints"))
    if (wavetrain::is_atomic_temporary(e.path().filename().string())) temporaries.insert(e.path().filename().string());
  ASSERT_EQ(temporaries.size(), 1u) << "the kill should leave last.ckpt's temporary";
  EXPECT_EQ(temporaries.begin()->rfind("last.ckpt.tmp.", 0), 0u);
  std::ofstream(dir / "killed/checkpoints/notes.tmp.txt") << "not ours";

  const Result resumed = wavetrain_in(dir, common + "run.dir=killed trainer.resume=last");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  for (const auto& e : fs::directory_iterator(dir / "killed/checkpoints"))
    EXPECT_FALSE(wavetrain::is_atomic_temporary(e.path().filename().string())) << e.path();
  EXPECT_TRUE(fs::exists(dir / "killed/checkpoints/notes.tmp.txt"));
  EXPECT_EQ(files_in(dir / "killed/checkpoints", "epoch="), kept);
}

// A checkpoint that cannot be written (a full disk, here a file-size limit: write() fails with
// EFBIG) ends the run with exit 1 and one line naming the file and the system's reason, on the
// terminal and in the run's log; its temporary is gone.
TEST(Reliability, AFailedCheckpointWriteIsInTheLogAndLeavesNoTemporary) {
  const fs::path dir = fresh_reliability("full");
  const Result r = shell_in(dir, "trap \"\" XFSZ; ulimit -f 16; exec \"" WAVETRAIN_BINARY "\" train task=toy_regression "
                                 "trainer.max_epochs=1 run.dir=full");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("wavetrain: error: Cannot write 'full/checkpoints/last.ckpt': File too large\n"), std::string::npos) << r.err;
  EXPECT_NE(read_text(dir / "full/wavetrain.log").find("] error: Cannot write 'full/checkpoints/last.ckpt': File too large\n"),
            std::string::npos);
  for (const auto& e : fs::directory_iterator(dir / "full/checkpoints")) ADD_FAILURE() << "left behind: " << e.path();
}

TEST(Reliability, AtomicTemporariesAreRecognisedByTheirExactNaming) {
  EXPECT_TRUE(wavetrain::is_atomic_temporary("last.ckpt.tmp.a1B2c3"));
  EXPECT_TRUE(wavetrain::is_atomic_temporary("result.json.tmp.XXXXXX"));
  EXPECT_FALSE(wavetrain::is_atomic_temporary("last.ckpt.tmp.a1B2c"));    // five characters
  EXPECT_FALSE(wavetrain::is_atomic_temporary("last.ckpt.tmp.a1B2c3d"));  // seven: ".tmp." is not where mkstemp puts it
  EXPECT_FALSE(wavetrain::is_atomic_temporary("last.ckpt.tmp.a1-2c3"));
  EXPECT_FALSE(wavetrain::is_atomic_temporary(".tmp.abcdef"));
  EXPECT_FALSE(wavetrain::is_atomic_temporary("notes.tmp.txt"));
}

// Starting again with a run.dir that an earlier run took: the new run goes beside it and says so
// on its first line and in its log; the earlier run is not touched.
TEST(Reliability, ATakenRunDirIsAnnouncedFirst) {
  const fs::path dir = fresh_reliability("taken");
  ASSERT_EQ(wavetrain_in(dir, "train task=toy_regression trainer.max_steps=5 run.dir=same").exit_code, 0);
  const std::string result = read_text(dir / "same/result.json");
  const Result again = wavetrain_in(dir, "train task=toy_regression trainer.max_steps=5 run.dir=same");
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const std::string note = "note: run.dir 'same' is taken by an earlier run; this run writes to 'same_1' "
                           "(continue the earlier one with trainer.resume=last)";
  EXPECT_EQ(again.err.substr(0, again.err.find('\n')), "wavetrain: " + note) << again.err;
  EXPECT_NE(read_text(dir / "same_1/wavetrain.log").find(note), std::string::npos);
  EXPECT_EQ(read_text(dir / "same/result.json"), result);
}

// A key in a config file that nothing reads is refused with its file and line and the key meant;
// keys added on purpose (`+key=` on the command line, an open section such as sweep.params) pass.
TEST(Reliability, ConfigFileKeysThatNothingReadsAreRefused) {
  const fs::path dir = fresh_reliability("keys");
  fs::create_directories(dir / "conf/experiment");
  std::ofstream(dir / "conf/experiment/typo.yaml") << "# @package _global_\ntask: toy_regression\ntrainer:\n  max_epoch: 3\n";
  std::ofstream(dir / "conf/experiment/bogus.yaml") << "# @package _global_\ntask: toy_regression\ntrainer:\n  bogus_key: 1\n";
  std::ofstream(dir / "conf/experiment/open.yaml")
      << "# @package _global_\ntask: toy_regression\ntrainer:\n  max_steps: 3\nsweep:\n  params:\n    trainer.seed: 1,2\n";
  Result r = wavetrain_in(dir, "train -cd conf +experiment=typo run.dir=typo");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err.substr(0, r.err.find("\nRun")),
            "wavetrain: error: Key 'trainer.max_epoch' (conf/experiment/typo.yaml:4) is not a key that wavetrain reads "
            "(a typo? a key of another task?)\nDid you mean trainer.max_epochs?\n") << r.err;
  EXPECT_FALSE(fs::exists(dir / "typo")) << "refused before anything is written";
  r = wavetrain_in(dir, "train -cd conf +experiment=bogus run.dir=bogus");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("Key 'trainer.bogus_key' (conf/experiment/bogus.yaml:4) is not a key that wavetrain reads"), std::string::npos)
      << r.err;
  r = wavetrain_in(dir, "train -m -cd conf +experiment=typo run.multirun_dir=sweep");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("Key 'trainer.max_epoch'"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir / "sweep"));
  r = wavetrain_in(dir, "train -cd conf +experiment=open +trainer.my_note=1 run.dir=open");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // Read through an interpolation (also the task's name), and Hydra's own section: accepted.
  std::ofstream(dir / "conf/experiment/refs.yaml")
      << "# @package _global_\nwhich: toy_regression\ntask: ${which}\nmy_rate: 0.002\noptimizer:\n  lr: ${my_rate}\n"
         "toy_regression:\n  hidden: 8\ntrainer:\n  max_steps: 3\nhydra:\n  job:\n    chdir: false\n";
  r = wavetrain_in(dir, "train -cd conf +experiment=refs run.dir=refs");
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

// WAVETRAIN_PARENT_PID makes a launcher's child stop when the launcher is gone, and only then: a
// process whose parent is another one (a wrapper that did not exec) while the named one lives runs.
TEST(Reliability, TheLaunchersVariableIsObeyedOnlyWhenTheLauncherIsGone) {
  const Result alive = wavetrain::testing::run_shell("env WAVETRAIN_PARENT_PID=" + std::to_string(::getpid()) + " '" WAVETRAIN_BINARY
                                                     "' --version; echo \"exit $?\"");
  EXPECT_NE(alive.out.find("wavetrain "), std::string::npos) << alive.out << alive.err;
  EXPECT_NE(alive.out.find("exit 0"), std::string::npos) << alive.out;
  const Result gone = wavetrain::testing::run_shell("sh -c 'exit 0' & dead=$!; wait $dead; env WAVETRAIN_PARENT_PID=$dead '" WAVETRAIN_BINARY
                                                    "' --version; echo \"exit $?\"");
  EXPECT_NE(gone.out.find("exit 143"), std::string::npos) << "the launcher is gone: SIGTERM; " << gone.out;
}

// Values that used to train silently (or not at all, with exit 0) are refused, naming the key.
TEST(Reliability, NonFiniteRatesAndUncountableStepsAreRefused) {
  const fs::path dir = fresh_reliability("values");
  fs::create_directories(dir / "conf/experiment");
  std::ofstream(dir / "conf/experiment/nan.yaml") << "# @package _global_\ntask: toy_regression\noptimizer:\n  lr: .nan\n";
  Result r = wavetrain_in(dir, "train -cd conf +experiment=nan run.dir=nan");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("wavetrain: error: optimizer.lr=nan (conf/experiment/nan.yaml:4): expected a finite number >= 0\n"),
            std::string::npos) << r.err;
  EXPECT_NE(read_text(dir / "nan/wavetrain.log").find("error: optimizer.lr=nan"), std::string::npos) << "the run's log has it too";
  r = wavetrain_in(dir, "train task=toy_regression trainer.gradient_clip_val=-1.0 run.dir=clip");
  EXPECT_NE(r.err.find("trainer.gradient_clip_val=-1.0 (the command line): expected a finite number >= 0"), std::string::npos) << r.err;
  r = wavetrain_in(dir, "train task=toy_regression trainer.max_epochs=9223372036854775807 run.dir=huge");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("trainer.max_epochs=9223372036854775807: 9223372036854775807 epochs of 32 steps are more steps than can be "
                       "counted (2^63 - 1)"), std::string::npos) << r.err;
  // With max_steps as the limit, any number of epochs is fine.
  r = wavetrain_in(dir, "train task=toy_regression trainer.max_epochs=9223372036854775807 trainer.max_steps=3 run.dir=steps");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(reliability_json(dir / "steps/result.json")["global_step"], 3);
}

}  // namespace
