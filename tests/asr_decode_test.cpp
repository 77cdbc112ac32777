// Decoding (experiments/asr/decode.h): greedy search and modified beam search on joiners whose
// best path is known, beam 1 against greedy, batched against one utterance at a time.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "experiments/asr/decode.h"

namespace wavetrain {
namespace {

namespace asr = experiments::asr;

asr::Transducer small_model(int64_t vocab) {
  asr::TransducerConfig c = asr::transducer_preset("tiny");
  c.vocab_size = vocab;
  c.encoder.num_layers = 1;
  at::manual_seed(7);
  return asr::Transducer(c);
}

// The joiner's output ignores its input: every frame gives the same distribution `p`.
void fix_distribution(asr::Transducer& m, const std::vector<double>& p) {
  at::NoGradGuard no_grad;
  auto params = m->joiner->named_parameters();
  params["output.weight"].zero_();
  for (size_t v = 0; v < p.size(); ++v) params["output.bias"][static_cast<int64_t>(v)] = std::log(p[v]);
}

// Two frames of blank 0.4, a 0.35, b 0.25. Greedy search takes blank twice: "" (probability 0.16).
// The most probable sequence is "a": blank then a (0.14) plus a then blank (0.14) = 0.28, above
// "" (0.16), "b" (0.20) and "aa" (0.1225). Beam 4 keeps both paths to "a" and merges them.
TEST(AsrDecode, BeamSearchFindsTheSequenceGreedySearchMisses) {
  asr::Transducer m = small_model(3);
  fix_distribution(m, {0.4, 0.35, 0.25});
  const at::Tensor enc = at::randn({1, 2, 128}), lengths = at::tensor({2}, at::kLong);
  EXPECT_TRUE(asr::greedy_search(*m, enc, lengths)[0].tokens.empty());
  EXPECT_TRUE(asr::modified_beam_search(*m, enc, lengths, 1)[0].tokens.empty());
  const asr::Hypothesis best = asr::modified_beam_search(*m, enc, lengths, 4)[0];
  EXPECT_EQ(best.tokens, std::vector<int>{1});
  EXPECT_NEAR(best.log_prob, std::log(0.28), 1e-5);  // both paths, added
  // Beam 2 keeps "" (0.4) and "a" (0.35) after frame 0, then the two best extensions: "" (0.16) and
  // one of the two paths to "a" (0.14 each): "a" still wins on score per token, with 0.14 only.
  const asr::Hypothesis two = asr::modified_beam_search(*m, enc, lengths, 2)[0];
  EXPECT_EQ(two.tokens, std::vector<int>{1});
  EXPECT_NEAR(two.log_prob, std::log(0.14), 1e-5);
}

// With a likely token, every frame emits one (modified beam search allows one per frame); the
// frames of emission are recorded; padding frames past an utterance's length emit nothing.
TEST(AsrDecode, OneTokenPerFrameAndLengthsRespected) {
  asr::Transducer m = small_model(5);
  fix_distribution(m, {0.1, 0.1, 0.6, 0.1, 0.1});
  const at::Tensor enc = at::randn({2, 5, 128}), lengths = at::tensor({5, 2}, at::kLong);
  for (int beam : {1, 4}) {
    const std::vector<asr::Hypothesis> h = asr::modified_beam_search(*m, enc, lengths, beam);
    EXPECT_EQ(h[0].tokens, std::vector<int>(5, 2)) << beam;
    EXPECT_EQ(h[0].frames, (std::vector<int>{0, 1, 2, 3, 4})) << beam;
    EXPECT_EQ(h[1].tokens, std::vector<int>(2, 2)) << beam;
  }
  const std::vector<asr::Hypothesis> g = asr::greedy_search(*m, enc, lengths, 2);
  EXPECT_EQ(g[0].frames, (std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4}));
  // <unk> is never emitted: with it as the likely token, greedy search emits nothing.
  EXPECT_TRUE(asr::greedy_search(*m, enc, lengths, 1, /*unk_id=*/2)[0].tokens.empty());
  EXPECT_TRUE(asr::modified_beam_search(*m, enc, lengths, 4, /*unk_id=*/2)[1].tokens.empty());
}

// A model with random weights (the joiner depends on the frame and the context): beam 1 is greedy
// search, and each utterance decodes the same alone as in a batch.
TEST(AsrDecode, BeamOneIsGreedyAndBatchedEqualsAlone) {
  asr::Transducer m = small_model(12);
  {  // sharper distributions than at initialisation, so that tokens get emitted
    at::NoGradGuard no_grad;
    m->joiner->named_parameters()["output.weight"].mul_(20);
  }
  const at::Tensor enc = at::randn({4, 30, 128}) * 3, lengths = at::tensor({30, 17, 25, 4}, at::kLong);
  const std::vector<asr::Hypothesis> greedy = asr::greedy_search(*m, enc, lengths);
  const std::vector<asr::Hypothesis> beam1 = asr::modified_beam_search(*m, enc, lengths, 1);
  const std::vector<asr::Hypothesis> beam4 = asr::modified_beam_search(*m, enc, lengths, 4);
  int64_t emitted = 0;
  for (int64_t b = 0; b < 4; ++b) {
    emitted += static_cast<int64_t>(greedy[static_cast<size_t>(b)].tokens.size());
    EXPECT_EQ(beam1[static_cast<size_t>(b)].tokens, greedy[static_cast<size_t>(b)].tokens) << b;
    EXPECT_EQ(beam1[static_cast<size_t>(b)].frames, greedy[static_cast<size_t>(b)].frames) << b;
    const at::Tensor one = enc.narrow(0, b, 1), len = lengths.narrow(0, b, 1);
    EXPECT_EQ(asr::greedy_search(*m, one, len)[0].tokens, greedy[static_cast<size_t>(b)].tokens) << b;
    const asr::Hypothesis alone = asr::modified_beam_search(*m, one, len, 4)[0];
    EXPECT_EQ(alone.tokens, beam4[static_cast<size_t>(b)].tokens) << b;
    EXPECT_NEAR(alone.log_prob, beam4[static_cast<size_t>(b)].log_prob, 1e-4) << b;
  }
  EXPECT_GT(emitted, 20);  // the comparison is about sequences, not empty outputs
  // The beam's score is a log-probability.
  for (const asr::Hypothesis& h : beam4) EXPECT_LE(h.log_prob, 0.0);
}

// Decoding on the CPU computes the predictor and the joiner without the modules (decode.cpp): the
// same tokens as a greedy search written here with the modules alone, one utterance at a time,
// with one token per frame (icefall's default) and with up to two (the ASR recipe's).
TEST(AsrDecode, CpuPathsEqualTheModules) {
  asr::Transducer m = small_model(12);
  {
    at::NoGradGuard no_grad;
    m->joiner->named_parameters()["output.weight"].mul_(20);
  }
  const at::Tensor enc = at::randn({3, 40, 128}) * 3, lengths = at::tensor({40, 22, 31}, at::kLong);
  for (int per_frame : {1, 2}) {
    const std::vector<asr::Hypothesis> fast = asr::greedy_search(*m, enc, lengths, per_frame);
    at::NoGradGuard no_grad;
    int64_t emitted = 0, second = 0;  // tokens, and tokens that were their frame's second
    for (int64_t b = 0; b < 3; ++b) {
      std::vector<int> tokens, frames;
      std::vector<int64_t> context = {0, 0};
      for (int64_t t = 0; t < lengths[b].item<int64_t>(); ++t)
        for (int k = 0; k < per_frame; ++k) {
          const at::Tensor pred = m->joiner->project_predictor(m->predictor->forward(at::tensor(context, at::kLong).view({1, 2}), false));
          const int y = static_cast<int>(m->joiner->forward(m->joiner->project_encoder(enc[b][t]), pred.view({-1})).argmax().item<int64_t>());
          if (y == 0) break;
          tokens.push_back(y);
          frames.push_back(static_cast<int>(t));
          context = {context[1], y};
          second += k;
        }
      EXPECT_EQ(fast[static_cast<size_t>(b)].tokens, tokens) << b << " " << per_frame;
      EXPECT_EQ(fast[static_cast<size_t>(b)].frames, frames) << b << " " << per_frame;
      emitted += static_cast<int64_t>(tokens.size());
    }
    EXPECT_GT(emitted, 20) << per_frame;
    if (per_frame == 2) {
      EXPECT_GT(second, 3);  // the second token of a frame is exercised
    }
  }
}

TEST(AsrDecode, OptionsAreChecked) {
  asr::DecodingOptions o;
  o.method = "beam";
  EXPECT_THROW(o.validate(), std::invalid_argument);
  o.method = "modified_beam_search";
  o.beam = 0;
  try {
    o.validate();
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "decoding.beam must be >= 1, got 0");
  }
  asr::Transducer m = small_model(3);
  EXPECT_THROW(asr::greedy_search(*m, at::randn({1, 2, 128}), at::tensor({3}, at::kLong)), std::invalid_argument);
}

// Result files are named by the method and the one setting that changes its output (icefall's names).
TEST(AsrDecode, SettingsLabelNamesTheSettingThatMatters) {
  asr::DecodingOptions o;
  o.max_symbols_per_frame = 3;
  o.beam = 7;  // not greedy search's
  EXPECT_EQ(o.settings_label(), "greedy_search-max-sym-per-frame-3");
  o.method = "modified_beam_search";
  EXPECT_EQ(o.settings_label(), "modified_beam_search-beam-size-7");
}

}  // namespace
}  // namespace wavetrain
