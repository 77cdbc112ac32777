// The ASR model: sizes, shapes, masking, the predictor's context, rotary positions, greedy search,
// WER, and the pruned loss's warm-up.
#include <gtest/gtest.h>

#include <torch/nn/init.h>

#include "experiments/asr/asr_task.h"
#include "experiments/asr/conformer.h"
#include "experiments/asr/decode.h"
#include "experiments/asr/transducer.h"
#include "experiments/asr/transducer_loss.h"
#include "experiments/asr/wer.h"

namespace asr = wavetrain::experiments::asr;

TEST(AsrModel, PresetSizes) {
  for (const auto& [preset, lo, hi] : {std::tuple<const char*, int64_t, int64_t>{"tiny", 1'000'000, 2'000'000}, {"small", 4'000'000, 6'000'000}}) {
    asr::TransducerConfig c = asr::transducer_preset(preset);
    c.vocab_size = 500;
    const asr::Transducer m(c);
    EXPECT_GE(m->parameter_count(), lo) << preset;
    EXPECT_LE(m->parameter_count(), hi) << preset;
  }
  EXPECT_THROW(asr::transducer_preset("huge"), std::invalid_argument);
  asr::TransducerConfig c = asr::transducer_preset("tiny");
  c.encoder.d_model = 130;  // not 4 heads of an even size
  EXPECT_THROW(c.validate(), std::invalid_argument);
}

TEST(AsrModel, SubsamplingLengths) {
  EXPECT_EQ(asr::subsampled_frames(6), 0);
  EXPECT_EQ(asr::subsampled_frames(7), 1);
  EXPECT_EQ(asr::subsampled_frames(10), 1);  // 3x3 stride 2 twice: 10 -> 4 -> 1
  EXPECT_EQ(asr::subsampled_frames(11), 2);
  EXPECT_EQ(asr::subsampled_frames(100), 24);
  const at::Tensor t = asr::subsampled_frames(at::tensor({3, 7, 10, 100, 301}, at::kLong));
  EXPECT_TRUE(at::equal(t, at::tensor({0, 1, 1, 24, 74}, at::kLong)));
  asr::ConformerConfig c;
  c.num_layers = 1;
  asr::Conformer enc(c);
  const auto [out, lengths] = enc->forward(at::randn({2, 100, 80}), at::tensor({100, 61}, at::kLong));
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 24, 128}));
  EXPECT_TRUE(at::equal(lengths, at::tensor({24, 14}, at::kLong)));
  EXPECT_THROW(enc->forward(at::randn({2, 100, 40}), at::tensor({100, 61}, at::kLong)), std::invalid_argument);
}

// An utterance's encoding does not depend on what it is batched with: padding reaches neither the
// attention (masked keys) nor the convolution (zeroed before it).
TEST(AsrModel, PaddingDoesNotLeakIntoRealFrames) {
  at::manual_seed(0);
  asr::ConformerConfig c;
  c.num_layers = 2;
  asr::Conformer enc(c);
  enc->eval();
  at::NoGradGuard no_grad;
  const at::Tensor short_utt = at::randn({1, 57, 80}), long_utt = at::randn({1, 120, 80});
  const auto [alone, alone_len] = enc->forward(short_utt, at::tensor({57}, at::kLong));
  at::Tensor batch = at::zeros({2, 120, 80});
  batch[0].narrow(0, 0, 57).copy_(short_utt[0]);
  batch[0].narrow(0, 57, 63).fill_(7.0);  // padding with a value that would show
  batch[1].copy_(long_utt[0]);
  const auto [both, both_len] = enc->forward(batch, at::tensor({57, 120}, at::kLong));
  const int64_t n = alone_len[0].item<int64_t>();
  ASSERT_EQ(n, 13);
  EXPECT_TRUE(at::allclose(both[0].narrow(0, 0, n), alone[0], 1e-5, 1e-5))
      << (both[0].narrow(0, 0, n) - alone[0]).abs().max().item<double>();
}

// Rotary positions make q.k depend on the distance between positions, not on where they are.
TEST(AsrModel, RotaryDotProductsDependOnDistanceOnly) {
  at::manual_seed(1);
  const at::Tensor q = at::randn({1, 1, 1, 16}).expand({1, 1, 20, 16}), k = at::randn({1, 1, 1, 16}).expand({1, 1, 20, 16});
  const at::Tensor scores = at::matmul(asr::rotary(q), asr::rotary(k).transpose(2, 3))[0][0];  // [20][20]
  for (int i = 0; i + 3 < 20; ++i) {
    EXPECT_NEAR(scores[i][i + 3].item<double>(), scores[0][3].item<double>(), 1e-4);
    EXPECT_NEAR(scores[i + 3][i].item<double>(), scores[3][0].item<double>(), 1e-4);
  }
  EXPECT_GT(std::abs(scores[0][3].item<double>() - scores[0][0].item<double>()), 1e-3);  // it does vary with distance
  EXPECT_TRUE(at::allclose(asr::rotary(q).select(2, 0), q.select(2, 0)));  // position 0 is not rotated
}

TEST(AsrModel, StatelessPredictorSeesOnlyItsContext) {
  at::manual_seed(2);
  asr::StatelessPredictor p(50, 32, 2);
  p->eval();
  at::NoGradGuard no_grad;
  const at::Tensor tokens = at::tensor({0, 5, 9, 12, 7, 3}, at::kLong).view({1, 6});
  const at::Tensor out = p->forward(tokens);
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{1, 6, 32}));
  at::Tensor changed = tokens.clone();
  changed[0][2] = 40;  // token 2 is context of outputs 2 and 3 only
  const at::Tensor out2 = p->forward(changed);
  for (int u = 0; u < 6; ++u) {
    const bool same = at::equal(out[0][u], out2[0][u]);
    EXPECT_EQ(same, u != 2 && u != 3) << "output " << u;
  }
  // Decoding's form: the last two tokens alone give the same output.
  const at::Tensor last = p->forward(tokens.narrow(1, 3, 2), /*pad=*/false);
  EXPECT_TRUE(at::allclose(last[0][0], out[0][4]));
  // Blank (0) has a zero embedding: the start context [blank, blank] gives relu(0) = 0.
  EXPECT_EQ(p->forward(at::zeros({1, 2}, at::kLong), false).abs().max().item<double>(), 0.0);
}

TEST(AsrModel, GreedySearchFollowsTheJoinerAndTheLengths) {
  asr::TransducerConfig c = asr::transducer_preset("tiny");
  c.vocab_size = 10;
  c.encoder.num_layers = 1;
  asr::Transducer m(c);
  at::NoGradGuard no_grad;
  // The joiner's output layer ignores its input: token 4 always wins over blank.
  auto params = m->joiner->named_parameters();
  params["output.weight"].zero_();
  params["output.bias"].zero_();
  params["output.bias"][4] = 1.0;
  const at::Tensor enc = at::randn({2, 6, 128});
  auto hyps = asr::greedy_search(*m, enc, at::tensor({6, 3}, at::kLong));
  EXPECT_EQ(hyps[0].tokens, std::vector<int>(6, 4));
  EXPECT_EQ(hyps[1].tokens, std::vector<int>(3, 4));
  hyps = asr::greedy_search(*m, enc, at::tensor({6, 3}, at::kLong), 3);
  EXPECT_EQ(hyps[0].tokens.size(), 18u);
  EXPECT_EQ(hyps[1].tokens.size(), 9u);
  params["output.bias"][0] = 2.0;  // now blank wins: nothing is emitted
  hyps = asr::greedy_search(*m, enc, at::tensor({6, 3}, at::kLong));
  EXPECT_TRUE(hyps[0].tokens.empty() && hyps[1].tokens.empty());
}

TEST(AsrModel, WordErrors) {
  asr::WordErrors e = asr::word_errors("set an alarm for seven", "set the alarm seven");
  EXPECT_EQ(e.substitutions, 1);
  EXPECT_EQ(e.deletions, 1);
  EXPECT_EQ(e.insertions, 0);
  EXPECT_EQ(e.reference_words, 5);
  EXPECT_DOUBLE_EQ(e.rate(), 0.4);
  e = asr::word_errors("call john", "");
  EXPECT_EQ(e.deletions, 2);
  e = asr::word_errors("", "hello there");
  EXPECT_EQ(e.insertions, 2);
  EXPECT_EQ(e.reference_words, 0);
  e = asr::word_errors("a b c", "x a b c");
  EXPECT_EQ(e.errors(), 1);
  EXPECT_EQ(e.insertions, 1);
  e += asr::word_errors("a b c", "a b c");
  EXPECT_EQ(e.reference_words, 6);
  EXPECT_DOUBLE_EQ(e.rate(), 1.0 / 6);
}

TEST(AsrModel, PrunedLossWarmUpFollowsIcefall) {
  const auto at_step = [](int64_t s) { return asr::loss_scales(s, 2000, 0.5); };
  EXPECT_DOUBLE_EQ(at_step(0).first, 1.0);
  EXPECT_DOUBLE_EQ(at_step(0).second, 0.1);
  EXPECT_DOUBLE_EQ(at_step(500).first, 0.875);
  EXPECT_DOUBLE_EQ(at_step(500).second, 0.325);
  EXPECT_DOUBLE_EQ(at_step(1000).first, 0.75);
  EXPECT_DOUBLE_EQ(at_step(1000).second, 0.55);
  EXPECT_DOUBLE_EQ(at_step(2000).first, 0.5);
  EXPECT_DOUBLE_EQ(at_step(2000).second, 1.0);
  EXPECT_DOUBLE_EQ(at_step(5000).first, 0.5);
  EXPECT_DOUBLE_EQ(asr::loss_scales(0, 0, 0.5).first, 0.5);  // no warm-up
}

// CTC places each token on a frame of its own and a blank between repeats, so an utterance with
// more tokens than that fits has an infinite CTC loss; ATen's backward then gives it NaN gradients
// even where the loss is masked out (one such utterance made every weight of a recipe run NaN). The
// CTC term of such an utterance is 0 with a zero gradient, and it still trains the transducer, which
// emits any number of symbols per frame.
TEST(AsrModel, AnUtteranceTooLongForCtcKeepsEveryGradientFinite) {
  asr::TransducerConfig c = asr::transducer_preset("tiny");
  c.vocab_size = 12;
  c.encoder.num_layers = 1;
  c.ctc_head = true;
  at::manual_seed(21);
  asr::Transducer m(c);
  const at::Tensor enc = at::randn({2, 6, c.encoder.d_model}).requires_grad_(true);
  const at::Tensor frames = at::tensor({6, 6}, at::kLong);
  // Utterance 0: 4 tokens in 6 frames. Utterance 1: 8 tokens, more than its 6 frames hold.
  const at::Tensor tokens = at::tensor({3, 5, 7, 2, 0, 0, 0, 0, 4, 4, 9, 1, 6, 6, 8, 2}, at::kLong).view({2, 8});
  const at::Tensor counts = at::tensor({4, 8}, at::kLong);
  asr::TransducerLossOptions o;
  o.ctc_scale = 0.2;
  const asr::TransducerLoss l = asr::transducer_loss(*m, enc, frames, tokens, counts, o);
  EXPECT_EQ(l.nonfinite, 0);
  EXPECT_EQ(l.frames, 12.0);
  ASSERT_TRUE(l.ctc.defined());
  (l.simple + l.pruned + o.ctc_scale * l.ctc).backward();
  EXPECT_TRUE(at::isfinite(enc.grad()).all().item<bool>());
  for (const auto& p : m->named_parameters()) {
    if (!p.value().grad().defined()) continue;
    EXPECT_TRUE(at::isfinite(p.value().grad()).all().item<bool>()) << p.key();
  }
  // The CTC term is utterance 0's alone; the transducer losses are both utterances'.
  const asr::TransducerLoss first = asr::transducer_loss(*m, enc.narrow(0, 0, 1), frames.narrow(0, 0, 1), tokens.narrow(0, 0, 1),
                                                         counts.narrow(0, 0, 1), o);
  EXPECT_NEAR(l.ctc.item<double>(), first.ctc.item<double>(), 1e-5 * first.ctc.item<double>());
  EXPECT_GT(first.ctc.item<double>(), 0.0);
  EXPECT_GT(l.pruned.item<double>(), first.pruned.item<double>() + 1.0);
}
