// Data-parallel training across simulated hosts (tests/multinode/hosts.sh: network namespaces on a
// bridge, one address each): ranks started as torchrun starts them (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR on host 0's address), on 2 hosts x 1 rank and 2 hosts x 2 ranks, reach one host's
// weights (the toy and the amp task), also over links that lose 1% of their packets; a host whose
// link is cut, or whose rank is killed, ends the run with a clear error within trainer.dist_timeout,
// its last.ckpt intact, and the resumed run ends where an uninterrupted one does; a Slurm job over
// 2 nodes (a slurmd on each host) trains as 2 ranks. Each test checks that no namespace or link of
// its hosts is left behind.
//
// Needs root (network namespaces). Where that is refused the tests skip, except under scripts/test
// (WAVETRAIN_TEST_REQUIRE_CLIENTS=1), where they fail.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

#include "tests/run_process.h"
#include "trainer/checkpoint.h"

namespace fs = std::filesystem;
using Result = wavetrain::testing::ProcessResult;

namespace {

const std::string kHosts = std::string(WAVETRAIN_TEST_DATA) + "/../multinode/hosts.sh";
const std::string kCluster = std::string(WAVETRAIN_TEST_DATA) + "/../slurm/local_cluster.sh";

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
    if (!cluster_.empty()) wavetrain::testing::run_shell("'" + kCluster + "' stop '" + cluster_ + "'; rm -rf '" + cluster_ + "'");
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
  Result timed_train(int hosts, int world, const std::string& args, double& seconds) const {
    const auto start = std::chrono::steady_clock::now();
    const Result r = train(hosts, world, args);
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  }
  // `common` on one rank with `batch`, on 2 hosts x 1 rank and on 2 hosts x 2 ranks (batch / 2 and
  // / 4 each): all take `steps` steps and end within 1e-5 (SGD: the ranks' summation order shows
  // only at float rounding). Returns the 2 x 1 run's seconds.
  double expect_two_hosts_reach_one_host(const std::string& common, int batch, int64_t steps, const std::string& what);
  wavetrain::TrainingState last(const std::string& run) const {
    return wavetrain::Checkpoint::load((dir_ / run / "checkpoints/last.ckpt").string());
  }
  void skip_or_fail() {
    if (wavetrain::testing::clients_required()) FAIL() << reason_;
    GTEST_SKIP() << reason_;
  }

  std::string name_, reason_, cluster_;  // cluster_: a Slurm cluster's directory, stopped first
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

double MultiNode::expect_two_hosts_reach_one_host(const std::string& common, int batch, int64_t steps, const std::string& what) {
  const Result one = wavetrain::testing::wavetrain_in(dir_, common + "trainer.batch_size=" + std::to_string(batch) + " run.dir=one");
  EXPECT_EQ(one.exit_code, 0) << one.err;
  double seconds = 0;
  ++r0_port_;
  const Result two = timed_train(2, 2, common + "trainer.batch_size=" + std::to_string(batch / 2) + " run.dir=two_by_one", seconds);
  EXPECT_EQ(two.exit_code, 0) << two.err;
  ++r0_port_;
  const Result four = train(2, 4, common + "trainer.batch_size=" + std::to_string(batch / 4) + " run.dir=two_by_two");
  EXPECT_EQ(four.exit_code, 0) << four.err;
  if (one.exit_code != 0 || two.exit_code != 0 || four.exit_code != 0) return seconds;
  const wavetrain::TrainingState reference = last("one");
  EXPECT_EQ(reference.global_step, steps) << what;
  EXPECT_EQ(last("two_by_one").global_step, steps) << what;
  EXPECT_EQ(last("two_by_two").global_step, steps) << what;
  expect_close(last("two_by_one"), reference, 1e-5, what + ", 2 hosts x 1 rank");
  expect_close(last("two_by_two"), reference, 1e-5, what + ", 2 hosts x 2 ranks");
  return seconds;
}

TEST_F(MultiNode, TwoHostsOfOneAndOfTwoRanksReachOneHostsWeights) {
  if (!hosts_up(2, "1gbit")) return skip_or_fail();
  expect_two_hosts_reach_one_host("train task=toy_regression trainer.max_epochs=1 optimizer.name=sgd optimizer.lr=0.1 ", 32, 32, "toy");
}

// The amp task (NAM's nano WaveNet on a short built-in capture; SGD, so that the ranks' summation
// order shows only at float rounding): 2 hosts x 1 rank and x 2 ranks reach one host's weights.
// Then both links lose 1% of their packets: TCP retransmits, and the run ends with the same weights,
// bit for bit, as over the lossless links.
TEST_F(MultiNode, TheAmpTaskOnTwoHostsReachesOneHostsWeightsAlsoOverLinksThatLoseOnePercent) {
  if (wavetrain::testing::run_shell("command -v nft").exit_code != 0) {
    reason_ = "nft (Debian's nftables) is not installed: it makes the lossy links";
    return skip_or_fail();
  }
  if (!hosts_up(2, "1gbit")) return skip_or_fail();
  ASSERT_EQ(wavetrain::testing::wavetrain_in(dir_, "data amp-synth -o cap --seconds 6").exit_code, 0);
  ASSERT_EQ(wavetrain::testing::wavetrain_in(dir_, "data amp --input cap/dry.wav --output cap/amp.wav -o capture.h5 --valid-seconds 1.5").exit_code, 0);
  const std::string common = "train +experiment=amp amp.data=capture.h5 model.preset=nano trainer.max_epochs=1 "
                             "optimizer.name=sgd optimizer.lr=0.05 ";
  const double clean_s = expect_two_hosts_reach_one_host(common, 8, 8, "amp");
  double lossy_s = 0;

  for (int host = 0; host < 2; ++host)
    ASSERT_EQ(wavetrain::testing::run_shell("'" + kHosts + "' loss " + name_ + " " + std::to_string(host) + " 1").exit_code, 0);
  ++r0_port_;
  const Result lossy = timed_train(2, 2, common + "trainer.batch_size=4 run.dir=lossy", lossy_s);
  ASSERT_EQ(lossy.exit_code, 0) << lossy.err;
  long dropped = 0, passed = 0;
  for (int host = 0; host < 2; ++host) {
    long d = 0, p = 0;
    std::istringstream(wavetrain::testing::run_shell("'" + kHosts + "' dropped " + name_ + " " + std::to_string(host)).out) >> d >> p;
    // Every 100th packet is dropped (hosts.sh loss: a counter, not a random draw), so each host's
    // count is exact; a few hundred packets cross each link.
    EXPECT_GT(d, 0) << "host " << host << ": no packet was lost: the loss was not applied";
    EXPECT_EQ(d, (d + p) / 100) << "host " << host << ": " << d << " of " << d + p << " packets dropped";
    dropped += d;
    passed += p;
  }
  std::printf("1%% loss: %ld of %ld packets dropped; 2 hosts x 1 rank took %.1f s with loss, %.1f s without\n", dropped,
              dropped + passed, lossy_s, clean_s);
  expect_close(last("lossy"), last("two_by_one"), 0, "1% loss against no loss");
}

// Host 1 stops taking part mid-run, by `how`: its link cut, or its rank killed. Both ranks end
// (rank 0 with a clear error) within trainer.dist_timeout, last.ckpt loads, and the run resumed on
// fresh hosts ends with the weights of an uninterrupted run, bit for bit.
class MultiNodeInterrupted : public MultiNode {
 protected:
  void interrupt_and_resume(const std::string& how) {
    if (!hosts_up(2)) return skip_or_fail();
    const std::string common = "train task=toy_regression trainer.max_epochs=1000 trainer.max_steps=600 trainer.batch_size=8 "
                               "optimizer.name=adam optimizer.lr=0.01 trainer.checkpoint.every_n_steps=50 trainer.dist_timeout=5 ";
    const std::string action = how == "cut" ? "'" + kHosts + "' cut " + name_ + " 1; " : "kill -9 $p1; ";
    std::string script = "cd '" + dir_.string() + "' || exit 1; " + rank_line(0, 2, 0, 0, 29400 + r0_port_, common + "run.dir=r") +
                         rank_line(1, 2, 1, 0, 29400 + r0_port_, common + "run.dir=r") +
                         "for i in $(seq 600); do [ -f r/checkpoints/last.ckpt ] && break; sleep 0.05; done; "
                         "start=$(date +%s%N); " + action +
                         "wait $p0; e0=$?; wait $p1; e1=$?; echo $e0 $e1 $(( ($(date +%s%N) - start) / 1000000 )); cat rank0.log >&2";
    const Result stopped = wavetrain::testing::run_shell("( " + script + " )");
    int e0 = -1, e1 = -1, ms = -1;
    std::istringstream(stopped.out) >> e0 >> e1 >> ms;
    EXPECT_EQ(e0, 1) << stopped.err;
    EXPECT_EQ(e1, how == "cut" ? 1 : 128 + 9) << stopped.err;
    EXPECT_LE(ms, 5000 + 5000) << "both ranks should stop within trainer.dist_timeout (5 s) and a margin";
    std::printf("%s: both ranks stopped %d ms after host 1 stopped taking part (trainer.dist_timeout=5)\n", how.c_str(), ms);
    EXPECT_NE(stopped.err.find("another rank stopped or is unreachable"), std::string::npos) << "[" << stopped.err << "]";
    const wavetrain::TrainingState saved = last("r");  // intact: it loads
    EXPECT_GT(saved.global_step, 0);
    EXPECT_LT(saved.global_step, 600);

    wavetrain::testing::run_shell("'" + kHosts + "' down " + name_);
    ASSERT_TRUE(hosts_up(2)) << reason_;
    ++r0_port_;
    const Result resumed = train(2, 2, common + "run.dir=r trainer.resume=last");
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    ++r0_port_;
    const Result straight = train(2, 2, common + "run.dir=straight");
    ASSERT_EQ(straight.exit_code, 0) << straight.err;
    EXPECT_EQ(last("r").global_step, 600);
    expect_close(last("r"), last("straight"), 0, "resumed against uninterrupted");
  }
};

TEST_F(MultiNodeInterrupted, ACutLinkEndsTheRunWithinTheTimeoutAndTheResumeEndsAsAnUninterruptedRun) {
  interrupt_and_resume("cut");
}

TEST_F(MultiNodeInterrupted, AKilledRankEndsTheRunWithinTheTimeoutAndTheResumeEndsAsAnUninterruptedRun) {
  interrupt_and_resume("kill");
}

// Slurm across the hosts (tests/slurm/local_cluster.sh in hosts mode: slurmctld on host 0, a slurmd
// on each host): a sweep with launcher=slurm launcher.nodes=2, started on host 0, runs its job as
// one rank on each node, the master found by name (the first node of SLURM_JOB_NODELIST), and ends
// with the weights of the same two ranks started on one machine.
TEST_F(MultiNode, ASlurmJobOverTwoHostsTrainsAsOneRankOnEach) {
  if (wavetrain::testing::run_shell("'" + kCluster + "' check").exit_code != 0) {
    reason_ = "Slurm or munge is not installed, or this is not root";
    return skip_or_fail();
  }
  if (!hosts_up(2, "1gbit")) return skip_or_fail();
  cluster_ = "/tmp/wtsl" + std::to_string(::getpid());  // short: unix socket paths live in it
  const Result up = wavetrain::testing::run_shell("'" + kCluster + "' start '" + cluster_ + "' " + name_ + " 2");
  ASSERT_EQ(up.exit_code, 0) << up.err;
  const std::string run = "task=toy_regression trainer.max_epochs=1 trainer.batch_size=16 trainer.threads=1 ";
  const Result job = wavetrain::testing::run_shell("cd '" + dir_.string() + "' && '" + kHosts + "' exec " + name_ + " 0 env SLURM_CONF='" +
                                                   cluster_ + "/slurm.conf' '" + WAVETRAIN_BINARY + "' train -m " + run +
                                                   "launcher=slurm launcher.nodes=2 run.multirun_dir=sweep");
  ASSERT_EQ(job.exit_code, 0) << job.out << job.err;
  const auto text = [](const fs::path& p) {
    std::ifstream in(p);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  EXPECT_NE(text(dir_ / "sweep/slurm/array-0.sbatch").find("#SBATCH --nodes=2\n#SBATCH --ntasks-per-node=1\n"), std::string::npos);
  EXPECT_NE(text(dir_ / "sweep/0/wavetrain.log").find("distributed: 2 ranks (slurm), master " + name_ + "-h0:"), std::string::npos)
      << text(dir_ / "sweep/0/wavetrain.log");
  // Host 1's slurmd started a task of the job, sent from host 0.
  EXPECT_NE(text(cluster_ + "/log/slurmd-" + name_ + "-h1.log").find("launch task StepId="), std::string::npos);
  const Result local = wavetrain::testing::wavetrain_in(dir_, "train " + run + "trainer.devices=2 run.dir=local");
  ASSERT_EQ(local.exit_code, 0) << local.err;
  expect_close(last("sweep/0"), last("local"), 0, "2 Slurm nodes against 2 local ranks");
}

}  // namespace
