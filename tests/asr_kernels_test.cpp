// The ASR encoder's own CPU kernels against ATen: the hashed dropout (experiments/common/dropout.h)
// and the depthwise convolution over time (experiments/asr/depthwise_conv.h).
#include <gtest/gtest.h>

#include <ATen/Parallel.h>

#include "experiments/asr/depthwise_conv.h"
#include "experiments/common/dropout.h"
#include "trainer/parallel_parts.h"

namespace ex = wavetrain::experiments;

TEST(Dropout, DropsAFractionPAndScalesTheRest) {
  for (const double p : {0.1, 0.5}) {
    const at::Tensor m = ex::dropout_mask(1 << 20, p, 1234);
    const double dropped = (m == 0).sum().item<double>() / static_cast<double>(m.numel());
    EXPECT_NEAR(dropped, p, 0.002) << "p " << p;  // 4 standard deviations at 2^20 draws
    const at::Tensor kept = m.masked_select(m != 0);
    EXPECT_TRUE(at::all(kept == static_cast<float>(1 / (1 - p))).item<bool>());
    // Neighbours are independent: P(both dropped) = p^2.
    const double both = ((m.narrow(0, 0, m.numel() - 1) == 0) & (m.narrow(0, 1, m.numel() - 1) == 0)).sum().item<double>() /
                        static_cast<double>(m.numel() - 1);
    EXPECT_NEAR(both, p * p, 0.002) << "p " << p;
  }
}

TEST(Dropout, TheMaskIsAFunctionOfTheSeedAloneWhateverTheThreads) {
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const at::Tensor one = ex::dropout_mask(300001, 0.3, 77);
  at::set_num_threads(2);
  EXPECT_TRUE(at::equal(ex::dropout_mask(300001, 0.3, 77), one));
  at::set_num_threads(threads);
  EXPECT_FALSE(at::equal(ex::dropout_mask(300001, 0.3, 78), one));
}

TEST(Dropout, ModuleTrainsWithItsMaskAndPassesThroughInEvaluation) {
  ex::Dropout d(0.25);
  const at::Tensor x = at::randn({4, 50, 8}).requires_grad_();
  at::Tensor y;
  {
    wavetrain::ScopedRandomStream stream(5);  // the seed the module will draw
    y = d->forward(x);
  }
  wavetrain::ScopedRandomStream stream(5);
  const at::Tensor mask = ex::dropout_mask(x.numel(), 0.25, wavetrain::next_random_seed()).view(x.sizes());
  EXPECT_TRUE(at::equal(y, x * mask));
  y.sum().backward();
  EXPECT_TRUE(at::equal(x.grad(), mask));  // d(x * mask)/dx
  d->eval();
  EXPECT_TRUE(at::equal(d->forward(x), x));
  EXPECT_THROW(ex::Dropout(1.0), std::invalid_argument);
}

TEST(DepthwiseConvTime, MatchesAtenConv1dAndItsGradients) {
  at::manual_seed(3);
  // (batch, frames, channels, kernel): frames shorter than the kernel included.
  for (const auto& [B, T, C, K] : std::vector<std::array<int64_t, 4>>{{3, 40, 16, 15}, {2, 5, 8, 15}, {1, 1, 4, 3}, {2, 17, 128, 7}}) {
    const at::Tensor x = at::randn({B, T, C}).requires_grad_(), w = at::randn({C, 1, K}).requires_grad_(),
                     b = at::randn({C}).requires_grad_();
    const at::Tensor x2 = x.detach().clone().requires_grad_(), w2 = w.detach().clone().requires_grad_(),
                     b2 = b.detach().clone().requires_grad_();
    const at::Tensor ours = ex::asr::depthwise_conv_time(x, w, b);
    const at::Tensor aten = at::conv1d(x2.transpose(1, 2), w2, b2, 1, (K - 1) / 2, 1, C).transpose(1, 2);
    ASSERT_EQ(ours.sizes(), aten.sizes());
    EXPECT_TRUE(at::allclose(ours, aten, 1e-5, 1e-5)) << B << "x" << T << "x" << C << " K " << K;
    const at::Tensor g = at::randn(ours.sizes());
    ours.backward(g);
    aten.backward(g);
    EXPECT_TRUE(at::allclose(x.grad(), x2.grad(), 1e-5, 1e-5)) << "dx, T " << T << " K " << K;
    EXPECT_TRUE(at::allclose(w.grad(), w2.grad(), 1e-4, 1e-4)) << "dw, T " << T << " K " << K;
    EXPECT_TRUE(at::allclose(b.grad(), b2.grad(), 1e-4, 1e-4)) << "dbias, T " << T << " K " << K;
  }
  // A strided input (a transposed view) is read as its values.
  const at::Tensor x = at::randn({2, 8, 9}).transpose(1, 2), w = at::randn({8, 1, 3}), b = at::randn({8});
  EXPECT_TRUE(at::allclose(ex::asr::depthwise_conv_time(x, w, b), ex::asr::depthwise_conv_time(x.contiguous(), w, b)));
  EXPECT_THROW(ex::asr::depthwise_conv_time(x, at::randn({8, 1, 4}), b), std::invalid_argument);  // an even kernel
}
