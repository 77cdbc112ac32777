// Learning-rate schedules against PyTorch's own scheduler classes (Debian's python3-torch runs
// tests/python/lr_schedules.py), plus validation and how the rates reach the optimizer.
#include <gtest/gtest.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

#include "trainer/lr_scheduler.h"

namespace wavetrain {
namespace {

std::map<std::string, std::vector<double>> python_schedules() {
  std::map<std::string, std::vector<double>> out;
  const std::string cmd = std::string(WAVETRAIN_TEST_PYTHON) + " " + WAVETRAIN_TEST_DATA +
                          "/../python/lr_schedules.py 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return out;
  char line[16384];
  while (fgets(line, sizeof(line), pipe)) {
    std::istringstream in(line);
    std::string name;
    in >> name;
    for (double v; in >> v;) out[name].push_back(v);
  }
  pclose(pipe);
  return out;
}

TEST(LrScheduler, MatchesPyTorchsSchedulers) {
  const auto py = python_schedules();
  if (py.empty()) GTEST_SKIP() << WAVETRAIN_TEST_PYTHON << " cannot import torch: install Debian's python3-torch";
  LrScheduleOptions exponential;
  exponential.name = "exponential";
  exponential.gamma = 0.993;
  LrScheduleOptions step;
  step.name = "step";
  step.step_size = 3;
  step.gamma = 0.5;
  LrScheduleOptions cosine;
  cosine.name = "cosine";
  cosine.warmup = 5;
  cosine.warmup_start_factor = 0.1;
  cosine.total = 20;
  cosine.min_lr = 1e-5;
  const std::vector<std::tuple<std::string, LrScheduleOptions, double>> cases = {
      {"exponential", exponential, 0.004}, {"step", step, 0.1}, {"cosine", cosine, 0.01}, {"constant", {}, 0.02}};
  for (const auto& [name, options, base] : cases) {
    ASSERT_EQ(py.at(name).size(), 21u) << name;
    const LrScheduler s(options, {base});
    for (size_t t = 0; t < py.at(name).size(); ++t)
      EXPECT_NEAR(s.lr_at(static_cast<int64_t>(t)), py.at(name)[t], 1e-15) << name << " t=" << t;
  }
}

TEST(LrScheduler, SetsEveryGroupAndResumesFromACount) {
  at::Tensor a = at::zeros({1}).requires_grad_(true), b = at::zeros({1}).requires_grad_(true);
  torch::optim::SGD sgd({torch::optim::OptimizerParamGroup({a}, std::make_unique<torch::optim::SGDOptions>(0.1)),
                         torch::optim::OptimizerParamGroup({b}, std::make_unique<torch::optim::SGDOptions>(0.01))},
                        torch::optim::SGDOptions(0.1));
  LrScheduleOptions o;
  o.name = "step";
  o.step_size = 2;
  o.gamma = 0.1;
  LrScheduler s(o, {0.1, 0.01});
  s.step(sgd);
  s.step(sgd);
  EXPECT_NEAR(sgd.param_groups()[0].options().get_lr(), 0.01, 1e-15);
  EXPECT_NEAR(sgd.param_groups()[1].options().get_lr(), 0.001, 1e-15);
  LrScheduler resumed(o, {0.1, 0.01});
  resumed.set_count(sgd, 5);
  EXPECT_EQ(resumed.count(), 5);
  EXPECT_NEAR(sgd.param_groups()[0].options().get_lr(), 0.001, 1e-15);
}

TEST(LrScheduler, CosineHoldsMinLrAfterTotalAndOptionsAreValidated) {
  LrScheduleOptions c;
  c.name = "cosine";
  c.total = 10;
  c.min_lr = 0.001;
  const LrScheduler s(c, {0.1});
  EXPECT_DOUBLE_EQ(s.lr_at(10), 0.001);
  EXPECT_DOUBLE_EQ(s.lr_at(50), 0.001);
  auto message = [](LrScheduleOptions o) {
    try {
      o.validate();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("(valid)");
  };
  LrScheduleOptions bad = c;
  bad.total = 0;
  EXPECT_EQ(message(bad), "scheduler.total must be greater than warmup (0)");
  bad = c;
  bad.name = "linear";
  EXPECT_EQ(message(bad), "scheduler.name='linear' is not a schedule: expected constant, exponential, step, cosine or eden");
  bad = {};
  bad.interval = "batch";
  EXPECT_EQ(message(bad), "scheduler.interval='batch' must be epoch or step");
}

}  // namespace
// icefall's Eden, against values computed in Python from its published formula (base 0.045,
// lr_batches 7500, lr_epochs 3.5, warmup 500 from 0.5: icefall's LibriSpeech recipe).
TEST(LrScheduler, EdenMatchesIcefallsFormulaAndReadsTheEpoch) {
  at::Tensor w = at::zeros({1}).requires_grad_(true);
  torch::optim::SGD sgd({w}, torch::optim::SGDOptions(0.045));
  LrScheduleOptions o;
  o.name = "eden";
  o.interval = "step";
  o.warmup = 500;
  o.warmup_start_factor = 0.5;
  LrScheduler s(o, {0.045});
  struct Point {
    int64_t step, epoch;
    double lr;
  };
  for (const Point& p : {Point{0, 0, 0.0225}, Point{250, 0, 0.03374063150499621}, Point{500, 0, 0.04495013842759144},
                         Point{7500, 0, 0.03784033868641715}, Point{20000, 2, 0.024846379080290047},
                         Point{100000, 10, 0.007073291639202309}}) {
    s.set_epoch(sgd, p.epoch);
    s.set_count(sgd, p.step);
    EXPECT_NEAR(sgd.param_groups()[0].options().get_lr(), p.lr, 1e-15) << p.step << " " << p.epoch;
  }
  // The epoch alone changes the rate (set at each epoch's start and on resume).
  s.set_count(sgd, 20000);
  s.set_epoch(sgd, 2);
  EXPECT_NEAR(sgd.param_groups()[0].options().get_lr(), 0.024846379080290047, 1e-15);
  o.interval = "epoch";
  EXPECT_THROW(LrScheduler(o, {0.045}), std::invalid_argument);
}

}  // namespace wavetrain
