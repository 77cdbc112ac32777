// Data-parallel training across simulated hosts (tests/multinode/hosts.sh: network namespaces on a
// bridge, one address each): ranks started as torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR on host 0's address), on 2 hosts x 1 rank and 2 hosts x 2 ranks, reach one host's
// weights; a host whose link is cut ends the run with a clear error within trainer.dist_timeout,
// its last.ckpt intact, and the resumed run ends where an uninterrupted one does. Each test checks
// that no namespace or link of its hosts is left behind.
//
// Needs root (network namespaces). Where that is refused the tests skip, except under scripts/test
// (WAVETRAIN_TEST_REQUIRE_CLIENTS=1), where they fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

#include "tests/run_process.h"
#include "trainer/checkpoint.h"

namespace fs = std::filesystem;
using Result = wavetrain::testing::ProcessResult;

namespace {

const std::string kHosts = std::string(WAVETRAIN_TEST_DATA) + "/../multinode/hosts.sh";

class MultiNode : public ::testing::Test {
 protected:
  void SetUp() override {
    // Hosts left by a test program that was killed (its TearDown never ran): wt<pid> whose pid is gone.
    wavetrain::testing::run_shell("for sw in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E '^wt[0-9]+-sw$'); do "
                                  "n=${sw%-sw}; kill -0 ${n#wt} 2>/dev/null || '" + kHosts + "' down $n; done");
    name_ = "wt" + std::to_string(::getpid());
    dir_ = fs::temp_directory_path() / ("wavetrain_multinode_" + name_);
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override {
    wavetrain::testing::run_shell("'" + kHosts + "' down " + name_);
    const Result left = wavetrain::testing::run_shell("'" + kHosts + "' left " + name_);
    EXPECT_EQ(left.out, "") << "left behind";
  }
  // Makes `n` hosts; false (and the test skips or fails) where namespaces are refused.
  bool hosts_up(int n, const std::string& rate = "") {
    const Result up = wavetrain::testing::run_shell("'" + kHosts + "' up " + name_ + " " + std::to_string(n) + " " + rate);
    if (up.exit_code == 0) return true;
    reason_ = "network namespaces are refused here: " + up.err;
    return false;
  }
  // The shell line that starts rank `rank` of `world` on host `host` in the background, its output
  // in rank<R>.log, its pid in $p<R>.
  std::string rank_line(int rank, int world, int host, int local_rank, int port, const std::string& args) const {
    std::ostringstream s;
    s << "'" << kHosts << "' exec " << name_ << " " << host << " env RANK=" << rank << " WORLD_SIZE=" << world
      << " LOCAL_RANK=" << local_rank << " MASTER_ADDR=10.231.0.1 MASTER_PORT=" << port << " '" << WAVETRAIN_BINARY
      << "' " << args << " >rank" << rank << ".log 2>&1 & p" << rank << "=$!; ";
    return s.str();
  }
  // Runs `world` ranks over `hosts` hosts (ranks filled host by host) and waits for them all.
  Result train(int hosts, int world, const std::string& args) const {
    std::string script = "cd '" + dir_.string() + "' || exit 1; ";
    const int per_host = world / hosts;
    for (int r = 0; r < world; ++r) script += rank_line(r, world, r / per_host, r % per_host, 29400 + r0_port_, args);
    script += "rc=0; ";
    for (int r = 0; r < world; ++r) script += "wait $p" + std::to_string(r) + " || rc=1; ";
    script += "cat rank0.log >&2; exit $rc";
    return wavetrain::testing::run_shell("( " + script + " )");  // run_shell's 2> then takes it all
  }
  wavetrain::TrainingState last(const std::string& run) const {
    return wavetrain::Checkpoint::load((dir_ / run / "checkpoints/last.ckpt").string());
  }
  void skip_or_fail() {
    if (wavetrain::testing::clients_required()) FAIL() << reason_;
    GTEST_SKIP() << reason_;
  }

  std::string name_, reason_;
  fs::path dir_;
  int r0_port_ = static_cast<int>(::getpid() % 500);
};

void expect_close(const wavetrain::TrainingState& a, const wavetrain::TrainingState& b, double tolerance, const std::string& what) {
  ASSERT_EQ(a.model.size(), b.model.size()) << what;
  for (size_t i = 0; i < a.model.size(); ++i) {
    EXPECT_EQ(a.model[i].first, b.model[i].first) << what;
    const double d = (a.model[i].second - b.model[i].second).abs().max().item<double>();
    if (tolerance == 0) EXPECT_TRUE(at::equal(a.model[i].second, b.model[i].second)) << what << ": " << a.model[i].first << " " << d;
    else EXPECT_LE(d, tolerance) << what << ": " << a.model[i].first;
  }
}

TEST_F(MultiNode, TwoHostsOfOneAndOfTwoRanksReachOneHostsWeights) {
  if (!hosts_up(2, "1gbit")) return skip_or_fail();
  const std::string common = "train task=toy_regression trainer.max_epochs=1 optimizer.name=sgd optimizer.lr=0.1 ";
  const Result two = train(2, 2, common + "trainer.batch_size=16 run.dir=two_by_one");
  ASSERT_EQ(two.exit_code, 0) << two.err;
  ++r0_port_;
  const Result four = train(2, 4, common + "trainer.batch_size=8 run.dir=two_by_two");
  ASSERT_EQ(four.exit_code, 0) << four.err;
  const Result one = wavetrain::testing::wavetrain_in(dir_, common + "trainer.batch_size=32 run.dir=one");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const wavetrain::TrainingState reference = last("one");
  EXPECT_EQ(reference.global_step, 32);
  EXPECT_EQ(last("two_by_one").global_step, 32);
  EXPECT_EQ(last("two_by_two").global_step, 32);
  expect_close(last("two_by_one"), reference, 1e-5, "2 hosts x 1 rank");
  expect_close(last("two_by_two"), reference, 1e-5, "2 hosts x 2 ranks");
}

TEST_F(MultiNode, ACutLinkEndsTheRunWithinTheTimeoutAndTheResumeEndsAsAnUninterruptedRun) {
  if (!hosts_up(2)) return skip_or_fail();
  const std::string common = "train task=toy_regression trainer.max_epochs=1000 trainer.max_steps=600 trainer.batch_size=8 "
                             "optimizer.name=adam optimizer.lr=0.01 trainer.checkpoint.every_n_steps=50 trainer.dist_timeout=5 ";
  // The run, and host 1's link cut once it has saved a checkpoint.
  std::string script = "cd '" + dir_.string() + "' || exit 1; " + rank_line(0, 2, 0, 0, 29400 + r0_port_, common + "run.dir=cut") +
                       rank_line(1, 2, 1, 0, 29400 + r0_port_, common + "run.dir=cut") +
                       "for i in $(seq 600); do [ -f cut/checkpoints/last.ckpt ] && break; sleep 0.05; done; "
                       "start=$(date +%s%N); '" + kHosts + "' cut " + name_ + " 1; "
                       "wait $p0; e0=$?; wait $p1; e1=$?; echo $e0 $e1 $(( ($(date +%s%N) - start) / 1000000 )); cat rank0.log >&2";
  const Result cut = wavetrain::testing::run_shell("( " + script + " )");
  int e0 = -1, e1 = -1, ms = -1;
  std::istringstream(cut.out) >> e0 >> e1 >> ms;
  EXPECT_EQ(e0, 1) << cut.err;
  EXPECT_EQ(e1, 1) << cut.err;
  EXPECT_LE(ms, 5000 + 5000) << "both ranks should stop within trainer.dist_timeout (5 s) and a margin";
  std::printf("both ranks stopped %d ms after host 1's link went down (trainer.dist_timeout=5)\n", ms);
  EXPECT_NE(cut.err.find("another rank stopped or is unreachable"), std::string::npos) << "[" << cut.err << "]";
  const wavetrain::TrainingState saved = last("cut");  // intact: it loads
  EXPECT_GT(saved.global_step, 0);
  EXPECT_LT(saved.global_step, 600);

  // Resumed on fresh hosts, it ends where an uninterrupted run ends.
  wavetrain::testing::run_shell("'" + kHosts + "' down " + name_);
  ASSERT_TRUE(hosts_up(2)) << reason_;
  ++r0_port_;
  const Result resumed = train(2, 2, common + "run.dir=cut trainer.resume=last");
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  ++r0_port_;
  const Result straight = train(2, 2, common + "run.dir=straight");
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  EXPECT_EQ(last("cut").global_step, 600);
  expect_close(last("cut"), last("straight"), 0, "resumed against uninterrupted");
}

}  // namespace
