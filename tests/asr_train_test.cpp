// `wavetrain train +experiment=asr` as a user runs it, on a corpus the test synthesises: a few
// steps lower the loss, a killed run resumes to bitwise-identical weights (its batches trained as
// two parts at once, trainer.cpu_batch_parts), bad stores are named; the `small` variant is the
// recipe with two keys changed.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "data/hdf5_store.h"
#include "experiments/asr/tokenizer.h"
#include "tests/run_process.h"
#include "trainer/checkpoint.h"

namespace fs = std::filesystem;
using wavetrain::testing::ProcessResult;

namespace {

fs::path fresh_asr_train(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_asr_train_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

ProcessResult wavetrain_in(const fs::path& dir, const std::string& args, const std::string& env = "") {
  return wavetrain::testing::run_shell("cd '" + dir.string() + "' && env " + env + " '" WAVETRAIN_BINARY "' " + args);
}

// A model small enough for a test: one block of width 32.
const std::string kSmallModel =
    "model.d_model=32 model.ff_dim=64 model.num_layers=1 model.predictor_dim=32 model.joiner_dim=32 "
    "model.subsampling_channels=8 ";

// A 24 + 6 utterance corpus in dir/corpus with a 40-piece tokenizer, as a user makes one.
::testing::AssertionResult make_corpus(const fs::path& dir, int seed) {
  for (const std::string& args : {"data asr-synth -o corpus --train 24 --dev 6 --test 0 --seed " + std::to_string(seed),
                                  std::string("data asr-bpe corpus/corpus.h5 --vocab 40")}) {
    const ProcessResult r = wavetrain_in(dir, args);
    if (r.exit_code != 0) return ::testing::AssertionFailure() << "wavetrain " << args << ": " << r.err;
  }
  return ::testing::AssertionSuccess();
}

// The training losses of metrics.csv, in step order.
std::vector<double> train_losses(const fs::path& csv_path) {
  std::ifstream csv(csv_path);
  std::string header, line;
  std::getline(csv, header);
  std::vector<std::string> columns;
  std::stringstream hs(header);
  for (std::string c; std::getline(hs, c, ',');) columns.push_back(c);
  const size_t col = static_cast<size_t>(std::find(columns.begin(), columns.end(), "train/loss") - columns.begin());
  std::vector<double> losses;
  while (std::getline(csv, line)) {
    std::stringstream ls(line);
    std::string cell;
    for (size_t i = 0; std::getline(ls, cell, ','); ++i)
      if (i == col && !cell.empty()) losses.push_back(std::stod(cell));
  }
  return losses;
}

}  // namespace

TEST(AsrTrain, AFewStepsLowerTheLossAndAKilledRunResumesBitwise) {
  const fs::path dir = fresh_asr_train("steps");
  ASSERT_TRUE(make_corpus(dir, 1));
  ProcessResult r;

  // 3 batches of 8 per epoch, 4 epochs: 12 steps; constant loss scales (no warm-up) so that the
  // loss values are comparable from the first step.
  const std::string common = "train +experiment=asr asr.data=corpus/corpus.h5 " + kSmallModel +
                             "trainer.batch_size=8 trainer.max_epochs=4 trainer.seed=3 optimizer.lr=0.003 "
                             "scheduler.name=constant asr.loss.warm_step=0 trainer.log_every_n_steps=1 "
                             "trainer.checkpoint.every_n_steps=5 trainer.cpu_batch_parts=2 ";
  r = wavetrain_in(dir, common + "run.dir=whole");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<double> losses = train_losses(dir / "whole/metrics.csv");
  ASSERT_EQ(losses.size(), 12u);
  const double first = (losses[0] + losses[1] + losses[2]) / 3, last = (losses[9] + losses[10] + losses[11]) / 3;
  EXPECT_LT(last, 0.8 * first) << "first steps " << first << ", last steps " << last;
  const nlohmann::json result = nlohmann::json::parse(std::ifstream(dir / "whole/result.json"));
  EXPECT_TRUE(result["last"].contains("val/wer")) << result.dump();
  EXPECT_GE(result["last"]["val/wer"].get<double>(), 0.0);
  EXPECT_TRUE(result.contains("data_wait_seconds"));
  std::ifstream log_file(dir / "whole/wavetrain.log");
  const std::string log((std::istreambuf_iterator<char>(log_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(log.find("data: the training loop waited"), std::string::npos) << log;
  EXPECT_NE(log.find("training each batch as 2 parts at once"), std::string::npos) << log;

  // Killed at step 7 (last checkpoint at step 5, mid-epoch 2), then resumed.
  r = wavetrain_in(dir, common + "run.dir=killed", "WAVETRAIN_FAULT_KILL_AT_STEP=7");
  EXPECT_EQ(r.exit_code, 128 + 9) << r.err;
  r = wavetrain_in(dir, common + "run.dir=killed trainer.resume=last");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const wavetrain::TrainingState whole = wavetrain::Checkpoint::load((dir / "whole/checkpoints/last.ckpt").string());
  const wavetrain::TrainingState resumed = wavetrain::Checkpoint::load((dir / "killed/checkpoints/last.ckpt").string());
  EXPECT_EQ(resumed.global_step, 12);
  ASSERT_EQ(resumed.model.size(), whole.model.size());
  for (size_t i = 0; i < whole.model.size(); ++i)
    EXPECT_TRUE(at::equal(resumed.model[i].second, whole.model[i].second)) << whole.model[i].first;
  // Audio read from the store every time (asr.cache_audio_mb=0) trains the same run as the audio
  // decoded once and kept (the default): nothing downstream writes into the kept tensors.
  r = wavetrain_in(dir, common + "run.dir=uncached asr.cache_audio_mb=0");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const wavetrain::TrainingState uncached = wavetrain::Checkpoint::load((dir / "uncached/checkpoints/last.ckpt").string());
  ASSERT_EQ(uncached.model.size(), whole.model.size());
  for (size_t i = 0; i < whole.model.size(); ++i)
    EXPECT_TRUE(at::equal(uncached.model[i].second, whole.model[i].second)) << whole.model[i].first;
  r = wavetrain_in(dir, common + "run.dir=bad_cache asr.cache_audio_mb=-1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("asr.cache_audio_mb must be >= 0 (0: off), got -1"), std::string::npos) << r.err;

  // With the CTC head, its loss joins in and is logged.
  r = wavetrain_in(dir, common + "run.dir=ctc trainer.max_epochs=1 model.ctc_head=true asr.loss.ctc_scale=0.2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream ctc_csv(dir / "ctc/metrics.csv");
  std::string ctc_header;
  std::getline(ctc_csv, ctc_header);
  EXPECT_NE(ctc_header.find("train/ctc_loss"), std::string::npos) << ctc_header;
  EXPECT_EQ(train_losses(dir / "ctc/metrics.csv").size(), 3u);
  r = wavetrain_in(dir, common + "run.dir=ctc2 trainer.max_epochs=1 model.ctc_head=false asr.loss.ctc_scale=0.2");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("asr.loss.ctc_scale > 0 needs the CTC head: model.ctc_head=true"), std::string::npos) << r.err;

  // The full RNN-T loss instead of the pruned one: the joiner on the whole grid.
  r = wavetrain_in(dir, common + "run.dir=full trainer.max_epochs=2 asr.loss.type=full");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<double> full = train_losses(dir / "full/metrics.csv");
  ASSERT_EQ(full.size(), 6u);
  EXPECT_LT(full[5], full[0]);
  // The pruned loss bounds the full one from above (it sums over fewer alignments), so the first
  // step's loss, from the same initial weights and batch, is no smaller pruned than full.
  EXPECT_GE(losses[0], full[0] - 1e-6);
  r = wavetrain_in(dir, common + "run.dir=bad_type asr.loss.type=ctc");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("asr.loss.type must be pruned or full, got 'ctc'"), std::string::npos) << r.err;

  // The CMVN statistics travel in the checkpoint.
  bool has_cmvn = false;
  for (const auto& [name, t] : whole.model) has_cmvn |= name == "feature_mean" && t.abs().sum().item<double>() > 0;
  EXPECT_TRUE(has_cmvn);
}

TEST(AsrTrain, TwoRanksEqualOneRankTrainingTheSameBatchesAsTwoParts) {
  // Rank r of 2 with batch 4 trains the r-th half of every global batch of 8, and the ranks
  // average their gradients: the same halves and the same average as one rank cutting a batch of 8
  // into 2 parts (each part's loss / 2, summed). Without dropout (the ranks' generators differ from
  // the parts' streams) and without bucketing (which depends on the batch size), the weights agree.
  const fs::path dir = fresh_asr_train("ranks");
  ASSERT_TRUE(make_corpus(dir, 2));
  ProcessResult r;
  const std::string common = "train +experiment=asr asr.data=corpus/corpus.h5 " + kSmallModel +
                             "model.dropout=0 asr.bucket_windows=0 trainer.max_epochs=2 trainer.seed=4 optimizer.lr=0.003 "
                             "scheduler.name=constant asr.loss.warm_step=0 ";
  r = wavetrain_in(dir, common + "trainer.devices=2 trainer.batch_size=4 trainer.cpu_batch_parts=1 run.dir=ranks");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = wavetrain_in(dir, common + "trainer.batch_size=8 trainer.cpu_batch_parts=2 run.dir=parts");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const wavetrain::TrainingState ranks = wavetrain::Checkpoint::load((dir / "ranks/checkpoints/last.ckpt").string());
  const wavetrain::TrainingState parts = wavetrain::Checkpoint::load((dir / "parts/checkpoints/last.ckpt").string());
  EXPECT_EQ(ranks.global_step, 6);
  EXPECT_EQ(parts.global_step, 6);
  ASSERT_EQ(ranks.model.size(), parts.model.size());
  for (size_t i = 0; i < ranks.model.size(); ++i)
    EXPECT_LE((ranks.model[i].second - parts.model[i].second).abs().max().item<double>(), 1e-4) << ranks.model[i].first;
  // And not trivially: training moved the weights by much more than that.
  r = wavetrain_in(dir, common + "trainer.batch_size=8 trainer.cpu_batch_parts=2 trainer.max_epochs=1 run.dir=half");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const wavetrain::TrainingState half = wavetrain::Checkpoint::load((dir / "half/checkpoints/last.ckpt").string());
  double moved = 0;
  for (size_t i = 0; i < half.model.size(); ++i)
    moved = std::max(moved, (half.model[i].second - parts.model[i].second).abs().max().item<double>());
  EXPECT_GT(moved, 1e-3);
}

TEST(AsrTrain, BadStoresAreNamed) {
  const fs::path dir = fresh_asr_train("bad");
  // An utterance of 0.05 s: fewer feature frames than the subsampling needs.
  {
    wavetrain::data::DatasetWriter w((dir / "short.h5").string());
    at::manual_seed(0);
    const auto add = [&](const std::string& split, int64_t samples, const std::string& text, const std::string& id) {
      at::Tensor t = at::empty({static_cast<int64_t>(text.size())}, at::kByte);
      std::copy(text.begin(), text.end(), t.data_ptr<uint8_t>());
      w.add(split, {{"audio", at::randn({samples}) * 0.1}, {"text", t}}, id);
    };
    for (int i = 0; i < 20; ++i) add("train", 16000, "call sarah at nine and then call peter at ten", "u" + std::to_string(i));
    add("train", 800, "hi", "tiny-one");
    add("dev", 16000, "call sarah", "d0");
    w.finish();
  }
  wavetrain::experiments::asr::TokenizerTraining t;
  t.store = (dir / "short.h5").string();
  t.vocab_size = 20;
  wavetrain::experiments::asr::train_tokenizer(t);
  ProcessResult r = wavetrain_in(dir, "train +experiment=asr asr.data=short.h5 " + kSmallModel + "trainer.max_steps=1");
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("short.h5 split 'train' item 20 (tiny-one): 800 samples (0.050 s) give"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("needs at least 7"), std::string::npos) << r.err;
  // With data.skip_bad_items it is left out with a warning, and training runs.
  r = wavetrain_in(dir, "train +experiment=asr asr.data=short.h5 " + kSmallModel +
                            "trainer.max_steps=1 data.skip_bad_items=true trainer.batch_size=4");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("warning: short.h5 split 'train' item 20 (tiny-one)"), std::string::npos) << r.err;

  // A store without transcripts.
  {
    wavetrain::data::DatasetWriter w((dir / "audio_only.h5").string());
    w.add("train", {{"audio", at::zeros({16000})}});
    w.add("dev", {{"audio", at::zeros({16000})}});
    w.finish();
  }
  r = wavetrain_in(dir, "train +experiment=asr asr.data=audio_only.h5 asr.tokenizer=bpe.model trainer.max_steps=1");
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("audio_only.h5: split 'train' has no 'text' field (no transcripts)"), std::string::npos) << r.err;
  // No tokenizer beside the store.
  fs::create_directories(dir / "elsewhere");
  fs::copy_file(dir / "short.h5", dir / "elsewhere/short.h5");
  r = wavetrain_in(dir, "train +experiment=asr asr.data=elsewhere/short.h5 trainer.max_steps=1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("elsewhere/bpe.model: no such tokenizer model"), std::string::npos) << r.err;
}

// The `small` variant is the recipe with two keys changed, as its file says: a mistake in its
// defaults list (a missing `asr`, `_self_` first) would lose or reorder the recipe's keys.
TEST(AsrTrain, TheSmallVariantIsTheRecipeWithTheSmallModelAndHalfTheLearningRate) {
  const fs::path dir = fresh_asr_train("small_variant");
  // Each line of the composed config, named by the section it is in: "optimizer/  lr: 0.002".
  const auto composed = [&](const std::string& experiment) {
    const ProcessResult r = wavetrain_in(dir, "train +experiment=" + experiment + " asr.data=x.h5 --cfg job");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> lines;
    std::istringstream in(r.out);
    std::string section;
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line[0] != ' ') section = line.substr(0, line.find(':'));
      lines.push_back(section + "/" + line);
    }
    return lines;
  };
  const std::vector<std::string> recipe = composed("asr"), small = composed("asr_small");
  ASSERT_EQ(recipe.size(), small.size());
  ASSERT_GT(recipe.size(), 100u);
  std::vector<std::string> changed;
  for (size_t i = 0; i < recipe.size(); ++i)
    if (recipe[i] != small[i]) changed.push_back(recipe[i] + " -> " + small[i]);
  EXPECT_EQ(changed, (std::vector<std::string>{"optimizer/  lr: 0.002 -> optimizer/  lr: 0.001",
                                               "model/  preset: tiny -> model/  preset: small"}));
}
