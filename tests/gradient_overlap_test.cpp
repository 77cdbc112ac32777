// Both engines of gradient_sync.h (wavetrain's hooks, gradient_overlap.h, and c10d's Reducer,
// ddp_reducer.cpp, where built) with two Gloo ranks on 127.0.0.1, one per thread: after an
// accumulation window the gradients are the mean of the ranks' own window sums, buckets were launched
// from the backward's hooks, an unused parameter stays without a gradient, and a rank that skips its
// backward still pairs its collectives with the other's.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <torch/autograd.h>
#include <torch/nn/modules/linear.h>

#include <chrono>
#include <thread>
#include <unistd.h>

#include "trainer/distributed.h"
#include "trainer/gradient_overlap.h"
#include "trainer/gradient_sync.h"

namespace {

using wavetrain::DistributedEnv;
using wavetrain::GradientSync;
using wavetrain::GradientSyncOptions;
using wavetrain::OverlappedGradientAverage;
using wavetrain::ProcessGroup;

// Multiplies by a weight whose gradient it leaves undefined (as a hand-written autograd function
// may): the hook of `w` then sees an undefined gradient.
struct ScaleWithoutWeightGradient : public torch::autograd::Function<ScaleWithoutWeightGradient> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& x, const at::Tensor& w) {
    ctx->saved_data["w"] = w.item<double>();
    return x * w.item<double>();
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx, torch::autograd::variable_list g) {
    return {g[0] * ctx->saved_data["w"].toDouble(), at::Tensor()};
  }
};

// A three-layer model with a fourth layer that the forward never uses. The same weights on every
// rank (the trainer broadcasts them; here the seed does).
struct Model {
  torch::nn::Linear a{nullptr}, b{nullptr}, c{nullptr}, unused{nullptr};
  at::Tensor scale = at::full({1}, 1.5).requires_grad_();  // used, but its gradient stays undefined
  Model() {
    at::manual_seed(1);
    a = torch::nn::Linear(5, 16);
    b = torch::nn::Linear(16, 8);
    c = torch::nn::Linear(8, 1);
    unused = torch::nn::Linear(3, 3);
  }
  std::vector<at::Tensor> parameters() const {
    std::vector<at::Tensor> all;
    for (const auto* m : {&a, &b, &c, &unused})
      for (const at::Tensor& p : (*m)->parameters()) all.push_back(p);
    all.push_back(scale);
    return all;
  }
  at::Tensor loss(const at::Tensor& x) {
    return c(ScaleWithoutWeightGradient::apply(at::tanh(b(at::tanh(a(x)))), scale)).pow(2).mean();
  }
};

at::Tensor batch(int rank, int micro) {
  at::manual_seed(10 + 7 * rank + micro);
  return at::randn({6, 5});
}

struct RankResult {
  std::vector<at::Tensor> local;     // the window's own gradient sums, without any averaging
  std::vector<at::Tensor> averaged;  // through the engine
  int64_t buckets = 0, launched_during_backward = 0;
  std::string engine;
  std::string error;
};

// What a rank works on, made on the main thread: the threads share ATen's global generator.
struct RankInputs {
  Model reference, model;
  at::Tensor batches[2];
  explicit RankInputs(int rank) : batches{batch(rank, 0), batch(rank, 1)} {}
};

// One rank: two micro-batches, the first not armed (accumulation only), the second armed; with
// `skip_last` the second backward is skipped (as for a non-finite loss).
void run_rank(int rank, int port, bool skip_last, const GradientSyncOptions& options, RankInputs& in, RankResult& out) {
  try {
    for (int micro = 0; micro < 2; ++micro)
      if (!(skip_last && micro == 1)) in.reference.loss(in.batches[micro]).backward();
    for (const at::Tensor& p : in.reference.parameters()) out.local.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());

    DistributedEnv env;
    env.rank = rank;
    env.world_size = 2;
    env.master_port = port;
    ProcessGroup group(env, std::chrono::seconds(30), at::Device(at::kCPU));
    Model& m = in.model;
    const std::unique_ptr<GradientSync> sync = wavetrain::make_gradient_sync(group, m.parameters(), {}, options);
    out.engine = sync->engine();
    // Two windows on the same batches: the first orders the buckets by when gradients came (the
    // unused layer, registered last, was in the first bucket and held all back), the second shows it.
    for (int window = 0; window < 2; ++window) {
      for (at::Tensor& p : m.parameters()) p.mutable_grad() = at::Tensor();
      m.loss(in.batches[0]).backward();
      sync->arm();
      if (!skip_last) sync->backward(m.loss(in.batches[1]));
      sync->finish();
    }
    for (const at::Tensor& p : m.parameters()) out.averaged.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
    out.buckets = sync->buckets();
    if (const auto* hooks = dynamic_cast<const OverlappedGradientAverage*>(sync.get()))
      out.launched_during_backward = hooks->launched_during_backward();
  } catch (const std::exception& e) {
    out.error = e.what();
  }
}

// Both ranks, rank 1 on a thread.
void run_ranks(int port, bool rank1_skips, const GradientSyncOptions& options, RankResult (&r)[2]) {
  RankInputs in0(0), in1(1);
  std::thread one([&] { run_rank(1, port, rank1_skips, options, in1, r[1]); });
  run_rank(0, port, false, options, in0, r[0]);
  one.join();
}

GradientSyncOptions engine(const std::string& name, bool find_unused = true) {
  GradientSyncOptions o;
  o.engine = name;
  o.bucket_bytes = 256;  // several buckets
  o.find_unused_parameters = find_unused;
  return o;
}

void expect_means(const RankResult (&r)[2]) {
  ASSERT_EQ(r[0].error, "");
  ASSERT_EQ(r[1].error, "");
  ASSERT_EQ(r[0].averaged.size(), r[0].local.size());
  for (size_t i = 0; i < r[0].local.size(); ++i) {
    if (!r[0].local[i].defined()) {  // the unused layer, and the scale whose gradient is undefined
      EXPECT_FALSE(r[0].averaged[i].defined()) << "parameter " << i;
      EXPECT_FALSE(r[1].averaged[i].defined()) << "parameter " << i;
      continue;
    }
    const at::Tensor mean = (r[0].local[i] + r[1].local[i]) / 2;
    // Against the mean of the reference model's window sums, to float rounding: that model's
    // backward ran at another moment of the two rank threads, and on the pip build (2026-11-29,
    // once in three full runs under ctest's load, never in 70 runs alone) its sums differed from
    // the trained model's in the last bits (5e-7), both ranks alike. Between the ranks, bit for
    // bit: with two ranks (a + b) / 2, the hooks' sum then division, equals a / 2 + b / 2, the
    // Reducer's division then sum.
    for (int rank = 0; rank < 2; ++rank)
      EXPECT_TRUE(at::allclose(r[rank].averaged[i], mean, /*rtol=*/1e-5, /*atol=*/1e-7))
          << "rank " << rank << ", parameter " << i << ": " << (r[rank].averaged[i] - mean).abs().max().item<double>();
    EXPECT_TRUE(at::equal(r[0].averaged[i], r[1].averaged[i])) << "parameter " << i;
  }
}

int free_port() { return 31000 + static_cast<int>(::getpid() % 2000); }

TEST(GradientOverlap, AveragesTheWindowSumsAndLaunchesBucketsDuringTheBackward) {
  RankResult r[2];
  run_ranks(free_port(), false, engine("hooks"), r);
  expect_means(r);
  EXPECT_EQ(r[0].engine, "hooks");
  EXPECT_GE(r[0].buckets, 4);
  // The last layers' buckets were complete, and launched, before the first layer's gradients existed.
  EXPECT_GE(r[0].launched_during_backward, 2);
  EXPECT_GE(r[1].launched_during_backward, 2);
}

TEST(GradientOverlap, ARankThatSkipsItsBackwardStillPairsItsCollectives) {
  RankResult r[2];
  run_ranks(free_port() + 1, true, engine("hooks"), r);
  expect_means(r);
  EXPECT_EQ(r[1].launched_during_backward, 0);
}

// c10d's Reducer (the PyPI 2.11 build; `auto` picks it there and the hooks elsewhere, where asking
// for it by name is an error that says what to use).
TEST(GradientOverlap, TheReducerAveragesTheWindowSumsWithUnusedParametersFound) {
  RankResult r[2];
  run_ranks(free_port() + 2, false, engine(wavetrain::c10d_reducer_built() ? "auto" : "reducer"), r);
  if (!wavetrain::c10d_reducer_built()) {
    EXPECT_NE(r[0].error.find("trainer.ddp_engine=reducer: this build's LibTorch"), std::string::npos) << r[0].error;
    GTEST_SKIP() << "this LibTorch has no c10d Reducer headers (Debian's 1.13)";
  }
  EXPECT_EQ(r[0].engine, "reducer");
  expect_means(r);
  EXPECT_GE(r[0].buckets, 3);
}

TEST(GradientOverlap, TheReducerPairsTheCollectivesOfARankThatSkipsItsBackward) {
  if (!wavetrain::c10d_reducer_built()) GTEST_SKIP() << "this LibTorch has no c10d Reducer headers";
  RankResult r[2];
  run_ranks(free_port() + 3, true, engine("reducer"), r);
  expect_means(r);
}

// Without find_unused_parameters the Reducer waits for every parameter's gradient; one the loss does
// not use is a clear error at the end of the step on both ranks, not a hang or a silent local step.
TEST(GradientOverlap, TheReducerWithoutUnusedParameterSearchNamesTheSetting) {
  if (!wavetrain::c10d_reducer_built()) GTEST_SKIP() << "this LibTorch has no c10d Reducer headers";
  RankResult r[2];
  run_ranks(free_port() + 4, false, engine("reducer", /*find_unused=*/false), r);
  for (int rank = 0; rank < 2; ++rank)
    EXPECT_NE(r[rank].error.find("set trainer.ddp_find_unused_parameters=true"), std::string::npos) << r[rank].error;
}

}  // namespace
