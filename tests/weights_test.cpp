// Weights interop with Python, using Debian's python3-torch as the real client: Python's plain
// and DataParallel state dicts load into a C++ model that reproduces Python's output, and what
// wavetrain exports loads in Python with weights_only=True and reproduces wavetrain's output.
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>

#include <cstdlib>
#include <filesystem>

#include "trainer/weights.h"

namespace fs = std::filesystem;

namespace wavetrain {
namespace {

const std::string kPython = WAVETRAIN_TEST_PYTHON;
const std::string kScripts = std::string(WAVETRAIN_TEST_DATA) + "/../python";

bool python_has_torch() {
  static const bool ok = std::system((kPython + " -c 'import torch' >/dev/null 2>&1").c_str()) == 0;
  return ok;
}

#define REQUIRE_PYTHON_TORCH()                                                                              \
  if (!python_has_torch())                                                                                  \
  GTEST_SKIP() << kPython << " cannot import torch: install Debian's python3-torch (scripts/setup --test-deps " \
                             "does) to run this interop test"

torch::nn::Sequential mlp() {
  return torch::nn::Sequential(torch::nn::Linear(4, 8), torch::nn::BatchNorm1d(8), torch::nn::ReLU(),
                               torch::nn::Linear(8, 3));
}

fs::path fresh_dir() {
  const fs::path d = fs::path(::testing::TempDir()) / ("wavetrain_weights_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

std::pair<at::Tensor, at::Tensor> io_tensors(const fs::path& file) {
  const serialization::StateDict io = serialization::to_state_dict(serialization::load_torch_file(file.string()), "io");
  return {io.at(0).second, io.at(1).second};
}

TEST(Weights, PythonStateDictsLoadAndReproducePythonsOutput) {
  REQUIRE_PYTHON_TORCH();
  const fs::path dir = fresh_dir();
  ASSERT_EQ(std::system((kPython + " " + kScripts + "/mlp_state_dicts.py " + dir.string() + " >/dev/null").c_str()), 0);
  const auto [x, y] = io_tensors(dir / "io.pt");
  for (const char* file : {"plain.pt", "data_parallel.pt"}) {
    torch::nn::Sequential model = mlp();
    const LoadReport report = load_weights((dir / file).string(), *model);
    EXPECT_TRUE(report.complete()) << file << "\n" << report.describe();
    EXPECT_EQ(report.prefix_note.empty(), std::string(file) == "plain.pt") << report.prefix_note;
    model->eval();
    const double diff = (model->forward(x) - y).abs().max().item<double>();
    EXPECT_LE(diff, 1e-6) << file;
  }
}

TEST(Weights, ExportsLoadInPythonWithWeightsOnly) {
  REQUIRE_PYTHON_TORCH();
  const fs::path dir = fresh_dir();
  torch::manual_seed(3);
  torch::nn::Sequential model = mlp();
  model->train();
  for (int i = 0; i < 3; ++i) model->forward(torch::randn({16, 4}));
  model->eval();
  const at::Tensor x = torch::randn({6, 4});
  const at::Tensor y = model->forward(x).detach();
  save_weights((dir / "cpp_plain.pt").string(), *model);
  save_weights((dir / "cpp_data_parallel.pt").string(), *model, /*module_prefix=*/true);
  serialization::save_torch_file((dir / "cpp_io.pt").string(), serialization::from_state_dict({{"x", x}, {"y", y}}));
  const std::string cmd = kPython + " " + kScripts + "/check_export.py " + dir.string();
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  // And back: the prefixed export loads into a plain C++ model.
  torch::nn::Sequential again = mlp();
  EXPECT_EQ(load_weights((dir / "cpp_data_parallel.pt").string(), *again).prefix_note,
            "removed the 'module.' prefix (a DataParallel/DDP state dict)");
}

TEST(Weights, AFileWithAForbiddenGlobalIsRefusedAndNothingRuns) {
  REQUIRE_PYTHON_TORCH();
  const fs::path dir = fresh_dir();
  fs::remove("/tmp/wavetrain_exploited");
  ASSERT_EQ(std::system((kPython + " " + kScripts + "/forbidden_global.py " + (dir / "evil.pt").string()).c_str()), 0);
  torch::nn::Sequential model = mlp();
  try {
    load_weights((dir / "evil.pt").string(), *model);
    FAIL() << "loaded a file with os.system in it";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("refused global 'posix.system'"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists("/tmp/wavetrain_exploited"));
}

TEST(Weights, StrictLoadingListsEveryProblemAndChangesNothing) {
  torch::nn::Sequential model = mlp();
  const at::Tensor before = model->named_parameters()["0.weight"].clone();
  StateDict sd = module_state_dict(*model);
  sd.erase(sd.begin());                                  // 0.weight missing
  sd.emplace_back("extra.bias", at::zeros({2}));         // unexpected
  sd[0].second = at::zeros({5});                         // 0.bias has the wrong shape
  try {
    load_state_dict(*model, sd, /*strict=*/true, "w.pt");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(),
                 "w.pt does not fit the model:\n"
                 "  missing keys (in the model, not in the file): 0.weight\n"
                 "  unexpected keys (in the file, not in the model): extra.bias\n"
                 "  shape mismatches: 0.bias: file [5], model [8]\n");
  }
  EXPECT_TRUE(at::equal(model->named_parameters()["0.weight"], before));
  sd.emplace_back("3.bias", at::full({3}, 7.0f));  // replaces nothing: 3.bias is already there once
  const LoadReport loose = load_state_dict(*model, sd, /*strict=*/false, "w.pt");
  EXPECT_FALSE(loose.complete());
  EXPECT_TRUE(at::equal(model->named_parameters()["3.bias"], at::full({3}, 7.0f)));
}

TEST(Weights, StateDictOrderIsPythons) {
  torch::nn::Sequential model = mlp();
  std::vector<std::string> names;
  for (const auto& [name, t] : module_state_dict(*model)) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean",
                                             "1.running_var", "1.num_batches_tracked", "3.weight", "3.bias"}));
  EXPECT_EQ(module_state_dict(*model, true).front().first, "module.0.weight");
}

}  // namespace
}  // namespace wavetrain
