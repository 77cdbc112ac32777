// RNN-T losses against k2/fast_rnnt's outputs (tests/data/reference/mi_rnnt_vectors.json: the
// simple loss in its three types with boundaries and a delay penalty, the smoothed loss, prune
// ranges with the pruned loss, the full loss) and against torchaudio's rnnt_loss (Debian's
// python3-torchaudio as a test-only client), plus S = 0, the T >= S rule and gradcheck.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "tests/run_process.h"
#include "tests/hdf5_dataset.h"
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "losses/mutual_information.h"
#include "losses/rnnt_logprobs.h"
#include "losses/rnnt_loss.h"
#include "tests/reference_json.h"

namespace wavetrain::losses {
namespace {

using wavetrain::testing::json_tensor;
using wavetrain::testing::load_json;
using wavetrain::testing::max_relative_error;

// What f throws as std::invalid_argument, or "no error".
template <typename F>
std::string invalid_argument_message(F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    return std::string(e.what());
  }
  return std::string("no error");
}


const nlohmann::json& cases() {
  static const nlohmann::json j = load_json(std::string(WAVETRAIN_TEST_DATA) + "/reference/mi_rnnt_vectors.json");
  return j["cases"];
}

RnntType type_of(const nlohmann::json& c) {
  const std::string t = c["rnnt_type"];
  return t == "regular" ? RnntType::kRegular : t == "modified" ? RnntType::kModified : RnntType::kConstrained;
}

struct Precision {
  at::ScalarType dtype;
  double tolerance;
  const char* name;
};
const Precision kPrecisions[] = {{at::kDouble, 1e-9, "f64"}, {at::kFloat, 1e-5, "f32"}};

TEST(RnntReference, SimpleLossAndLogprobs) {
  int checked = 0;
  for (const nlohmann::json& c : cases()) {
    if (c["kind"] != "rnnt_loss_simple") continue;
    for (const Precision& p : kPrecisions) {
      const std::string name = std::string(c["name"]) + " " + p.name;
      const at::Tensor lm = json_tensor(c["lm"], p.dtype).requires_grad_(true);
      const at::Tensor am = json_tensor(c["am"], p.dtype).requires_grad_(true);
      const at::Tensor symbols = json_tensor(c["symbols"], at::kLong);
      RnntOptions o;
      o.termination_symbol = c["termination_symbol"];
      if (c["use_boundary"]) o.boundary = json_tensor(c["boundary"], at::kLong);
      o.rnnt_type = type_of(c);
      o.delay_penalty = c["delay_penalty"];
      o.reduction = Reduction::kNone;
      const RnntLogprobs lp = get_rnnt_logprobs(lm, am, symbols, o.termination_symbol, o.boundary, o.rnnt_type);
      EXPECT_LE(max_relative_error(lp.px, json_tensor(c["px_from_get_rnnt_logprobs"])), p.tolerance) << name;
      EXPECT_LE(max_relative_error(lp.py, json_tensor(c["py_from_get_rnnt_logprobs"])), p.tolerance) << name;
      const at::Tensor loss = rnnt_loss_simple(lm, am, symbols, o);
      EXPECT_LE(max_relative_error(loss, json_tensor(c["loss"])), p.tolerance) << name << loss;
      loss.sum().backward();
      EXPECT_LE(max_relative_error(lm.grad(), json_tensor(c["lm_grad"])), p.tolerance) << name;
      EXPECT_LE(max_relative_error(am.grad(), json_tensor(c["am_grad"])), p.tolerance) << name;
      o.reduction = Reduction::kMean;
      EXPECT_NEAR(rnnt_loss_simple(lm, am, symbols, o).item<double>(), c["loss_mean"].get<double>(),
                  p.tolerance * c["loss_mean"].get<double>())
          << name;
      o.reduction = Reduction::kSum;
      EXPECT_NEAR(rnnt_loss_simple(lm, am, symbols, o).item<double>(), c["loss_sum"].get<double>(),
                  p.tolerance * c["loss_sum"].get<double>())
          << name;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 9);
}

TEST(RnntReference, SmoothedLoss) {
  int checked = 0;
  for (const nlohmann::json& c : cases()) {
    if (c["kind"] != "rnnt_loss_smoothed") continue;
    for (const Precision& p : kPrecisions) {
      const std::string name = std::string(c["name"]) + " " + p.name;
      const at::Tensor lm = json_tensor(c["lm"], p.dtype).requires_grad_(true);
      const at::Tensor am = json_tensor(c["am"], p.dtype).requires_grad_(true);
      RnntOptions o;
      o.termination_symbol = c["termination_symbol"];
      if (c["use_boundary"]) o.boundary = json_tensor(c["boundary"], at::kLong);
      o.rnnt_type = type_of(c);
      o.reduction = Reduction::kNone;
      const at::Tensor loss = rnnt_loss_smoothed(lm, am, json_tensor(c["symbols"], at::kLong), c["lm_only_scale"],
                                                 c["am_only_scale"], o);
      EXPECT_LE(max_relative_error(loss, json_tensor(c["loss"])), p.tolerance) << name << loss;
      loss.sum().backward();
      EXPECT_LE(max_relative_error(lm.grad(), json_tensor(c["lm_grad"])), p.tolerance) << name;
      EXPECT_LE(max_relative_error(am.grad(), json_tensor(c["am_grad"])), p.tolerance) << name;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 2);
}

TEST(RnntReference, FullLoss) {
  int checked = 0;
  for (const nlohmann::json& c : cases()) {
    if (c["kind"] != "rnnt_loss") continue;
    for (const Precision& p : kPrecisions) {
      const at::Tensor logits = json_tensor(c["logits"], p.dtype).requires_grad_(true);
      RnntOptions o;
      o.termination_symbol = c["termination_symbol"];
      o.boundary = json_tensor(c["boundary"], at::kLong);
      o.reduction = Reduction::kNone;
      const at::Tensor loss = rnnt_loss(logits, json_tensor(c["symbols"], at::kLong), o);
      EXPECT_LE(max_relative_error(loss, json_tensor(c["loss"])), p.tolerance) << p.name << loss;
      loss.sum().backward();
      EXPECT_LE(max_relative_error(logits.grad(), json_tensor(c["logits_grad"])), p.tolerance) << p.name;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 1);
}

// With each build of the CPU kernels this CPU can run (detail::cap_vector_kernels): AVX-512, AVX2 +
// FMA and the baseline ISA's, which a CPU without AVX2 + FMA runs.
TEST(RnntReference, PruneRangesAndPrunedLoss) {
  int checked = 0;
  for (const nlohmann::json& c : cases()) {
    if (c["kind"] != "pruned") continue;
    for (const detail::VectorIsa isa :
         {detail::VectorIsa::kAvx512, detail::VectorIsa::kAvx2Fma, detail::VectorIsa::kBaseline})
    for (const Precision& p : kPrecisions) {
      detail::cap_vector_kernels(isa);
      const at::Tensor lm = json_tensor(c["lm"], p.dtype), am = json_tensor(c["am"], p.dtype);
      const at::Tensor symbols = json_tensor(c["symbols"], at::kLong);
      RnntOptions o;
      o.termination_symbol = c["termination_symbol"];
      o.boundary = json_tensor(c["boundary"], at::kLong);
      o.reduction = Reduction::kNone;
      const RnntLossWithGrad simple = rnnt_loss_simple_with_grad(lm, am, symbols, o);
      EXPECT_LE(max_relative_error(simple.px_grad, json_tensor(c["simple_px_grad"])), p.tolerance) << p.name;
      EXPECT_LE(max_relative_error(simple.py_grad, json_tensor(c["simple_py_grad"])), p.tolerance) << p.name;
      const at::Tensor ranges = get_rnnt_prune_ranges(simple.px_grad, simple.py_grad, *o.boundary, c["s_range"]);
      EXPECT_TRUE(at::equal(ranges, json_tensor(c["ranges"], at::kLong))) << p.name << ranges;
      const auto [am_pruned, lm_pruned] = do_rnnt_pruning(am, lm, ranges);
      const at::Tensor logits = (am_pruned + lm_pruned).detach().requires_grad_(true);
      const at::Tensor loss = rnnt_loss_pruned(logits, symbols, ranges, o);
      EXPECT_LE(max_relative_error(loss, json_tensor(c["pruned_loss"])), p.tolerance) << p.name << loss;
      loss.sum().backward();
      EXPECT_LE(max_relative_error(logits.grad(), json_tensor(c["pruned_logits_grad"])), p.tolerance) << p.name;
      detail::cap_vector_kernels(detail::VectorIsa::kAvx512);
    }
    ++checked;
  }
  EXPECT_EQ(checked, 1);
}

TEST(RnntLoss, MatchesTorchaudio) {
  // The script prints B T U C, then logits, targets, logit and target lengths, then torchaudio's
  // losses (reduction none), each line space-separated.
  const std::string out = wavetrain::testing::python_output("torchaudio_rnnt.py");
  if (out.empty()) GTEST_SKIP() << WAVETRAIN_TEST_PYTHON << " cannot import torchaudio: install Debian's python3-torchaudio";
  std::istringstream in(out);
  int cases_seen = 0;
  for (std::string header; std::getline(in, header);) {
    int64_t B, T, U, C;
    std::istringstream(header) >> B >> T >> U >> C;
    auto read_line = [&] {
      std::string line;
      std::getline(in, line);
      std::istringstream l(line);
      std::vector<double> v;
      for (double x; l >> x;) v.push_back(x);
      return v;
    };
    const at::Tensor logits = at::tensor(read_line(), at::kDouble).view({B, T, U + 1, C}).to(at::kFloat);
    const at::Tensor targets = at::tensor(read_line(), at::kDouble).view({B, U}).to(at::kLong);
    const at::Tensor logit_lengths = at::tensor(read_line(), at::kDouble).to(at::kLong);
    const at::Tensor target_lengths = at::tensor(read_line(), at::kDouble).to(at::kLong);
    const at::Tensor expected = at::tensor(read_line(), at::kDouble);
    RnntOptions o;
    o.termination_symbol = 0;
    o.reduction = Reduction::kNone;
    o.boundary = at::stack({at::zeros({B}, at::kLong), at::zeros({B}, at::kLong), target_lengths, logit_lengths}, 1);
    const at::Tensor loss = rnnt_loss(logits, targets, o);
    EXPECT_LE(max_relative_error(loss, expected, 1e-30), 1e-4) << header << "\n" << loss << expected;
    ++cases_seen;
  }
  EXPECT_EQ(cases_seen, 3);
}

// The lattice's log-probabilities and their gradients against autograd of their definition
// (px = am[t][y_s] + lm[s][y_s] - logsumexp(am[t] + lm[s]), likewise py with the blank), in
// float64, on more items than threads, with rows far from 0 (the kernel takes each row's maximum
// out) and one row of lm at -inf but its blank, so the loss is finite and that row's exp is 0.
// The CPU kernel computes each item in its own thread; a mix-up between items would show here.
TEST(RnntLoss, SymbolLogprobsEqualAutogradOfTheirDefinitionForEveryItem) {
  at::manual_seed(5);
  const int64_t B = 5, S = 7, T = 11, C = 13, blank = 2;
  at::Tensor lm0 = at::randn({B, S + 1, C}, at::kDouble) * 4 + 30;
  lm0[3][S].fill_(-std::numeric_limits<double>::infinity());
  lm0[3][S][blank] = 1.0;
  const at::Tensor am0 = at::randn({B, T, C}, at::kDouble) * 3 - 50;
  const at::Tensor symbols = at::randint(0, C, {B, S}, at::kLong);
  const at::Tensor lm = lm0.clone().requires_grad_(), am = am0.clone().requires_grad_();
  const RnntLogprobs lp = get_rnnt_logprobs(lm, am, symbols, blank, std::nullopt, RnntType::kModified);
  const at::Tensor lm_e = lm0.clone().requires_grad_(), am_e = am0.clone().requires_grad_();
  const at::Tensor joint = lm_e.unsqueeze(2) + am_e.unsqueeze(1);  // [B][S+1][T][C]
  const at::Tensor log_probs = joint - at::logsumexp(joint, 3, true);
  const at::Tensor index = symbols.view({B, S, 1, 1}).expand({B, S, T, 1});
  const at::Tensor px_e = at::gather(log_probs.narrow(1, 0, S), 3, index).squeeze(3);
  const at::Tensor py_e = log_probs.select(3, blank);
  EXPECT_LE(max_relative_error(lp.px, px_e), 1e-12);
  EXPECT_LE(max_relative_error(lp.py, py_e), 1e-12);
  // Weights for both outputs, so that every gradient term (products and direct terms) counts.
  const at::Tensor wx = at::randn({B, S, T}, at::kDouble), wy = at::randn({B, S + 1, T}, at::kDouble);
  ((lp.px * wx).sum() + (lp.py * wy).sum()).backward();
  ((px_e * wx).sum() + (py_e * wy).sum()).backward();
  EXPECT_LE(max_relative_error(lm.grad(), lm_e.grad()), 1e-10);
  EXPECT_LE(max_relative_error(am.grad(), am_e.grad()), 1e-10);
}

// No frames and no symbols: nothing to emit costs 0, with zero gradients (the CPU kernel's products
// then have an empty inner dimension, and its gradients come from them).
TEST(RnntLoss, NoFramesAndNoSymbolsCostNothing) {
  at::manual_seed(6);
  for (RnntType type : {RnntType::kRegular, RnntType::kModified}) {
    const at::Tensor lm = at::randn({2, 1, 4}, at::kDouble).requires_grad_();
    const at::Tensor am = at::randn({2, 0, 4}, at::kDouble).requires_grad_();
    RnntOptions o;
    o.reduction = Reduction::kNone;
    o.rnnt_type = type;
    const at::Tensor loss = rnnt_loss_simple(lm, am, at::zeros({2, 0}, at::kLong), o);
    EXPECT_TRUE(at::equal(loss, at::zeros({2}, at::kDouble))) << loss;
    loss.sum().backward();
    EXPECT_TRUE(at::equal(lm.grad(), at::zeros_like(lm))) << lm.grad();
    EXPECT_EQ(am.grad().numel(), 0);
  }
}

TEST(RnntLoss, EmptyReferencesAreAllowed) {
  // S = 0: the loss is minus the sum of the blank log-probs over the frames.
  at::manual_seed(21);
  const int64_t B = 2, T = 5, C = 4;
  const at::Tensor lm = at::randn({B, 1, C}, at::kDouble), am = at::randn({B, T, C}, at::kDouble);
  const at::Tensor symbols = at::zeros({B, 0}, at::kLong);
  RnntOptions o;
  o.reduction = Reduction::kNone;
  const at::Tensor expected = -at::log_softmax(am + lm, 2).select(2, 0).sum(1);
  for (RnntType type : {RnntType::kRegular, RnntType::kModified, RnntType::kConstrained}) {
    o.rnnt_type = type;
    EXPECT_LE(max_relative_error(rnnt_loss_simple(lm, am, symbols, o), expected), 1e-12);
    EXPECT_LE(max_relative_error(rnnt_loss(am.unsqueeze(2) + lm.unsqueeze(1), symbols, o), expected), 1e-12);
    // And the gradients (the CPU kernel used to skip its backward when px had no elements: every
    // gradient was 0): against autograd of the closed form.
    const at::Tensor lm_g = lm.clone().requires_grad_(), am_g = am.clone().requires_grad_();
    const at::Tensor lm_e = lm.clone().requires_grad_(), am_e = am.clone().requires_grad_();
    (-at::log_softmax(am_e + lm_e, 2).select(2, 0).sum(1)).sum().backward();
    rnnt_loss_simple(lm_g, am_g, symbols, o).sum().backward();
    EXPECT_LE(max_relative_error(am_g.grad(), am_e.grad()), 1e-10) << static_cast<int>(type);
    EXPECT_LE(max_relative_error(lm_g.grad(), lm_e.grad()), 1e-10) << static_cast<int>(type);
    const at::Tensor logits = (am.unsqueeze(2) + lm.unsqueeze(1)).requires_grad_();
    const at::Tensor logits_e = logits.detach().clone().requires_grad_();
    rnnt_loss(logits, symbols, o).sum().backward();
    (-at::log_softmax(logits_e, 3).select(3, 0).sum({1, 2})).sum().backward();
    EXPECT_LE(max_relative_error(logits.grad(), logits_e.grad()), 1e-10) << static_cast<int>(type);
  }
  // The pruned path: one symbol position (0) per frame.
  o.rnnt_type = RnntType::kRegular;
  o.boundary = at::tensor(std::vector<int64_t>{0, 0, 0, T, 0, 0, 0, T}, at::kLong).view({2, 4});
  const RnntLossWithGrad simple = rnnt_loss_simple_with_grad(lm, am, symbols, o);
  const at::Tensor ranges = get_rnnt_prune_ranges(simple.px_grad, simple.py_grad, *o.boundary, 5);
  EXPECT_TRUE(at::equal(ranges, at::zeros({B, T, 1}, at::kLong)));
  const auto [am_pruned, lm_pruned] = do_rnnt_pruning(am, lm, ranges);
  EXPECT_LE(max_relative_error(rnnt_loss_pruned(am_pruned + lm_pruned, symbols, ranges, o), expected), 1e-12);
}

// Regular mode, an item with more symbols than s_range can cover in its frames (20 in 4 at s_range 3:
// each frame advances at most 2): the ranges are widened to ceil(20 / 4) + 1 = 6 (fast_rnnt does the
// same) and the pruned loss stays finite, never below the full loss (pruning only removes paths).
// Before: +inf for that item, silently.
TEST(RnntLoss, PrunedLossWidensARangeTooNarrowForAnItem) {
  at::manual_seed(41);
  const int64_t B = 2, T = 4, S = 20, C = 30;
  const at::Tensor lm = at::randn({B, S + 1, C}, at::kDouble), am = at::randn({B, T, C}, at::kDouble);
  const at::Tensor symbols = at::randint(1, C, {B, S}, at::kLong);
  RnntOptions o;
  o.reduction = Reduction::kNone;
  o.boundary = at::tensor(std::vector<int64_t>{0, 0, 20, 4, 0, 0, 5, 4}, at::kLong).view({2, 4});
  const RnntLossWithGrad simple = rnnt_loss_simple_with_grad(lm, am, symbols, o);
  const at::Tensor ranges = get_rnnt_prune_ranges(simple.px_grad, simple.py_grad, *o.boundary, 3);
  EXPECT_EQ(ranges.size(2), 6);
  const auto [am_pruned, lm_pruned] = do_rnnt_pruning(am, lm, ranges);
  const at::Tensor pruned = rnnt_loss_pruned(am_pruned + lm_pruned, symbols, ranges, o);
  const at::Tensor full = rnnt_loss(am.unsqueeze(2) + lm.unsqueeze(1), symbols, o);
  EXPECT_TRUE(at::isfinite(pruned).all().item<bool>()) << pruned;
  EXPECT_TRUE((pruned >= full - 1e-9).all().item<bool>()) << pruned << full;
}

// Ranges and boundaries are checked up front with the item, the value and the rule (before: a value
// past S silently took rows of the next item; others raised LibTorch errors with a backtrace).
TEST(RnntLoss, PruningInputsAreValidated) {
  at::manual_seed(42);
  const int64_t B = 2, T = 5, S = 3, C = 6;
  const at::Tensor lm = at::randn({B, S + 1, C}), am = at::randn({B, T, C});
  const at::Tensor symbols = at::randint(1, C, {B, S}, at::kLong);
  at::Tensor ranges = at::zeros({B, T, 2}, at::kLong);
  ranges[1][2][1] = 4;
  EXPECT_EQ(invalid_argument_message([&] { do_rnnt_pruning(am, lm, ranges); }),
            "do_rnnt_pruning: ranges[1][2][1] = 4 is outside [0, S] = [0, 3] (item 1's symbol positions)");
  RnntOptions o;
  EXPECT_EQ(invalid_argument_message([&] { rnnt_loss_pruned(at::randn({B, T, 2, C}), symbols, ranges, o); }),
            "get_rnnt_logprobs_pruned: ranges[1][2][1] = 4 is outside [0, S] = [0, 3] (item 1's symbol positions)");
  ranges[1][2][1] = -1;
  EXPECT_EQ(invalid_argument_message([&] { do_rnnt_pruning(am, lm, ranges); }),
            "do_rnnt_pruning: ranges[1][2][1] = -1 is outside [0, S] = [0, 3] (item 1's symbol positions)");
  const RnntLossWithGrad simple = rnnt_loss_simple_with_grad(lm, am, symbols, o);
  const at::Tensor boundary = at::tensor(std::vector<int64_t>{0, 0, 3, 7, 0, 0, 3, 5}, at::kLong).view({2, 4});
  EXPECT_EQ(invalid_argument_message([&] { get_rnnt_prune_ranges(simple.px_grad, simple.py_grad, boundary, 2); }),
            "get_rnnt_prune_ranges: boundary of item 0 is [0, 0, 3, 7]; it needs 0 <= s_begin <= s_end <= S = 3 and "
            "0 <= t_begin <= t_end <= T = 5");
}

// The regular px gets -inf at column T and at each item's t_end (append_neg_inf_column and
// fix_for_boundary, fused on the CPU). Through (px * w).sum() a gradient reaches every entry of px,
// the -inf ones included; those overwritten must pass nothing on to lm and am. Against the ATen
// composition, in float64.
TEST(RnntLoss, PxEndsDropTheGradientOfTheEntriesTheyOverwrite) {
  at::manual_seed(44);
  const int64_t B = 3, S = 4, T = 9, C = 7;
  const at::Tensor lm = at::randn({B, S + 1, C}, at::kDouble), am = at::randn({B, T, C}, at::kDouble);
  const at::Tensor symbols = at::randint(1, C, {B, S}, at::kLong);
  const at::Tensor boundary = at::tensor(std::vector<int64_t>{0, 0, 4, 9, 0, 0, 2, 5, 0, 0, 3, 7}, at::kLong).view({B, 4});
  const at::Tensor w = at::rand({B, S, T + 1}, at::kDouble) + 0.5;
  auto grads = [&](bool fused) {
    const at::Tensor l = lm.clone().requires_grad_(true), a = am.clone().requires_grad_(true);
    at::Tensor px;
    if (fused) {
      px = get_rnnt_logprobs(l, a, symbols, 0, boundary, RnntType::kRegular).px;
    } else {
      const at::Tensor raw = detail::symbol_logprobs(l, a, symbols, 0).first;
      const at::Tensor appended = at::cat({raw, at::full({B, S, 1}, -INFINITY, raw.options())}, 2);
      px = appended.scatter(2, boundary.select(1, 3).view({B, 1, 1}).expand({B, S, T + 1}), -INFINITY);
    }
    (px * w).sum().backward();
    return std::make_tuple(px.detach(), l.grad(), a.grad());
  };
  const auto [px_f, lm_f, am_f] = grads(true);
  const auto [px_r, lm_r, am_r] = grads(false);
  EXPECT_TRUE(at::equal(at::isinf(px_f), at::isinf(px_r)));
  EXPECT_EQ(at::isinf(px_f).sum().item<int64_t>(), B * S * 2 - S);  // item 0 ends at T: one column
  EXPECT_LE(max_relative_error(px_f.masked_fill(at::isinf(px_f), 0), px_r.masked_fill(at::isinf(px_r), 0)), 1e-12);
  EXPECT_LE(max_relative_error(lm_f, lm_r), 1e-12);
  EXPECT_LE(max_relative_error(am_f, am_r), 1e-12);
}

// do_rnnt_pruning's two outputs and their gradients (written-out CPU backwards: a sum over the
// repeats for am, an add into picked rows for lm) against k2's composition, expand and gather, in
// float64, through a joiner-like use of both (a weighted sum).
TEST(RnntLoss, PruningGradientsEqualTheExpandAndGatherComposition) {
  at::manual_seed(45);
  const int64_t B = 3, T = 6, S = 4, C = 5, R = 3;
  const at::Tensor am0 = at::randn({B, T, C}, at::kDouble), lm0 = at::randn({B, S + 1, C}, at::kDouble);
  const at::Tensor ranges =
      at::clamp_max(at::randint(0, S - R + 2, {B, T, 1}, at::kLong) + at::arange(R, at::kLong).view({1, 1, R}), S);
  const at::Tensor w = at::randn({B, T, R, C}, at::kDouble), v = at::randn({B, T, R, C}, at::kDouble);
  auto run = [&](bool ours) {
    const at::Tensor am = am0.clone().requires_grad_(true), lm = lm0.clone().requires_grad_(true);
    at::Tensor am_pruned, lm_pruned;
    if (ours) {
      std::tie(am_pruned, lm_pruned) = do_rnnt_pruning(am, lm, ranges);
    } else {
      am_pruned = am.unsqueeze(2).expand({B, T, R, C});
      lm_pruned = at::gather(lm.unsqueeze(1).expand({B, T, S + 1, C}), 2, ranges.unsqueeze(3).expand({B, T, R, C}));
    }
    ((am_pruned * w).sum() + (lm_pruned * v).sum() + (am_pruned * lm_pruned).sum()).backward();
    return std::make_tuple(am_pruned.detach().clone(), lm_pruned.detach().clone(), am.grad(), lm.grad());
  };
  const auto [a1, l1, ga1, gl1] = run(true);
  const auto [a2, l2, ga2, gl2] = run(false);
  EXPECT_TRUE(at::equal(a1, a2));
  EXPECT_TRUE(at::equal(l1, l2));
  EXPECT_LE(max_relative_error(ga1, ga2), 1e-12);
  EXPECT_LE(max_relative_error(gl1, gl2), 1e-12);
}

TEST(RnntLoss, LmAndAmOfDifferentTypesAreRefusedNamingBoth) {
  const int64_t B = 2, T = 5, S = 3, C = 6;
  const at::Tensor lm = at::randn({B, S + 1, C}), am = at::randn({B, T, C});
  const at::Tensor symbols = at::randint(1, C, {B, S}, at::kLong);
  const RnntOptions o;
  EXPECT_EQ(invalid_argument_message([&] { rnnt_loss_simple(lm, am.to(at::kDouble), symbols, o); }),
            "get_rnnt_logprobs: lm and am must have one floating type (half and bfloat16 count as float), got lm "
            "Float and am Double");
  EXPECT_EQ(invalid_argument_message([&] { rnnt_loss_smoothed(lm.to(at::kDouble), am, symbols, 0.25, 0.0, o); }),
            "get_rnnt_logprobs_smoothed: lm and am must have one floating type (half and bfloat16 count as float), "
            "got lm Double and am Float");
  EXPECT_EQ(invalid_argument_message([&] { rnnt_loss_simple(lm.to(at::kLong), am, symbols, o); }),
            "get_rnnt_logprobs: lm and am must have one floating type (half and bfloat16 count as float), got lm "
            "Long and am Float");
  // Half is computed in float32, so it mixes with float32 and gives float32's loss to half precision.
  const at::Tensor both_float = rnnt_loss_simple(lm, am, symbols, o);
  const at::Tensor half_lm = rnnt_loss_simple(lm.to(at::kHalf), am, symbols, o);
  EXPECT_TRUE(at::allclose(half_lm, both_float, 1e-2, 1e-2)) << half_lm << both_float;
}

TEST(RnntLoss, ModifiedNeedsAsManyFramesAsSymbols) {
  at::manual_seed(22);
  const at::Tensor lm = at::randn({2, 4, 5}), am = at::randn({2, 6, 5});
  const at::Tensor symbols = at::randint(1, 5, {2, 3}, at::kLong);
  RnntOptions o;
  o.rnnt_type = RnntType::kModified;
  o.boundary = at::tensor({0, 0, 3, 6, 0, 0, 3, 2}, at::kLong).view({2, 4});
  try {
    rnnt_loss_simple(lm, am, symbols, o);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "get_rnnt_logprobs: rnnt_type modified needs T >= S in every item; item 1 has S = 3 symbols "
                           "and T = 2 frames (boundary[1])");
  }
  o.rnnt_type = RnntType::kRegular;  // regular allows several symbols per frame
  EXPECT_TRUE(at::isfinite(rnnt_loss_simple(lm, am, symbols, o)).all().item<bool>());
  try {
    rnnt_loss_simple(lm, am, symbols.clone().fill_(7), o);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "get_rnnt_logprobs: item 0 has a symbol outside [0, C = 5): 7 .. 7");
  }
}

TEST(RnntLoss, SimpleLossGradcheckInFloat64) {
  at::manual_seed(23);
  const at::Tensor lm = at::randn({2, 3, 4}, at::kDouble), am = at::randn({2, 5, 4}, at::kDouble);
  const at::Tensor symbols = at::randint(1, 4, {2, 2}, at::kLong);
  RnntOptions o;
  o.boundary = at::tensor({0, 0, 2, 5, 0, 0, 1, 4}, at::kLong).view({2, 4});
  o.delay_penalty = 0.3;
  for (RnntType type : {RnntType::kRegular, RnntType::kModified, RnntType::kConstrained}) {
    o.rnnt_type = type;
    const at::Tensor l = lm.clone().requires_grad_(true), a = am.clone().requires_grad_(true);
    rnnt_loss_smoothed(l, a, symbols, 0.2, 0.1, o).backward();
    auto f = [&](const at::Tensor& lv, const at::Tensor& av) { return rnnt_loss_smoothed(lv, av, symbols, 0.2, 0.1, o).item<double>(); };
    for (int which = 0; which < 2; ++which) {
      const at::Tensor& x = which == 0 ? lm : am;
      const at::Tensor analytic = which == 0 ? l.grad() : a.grad();
      double worst = 0;
      for (int64_t i = 0; i < x.numel(); ++i) {
        at::Tensor up = x.clone(), down = x.clone();
        up.view({-1})[i] += 1e-6;
        down.view({-1})[i] -= 1e-6;
        const double numeric = which == 0 ? (f(up, am) - f(down, am)) / 2e-6 : (f(lm, up) - f(lm, down)) / 2e-6;
        worst = std::max(worst, std::abs(numeric - analytic.view({-1})[i].item<double>()));
      }
      EXPECT_LE(worst, 1e-8) << static_cast<int>(type) << " " << which;
    }
  }
}

// k2's fast_rnnt itself (1.3, built into the .venv by scripts/setup --test-deps), live on fresh
// float64 inputs beside the stored vectors: the recursion with its gradients, and the simple,
// smoothed, pruned (with fast_rnnt's own prune ranges, which must equal ours) and full losses, per
// utterance, regular and modified, each item in its own box.
at::Tensor read_dataset(const std::string& path, const std::string& name, at::ScalarType type) {
  return wavetrain::testing::read_hdf5_dataset(path, name, type);
}

TEST(RnntLoss, MatchesFastRnntLiveOnFreshInputs) {
  WAVETRAIN_REQUIRE_CLIENT(wavetrain::testing::client_importable("fast_rnnt"), "fast_rnnt is not in " WAVETRAIN_CLIENT_PYTHON);
  for (int seed : {1, 2}) {
    const std::string path = ::testing::TempDir() + "fast_rnnt_live_" + std::to_string(::getpid()) + ".h5";
    const wavetrain::testing::ProcessResult r = wavetrain::testing::client_run("fast_rnnt_live.py " + path + " " + std::to_string(seed));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto f64 = [&](const std::string& name) { return read_dataset(path, name, at::kDouble); };
    const at::Tensor boundary = read_dataset(path, "boundary", at::kLong);
    const double tol = 1e-9;
    for (const std::string mode : {"regular", "modified"}) {
      const std::string what = mode + " seed " + std::to_string(seed);
      const MutualInformation mi = mutual_information_with_grad(f64("mi_" + mode + "_px"), f64("mi_" + mode + "_py"), boundary);
      EXPECT_LE(max_relative_error(mi.scores, f64("mi_" + mode + "_scores"), 1e-30), tol) << what;
      EXPECT_LE(max_relative_error(mi.px_grad, f64("mi_" + mode + "_px_grad")), tol) << what;
      EXPECT_LE(max_relative_error(mi.py_grad, f64("mi_" + mode + "_py_grad")), tol) << what;

      const at::Tensor lm = f64("lm"), am = f64("am"), symbols = read_dataset(path, "symbols", at::kLong);
      RnntOptions o;
      o.boundary = boundary;
      o.rnnt_type = mode == "regular" ? RnntType::kRegular : RnntType::kModified;
      o.reduction = Reduction::kNone;
      const RnntLossWithGrad simple = rnnt_loss_simple_with_grad(lm, am, symbols, o);
      EXPECT_LE(max_relative_error(simple.loss, f64(mode + "_simple")), tol) << what;
      EXPECT_LE(max_relative_error(simple.px_grad, f64(mode + "_simple_px_grad")), tol) << what;
      EXPECT_LE(max_relative_error(simple.py_grad, f64(mode + "_simple_py_grad")), tol) << what;
      EXPECT_LE(max_relative_error(rnnt_loss_smoothed(lm, am, symbols, 0.1, 0.2, o), f64(mode + "_smoothed")), tol) << what;
      const at::Tensor ranges = get_rnnt_prune_ranges(simple.px_grad, simple.py_grad, boundary, 4);
      EXPECT_TRUE(at::equal(ranges, read_dataset(path, mode + "_ranges", at::kLong))) << what;
      const auto [am_pruned, lm_pruned] = do_rnnt_pruning(am, lm, ranges);
      EXPECT_LE(max_relative_error(rnnt_loss_pruned((am_pruned + lm_pruned).tanh(), symbols, ranges, o), f64(mode + "_pruned")),
                tol) << what;
      const at::Tensor logits = (am.unsqueeze(2) + lm.unsqueeze(1)).tanh();
      EXPECT_LE(max_relative_error(rnnt_loss(logits, symbols, o), f64(mode + "_full")), tol) << what;
    }
    std::remove(path.c_str());
  }
}

// do_rnnt_pruning's lm rows (detail::pick_rows: a written-out backward on the CPU) against k2's way,
// a gather from lm expanded to [B][T][S+1][C], and its autograd gradient, in float64.
TEST(RnntLoss, PrunedRowsAndTheirGradientEqualTheGatherComposition) {
  at::manual_seed(7);
  const int64_t B = 3, T = 7, S = 5, C = 6, R = 3;
  const at::Tensor lm = at::randn({B, S + 1, C}, at::kDouble).requires_grad_();
  const at::Tensor am = at::randn({B, T, C}, at::kDouble);
  const at::Tensor ranges = at::randint(0, S + 2 - R, {B, T, 1}, at::kLong) + at::arange(R, at::kLong);  // rows 0 .. S
  const at::Tensor weights = at::randn({B, T, R, C}, at::kDouble);
  const auto [am_pruned, lm_pruned] = do_rnnt_pruning(am, lm, ranges);
  (lm_pruned * weights).sum().backward();
  const at::Tensor lm_e = lm.detach().clone().requires_grad_();
  const at::Tensor expected = at::gather(lm_e.unsqueeze(1).expand({B, T, S + 1, C}), 2, ranges.unsqueeze(3).expand({B, T, R, C}));
  EXPECT_TRUE(at::equal(lm_pruned.detach(), expected.detach()));
  (expected * weights).sum().backward();
  EXPECT_LE(max_relative_error(lm.grad(), lm_e.grad()), 1e-12);
}

}  // namespace
}  // namespace wavetrain::losses
