// Mixed precision: the policy for every device x precision, the autocast guard on CPU, and the
// gradient scaler against Python GradScaler's update rule.
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>

#include <cmath>

#include "trainer/amp.h"
#include "trainer/grad_scaler.h"
#include "trainer/torch_compat.h"

namespace wavetrain {
namespace {

std::string policy_code(Precision p, bool amp_on_mps, c10::DeviceType d, AmpCapabilities caps) {
  try {
    const AmpPolicy a = resolve_amp_policy(p, amp_on_mps, d, caps);
    std::string s = !a.autocast ? "fp32" : a.dtype == at::kHalf ? "fp16" : "bf16";
    if (a.grad_scaler) s += "+scaler";
    if (!a.warnings.empty()) s += "!";
    return s;
  } catch (const std::invalid_argument&) {
    return "ERR";
  }
}

TEST(AmpPolicy, EveryDeviceAndPrecision) {
  using D = c10::DeviceType;
  const AmpCapabilities ampere{true, true, "A100"}, turing{false, false, "T4"}, old_mps{false, false, ""};
  struct Row {
    D device;
    bool amp_on_mps;
    AmpCapabilities caps;
    std::vector<std::string> expected;  // 32, 16-mixed, bf16-mixed
  };
  const std::vector<Row> rows = {
      {D::CUDA, false, ampere, {"fp32", "fp16+scaler", "bf16"}},
      {D::CUDA, false, turing, {"fp32", "fp16+scaler", "ERR"}},
      {D::MPS, false, ampere, {"fp32", "fp32!", "fp32!"}},
      {D::MPS, true, ampere, {"fp32", "fp16+scaler", "bf16"}},
      {D::MPS, true, old_mps, {"fp32", "fp32!", "fp32!"}},
      {D::CPU, false, turing, {"fp32", "bf16!", "bf16"}},
      {D::CPU, true, ampere, {"fp32", "bf16!", "bf16"}},
  };
  for (const Row& r : rows) {
    const std::vector<Precision> precisions = {Precision::Fp32, Precision::Fp16Mixed, Precision::Bf16Mixed};
    for (size_t i = 0; i < precisions.size(); ++i)
      EXPECT_EQ(policy_code(precisions[i], r.amp_on_mps, r.device, r.caps), r.expected[i])
          << c10::DeviceTypeName(r.device) << " amp_on_mps=" << r.amp_on_mps << " " << precision_name(precisions[i]);
  }
}

TEST(AmpPolicy, MessagesAndParsing) {
  EXPECT_EQ(resolve_amp_policy(Precision::Fp16Mixed, false, c10::DeviceType::CPU, {}).warnings.at(0),
            "precision 16-mixed is not available on cpu (CPU autocast is bfloat16); using bf16-mixed");
  EXPECT_EQ(resolve_amp_policy(Precision::Bf16Mixed, false, c10::DeviceType::MPS, {}).warnings.at(0),
            "precision bf16-mixed is ignored on mps: it runs fp32 unless trainer.amp_on_mps=true");
  try {
    resolve_amp_policy(Precision::Bf16Mixed, false, c10::DeviceType::CUDA, {false, false, "Tesla T4"});
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "precision bf16-mixed needs a GPU with bfloat16 (compute capability 8.0 or newer); "
                           "Tesla T4 has none. Use trainer.precision=16-mixed");
  }
  EXPECT_EQ(resolve_amp_policy(Precision::Fp16Mixed, false, c10::DeviceType::CUDA, {}).describe(),
            "cuda: fp16 autocast with gradient scaling (precision 16-mixed)");
  EXPECT_EQ(resolve_amp_policy(Precision::Fp32, false, c10::DeviceType::CPU, {}).describe(), "cpu: fp32 (precision 32)");
  EXPECT_EQ(parse_precision("bf16-mixed"), Precision::Bf16Mixed);
  EXPECT_THROW(parse_precision("16"), std::invalid_argument);
  EXPECT_FALSE(probe_amp_capabilities(c10::Device(c10::kCPU)).cuda_bf16);
}

TEST(AutocastGuard, LinearIsBf16InsideAndFp32OutsideWhileTheLossStaysFp32) {
  at::manual_seed(0);
  const at::Tensor w = at::randn({4, 8}), b = at::randn({4}), x = at::randn({2, 8}), target = at::randn({2, 4});
  const AmpPolicy bf16 = resolve_amp_policy(Precision::Bf16Mixed, false, c10::DeviceType::CPU, {});
  at::Tensor out;
  {
    AutocastGuard guard(bf16);
    out = at::linear(x, w, b);
    EXPECT_EQ(out.scalar_type(), at::kBFloat16);
    // 1.13 CPU autocast leaves log_softmax in the arriving dtype; models lift it to fp32 first.
    EXPECT_EQ(at::log_softmax(reduced_to_fp32(out), 1).scalar_type(), at::kFloat);
    {
      AutocastGuard nested(bf16);
      EXPECT_EQ(at::linear(x, w, b).scalar_type(), at::kBFloat16);
    }
    EXPECT_TRUE(compat::autocast_enabled(c10::DeviceType::CPU));  // the inner exit restored "on"
  }
  EXPECT_FALSE(compat::autocast_enabled(c10::DeviceType::CPU));
  EXPECT_EQ(at::linear(x, w, b).scalar_type(), at::kFloat);
  const at::Tensor loss = at::mse_loss(reduced_to_fp32(out), target);
  EXPECT_EQ(loss.scalar_type(), at::kFloat);
  {
    AutocastGuard off(resolve_amp_policy(Precision::Fp32, false, c10::DeviceType::CPU, {}));
    EXPECT_EQ(at::linear(x, w, b).scalar_type(), at::kFloat);
  }
}

// One parameter, SGD lr 1: after a step p = p - grad.
struct OneParameter {
  at::Tensor p = at::ones({3}).requires_grad_(true);
  torch::optim::SGD sgd{std::vector<at::Tensor>{p}, torch::optim::SGDOptions(1.0)};
};

// backward of scale(sum(p * c)) gives grad = c * scale.
void backward(GradScaler& s, OneParameter& m, const at::Tensor& c) {
  m.sgd.zero_grad();
  s.scale((m.p * c).sum()).backward();
}

TEST(GradScaler, InfSkipsTheStepLeavesParametersAndHalvesTheScale) {
  GradScaler scaler;
  OneParameter m;
  backward(scaler, m, at::tensor({1.0f, std::numeric_limits<float>::infinity(), 1.0f}));
  EXPECT_FALSE(scaler.step(m.sgd));
  scaler.update();
  EXPECT_TRUE(at::equal(m.p.detach(), at::ones({3})));
  EXPECT_EQ(scaler.get_scale(), 32768.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  backward(scaler, m, at::tensor({1.0f, std::nanf(""), 1.0f}));
  EXPECT_FALSE(scaler.step(m.sgd));
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), 16384.0);
}

TEST(GradScaler, UnscaleGivesTheTrueGradientAndTheStepUsesIt) {
  GradScaler scaler;
  OneParameter m;
  backward(scaler, m, at::tensor({0.5f, -2.0f, 3.0f}));
  EXPECT_TRUE(at::equal(m.p.grad(), at::tensor({0.5f, -2.0f, 3.0f}) * 65536.0f));
  scaler.unscale_(m.sgd);
  EXPECT_TRUE(at::equal(m.p.grad(), at::tensor({0.5f, -2.0f, 3.0f})));  // before clipping, say
  EXPECT_TRUE(scaler.step(m.sgd));
  scaler.update();
  EXPECT_TRUE(at::equal(m.p.detach(), at::tensor({0.5f, 3.0f, -2.0f})));
  EXPECT_EQ(scaler.growth_tracker(), 1);
}

TEST(GradScaler, ScaleDoublesAfterGrowthIntervalCleanSteps) {
  GradScaler scaler({65536.0, 2.0, 0.5, 3, true});
  OneParameter m;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(scaler.get_scale(), 65536.0) << i;
    backward(scaler, m, at::ones({3}));
    scaler.step(m.sgd);
    scaler.update();
  }
  EXPECT_EQ(scaler.get_scale(), 131072.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(GradScaler, ScriptedSequenceMatchesPythonsUpdateRule) {
  // Python: inf -> scale *= backoff, tracker = 0; else tracker += 1, and when it reaches
  // growth_interval: scale *= growth, tracker = 0. Worked by hand for init 8, interval 2.
  GradScaler scaler({8.0, 2.0, 0.5, 2, true});
  OneParameter m;
  const std::vector<bool> inf = {false, false, false, true, false, true, true, false, false, false, false};
  const std::vector<double> scales = {8, 16, 16, 8, 8, 4, 2, 2, 4, 4, 8};
  const std::vector<int64_t> trackers = {1, 0, 1, 0, 1, 0, 0, 1, 0, 1, 0};
  for (size_t i = 0; i < inf.size(); ++i) {
    backward(scaler, m, inf[i] ? at::full({3}, std::numeric_limits<float>::infinity()) : at::full({3}, 0.001f));
    scaler.step(m.sgd);
    scaler.update();
    EXPECT_EQ(scaler.get_scale(), scales[i]) << "step " << i;
    EXPECT_EQ(scaler.growth_tracker(), trackers[i]) << "step " << i;
  }
}

TEST(GradScaler, GrowthThatWouldOverflowKeepsTheScale) {
  const double big = std::ldexp(1.0, 127);
  GradScaler scaler({big, 2.0, 0.5, 1, true});
  OneParameter m;
  backward(scaler, m, at::full({3}, 1e-30f));
  scaler.step(m.sgd);
  scaler.update();
  EXPECT_EQ(scaler.get_scale(), big);
}

// The fused _amp_* kernels are used where ATen has them: CUDA always, the CPU from 2.3 (so the
// pip build's tests run the fused path on the CPU and Debian's 1.13 build the composite one).
TEST(GradScaler, FusedKernelsOnTheCpuFromPyTorch23) {
  EXPECT_EQ(GradScaler::fused_kernels_on(at::Device(at::kCPU)), WAVETRAIN_TORCH_AT_LEAST(2, 3));
  EXPECT_EQ(GradScaler::fused_kernels_on(at::Device(at::kCUDA, 0)), compat::cuda_built());
}

TEST(GradScaler, MisuseIsAnErrorAndStateRoundTrips) {
  GradScaler scaler;
  OneParameter m;
  backward(scaler, m, at::ones({3}));
  scaler.unscale_(m.sgd);
  EXPECT_THROW(scaler.unscale_(m.sgd), std::logic_error);
  scaler.step(m.sgd);
  EXPECT_THROW(scaler.step(m.sgd), std::logic_error);
  scaler.update();
  EXPECT_THROW(scaler.update(), std::logic_error);  // nothing recorded since

  GradScaler restored;
  restored.load_state({1024.0, 7});
  EXPECT_EQ(restored.get_scale(), 1024.0);
  EXPECT_EQ(restored.growth_tracker(), 7);
  EXPECT_EQ(restored.state().scale, 1024.0);

  GradScaler off({65536.0, 2.0, 0.5, 2000, false});
  OneParameter n;
  n.sgd.zero_grad();
  off.scale((n.p * 2).sum()).backward();
  EXPECT_TRUE(at::equal(n.p.grad(), at::full({3}, 2.0f)));  // disabled: no scaling at all
  EXPECT_TRUE(off.step(n.sgd));
}

}  // namespace
}  // namespace wavetrain
