// Batch parts trained at once (trainer/parallel_parts.h): how a batch is cut, that every part runs
// once and single-threaded, errors come back, random streams are reproducible, and train_parts'
// gradients are the parts' summed gradients, the same run after run. And the other thread of the
// training loop: the next batch made ahead, on one thread for the whole fit (trainer/ahead_thread.h).
#include <gtest/gtest.h>

#include <ATen/Parallel.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <set>
#include <stdexcept>

#include "trainer/config/config.h"
#include "trainer/config/yaml_io.h"
#include "trainer/parallel_parts.h"
#include "trainer/trainer.h"

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

namespace wavetrain {
namespace {

// A task that asks for its training batches ahead (as the ASR task does) and records the kernel
// thread that made each: a linear model on fixed data. prefetch_probe.ahead=false makes every batch
// in line; prefetch_probe.throw_batch=N throws while making the run's Nth training batch (from 0).
struct PrefetchLog {
  std::mutex mutex;
  std::vector<long> train_threads;  // per training batch, in the order made
} g_prefetch_log;

class PrefetchProbe : public Task {
 public:
  explicit PrefetchProbe(const config::Config& cfg)
      : ahead_(cfg.get_bool("prefetch_probe.ahead", true)), throw_batch_(cfg.get_int("prefetch_probe.throw_batch", -1)) {
    x_ = at::linspace(-1, 1, 64).unsqueeze(1);
    y_ = 3 * x_ - 1;
    weight_ = model_->register_parameter("weight", at::full({1, 1}, 0.5));
    bias_ = model_->register_parameter("bias", at::zeros({1}));
  }
  torch::nn::Module& model() override { return *model_; }
  int64_t size(Split) const override { return 64; }
  bool prefetch_batches() const override { return ahead_; }
  Batch make_batch(Split split, const std::vector<int64_t>& indices, const at::Device&) override {
    if (split == Split::Train) {
      std::lock_guard<std::mutex> lock(g_prefetch_log.mutex);
      if (static_cast<int64_t>(g_prefetch_log.train_threads.size()) == throw_batch_)
        throw std::runtime_error("prefetch_probe: batch " + std::to_string(throw_batch_) + " is unreadable");
      g_prefetch_log.train_threads.push_back(static_cast<long>(::syscall(SYS_gettid)));
    }
    const at::Tensor idx = at::tensor(indices, at::kLong);
    return {x_.index_select(0, idx), y_.index_select(0, idx), static_cast<int64_t>(indices.size())};
  }
  at::Tensor forward(const Batch& b) override { return b.input.matmul(weight_) + bias_; }
  at::Tensor loss(const at::Tensor& p, const Batch& b, Metrics&) override { return at::mse_loss(p, b.target); }
  Metrics validation_metrics(const at::Tensor& p, const Batch& b) override {
    return {{"val/mse", at::mse_loss(p, b.target).item<double>()}};
  }

 private:
  bool ahead_;
  int64_t throw_batch_;
  at::Tensor x_, y_, weight_, bias_;
  std::shared_ptr<torch::nn::Module> model_ = std::make_shared<torch::nn::Module>();  // held by a shared_ptr, as checkpoints need
};
const TaskRegistration kPrefetchProbe("prefetch_probe", [](const config::Config& cfg) { return std::make_unique<PrefetchProbe>(cfg); },
                                      {"prefetch_probe.*"});

// Trains task prefetch_probe for `epochs` epochs of 8 batches of 8 in a fresh run directory.
FitResult fit_probe(const std::string& name, int64_t epochs, const std::string& probe_yaml = "{}") {
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("wavetrain_prefetch_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  const config::Config cfg(config::load_yaml_string(
      "task: prefetch_probe\nprefetch_probe: " + probe_yaml + "\n"
      "trainer: {seed: 0, max_epochs: " + std::to_string(epochs) + ", max_steps: -1, batch_size: 8, monitor: '', mode: min}\n"
      "optimizer: {name: adam, lr: 0.01}\nscheduler: {name: constant, interval: epoch, step_size: 1, gamma: 1.0}\n",
      "prefetch.yaml"));
  const RunDirectory run = RunDirectory::create(dir);
  FitResult r = Trainer(cfg, run, DeviceChoice{c10::Device(c10::kCPU), {}}, AmpPolicy{}).fit();
  std::filesystem::remove_all(dir);
  return r;
}

double val_mse(const FitResult& r) {
  for (const auto& [k, v] : r.last)
    if (k == "val/mse") return v;
  return NAN;
}

// The next batch is made on one thread for the whole fit, not a new thread per batch (each new
// thread rebuilt LibTorch 1.13's thread pool, trainer/ahead_thread.h); an error it meets reaches
// the caller with its message, and the run is the one that making every batch in line gives.
TEST(BatchesAhead, AreMadeOnOneThreadAndTheirErrorsComeBack) {
  g_prefetch_log.train_threads.clear();
  const FitResult r = fit_probe("ahead", 3);
  EXPECT_EQ(r.global_step, 24);
  const long main_thread = static_cast<long>(::syscall(SYS_gettid));
  std::set<long> ahead;
  ASSERT_EQ(g_prefetch_log.train_threads.size(), 24u);
  for (size_t i = 0; i < g_prefetch_log.train_threads.size(); ++i) {
    // Each epoch's first batch is made in line; the other 7 ahead.
    if (i % 8 == 0) EXPECT_EQ(g_prefetch_log.train_threads[i], main_thread) << i;
    else ahead.insert(g_prefetch_log.train_threads[i]);
  }
  EXPECT_EQ(ahead.size(), 1u);
  EXPECT_EQ(ahead.count(main_thread), 0u);

  g_prefetch_log.train_threads.clear();
  const FitResult in_line = fit_probe("in_line", 3, "{ahead: false}");
  EXPECT_EQ(std::set<long>(g_prefetch_log.train_threads.begin(), g_prefetch_log.train_threads.end()), std::set<long>{main_thread});
  EXPECT_EQ(val_mse(in_line), val_mse(r));
  EXPECT_FALSE(std::isnan(val_mse(r)));

  // Batch 3 is made ahead, while batch 2 trains.
  g_prefetch_log.train_threads.clear();
  try {
    fit_probe("throws", 1, "{throw_batch: 3}");
    FAIL() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "prefetch_probe: batch 3 is unreadable");
  }
  EXPECT_EQ(g_prefetch_log.train_threads.size(), 3u);
  EXPECT_NE(g_prefetch_log.train_threads[2], main_thread);
}

}  // namespace
}  // namespace wavetrain
