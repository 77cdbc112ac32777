// Checkpoints: exact resume of model, Adam moments, scaler, counters and RNG; the file opens in
// Python with weights_only=True; damaged files give their documented errors and nothing already
// written is lost.
#include <gtest/gtest.h>

#include <cmath>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <filesystem>
#include <fstream>

#include "trainer/checkpoint.h"
#include "trainer/checkpoint_average.h"
#include "trainer/crc32c.h"
#include "trainer/weights.h"
#include "wavetrain_build_config.h"

namespace fs = std::filesystem;

namespace wavetrain {
namespace {

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::path(::testing::TempDir()) / ("wavetrain_ckpt_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

torch::nn::Sequential model() { return torch::nn::Sequential(torch::nn::Linear(3, 4), torch::nn::BatchNorm1d(4), torch::nn::Linear(4, 1)); }

void train_step(torch::nn::Sequential& m, torch::optim::Optimizer& opt, GradScaler& scaler) {
  const at::Tensor x = at::randn({8, 3}), y = at::randn({8, 1});  // drawn from the global RNG
  opt.zero_grad();
  scaler.scale(at::mse_loss(m->forward(x), y)).backward();
  scaler.step(opt);
  scaler.update();
}

TrainingState capture(torch::nn::Sequential& m, torch::optim::Optimizer& opt, GradScaler& scaler) {
  TrainingState s;
  s.model = module_state_dict(*m);
  s.optimizer = optimizer_state(opt);
  s.scaler = scaler.state();
  s.epoch = 2;
  s.global_step = 17;
  s.batch_in_epoch = 5;
  s.rng = capture_rng();
  s.config_yaml = "trainer:\n  lr: 0.01\n";
  s.metrics = {{"val/esr", 0.125}, {"train/loss", 1.5}};
  return s;
}

TEST(Crc32c, ReferenceValues) {
  EXPECT_EQ(crc32c("123456789"), 0xE3069283u);  // the standard check value of CRC-32C
  EXPECT_EQ(crc32c(""), 0u);
  EXPECT_EQ(crc32c(std::string_view("6789"), crc32c("12345")), 0xE3069283u);  // continuing gives the same result
}

TEST(Checkpoint, ResumesExactly) {
  const fs::path dir = fresh_dir("resume");
  at::manual_seed(0);
  torch::nn::Sequential a = model();
  torch::optim::Adam adam_a(a->parameters(), torch::optim::AdamOptions(0.01));
  GradScaler scaler_a({1024.0, 2.0, 0.5, 2, true});
  for (int i = 0; i < 3; ++i) train_step(a, adam_a, scaler_a);
  Checkpoint::save((dir / "c.ckpt").string(), capture(a, adam_a, scaler_a));
  for (int i = 0; i < 2; ++i) train_step(a, adam_a, scaler_a);  // the run goes on

  at::manual_seed(123);  // a different process state, as after a restart
  torch::nn::Sequential b = model();
  torch::optim::Adam adam_b(b->parameters(), torch::optim::AdamOptions(0.5));
  GradScaler scaler_b({1024.0, 2.0, 0.5, 2, true});  // options come from the config, state from the file
  const TrainingState s = Checkpoint::load((dir / "c.ckpt").string());
  load_state_dict(*b, s.model, true, "c.ckpt");
  load_optimizer_state(adam_b, s.optimizer, "c.ckpt");
  scaler_b.load_state(*s.scaler);
  restore_rng(s.rng);
  for (int i = 0; i < 2; ++i) train_step(b, adam_b, scaler_b);

  const StateDict da = module_state_dict(*a), db = module_state_dict(*b);
  ASSERT_EQ(da.size(), db.size());
  for (size_t i = 0; i < da.size(); ++i) EXPECT_TRUE(at::equal(da[i].second, db[i].second)) << da[i].first;
  EXPECT_EQ(scaler_a.get_scale(), scaler_b.get_scale());
  EXPECT_EQ(s.epoch, 2);
  EXPECT_EQ(s.global_step, 17);
  EXPECT_EQ(s.batch_in_epoch, 5);
  EXPECT_EQ(s.config_yaml, "trainer:\n  lr: 0.01\n");
  EXPECT_EQ(s.metrics.at(0).first, "val/esr");
  EXPECT_EQ(s.metrics.at(0).second, 0.125);
  EXPECT_EQ(s.wavetrain_version, WAVETRAIN_VERSION);
}

TEST(Checkpoint, SgdMomentumAndMismatchedOptimizers) {
  const fs::path dir = fresh_dir("sgd");
  torch::nn::Sequential m = model();
  torch::optim::SGD sgd(m->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  GradScaler off({65536.0, 2.0, 0.5, 2000, false});
  train_step(m, sgd, off);
  const serialization::Value state = optimizer_state(sgd);
  torch::optim::SGD sgd2(m->parameters(), torch::optim::SGDOptions(0.3).momentum(0.9));
  load_optimizer_state(sgd2, state, "x");
  EXPECT_EQ(sgd2.param_groups()[0].options().get_lr(), 0.1);
  torch::optim::Adam adam(m->parameters(), torch::optim::AdamOptions(0.1));
  try {
    load_optimizer_state(adam, state, "x.ckpt");
    FAIL();
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "x.ckpt: optimizer state is for sgd, but the run uses adam");
  }
}

TEST(Checkpoint, AdamWWithAmsgradStateRoundTrips) {
  torch::nn::Sequential m = model();
  torch::optim::AdamW a(m->parameters(), torch::optim::AdamWOptions(0.01).amsgrad(true).weight_decay(0.1));
  GradScaler off({65536.0, 2.0, 0.5, 2000, false});
  for (int i = 0; i < 2; ++i) train_step(m, a, off);
  const serialization::Value saved = optimizer_state(a);
  torch::optim::AdamW b(m->parameters(), torch::optim::AdamWOptions(0.5).amsgrad(true));
  load_optimizer_state(b, saved, "x");
  const serialization::Value again = optimizer_state(b);
  const auto& sa = saved.find("state")->entries();
  const auto& sb = again.find("state")->entries();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].second.find("step")->as_int(), 2);
    EXPECT_EQ(sb[i].second.find("step")->as_int(), 2);
    for (const char* k : {"exp_avg", "exp_avg_sq", "max_exp_avg_sq"})
      EXPECT_TRUE(at::equal(sa[i].second.find(k)->as_tensor(), sb[i].second.find(k)->as_tensor())) << k;
  }
  EXPECT_EQ(b.param_groups()[0].options().get_lr(), 0.01);
}

std::string error_loading(const fs::path& p) {
  try {
    Checkpoint::load(p.string());
  } catch (const std::exception& e) {
    return e.what();
  }
  return "(loaded)";
}

TEST(Checkpoint, DamagedFilesGiveTheirErrors) {
  const fs::path dir = fresh_dir("damaged");
  torch::nn::Sequential m = model();
  torch::optim::Adam adam(m->parameters());
  GradScaler scaler;
  train_step(m, adam, scaler);
  const fs::path good = dir / "good.ckpt";
  Checkpoint::save(good.string(), capture(m, adam, scaler));
  std::ifstream in(good, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());

  auto write = [&](const std::string& name, const std::string& content) {
    std::ofstream(dir / name, std::ios::binary) << content;
    return dir / name;
  };
  EXPECT_EQ(error_loading(write("empty.ckpt", "")), (dir / "empty.ckpt").string() +
                                                        ": the file is empty (not a wavetrain checkpoint)");
  EXPECT_EQ(error_loading(write("half.ckpt", bytes.substr(0, bytes.size() / 2)))
                .rfind((dir / "half.ckpt").string() + ": not a readable checkpoint (truncated, corrupted, or not a zip", 0),
            0u);
  EXPECT_EQ(error_loading(write("text.ckpt", "epoch: 3\n")).rfind((dir / "text.ckpt").string() + ": not a readable", 0),
            0u);
  // One flipped byte inside the first weight matrix's data: LibTorch checks no CRC, ours catches it.
  const at::Tensor w = m->named_parameters()["0.weight"].contiguous();
  const std::string raw(static_cast<const char*>(w.data_ptr()), w.numel() * w.element_size());
  std::string flipped = bytes;
  const size_t at = bytes.find(raw) + 5;
  ASSERT_NE(bytes.find(raw), std::string::npos);
  flipped[at] = static_cast<char>(flipped[at] ^ 0x5A);
  const std::string flipped_error = error_loading(write("flipped.ckpt", flipped));
  EXPECT_EQ(flipped_error.rfind((dir / "flipped.ckpt").string() + ": checksum mismatch (stored ", 0), 0u)
      << flipped_error;
  EXPECT_EQ(error_loading(dir / "missing.ckpt").rfind((dir / "missing.ckpt").string() + ": cannot open", 0), 0u);
  // A plain state dict is a PyTorch file, but not a checkpoint.
  save_weights((dir / "weights.pt").string(), *m);
  EXPECT_EQ(error_loading(dir / "weights.pt").find("a PyTorch file but not a wavetrain checkpoint"),
            (dir / "weights.pt").string().size() + 2);
  EXPECT_EQ(error_loading(good), "(loaded)");
}

TEST(Checkpoint, AFailedSaveLeavesTheOldFileIntact) {
  const fs::path dir = fresh_dir("atomic");
  torch::nn::Sequential m = model();
  torch::optim::Adam adam(m->parameters());
  GradScaler scaler;
  train_step(m, adam, scaler);
  const fs::path path = dir / "last.ckpt";
  Checkpoint::save(path.string(), capture(m, adam, scaler));
  TrainingState bad = capture(m, adam, scaler);
  bad.config_yaml = std::string("bad \xff utf-8");  // cannot be pickled as a Python str
  EXPECT_ANY_THROW(Checkpoint::save(path.string(), bad));
  EXPECT_EQ(Checkpoint::load(path.string()).global_step, 17);
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
}

TEST(Checkpoint, InfoListsStepMetricsAndTensors) {
  const fs::path dir = fresh_dir("info");
  torch::nn::Sequential m = model();
  torch::optim::Adam adam(m->parameters());
  GradScaler scaler;
  train_step(m, adam, scaler);
  Checkpoint::save((dir / "c.ckpt").string(), capture(m, adam, scaler));
  const std::string info = Checkpoint::info((dir / "c.ckpt").string());
  EXPECT_NE(info.find("epoch 2, global step 17, batch in epoch 5"), std::string::npos) << info;
  EXPECT_NE(info.find("metrics: val/esr=0.125 train/loss=1.5"), std::string::npos) << info;
  EXPECT_NE(info.find("optimizer: adam"), std::string::npos) << info;
  EXPECT_NE(info.find("model: 9 tensors"), std::string::npos) << info;
  EXPECT_NE(info.find("1.num_batches_tracked"), std::string::npos) << info;
}

TEST(Checkpoint, TrainingTimeAndEarlyStoppingRoundTrip) {
  const fs::path dir = fresh_dir("loop_state");
  torch::nn::Sequential m = model();
  torch::optim::Adam adam(m->parameters());
  GradScaler scaler;
  TrainingState s = capture(m, adam, scaler);
  s.train_seconds = 12.5;
  s.early_stopping = {"val/esr", 0.25, 2, "patience"};
  Checkpoint::save((dir / "c.ckpt").string(), s);
  const TrainingState back = Checkpoint::load((dir / "c.ckpt").string());
  EXPECT_EQ(back.train_seconds, 12.5);
  EXPECT_EQ(back.early_stopping.monitor, "val/esr");
  EXPECT_EQ(back.early_stopping.best, 0.25);
  EXPECT_EQ(back.early_stopping.wait, 2);
  EXPECT_EQ(back.early_stopping.stopped, "patience");
  EXPECT_NE(Checkpoint::info((dir / "c.ckpt").string()).find("batch in epoch 5, trained 12.5 s"), std::string::npos);

  s.early_stopping = {"val/esr", NAN, 0, ""};  // before the first validation
  Checkpoint::save((dir / "c.ckpt").string(), s);
  EXPECT_TRUE(std::isnan(Checkpoint::load((dir / "c.ckpt").string()).early_stopping.best));
  s.early_stopping = {};  // early stopping off
  Checkpoint::save((dir / "c.ckpt").string(), s);
  EXPECT_EQ(Checkpoint::load((dir / "c.ckpt").string()).early_stopping.monitor, "");
}

TEST(Checkpoint, PythonOpensIt) {
  if (std::system((std::string(WAVETRAIN_TEST_PYTHON) + " -c 'import torch' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << WAVETRAIN_TEST_PYTHON << " cannot import torch: install Debian's python3-torch";
  const fs::path dir = fresh_dir("python");
  torch::nn::Sequential m = model();
  torch::optim::Adam adam(m->parameters());
  GradScaler scaler;
  train_step(m, adam, scaler);
  Checkpoint::save((dir / "c.ckpt").string(), capture(m, adam, scaler));
  const std::string script =
      // torch 1.13's weights_only loader lacks the opcode for floats (BINFLOAT); 2.x has it.
      "import torch; c = torch.load('" + (dir / "c.ckpt").string() +
      "', weights_only=int(torch.__version__.split('.')[0]) >= 2); "
      "assert c['format'] == 'wavetrain-checkpoint' and c['global_step'] == 17, c.keys(); "
      "assert list(c['model'])[:2] == ['0.weight', '0.bias']; "
      "assert c['optimizer']['state'][0]['exp_avg'].shape == (4, 3); "
      "assert c['metrics']['val/esr'] == 0.125";
  EXPECT_EQ(std::system((std::string(WAVETRAIN_TEST_PYTHON) + " -c \"" + script + "\"").c_str()), 0);
}

// Averaging the last epoch checkpoints (icefall's --avg): the right files are picked (per-epoch
// ones only, up to the step, the newest N), floating tensors are their mean, counters the last's,
// and a missing or mismatched checkpoint is named.
TEST(CheckpointAverage, PicksTheLastEpochCheckpointsAndAveragesTheirWeights) {
  const fs::path dir = fresh_dir("average");
  const auto save = [&](const std::string& name, double value, int64_t count) {
    TrainingState s;
    s.model = {{"w", at::full({2, 3}, value, at::kFloat)}, {"b", at::full({3}, 2 * value, at::kDouble)},
               {"n", at::full({}, count, at::kLong)}};
    Checkpoint::save((dir / name).string(), s);
  };
  save("epoch=1-step=100.ckpt", 1.0, 1);
  save("epoch=2-step=200.ckpt", 2.0, 2);
  save("epoch=3-step=300.ckpt", 4.0, 3);
  save("epoch=3-step=300-val_wer=5.0.ckpt", 100.0, 9);  // a top-k copy: not an epoch checkpoint
  save("epoch=4-step=400.ckpt", 8.0, 4);                // past the step asked for
  save("best.ckpt", 4.0, 3);
  const std::vector<std::string> files = epoch_checkpoints_up_to(dir.string(), 300, 2);
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(fs::path(files[0]).filename(), "epoch=2-step=200.ckpt");
  EXPECT_EQ(fs::path(files[1]).filename(), "epoch=3-step=300.ckpt");
  std::vector<std::string> used;
  const StateDict avg = averaged_model(dir.string(), 300, 3, &used);
  ASSERT_EQ(used.size(), 3u);
  ASSERT_EQ(avg.size(), 3u);
  EXPECT_EQ(avg[0].first, "w");
  EXPECT_EQ(avg[0].second.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::allclose(avg[0].second, at::full({2, 3}, 7.0 / 3.0, at::kFloat)));
  EXPECT_DOUBLE_EQ(avg[1].second[0].item<double>(), 14.0 / 3.0);
  EXPECT_EQ(avg[2].second.item<int64_t>(), 3);  // the last's count
  try {
    epoch_checkpoints_up_to(dir.string(), 300, 4);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("it has 3 (epoch=1-step=100.ckpt, epoch=2-step=200.ckpt, epoch=3-step=300.ckpt)"), std::string::npos) << what;
    EXPECT_NE(what.find("trainer.checkpoint.every_n_epochs=1"), std::string::npos) << what;
  }
  TrainingState other;
  other.model = {{"w", at::zeros({3, 2}, at::kFloat)}, {"b", at::zeros({3}, at::kDouble)}, {"n", at::zeros({}, at::kLong)}};
  Checkpoint::save((dir / "epoch=5-step=500.ckpt").string(), other);
  try {
    averaged_model(dir.string(), 500, 2);
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("epoch=5-step=500.ckpt: w is Float [3, 2], expected Float [2, 3]"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace wavetrain
