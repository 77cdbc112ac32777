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

// Numbers, not only dtypes: under CPU bf16 autocast a Linear rounds its inputs to bf16 and computes
// in bf16, exactly as the explicit bf16 computation does, and differs from fp32 by bf16's precision.
TEST(Compat, CpuBf16AutocastComputesWhatExplicitBf16Computes) {
  at::manual_seed(1);
  const at::Tensor w = at::randn({16, 64}), b = at::randn({16}), x = at::randn({8, 64});
  const at::Tensor fp32 = at::linear(x, w, b);
  const at::Tensor explicit_bf16 = at::linear(x.to(at::kBFloat16), w.to(at::kBFloat16), b.to(at::kBFloat16));
  const at::ScalarType old_dtype = compat::autocast_dtype(c10::DeviceType::CPU);
  compat::set_autocast_dtype(c10::DeviceType::CPU, at::kBFloat16);
  compat::set_autocast_enabled(c10::DeviceType::CPU, true);
  const at::Tensor autocast = at::linear(x, w, b);
  compat::set_autocast_enabled(c10::DeviceType::CPU, false);
  compat::set_autocast_dtype(c10::DeviceType::CPU, old_dtype);
  compat::autocast_clear_cache();
  ASSERT_EQ(autocast.scalar_type(), at::kBFloat16);
  EXPECT_TRUE(at::equal(autocast, explicit_bf16));
  const double error = (autocast.to(at::kFloat) - fp32).abs().max().item<double>();
  const double scale = fp32.abs().max().item<double>();
  EXPECT_GT(error, 0.0);             // it really ran in bf16
  EXPECT_LT(error, 0.03 * scale);    // ... and only bf16's rounding separates it from fp32
}

// torch::mps is declared on every platform from 2.1, so the 2.x build compiles the MPS calls; on a
// machine without Metal they report no device and seeding is a no-op.
TEST(Compat, MpsCallsCompileWhereTheHeaderExists) {
  EXPECT_EQ(WAVETRAIN_HAS_MPS_HEADER != 0, WAVETRAIN_TORCH_AT_LEAST(2, 1));
  if (!compat::mps_built()) {
    EXPECT_FALSE(compat::mps_available());
    compat::mps_manual_seed(7);
  }
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
