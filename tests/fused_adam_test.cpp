// FusedAdam (trainer/fused_adam.h) against torch::optim::Adam: the same parameters and state after
// several steps, with and without weight decay, and Adam's own step where it cannot fuse.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "trainer/fused_adam.h"
#include "trainer/torch_compat.h"

namespace {

// Parameters of assorted sizes (one over the parallel loop's grain, one a scalar), twice.
std::vector<at::Tensor> parameters(at::ScalarType dtype = at::kFloat) {
  at::manual_seed(2);
  return {at::randn({70000}, dtype).requires_grad_(), at::randn({3, 5}, dtype).requires_grad_(),
          at::randn({1}, dtype).requires_grad_()};
}

void set_gradients(std::vector<at::Tensor>& params, int step) {
  at::manual_seed(100 + step);
  for (at::Tensor& p : params) p.mutable_grad() = at::randn(p.sizes(), p.options()) * (1 + step);
}

}  // namespace

// FusedAdam (with `path`) and torch::optim::Adam, six steps from the same parameters and gradients.
void expect_adam_step_for_step(wavetrain::FusedAdam::Path path) {
  for (const double weight_decay : {0.0, 0.01}) {
    std::vector<at::Tensor> a = parameters(), b = parameters();
    const auto options = torch::optim::AdamOptions(0.003).weight_decay(weight_decay);
    torch::optim::Adam reference(a, options);
    wavetrain::FusedAdam fused(b, options);
    fused.set_path(path);
    for (int step = 0; step < 6; ++step) {
      set_gradients(a, step);
      set_gradients(b, step);
      reference.step();
      fused.step();
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_TRUE(at::allclose(a[i], b[i], 1e-6, 1e-7))
            << "parameter " << i << " step " << step << " weight decay " << weight_decay << ": largest difference "
            << (a[i] - b[i]).abs().max().item<double>() << ", relative "
            << ((a[i] - b[i]).abs() / (a[i].abs() + 1e-30)).max().item<double>();
    }
    for (size_t i = 0; i < a.size(); ++i) {
      const auto& ra = static_cast<torch::optim::AdamParamState&>(*reference.state().at(wavetrain::compat::optimizer_state_key(a[i])));
      const auto& fb = static_cast<torch::optim::AdamParamState&>(*fused.state().at(wavetrain::compat::optimizer_state_key(b[i])));
      EXPECT_EQ(fb.step(), 6);
      EXPECT_TRUE(at::allclose(ra.exp_avg(), fb.exp_avg(), 1e-6, 1e-6)) << (ra.exp_avg() - fb.exp_avg()).abs().max().item<double>();
      EXPECT_TRUE(at::allclose(ra.exp_avg_sq(), fb.exp_avg_sq(), 1e-6, 1e-10))
          << (ra.exp_avg_sq() - fb.exp_avg_sq()).abs().max().item<double>() << " of " << ra.exp_avg_sq().abs().max().item<double>();
    }
    // The update moved the parameters (not a no-op that passes the comparison trivially).
    EXPECT_GT((b[0] - parameters()[0]).abs().max().item<double>(), 1e-3);
  }
}

TEST(FusedAdam, MatchesTorchAdamStepForStep) { expect_adam_step_for_step(wavetrain::FusedAdam::Path::kAuto); }

// The CUDA update (ATen's multi-tensor kernel), run on the CPU where this LibTorch has that kernel;
// tests/cuda_test.cpp runs it on a GPU.
TEST(FusedAdam, AtenKernelPathMatchesTorchAdamStepForStep) {
  if (!wavetrain::compat::fused_adam_kernel_on_cpu()) GTEST_SKIP() << "LibTorch < 2.4 has at::_fused_adam_ on CUDA only";
  expect_adam_step_for_step(wavetrain::FusedAdam::Path::kAtenKernel);
}

// Parameters whose step counts differ (one got no gradient for a step) each get their own count's
// bias correction on the kernel path, as torch::optim::Adam gives them.
TEST(FusedAdam, AtenKernelPathKeepsEachParametersStepCount) {
  if (!wavetrain::compat::fused_adam_kernel_on_cpu()) GTEST_SKIP() << "LibTorch < 2.4 has at::_fused_adam_ on CUDA only";
  std::vector<at::Tensor> a = parameters(), b = parameters();
  torch::optim::Adam reference(a, torch::optim::AdamOptions(0.01));
  wavetrain::FusedAdam fused(b, torch::optim::AdamOptions(0.01));
  fused.set_path(wavetrain::FusedAdam::Path::kAtenKernel);
  for (int step = 0; step < 4; ++step) {
    set_gradients(a, step);
    set_gradients(b, step);
    if (step == 1) {  // parameter 1 sits this step out
      a[1].mutable_grad() = at::Tensor();
      b[1].mutable_grad() = at::Tensor();
    }
    reference.step();
    fused.step();
  }
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::allclose(a[i], b[i], 1e-6, 1e-7)) << "parameter " << i;
  const auto count = [&](size_t i) {
    return static_cast<torch::optim::AdamParamState&>(*fused.state().at(wavetrain::compat::optimizer_state_key(b[i]))).step();
  };
  EXPECT_EQ(count(0), 4);
  EXPECT_EQ(count(1), 3);
}

TEST(FusedAdam, TakesAdamsOwnStepWhereItCannotFuse) {
  std::vector<at::Tensor> a = parameters(at::kDouble), b = parameters(at::kDouble);
  torch::optim::Adam reference(a, torch::optim::AdamOptions(0.01));
  wavetrain::FusedAdam fused(b, torch::optim::AdamOptions(0.01));
  for (int step = 0; step < 3; ++step) {
    set_gradients(a, step);
    set_gradients(b, step);
    reference.step();
    fused.step();
  }
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(at::equal(a[i], b[i])) << "parameter " << i;
}
