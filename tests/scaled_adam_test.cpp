// ScaledAdam and Eden (icefall's optimizer and schedule) against an independent Python statement
// of icefall's definitions (tests/python/scaled_adam_reference.py, run by the tests' .venv), and
// ScaledAdam's state through a checkpoint.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/run_process.h"
#include "trainer/checkpoint.h"
#include "trainer/config/yaml_io.h"
#include "trainer/fit_options.h"
#include "trainer/lr_scheduler.h"
#include "trainer/scaled_adam.h"
#include "trainer/task.h"

namespace wavetrain {
namespace {

namespace fs = std::filesystem;

// Shapes that take every path: matrices, a vector, scalars of shape [1] and [], a 3-d tensor (its
// gradient missing every 7th step), a small-valued matrix; and three whose gradients keep pointing
// one way, so that their scale steps hit icefall's limits: one near param_max_rms growing, one
// below param_min_rms shrinking, one shrinking faster than the +-0.1 clamp at a large rate.
const std::vector<std::vector<int64_t>> kShapes = {{3, 4}, {5}, {1}, {}, {2, 3, 2}, {4, 4}, {3, 3}, {2, 2}, {2, 5}};
constexpr int kSteps = 150;

struct OptimCase {
  std::vector<at::Tensor> init;                    // float64
  std::vector<std::vector<at::Tensor>> grads;      // [step][param], undefined: no gradient
  std::vector<double> lrs;
};

OptimCase scaled_adam_case() {
  at::manual_seed(11);
  OptimCase c;
  const std::vector<double> init_scale = {1, 1, 1, 1, 1, 0.05, 2.9, 1e-6, 0.5};
  for (size_t i = 0; i < kShapes.size(); ++i) c.init.push_back(at::randn(kShapes[i], at::kDouble) * init_scale[i]);
  for (int t = 0; t < kSteps; ++t) {
    std::vector<at::Tensor> g;
    for (size_t i = 0; i < kShapes.size(); ++i) {
      if (i == 4 && t % 7 == 3) {
        g.emplace_back();
        continue;
      }
      at::Tensor x = at::randn(kShapes[i], at::kDouble) * (1 + 0.5 * (t % 13));
      if (i == 6) x = c.init[i] * (-1 - 0.1 * x);  // grow
      if (i == 7) x = c.init[i] * (1e3 + 0.1 * x);  // shrink, below param_min_rms
      if (i == 8) x = c.init[i] * (1 + 0.1 * x);    // shrink
      if (t == 77) x = x * 50;  // a spike for the clipping to catch
      g.push_back(x);
    }
    c.grads.push_back(g);
    c.lrs.push_back(t >= 100 && t < 116 ? 0.6 : 0.045 * (0.5 + 0.5 * std::min(1.0, t / 30.0)));
  }
  return c;
}

std::vector<double> flat_values(const at::Tensor& t) {
  const at::Tensor c = t.to(at::kDouble).contiguous().view({-1});
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

// Runs steps [from, to) of the case on `params` with `opt`; returns each step's clipping scale.
std::vector<double> run_scaled_adam_steps(ScaledAdam& opt, std::vector<at::Tensor>& params, const OptimCase& c, int from, int to) {
  std::vector<double> scales;
  for (int t = from; t < to; ++t) {
    opt.param_groups()[0].options().set_lr(c.lrs[static_cast<size_t>(t)]);
    for (size_t i = 0; i < params.size(); ++i) {
      const at::Tensor& g = c.grads[static_cast<size_t>(t)][i];
      params[i].mutable_grad() = g.defined() ? g.clone() : at::Tensor();
    }
    opt.step();
    scales.push_back(opt.last_clipping_scales()[0]);
  }
  return scales;
}

std::vector<at::Tensor> scaled_adam_params(const OptimCase& c) {
  std::vector<at::Tensor> params;
  for (const at::Tensor& x : c.init) params.push_back(x.clone().requires_grad_(true));
  return params;
}

TEST(ScaledAdam, EqualsThePythonReferenceOfIcefallsDefinition) {
  WAVETRAIN_REQUIRE_CLIENT(testing::client_importable("torch"), "torch is not in " WAVETRAIN_CLIENT_PYTHON);
  const OptimCase c = scaled_adam_case();
  std::vector<at::Tensor> params = scaled_adam_params(c);
  ScaledAdam opt({torch::optim::OptimizerParamGroup(params)}, ScaledAdamOptions(0.045));
  const std::vector<double> scales = run_scaled_adam_steps(opt, params, c, 0, kSteps);

  nlohmann::json j;
  j["options"] = {{"clipping_scale", 2.0}, {"beta1", 0.9},          {"beta2", 0.98},         {"scalar_lr_scale", 0.1},
                  {"eps", 1e-8},           {"param_min_rms", 1e-5}, {"param_max_rms", 3.0},  {"scalar_max", 10.0},
                  {"size_update_period", 4}, {"clipping_update_period", 100}};
  for (size_t i = 0; i < c.init.size(); ++i) j["params"].push_back({kShapes[i], flat_values(c.init[i])});
  j["groups"] = {std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8}};
  for (int t = 0; t < kSteps; ++t) {
    nlohmann::json grads = nlohmann::json::array();
    for (const at::Tensor& g : c.grads[static_cast<size_t>(t)]) grads.push_back(g.defined() ? nlohmann::json(flat_values(g)) : nlohmann::json());
    j["steps"].push_back({{"lr", c.lrs[static_cast<size_t>(t)]}, {"grads", grads}});
  }
  // Eden at points around its warm-up and its two knees (icefall's LibriSpeech settings).
  const std::vector<std::pair<int64_t, int64_t>> eden_points = {{0, 0}, {250, 0}, {499, 0}, {500, 1}, {7500, 3}, {20000, 7}, {123456, 30}};
  for (const auto& [step, epoch] : eden_points) j["eden"].push_back({step, epoch, 0.045, 7500.0, 3.5, 500, 0.5});
  const fs::path file = fs::path(::testing::TempDir()) / ("wavetrain_scaled_adam_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << j.dump();
  const testing::ProcessResult r = testing::client_run("scaled_adam_reference.py " + file.string());
  fs::remove(file);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json ref = nlohmann::json::parse(r.out);

  for (size_t i = 0; i < params.size(); ++i) {
    const std::vector<double> mine = flat_values(params[i].detach()), theirs = ref["params"][i].get<std::vector<double>>();
    ASSERT_EQ(mine.size(), theirs.size());
    for (size_t k = 0; k < mine.size(); ++k) EXPECT_NEAR(mine[k], theirs[k], 1e-10 * (1 + std::abs(theirs[k]))) << i << "[" << k << "]";
    // The parameters moved: the comparison is not of two untouched copies.
    if (i != 7) {
      EXPECT_GT((params[i].detach() - c.init[i]).abs().max().item<double>(), 1e-3) << i;
    }
  }
  int clipped = 0;
  for (int t = 0; t < kSteps; ++t) {
    EXPECT_NEAR(scales[static_cast<size_t>(t)], ref["clipping"][t][0].get<double>(), 1e-12) << t;
    clipped += scales[static_cast<size_t>(t)] < 1.0;
  }
  EXPECT_LT(scales[77], 0.1);  // the spike
  EXPECT_GE(clipped, 2);

  LrScheduleOptions o;
  o.name = "eden";
  o.interval = "step";
  o.warmup = 500;
  o.warmup_start_factor = 0.5;
  LrScheduler eden(o, {0.045});
  at::Tensor w = at::zeros({1}).requires_grad_(true);
  torch::optim::SGD sgd({w}, torch::optim::SGDOptions(0.045));
  for (size_t k = 0; k < eden_points.size(); ++k) {
    eden.set_epoch(sgd, eden_points[k].second);
    eden.set_count(sgd, eden_points[k].first);
    EXPECT_NEAR(sgd.param_groups()[0].options().get_lr(), ref["eden"][k].get<double>(), 1e-15) << eden_points[k].first;
  }
}

// Its state through a checkpoint file: 60 steps, saved, loaded into a new optimizer, 90 more, is
// bitwise the straight 150 steps.
TEST(ScaledAdam, StateSurvivesACheckpointBitwise) {
  const OptimCase c = scaled_adam_case();
  std::vector<at::Tensor> straight = scaled_adam_params(c);
  ScaledAdam a({torch::optim::OptimizerParamGroup(straight)}, ScaledAdamOptions(0.045));
  run_scaled_adam_steps(a, straight, c, 0, kSteps);

  std::vector<at::Tensor> first = scaled_adam_params(c);
  ScaledAdam b({torch::optim::OptimizerParamGroup(first)}, ScaledAdamOptions(0.045));
  run_scaled_adam_steps(b, first, c, 0, 60);
  TrainingState state;
  state.config_yaml = "task: x\n";
  state.optimizer = optimizer_state(b);
  const fs::path file = fs::path(::testing::TempDir()) / ("wavetrain_scaled_adam_" + std::to_string(::getpid()) + ".ckpt");
  Checkpoint::save(file.string(), state);
  const TrainingState loaded = Checkpoint::load(file.string());
  fs::remove(file);

  std::vector<at::Tensor> resumed;
  for (const at::Tensor& p : first) resumed.push_back(p.detach().clone().requires_grad_(true));
  ScaledAdam d({torch::optim::OptimizerParamGroup(resumed)}, ScaledAdamOptions(0.045));
  load_optimizer_state(d, loaded.optimizer, "test.ckpt");
  run_scaled_adam_steps(d, resumed, c, 60, kSteps);
  for (size_t i = 0; i < straight.size(); ++i) EXPECT_TRUE(at::equal(straight[i], resumed[i])) << i;

  // Another optimizer's state, or another model's, is refused naming the file.
  torch::optim::SGD sgd(std::vector<at::Tensor>{at::zeros({2}).requires_grad_(true)}, torch::optim::SGDOptions(0.1));
  EXPECT_THROW(load_optimizer_state(sgd, loaded.optimizer, "test.ckpt"), std::runtime_error);
  std::vector<at::Tensor> other = {at::zeros({3, 4}, at::kDouble).requires_grad_(true)};
  ScaledAdam e({torch::optim::OptimizerParamGroup(other)}, ScaledAdamOptions(0.045));
  try {
    load_optimizer_state(e, loaded.optimizer, "test.ckpt");
    ADD_FAILURE() << "a state of 9 parameters loaded into 1";
  } catch (const std::runtime_error& x) {
    EXPECT_NE(std::string(x.what()).find("test.ckpt: optimizer (scaled_adam) group 0 has 9 parameters, the run 1"), std::string::npos) << x.what();
  }
}

TEST(ScaledAdam, ComesFromTheConfigAndBadOptionsNameTheirKey) {
  const auto make = [](const std::string& yaml) {
    const config::Config cfg(config::load_yaml_string(yaml, "test"));
    std::vector<ParamGroup> groups{{"model", {at::zeros({2, 2}).requires_grad_(true)}, std::nullopt, std::nullopt}};
    return make_optimizer(cfg, groups);
  };
  const auto opt = make("optimizer:\n  name: scaled_adam\n  lr: 0.03\n  scaled_adam:\n    clipping_scale: 1.5\n");
  const auto* scaled = dynamic_cast<const ScaledAdam*>(opt.get());
  ASSERT_NE(scaled, nullptr);
  const auto& o = static_cast<const ScaledAdamOptions&>(scaled->param_groups()[0].options());
  EXPECT_EQ(o.lr(), 0.03);
  EXPECT_EQ(o.clipping_scale(), 1.5);
  EXPECT_EQ(o.beta2(), 0.98);
  const auto error_of = [&](const std::string& yaml) {
    try {
      make(yaml);
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of("optimizer:\n  name: scaled_adam\n  scaled_adam:\n    beta2: 1.0\n"), "optimizer.scaled_adam.beta2 must be in (0, 1)");
  EXPECT_EQ(error_of("optimizer:\n  name: scaled_adam\n  scaled_adam:\n    beta1: 0.99\n"),
            "optimizer.scaled_adam.beta1 must be <= beta2 (icefall's rule)");
  EXPECT_EQ(error_of("optimizer:\n  name: scaled_adam\n  weight_decay: 0.01\n"),
            "optimizer.weight_decay must be 0 with optimizer.name=scaled_adam (it has none)");
  EXPECT_NE(error_of("optimizer:\n  name: scaledadam\n").find("expected adam, adamw, sgd or scaled_adam"), std::string::npos);
}

}  // namespace
}  // namespace wavetrain
