// Thread policy: precedence, validation and the cgroup quota parser.
#include <ATen/Parallel.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>

#include "trainer/threads.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <cstdlib>
#include <string>

namespace wavetrain {
namespace {

TEST(ThreadSettings, DefaultIsEveryUsableCore) {
  ThreadSettings s = choose_thread_settings(nullptr, std::nullopt, 6, "PASSIVE");
  EXPECT_EQ(s.intra_op, 6);
  EXPECT_EQ(s.inter_op, 1);
  EXPECT_EQ(s.source, "usable cores");
  EXPECT_EQ(s.omp_wait_policy, "PASSIVE");
  EXPECT_EQ(choose_thread_settings("", std::nullopt, 3, nullptr).intra_op, 3);  // empty means unset
  EXPECT_EQ(choose_thread_settings(nullptr, std::nullopt, 0, nullptr).intra_op, 1);
}

TEST(ThreadSettings, EnvironmentWinsOverConfig) {
  ThreadSettings s = choose_thread_settings("3", 5, 8, nullptr);
  EXPECT_EQ(s.intra_op, 3);
  EXPECT_EQ(s.source, "WAVETRAIN_THREADS");
  EXPECT_EQ(choose_thread_settings("0", 5, 8, nullptr).intra_op, 8);
  EXPECT_EQ(choose_thread_settings("auto", 5, 8, nullptr).intra_op, 8);
  ThreadSettings c = choose_thread_settings(nullptr, 5, 8, nullptr);
  EXPECT_EQ(c.intra_op, 5);
  EXPECT_EQ(c.source, "config");
  EXPECT_EQ(choose_thread_settings(nullptr, 0, 8, nullptr).intra_op, 8);
}

TEST(ThreadSettings, BadValuesNameTheirSource) {
  for (const char* bad : {"two", "-1", "1.5", "99999", " 2"}) {
    try {
      choose_thread_settings(bad, std::nullopt, 2, nullptr);
      ADD_FAILURE() << "accepted " << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind(std::string("WAVETRAIN_THREADS='") + bad + "'", 0), 0u) << e.what();
    }
  }
  try {
    choose_thread_settings(nullptr, -2, 2, nullptr);
    ADD_FAILURE();
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind("trainer.threads=-2", 0), 0u) << e.what();
  }
}

TEST(ThreadSettings, CgroupCpuMaxIsRoundedUp) {
  EXPECT_EQ(parse_cgroup_cpu_max("max 100000"), std::nullopt);
  EXPECT_EQ(parse_cgroup_cpu_max("200000 100000"), 2);
  EXPECT_EQ(parse_cgroup_cpu_max("150000 100000"), 2);
  EXPECT_EQ(parse_cgroup_cpu_max("50000 100000"), 1);
  EXPECT_EQ(parse_cgroup_cpu_max("garbage"), std::nullopt);
  EXPECT_EQ(parse_cgroup_cpu_max("100000 0"), std::nullopt);
}

TEST(ThreadSettings, ConfigureAppliesToAten) {
  const int cores = usable_cpu_count();
  ASSERT_GE(cores, 1);
  ThreadSettings s = configure_threads(1);
  if (std::getenv("WAVETRAIN_THREADS") == nullptr) {
    EXPECT_EQ(s.intra_op, 1);
    EXPECT_EQ(at::get_num_threads(), 1);
    s = configure_threads(std::nullopt);
    EXPECT_EQ(s.intra_op, cores);
    EXPECT_EQ(at::get_num_threads(), cores);
  }
  EXPECT_EQ(current_thread_settings().intra_op, at::get_num_threads());
  EXPECT_EQ(s.inter_op, 1);
}

// Where LibTorch multiplies with OpenBLAS (the Debian build), its pool is made serial unless the
// user sized it with OPENBLAS_NUM_THREADS.
TEST(ThreadSettings, OpenBlasMultipliesInTheCallingThreadUnlessTheUserSizedIt) {
  if (openblas_threads() < 0) GTEST_SKIP() << "LibTorch here multiplies with MKL, not OpenBLAS";
  const int intra_op = current_thread_settings().intra_op;
  const char* original = std::getenv("OPENBLAS_NUM_THREADS");
  const std::string saved = original ? original : "";
  unsetenv("OPENBLAS_NUM_THREADS");
  set_openblas_threads(2);
  ThreadSettings s = configure_threads(intra_op);
  EXPECT_EQ(openblas_threads(), 1);
  EXPECT_EQ(s.openblas_threads, 1);
  setenv("OPENBLAS_NUM_THREADS", "2", 1);
  set_openblas_threads(2);
  const int users = openblas_threads();  // 2, or fewer where OpenBLAS caps it at the cores
  s = configure_threads(intra_op);
  EXPECT_EQ(openblas_threads(), users);
  EXPECT_EQ(s.openblas_threads, users);
  if (original) setenv("OPENBLAS_NUM_THREADS", saved.c_str(), 1);
  else unsetenv("OPENBLAS_NUM_THREADS");
  configure_threads(intra_op);
}

TEST(ThreadSettings, SubnormalsAreFlushed) {
  // Tensor ops, not scalar expressions: the compiler may move those across the calls that change
  // the floating-point control register, since it does not model it.
  const at::Tensor tiny = at::full({1 << 16}, 1e-30f);  // large enough for ATen's thread pool
  at::globalContext().setFlushDenormal(false);
  // Unflushed, checked on this thread alone (under ATen's grain of 32768): a pool that an earlier
  // test started has kept the flag its threads were created with.
  EXPECT_GT((tiny.narrow(0, 0, 1024) * 1e-10f).min().item<float>(), 0.0f);  // 1e-40: a subnormal
  const ThreadSettings s = configure_threads(1);
#if defined(__x86_64__)
  EXPECT_TRUE(s.flush_denormal);
#endif
  if (!s.flush_denormal) GTEST_SKIP() << "this CPU cannot flush subnormals";
  EXPECT_EQ((tiny * 1e-10f).abs().max().item<float>(), 0.0f);
}

#if defined(__GLIBC__)
// A freed 64 MiB block stays with the process: malloc takes it from the heap (mallinfo2's hblkhd,
// the bytes in blocks mapped on their own, does not grow), where glibc's default would map it and
// unmap it on free. The user's malloc tunables are left alone.
TEST(ThreadSettings, FreedMemoryIsKeptUnlessTheUserTunedMalloc) {
  const char* original = std::getenv("GLIBC_TUNABLES");
  const std::string saved = original ? original : "";
  setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=2", 1);
  EXPECT_FALSE(configure_threads(1).keeps_freed_memory);
  unsetenv("GLIBC_TUNABLES");
  ASSERT_TRUE(configure_threads(1).keeps_freed_memory);
  const size_t mapped_before = mallinfo2().hblkhd;
  void* block = std::malloc(64u << 20);
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before);
  std::free(block);
  if (original) setenv("GLIBC_TUNABLES", saved.c_str(), 1);
}
#endif

}  // namespace
}  // namespace wavetrain
