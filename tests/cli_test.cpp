// The wavetrain binary as a user runs it: exit codes, messages, the device report, and the thread
// and OpenMP defaults that only a real process start can show.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/run_process.h"
#include "trainer/threads.h"
#include "wavetrain_build_config.h"

#include <torch/version.h>

namespace {

using Result = wavetrain::testing::ProcessResult;

// Runs `env ENV wavetrain ARGS` through the shell; ENV may unset variables with -u NAME.
Result wavetrain(const std::string& args, const std::string& env = "") {
  return wavetrain::testing::run_shell("env -u WAVETRAIN_THREADS -u OMP_WAIT_POLICY " + env + " '" WAVETRAIN_BINARY
                                       "' " + args);
}

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(Cli, DevicesJsonReportsCpuAndWhatAutoPicks) {
  Result r = wavetrain("devices --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["backends"].size(), 3u);
  EXPECT_EQ(j["backends"][0]["backend"], "cpu");
  EXPECT_EQ(j["backends"][0]["available"], true);
  EXPECT_EQ(j["request"], "auto");
  const bool cuda = j["backends"][1]["available"].get<bool>();
  const bool mps = j["backends"][2]["available"].get<bool>();
  EXPECT_EQ(j["chosen"], cuda ? "cuda:0" : mps ? "mps" : "cpu");
  EXPECT_TRUE(j["warnings"].empty());
  EXPECT_EQ(j["wavetrain_version"], WAVETRAIN_VERSION);
}

TEST(Cli, DefaultThreadsAreTheUsableCoresWithPassiveWaiting) {
  const nlohmann::json j = nlohmann::json::parse(wavetrain("devices --json").out);
  EXPECT_EQ(j["threads"]["intra_op"], wavetrain::usable_cpu_count());
  EXPECT_EQ(j["threads"]["inter_op"], 1);
  EXPECT_EQ(j["threads"]["source"], "usable cores");
  EXPECT_EQ(j["threads"]["omp_wait_policy"], "PASSIVE");
  // OpenBLAS (the Debian build's BLAS) multiplies in the calling thread; -1 where it is MKL.
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr) {
    EXPECT_EQ(j["threads"]["openblas_threads"], wavetrain::openblas_threads() < 0 ? -1 : 1);
  }
}

TEST(Cli, OpenMpRuntimeSeesThePassiveDefaultAtItsStart) {
  // libgomp prints its settings as it initialises. It shows OMP_WAIT_POLICY = 'PASSIVE' also when
  // the variable is unset, so the spin count is what tells: 0 only under a real PASSIVE policy
  // (300000 when unset, 30000000000 when ACTIVE).
  Result r = wavetrain("--version", "OMP_DISPLAY_ENV=verbose");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "GOMP_SPINCOUNT = '0'")) << r.err;
  Result active = wavetrain("--version", "OMP_DISPLAY_ENV=verbose OMP_WAIT_POLICY=ACTIVE");
  EXPECT_TRUE(contains(active.err, "OMP_WAIT_POLICY = 'ACTIVE'")) << active.err;  // the user's choice stays
  EXPECT_TRUE(contains(active.err, "GOMP_SPINCOUNT = '30000000000'")) << active.err;
}

TEST(Cli, ThreadsFromTheEnvironment) {
  const nlohmann::json j = nlohmann::json::parse(wavetrain("devices --json", "WAVETRAIN_THREADS=1").out);
  EXPECT_EQ(j["threads"]["intra_op"], 1);
  EXPECT_EQ(j["threads"]["source"], "WAVETRAIN_THREADS");
  Result bad = wavetrain("devices", "WAVETRAIN_THREADS=many");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(contains(bad.err, "wavetrain: error: WAVETRAIN_THREADS='many' is not a thread count")) << bad.err;
}

TEST(Cli, DevicesTableAndFallbackWarning) {
  Result r = wavetrain("devices");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "backend  built  available  details\n")) << r.out;
  EXPECT_TRUE(contains(r.out, "\ncpu      yes    yes        ")) << r.out;
  EXPECT_TRUE(contains(r.out, "\nauto -> ")) << r.out;

  const nlohmann::json j = nlohmann::json::parse(wavetrain("devices --json").out);
  if (!j["backends"][1]["built"].get<bool>()) {
    Result cuda = wavetrain("devices --device cuda");
    EXPECT_EQ(cuda.exit_code, 0);
    EXPECT_TRUE(contains(cuda.out, "\ncuda -> cpu\n")) << cuda.out;
    EXPECT_TRUE(contains(cuda.err, "warning: device 'cuda' was requested but this LibTorch (")) << cuda.err;
    EXPECT_TRUE(contains(cuda.err, ") was built without CUDA; using cpu")) << cuda.err;
  }
}

TEST(Cli, BadDeviceRequestIsAUsageError) {
  Result r = wavetrain("devices --device tpu");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(contains(r.err, "wavetrain: error: --device: Unknown device 'tpu'. Expected one of: auto, cpu, cuda"))
      << r.err;
}

TEST(Cli, VersionNamesWavetrainAndLibTorch) {
  Result r = wavetrain("--version");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out.rfind(std::string("wavetrain ") + WAVETRAIN_VERSION + " (LibTorch " + TORCH_VERSION, 0), 0u)
      << r.out;
}

TEST(Cli, UnknownCommandsAndFlagsExitWithTwo) {
  Result cmd = wavetrain("bogus");
  EXPECT_EQ(cmd.exit_code, 2);
  EXPECT_TRUE(contains(cmd.err, "wavetrain: error: unknown command 'bogus'. Commands: ckpt, data, devices, eval, export, import, infer, report, train")) << cmd.err;

  Result flag = wavetrain("devices --bogus");
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_TRUE(contains(flag.err, "--bogus")) << flag.err;

  Result top_flag = wavetrain("--bogus");
  EXPECT_EQ(top_flag.exit_code, 2);
  EXPECT_TRUE(contains(top_flag.err, "--bogus")) << top_flag.err;

  Result none = wavetrain("");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_TRUE(contains(none.err, "wavetrain: error: ")) << none.err;
}

TEST(Cli, EveryCommandHasHelp) {
  Result top = wavetrain("--help");
  EXPECT_EQ(top.exit_code, 0);
  EXPECT_TRUE(contains(top.out, "devices")) << top.out;
  Result devices = wavetrain("devices --help");
  EXPECT_EQ(devices.exit_code, 0);
  EXPECT_TRUE(contains(devices.out, "--json")) << devices.out;
  EXPECT_TRUE(contains(devices.out, "--device")) << devices.out;
}

}  // namespace
