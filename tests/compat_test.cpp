// The compat layer on this LibTorch: version macros agree with the runtime, and the autocast
// wrappers really switch CPU autocast (a Linear gives bf16 inside, fp32 outside).
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "trainer/torch_compat.h"

namespace wavetrain {
namespace {

TEST(Compat, VersionMacrosMatchTheVersionString) {
  const std::string v = compat::torch_version();
  EXPECT_EQ(v.rfind(std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + ".", 0), 0u)
      << v;
  EXPECT_TRUE(WAVETRAIN_TORCH_AT_LEAST(1, 13));
  EXPECT_FALSE(WAVETRAIN_TORCH_AT_LEAST(TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR + 1));
  EXPECT_TRUE(WAVETRAIN_TORCH_AT_LEAST(TORCH_VERSION_MAJOR - 1, 99));
}

TEST(Compat, AutocastSupportFollowsTheVersion) {
  EXPECT_TRUE(compat::autocast_supported(c10::DeviceType::CPU));
  EXPECT_TRUE(compat::autocast_supported(c10::DeviceType::CUDA));
  EXPECT_EQ(compat::autocast_supported(c10::DeviceType::MPS), WAVETRAIN_TORCH_AT_LEAST(2, 5));
}

TEST(Compat, CpuAutocastWrappersChangeWhatALinearComputesIn) {
  at::manual_seed(0);
  const at::Tensor w = at::randn({4, 8}), b = at::randn({4}), x = at::randn({2, 8});
  auto linear = [&](const at::Tensor& in) { return at::linear(in, w, b); };
  ASSERT_FALSE(compat::autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(linear(x).scalar_type(), at::kFloat);

  const at::ScalarType old_dtype = compat::autocast_dtype(c10::DeviceType::CPU);
  compat::set_autocast_dtype(c10::DeviceType::CPU, at::kBFloat16);
  compat::set_autocast_enabled(c10::DeviceType::CPU, true);
  EXPECT_TRUE(compat::autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(compat::autocast_dtype(c10::DeviceType::CPU), at::kBFloat16);
  EXPECT_FALSE(compat::autocast_enabled(c10::DeviceType::CUDA));  // per device type
  EXPECT_EQ(linear(x).scalar_type(), at::kBFloat16);
  compat::set_autocast_enabled(c10::DeviceType::CPU, false);
  compat::set_autocast_dtype(c10::DeviceType::CPU, old_dtype);
  compat::autocast_clear_cache();

  EXPECT_EQ(linear(x).scalar_type(), at::kFloat);
}

TEST(Compat, NestingCounterBalances) {
  const int depth = compat::autocast_increment_nesting();
  EXPECT_GE(depth, 1);
  EXPECT_EQ(compat::autocast_decrement_nesting(), depth - 1);
}

TEST(Compat, BackendFlagsAgreeWithThisBuild) {
  if (!compat::cuda_built()) {
    EXPECT_FALSE(torch::cuda::is_available());
    EXPECT_EQ(torch::cuda::device_count(), 0u);
    EXPECT_ANY_THROW(compat::set_cuda_memory_fraction(0.5, 0));
  }
  if (!compat::mps_built()) {
    EXPECT_FALSE(compat::mps_available());
  }
}

}  // namespace
}  // namespace wavetrain
