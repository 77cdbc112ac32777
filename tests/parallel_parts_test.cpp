// Batch parts trained at once (trainer/parallel_parts.h): how a batch is cut, that every part runs
// once and single-threaded, errors come back, random streams are reproducible, and train_parts'
// gradients are the parts' summed gradients, the same run after run.
#include <gtest/gtest.h>

#include <ATen/Parallel.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <atomic>
#include <stdexcept>

#include "trainer/parallel_parts.h"

#ifdef _OPENMP
#include <omp.h>
#endif

namespace {

// A task whose loss per part is the mean squared error of a convolution + linear model (oneDNN
// convolutions in its forward: the kind that hung inside the parts' region before).
class ConvTask : public wavetrain::Task {
 public:
  ConvTask() {
    at::manual_seed(5);
    model_.conv = model_.register_module("conv", torch::nn::Conv1d(torch::nn::Conv1dOptions(4, 8, 3).padding(1)));
    model_.depthwise =
        model_.register_module("depthwise", torch::nn::Conv1d(torch::nn::Conv1dOptions(8, 8, 5).padding(2).groups(8)));
    model_.out = model_.register_module("out", torch::nn::Linear(8, 1));
  }
  torch::nn::Module& model() override { return model_; }
  int64_t size(wavetrain::Split) const override { return 0; }
  wavetrain::Batch make_batch(wavetrain::Split, const std::vector<int64_t>&, const at::Device&) override { return {}; }
  at::Tensor forward(const wavetrain::Batch& b) override {
    return model_.out(at::relu(model_.depthwise(at::relu(model_.conv(b.input)))).mean(2));
  }
  at::Tensor loss(const at::Tensor& prediction, const wavetrain::Batch& b, wavetrain::Metrics& logged) override {
    const at::Tensor l = (prediction - b.target).pow(2).mean();
    logged.emplace_back("train/rows", static_cast<double>(b.size));
    return l;
  }
  wavetrain::Metrics validation_metrics(const at::Tensor&, const wavetrain::Batch&) override { return {}; }
  bool parallel_batch_parts() const override { return true; }

  struct Net : torch::nn::Module {
    torch::nn::Conv1d conv{nullptr}, depthwise{nullptr};
    torch::nn::Linear out{nullptr};
  } model_;
};

wavetrain::Batch rows(const at::Tensor& x, const at::Tensor& y, int64_t first, int64_t n) {
  wavetrain::Batch b;
  b.input = x.narrow(0, first, n);
  b.target = y.narrow(0, first, n);
  b.size = n;
  return b;
}

}  // namespace

TEST(ParallelParts, BatchesAreCutIntoConsecutiveNearlyEqualParts) {
  using V = std::vector<std::vector<int64_t>>;
  EXPECT_EQ(wavetrain::cut_into_parts({0, 1, 2, 3, 4}, 3), (V{{0, 1}, {2, 3}, {4}}));
  EXPECT_EQ(wavetrain::cut_into_parts({7, 3, 9, 1}, 2), (V{{7, 3}, {9, 1}}));
  EXPECT_EQ(wavetrain::cut_into_parts({7, 3}, 4), (V{{7}, {3}}));  // never an empty part
  EXPECT_EQ(wavetrain::cut_into_parts({7, 3}, 1), (V{{7, 3}}));
}

TEST(ParallelParts, EveryPartRunsOnceSingleThreadedAndErrorsComeBack) {
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  std::vector<std::atomic<int>> runs(5);
  std::atomic<int> nested_threads{0};
  wavetrain::run_parts_in_parallel(5, [&](int64_t i) {
    ++runs[static_cast<size_t>(i)];
#ifdef _OPENMP
    nested_threads = std::max(nested_threads.load(), omp_get_max_threads());
#endif
  });
  for (const auto& r : runs) EXPECT_EQ(r.load(), 1);
#ifdef _OPENMP
  EXPECT_EQ(nested_threads.load(), 1);  // what MKL and oneDNN size their work by
#endif
  EXPECT_THROW(wavetrain::run_parts_in_parallel(3,
                                                [](int64_t i) {
                                                  if (i == 1) throw std::runtime_error("part 1 failed");
                                                }),
               std::runtime_error);
  at::set_num_threads(threads);
}

TEST(ParallelParts, RandomStreamsAreReproducibleAndNest) {
  std::vector<uint64_t> a, b;
  {
    wavetrain::ScopedRandomStream s(42);
    for (int i = 0; i < 3; ++i) a.push_back(wavetrain::next_random_seed());
    {
      wavetrain::ScopedRandomStream inner(7);
      b.push_back(wavetrain::next_random_seed());
    }
    a.push_back(wavetrain::next_random_seed());  // the outer stream goes on where it was
  }
  {
    wavetrain::ScopedRandomStream s(42);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(wavetrain::next_random_seed(), a[static_cast<size_t>(i)]);
  }
  EXPECT_NE(a[0], a[1]);
  EXPECT_NE(b[0], a[0]);
  // Without a stream: ATen's default generator, so manual_seed governs it.
  at::manual_seed(11);
  const uint64_t first = wavetrain::next_random_seed();
  at::manual_seed(11);
  EXPECT_EQ(wavetrain::next_random_seed(), first);
}

TEST(ParallelParts, GradientsAreThePartsSumAndTheSameEveryRun) {
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  ConvTask task;
  const at::Tensor x = at::randn({6, 4, 20}), y = at::randn({6, 1});
  std::vector<at::Tensor> params = task.model().parameters();
  const std::vector<wavetrain::Batch> parts = {rows(x, y, 0, 3), rows(x, y, 3, 3)};
  wavetrain::GradScalerOptions off;
  off.enabled = false;
  wavetrain::GradScaler scaler(off);
  const wavetrain::AmpPolicy fp32;

  // The whole batch once, unsplit (oneDNN's convolutions with 2 threads), so that the parts below
  // meet primitives made for the full team.
  wavetrain::Metrics unused;
  task.loss(task.forward(rows(x, y, 0, 6)), rows(x, y, 0, 6), unused).backward();

  // The reference: each part's loss / 2, backward one after the other.
  std::vector<at::Tensor> expected;
  for (const at::Tensor& p : params) p.mutable_grad() = at::Tensor();
  for (const auto& part : parts) (task.loss(task.forward(part), part, unused) / 2).backward();
  for (const at::Tensor& p : params) expected.push_back(p.grad().clone());

  std::vector<at::Tensor> first;
  for (int run = 0; run < 3; ++run) {
    for (const at::Tensor& p : params) p.mutable_grad() = at::Tensor();
    const wavetrain::PartsResult r = wavetrain::train_parts(task, parts, params, fp32, scaler, 0.5, 99);
    ASSERT_TRUE(r.finite);
    ASSERT_EQ(r.logged.size(), 1u);
    EXPECT_EQ(r.logged[0].first, "train/rows");
    EXPECT_DOUBLE_EQ(r.logged[0].second, 3.0);
    for (size_t j = 0; j < params.size(); ++j) {
      ASSERT_TRUE(params[j].grad().defined());
      EXPECT_TRUE(at::allclose(params[j].grad(), expected[j], 1e-5, 1e-6)) << "parameter " << j;
      if (run == 0) first.push_back(params[j].grad().clone());
      else EXPECT_TRUE(at::equal(params[j].grad(), first[j])) << "run " << run << ", parameter " << j;
    }
  }
  // Gradients add to what .grad holds (accumulation), and a non-finite part adds nothing.
  const wavetrain::PartsResult again = wavetrain::train_parts(task, parts, params, fp32, scaler, 0.5, 99);
  EXPECT_TRUE(again.finite);
  EXPECT_TRUE(at::allclose(params[0].grad(), 2 * first[0], 1e-5, 1e-6));
  at::Tensor bad_y = y.clone();
  bad_y[4][0] = std::numeric_limits<float>::quiet_NaN();
  const at::Tensor before = params[0].grad().clone();
  const wavetrain::PartsResult bad = wavetrain::train_parts(task, {rows(x, y, 0, 3), rows(x, bad_y, 3, 3)}, params, fp32, scaler, 0.5, 99);
  EXPECT_FALSE(bad.finite);
  EXPECT_TRUE(at::equal(params[0].grad(), before));
  at::set_num_threads(threads);
}
