// RNN-T losses (definitions in rnnt_loss.h), following k2's rnnt_loss.py step by step so that the
// numbers agree; the differences are in what is allowed (S = 0), what is checked (per item, with
// messages) and that nothing is modified in place.
#include "losses/rnnt_loss.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <iostream>
#include <limits>
#include <stdexcept>
#include <string>

#include "losses/mutual_information.h"
#include "losses/rnnt_logprobs.h"

namespace wavetrain::losses {
namespace {

const double kNegInf = -std::numeric_limits<double>::infinity();

[[noreturn]] void fail(const char* where, const std::string& message) {
  throw std::invalid_argument(std::string(where) + ": " + message);
}

const char* type_name(RnntType t) {
  return t == RnntType::kRegular ? "regular" : t == RnntType::kModified ? "modified" : "constrained";
}

// Half and bfloat16 are computed in float32.
at::ScalarType lifted_type(const at::Tensor& x) {
  return (x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16) ? at::kFloat : x.scalar_type();
}

at::Tensor lifted(const at::Tensor& x) { return lifted_type(x) == x.scalar_type() ? x : x.to(at::kFloat); }

double tiny(const at::Tensor& x) {  // torch.finfo(dtype).tiny
  return x.scalar_type() == at::kDouble ? std::numeric_limits<double>::min() : std::numeric_limits<float>::min();
}

void check_symbols(const char* where, const at::Tensor& symbols, int64_t B, int64_t S, int64_t C,
                   int64_t termination_symbol) {
  if (symbols.dim() != 2 || symbols.size(0) != B || symbols.size(1) != S)
    fail(where, "symbols must be [B][S] = [" + std::to_string(B) + "][" + std::to_string(S) + "], got " +
                    c10::str(symbols.sizes()));
  if (symbols.scalar_type() != at::kLong) fail(where, "symbols must be int64");
  if (termination_symbol < 0 || termination_symbol >= C)
    fail(where, "termination_symbol " + std::to_string(termination_symbol) + " is not in [0, C = " + std::to_string(C) + ")");
  if (symbols.numel() == 0) return;
  const at::Tensor bad = ((symbols < 0) | (symbols >= C)).any(1).cpu();
  for (int64_t b = 0; b < B; ++b)
    if (bad[b].item<bool>())
      fail(where, "item " + std::to_string(b) + " has a symbol outside [0, C = " + std::to_string(C) + "): " +
                      c10::str(symbols[b].cpu().min().item<int64_t>()) + " .. " +
                      c10::str(symbols[b].cpu().max().item<int64_t>()));
}

// Modified and constrained transducers emit at most one symbol per frame: an item needs at least
// as many frames as symbols, or it has no path at all.
void check_frames(const char* where, RnntType type, const std::optional<at::Tensor>& boundary, int64_t S, int64_t T) {
  if (type == RnntType::kRegular) return;
  if (!boundary) {
    if (S > T)
      fail(where, std::string("rnnt_type ") + type_name(type) + " needs T >= S, and every item has S = " +
                      std::to_string(S) + " symbols but T = " + std::to_string(T) + " frames");
    return;
  }
  const at::Tensor b = boundary->cpu();
  for (int64_t i = 0; i < b.size(0); ++i) {
    const int64_t s = b[i][2].item<int64_t>() - b[i][0].item<int64_t>(), t = b[i][3].item<int64_t>() - b[i][1].item<int64_t>();
    if (s > t)
      fail(where, std::string("rnnt_type ") + type_name(type) + " needs T >= S in every item; item " + std::to_string(i) +
                      " has S = " + std::to_string(s) + " symbols and T = " + std::to_string(t) + " frames (boundary[" +
                      std::to_string(i) + "])");
  }
}

void check_boundary_shape(const char* where, const std::optional<at::Tensor>& boundary, int64_t B) {
  if (boundary && (boundary->dim() != 2 || boundary->size(0) != B || boundary->size(1) != 4))
    fail(where, "boundary must be [B][4] = [" + std::to_string(B) + "][4], got " + c10::str(boundary->sizes()));
}

// A boundary's values: 0 <= s_begin <= s_end <= S and 0 <= t_begin <= t_end <= T in every item.
void check_boundary_values(const char* where, const std::optional<at::Tensor>& boundary, int64_t S, int64_t T) {
  if (!boundary) return;
  const at::Tensor b = boundary->cpu();
  for (int64_t i = 0; i < b.size(0); ++i) {
    const int64_t sb = b[i][0].item<int64_t>(), tb = b[i][1].item<int64_t>(), se = b[i][2].item<int64_t>(), te = b[i][3].item<int64_t>();
    if (!(0 <= sb && sb <= se && se <= S && 0 <= tb && tb <= te && te <= T))
      fail(where, "boundary of item " + std::to_string(i) + " is [" + std::to_string(sb) + ", " + std::to_string(tb) + ", " + std::to_string(se) +
                      ", " + std::to_string(te) + "]; it needs 0 <= s_begin <= s_end <= S = " + std::to_string(S) +
                      " and 0 <= t_begin <= t_end <= T = " + std::to_string(T));
  }
}

// Pruning ranges index symbol positions 0 .. S of their own item.
void check_ranges(const char* where, const at::Tensor& ranges, int64_t S) {
  if (ranges.scalar_type() != at::kLong) fail(where, "ranges must be int64");
  if (ranges.numel() == 0) return;
  const at::Tensor bad = ((ranges < 0) | (ranges > S)).nonzero();
  if (bad.size(0) == 0) return;
  const at::Tensor first = bad[0].cpu();
  const int64_t b = first[0].item<int64_t>(), t = first[1].item<int64_t>(), k = first[2].item<int64_t>();
  fail(where, "ranges[" + std::to_string(b) + "][" + std::to_string(t) + "][" + std::to_string(k) + "] = " +
                  std::to_string(ranges[b][t][k].item<int64_t>()) + " is outside [0, S] = [0, " + std::to_string(S) +
                  "] (item " + std::to_string(b) + "'s symbol positions)");
}

// Regular RNN-T with a boundary: px[b][:][t_end] must be -inf (no symbol after the last frame).
at::Tensor fix_for_boundary(const at::Tensor& px, const std::optional<at::Tensor>& boundary) {
  if (!boundary) return px;
  const int64_t B = px.size(0), S = px.size(1), T1 = px.size(2);
  const at::Tensor index = boundary->select(1, 3).to(px.device()).reshape({B, 1, 1}).expand({B, S, T1});
  return px.scatter(2, index, kNegInf);
}


// k2's delay penalty: px[b][s][t] += delay_penalty * ((T_b - 1) / 2 - t), rewarding early symbols.
at::Tensor penalize_delay(const at::Tensor& px, const std::optional<at::Tensor>& boundary, RnntType type,
                          double delay_penalty) {
  if (!(delay_penalty > 0.0)) return px;
  const int64_t B = px.size(0), T0 = px.size(2);
  const int64_t T = type == RnntType::kRegular ? T0 - 1 : T0;
  const at::TensorOptions options = px.options();
  const at::Tensor offset = boundary ? (boundary->select(1, 3).to(options) - 1.0) / 2.0
                                     : at::full({B}, static_cast<double>(T - 1) / 2.0, options);
  const at::Tensor penalty = offset.reshape({B, 1, 1}) - at::arange(T0, options).reshape({1, 1, T0});
  return px + penalty * delay_penalty;
}

at::Tensor reduce(const at::Tensor& negated, Reduction r) {
  switch (r) {
    case Reduction::kNone: return -negated;
    case Reduction::kSum: return -negated.sum();
    default: return -negated.mean();
  }
}

at::Tensor append_neg_inf_column(const at::Tensor& x) {
  return at::cat({x, at::full({x.size(0), x.size(1), 1}, kNegInf, x.options())}, 2);
}

// The regular recursion's px [B][S][T] -> [B][S][T+1] with -inf at column T (append) or px
// [B][S][T+1] as it is, and, with a boundary, -inf at each item's t_end (no symbol after the last
// frame): append_neg_inf_column then fix_for_boundary, as one pass each way on the CPU (the cat, the
// scatter and their backwards were six passes over px, a tenth of the simple loss at 1 thread).
struct RegularPxEnds : public torch::autograd::Function<RegularPxEnds> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& px_in, const at::Tensor& t_end,
                            bool append) {
    const at::Tensor px = px_in.contiguous();
    const int64_t B = px.size(0), S = px.size(1), Tin = px.size(2), T = append ? Tin : Tin - 1;
    at::Tensor out = at::empty({B, S, T + 1}, px.options());
    const int64_t* end = t_end.data_ptr<int64_t>();
    AT_DISPATCH_FLOATING_TYPES(px.scalar_type(), "regular_px_ends", [&] {
      const scalar_t ninf = -std::numeric_limits<scalar_t>::infinity();
      const scalar_t* x = px.data_ptr<scalar_t>();
      scalar_t* o = out.data_ptr<scalar_t>();
      at::parallel_for(0, B * S, 64, [&](int64_t begin, int64_t stop) {
        for (int64_t r = begin; r < stop; ++r) {
          std::copy(x + r * Tin, x + r * Tin + T, o + r * (T + 1));
          o[r * (T + 1) + T] = append ? ninf : x[r * Tin + T];
          o[r * (T + 1) + end[r / S]] = ninf;
        }
      });
    });
    ctx->save_for_backward({t_end});
    ctx->saved_data["append"] = append;
    return out;
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor t_end = ctx->get_saved_variables()[0];
    const bool append = ctx->saved_data["append"].toBool();
    const at::Tensor g = grads[0].contiguous();
    const int64_t B = g.size(0), S = g.size(1), T = g.size(2) - 1, Tout = append ? T : T + 1;
    at::Tensor out = at::empty({B, S, Tout}, g.options());
    const int64_t* end = t_end.data_ptr<int64_t>();
    AT_DISPATCH_FLOATING_TYPES(g.scalar_type(), "regular_px_ends_backward", [&] {
      const scalar_t* gi = g.data_ptr<scalar_t>();
      scalar_t* o = out.data_ptr<scalar_t>();
      at::parallel_for(0, B * S, 64, [&](int64_t begin, int64_t stop) {
        for (int64_t r = begin; r < stop; ++r) {
          std::copy(gi + r * (T + 1), gi + r * (T + 1) + Tout, o + r * Tout);
          if (end[r / S] < Tout) o[r * Tout + end[r / S]] = scalar_t(0);  // overwritten by -inf: no gradient
        }
      });
    });
    return {out, at::Tensor(), at::Tensor()};
  }
};

// The regular recursion's px with its ends: [B][S][T] (append) or [B][S][T+1] -> [B][S][T+1].
at::Tensor regular_px_ends(const at::Tensor& px, const std::optional<at::Tensor>& boundary, bool append) {
  if (px.device().is_cpu() && (px.scalar_type() == at::kFloat || px.scalar_type() == at::kDouble)) {
    const int64_t T = append ? px.size(2) : px.size(2) - 1;
    const at::Tensor t_end = boundary ? boundary->select(1, 3).to(at::kCPU, at::kLong).contiguous()
                                      : at::full({px.size(0)}, T, at::TensorOptions().dtype(at::kLong));
    return RegularPxEnds::apply(px, t_end, append);
  }
  return fix_for_boundary(append ? append_neg_inf_column(px) : px, boundary);
}

// The last step shared by every get_rnnt_logprobs*, px [B][S][T] (or [B][S][T+1] with its end
// column already there): regular, the -inf column at T and -inf after each item's last frame;
// constrained, the blank folded into the symbol.
RnntLogprobs finish(const at::Tensor& px, const at::Tensor& py, const std::optional<at::Tensor>& boundary,
                    RnntType type, bool has_end_column = false) {
  if (type == RnntType::kRegular) return {regular_px_ends(px, boundary, !has_end_column), py};
  if (type == RnntType::kConstrained) return {px + py.narrow(1, 1, px.size(1)), py};
  return {px, py};
}

struct LmAm {
  int64_t B, S, T, C;
};

LmAm check_lm_am(const char* where, const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                 int64_t termination_symbol, const std::optional<at::Tensor>& boundary, RnntType type) {
  if (lm.dim() != 3 || lm.size(1) < 1) fail(where, "lm must be [B][S+1][C], got " + c10::str(lm.sizes()));
  if (am.dim() != 3) fail(where, "am must be [B][T][C], got " + c10::str(am.sizes()));
  if (lm.size(0) != am.size(0) || lm.size(2) != am.size(2))
    fail(where, "lm " + c10::str(lm.sizes()) + " and am " + c10::str(am.sizes()) + " must agree in B and C");
  // Half and bfloat16 are lifted to float32 (above), so they mix with float32; float32 and float64 do
  // not mix: the kernels read both with one element type.
  if (!at::isFloatingType(lm.scalar_type()) || !at::isFloatingType(am.scalar_type()) || lifted_type(lm) != lifted_type(am))
    fail(where, std::string("lm and am must have one floating type (half and bfloat16 count as float), got lm ") +
                    c10::toString(lm.scalar_type()) + " and am " + c10::toString(am.scalar_type()));
  if (lm.device() != am.device())
    fail(where, "lm and am must be on one device, got lm on " + lm.device().str() + " and am on " + am.device().str());
  const LmAm d{am.size(0), lm.size(1) - 1, am.size(1), am.size(2)};
  check_symbols(where, symbols, d.B, d.S, d.C, termination_symbol);
  check_boundary_shape(where, boundary, d.B);
  check_frames(where, type, boundary, d.S, d.T);
  return d;
}

MutualInformation recursion(const RnntLogprobs& lp, const RnntOptions& o, bool with_grad) {
  const at::Tensor px = penalize_delay(lp.px, o.boundary, o.rnnt_type, o.delay_penalty);
  if (with_grad) return mutual_information_with_grad(px, lp.py, o.boundary);
  MutualInformation mi;
  mi.scores = mutual_information_recursion(px, lp.py, o.boundary);
  return mi;
}

RnntLossWithGrad loss_from(const RnntLogprobs& lp, const RnntOptions& o, bool with_grad, at::ScalarType type) {
  const MutualInformation mi = recursion(lp, o, with_grad);
  return {reduce(mi.scores, o.reduction).to(type), mi.px_grad, mi.py_grad};
}

// symbols [B][S] with the blank appended as symbol S: [B][S+1], the symbol each lattice row emits.
at::Tensor symbols_and_blank(const at::Tensor& symbols, int64_t blank) {
  return at::cat({symbols, at::full({symbols.size(0), 1}, blank, symbols.options())}, 1);
}

}  // namespace

RnntLogprobs get_rnnt_logprobs(const at::Tensor& lm_in, const at::Tensor& am_in, const at::Tensor& symbols,
                               int64_t termination_symbol, const std::optional<at::Tensor>& boundary, RnntType type) {
  check_lm_am("get_rnnt_logprobs", lm_in, am_in, symbols, termination_symbol, boundary, type);
  auto [px, py] = detail::symbol_logprobs(lifted(lm_in), lifted(am_in), symbols, termination_symbol);
  return finish(px, py, boundary, type);
}

at::Tensor rnnt_loss_simple(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols, const RnntOptions& o) {
  return loss_from(get_rnnt_logprobs(lm, am, symbols, o.termination_symbol, o.boundary, o.rnnt_type), o, false,
                   am.scalar_type())
      .loss;
}

RnntLossWithGrad rnnt_loss_simple_with_grad(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                                            const RnntOptions& o) {
  return loss_from(get_rnnt_logprobs(lm, am, symbols, o.termination_symbol, o.boundary, o.rnnt_type), o, true,
                   am.scalar_type());
}

RnntLogprobs get_rnnt_logprobs_smoothed(const at::Tensor& lm_in, const at::Tensor& am_in, const at::Tensor& symbols,
                                        int64_t termination_symbol, double lm_only_scale, double am_only_scale,
                                        const std::optional<at::Tensor>& boundary, RnntType type) {
  const LmAm d = check_lm_am("get_rnnt_logprobs_smoothed", lm_in, am_in, symbols, termination_symbol, boundary, type);
  const at::Tensor lm = lifted(lm_in), am = lifted(am_in);
  const int64_t B = d.B, S = d.S, C = d.C;
  // The full model: the same log-probabilities as the simple loss.
  const auto [px, py] = detail::symbol_logprobs(lm, am, symbols, termination_symbol);  // [B][S][T], [B][S+1][T]
  const double combined = 1.0 - lm_only_scale - am_only_scale;
  at::Tensor px_interp = px * combined, py_interp = py * combined;

  // LM only: each context's own softmax, the same for every frame ([B][S][1], [B][S+1][1]).
  if (lm_only_scale != 0.0) {
    const at::Tensor lm_norm = at::logsumexp(lm, 2, true);  // [B][S+1][1]
    const at::Tensor px_lmonly = at::gather(lm.narrow(1, 0, S), 2, symbols.unsqueeze(-1)) - lm_norm.narrow(1, 0, S);
    const at::Tensor py_lmonly = lm.select(2, termination_symbol).unsqueeze(2) - lm_norm;
    px_interp = px_interp + px_lmonly * lm_only_scale;
    py_interp = py_interp + py_lmonly * lm_only_scale;
  }
  // AM only: the AM against a unigram LM, the LM's distribution averaged over every context of the
  // batch (+ the smallest normal number, as k2). That is the lattice of a prediction network whose
  // every row is log(unigram), so symbol_logprobs computes it too.
  if (am_only_scale != 0.0) {
    const at::Tensor unigram = at::softmax(lm, 2).mean(at::IntArrayRef{0, 1}, true) + tiny(lm);  // [1][1][C]
    const auto [px_amonly, py_amonly] =
        detail::symbol_logprobs(unigram.log().expand({B, S + 1, C}), am, symbols, termination_symbol);
    px_interp = px_interp + px_amonly * am_only_scale;
    py_interp = py_interp + py_amonly * am_only_scale;
  }
  // k2 replaces a zero scale by 1e-20 to keep -inf * 0 out; here a zero-weighted part is skipped
  // (its contribution would be 1e-20 of a log-probability) and the -inf column is added last.
  return finish(px_interp, py_interp, boundary, type);
}

at::Tensor rnnt_loss_smoothed(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                              double lm_only_scale, double am_only_scale, const RnntOptions& o) {
  const RnntLogprobs lp = get_rnnt_logprobs_smoothed(lm, am, symbols, o.termination_symbol, lm_only_scale, am_only_scale,
                                                     o.boundary, o.rnnt_type);
  return loss_from(lp, o, false, am.scalar_type()).loss;
}

RnntLossWithGrad rnnt_loss_smoothed_with_grad(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                                              double lm_only_scale, double am_only_scale, const RnntOptions& o) {
  const RnntLogprobs lp = get_rnnt_logprobs_smoothed(lm, am, symbols, o.termination_symbol, lm_only_scale, am_only_scale,
                                                     o.boundary, o.rnnt_type);
  return loss_from(lp, o, true, am.scalar_type());
}

at::Tensor get_rnnt_prune_ranges(const at::Tensor& px_grad, const at::Tensor& py_grad_in, const at::Tensor& boundary,
                                 int64_t s_range) {
  const char* where = "get_rnnt_prune_ranges";
  if (px_grad.dim() != 3 || py_grad_in.dim() != 3)
    fail(where, "px_grad must be [B][S][T or T+1] and py_grad [B][S+1][T], got " + c10::str(px_grad.sizes()) + " and " +
                    c10::str(py_grad_in.sizes()));
  const int64_t B = px_grad.size(0), S = px_grad.size(1), T1 = px_grad.size(2), T = py_grad_in.size(2), S1 = S + 1;
  if (py_grad_in.size(0) != B || py_grad_in.size(1) != S1 || (T1 != T && T1 != T + 1))
    fail(where, "px_grad " + c10::str(px_grad.sizes()) + " and py_grad " + c10::str(py_grad_in.sizes()) +
                    " do not fit [B][S][T or T+1] and [B][S+1][T]");
  check_boundary_shape(where, boundary, B);
  if (s_range > S) s_range = S + 1;  // no pruning: every symbol position is kept
  const bool modified = T1 == T;
  check_boundary_values(where, boundary, S, T);
  if (S > 0 && s_range < (modified ? 1 : 2))
    fail(where, "s_range must be at least " + std::string(modified ? "1 (modified)" : "2 (regular)") +
                    " or no path survives the pruning, got " + std::to_string(s_range));
  // Regular: a frame's block of s_range positions lets the path advance s_range - 1 symbols, so an
  // item with S_b symbols in T_b frames needs s_range >= ceil(S_b / T_b) + 1, or no path connects
  // the blocks and its pruned loss is +inf. Widened then, as fast_rnnt does, with a warning.
  if (!modified && S > 0 && s_range <= S) {
    const at::Tensor bc = boundary.cpu();
    int64_t needed = s_range, item = -1, item_s = 0, item_t = 0;
    for (int64_t i = 0; i < B; ++i) {
      const int64_t sb = bc[i][2].item<int64_t>() - bc[i][0].item<int64_t>(), tb = bc[i][3].item<int64_t>() - bc[i][1].item<int64_t>();
      if (tb <= 0 || sb == 0) continue;
      const int64_t need = (sb + tb - 1) / tb + 1;
      if (need > needed) needed = need, item = i, item_s = sb, item_t = tb;
    }
    if (item >= 0) {
      needed = std::min(needed, S + 1);
      std::cerr << where << ": warning: s_range " << s_range << " cannot cover item " << item << "'s " << item_s << " symbols in " << item_t
                << " frames (each frame advances at most s_range - 1); widened to " << needed << std::endl;
      s_range = needed;
    }
  }
  const at::Tensor py_grad = py_grad_in.contiguous();
  const at::Tensor b = boundary.to(px_grad.device());

  // The occupation of s_range consecutive positions starting at s, minus what leaves the block
  // through the symbol just before it: the block start that keeps the most of the path mass.
  const at::Tensor blocks = py_grad.as_strided({B, S1 - s_range + 1, s_range, T}, {S1 * T, T, T, 1}).sum(2);
  const at::Tensor px_pad = at::cat({at::zeros({B, 1, T1}, px_grad.options()), px_grad}, 1);  // [B][S1][T1]
  const at::Tensor final_grad = blocks - px_pad.narrow(1, 0, S1 - s_range + 1).narrow(2, 0, T);
  at::Tensor s_begin = at::argmax(final_grad, 1);  // [B][T]

  // Past an item's frames, and on its last frame, the block must end at its last symbol.
  const at::Tensor frames = at::arange(T, s_begin.options()).reshape({1, T}).expand({B, T});
  const at::Tensor before_last = frames < b.select(1, 3).reshape({B, 1}) - 1;
  const at::Tensor padding = (b.select(1, 2).reshape({B, 1}) - s_range + 1).clamp_min(0);
  s_begin = at::where(before_last, s_begin, padding);

  // Monotonic, starting at 0, and advancing by less than the range per frame (modified: by at most
  // one symbol), so that consecutive blocks overlap as a path needs (k2's construction: a running
  // minimum from the right, applied before and after the transform x -> (range - 1) t - x).
  const int64_t step = modified ? 2 : s_range;
  auto suffix_min = [](const at::Tensor& x) { return std::get<0>(at::cummin(x.flip({1}), 1)).flip({1}); };
  const at::Tensor ramp = (step - 1) * at::arange(T, s_begin.options()).reshape({1, T});
  s_begin = suffix_min(s_begin);
  s_begin = suffix_min(ramp - s_begin).clamp_min(0);
  s_begin = ramp - s_begin;
  return s_begin.reshape({B, T, 1}).expand({B, T, s_range}) + at::arange(s_range, s_begin.options());
}

std::pair<at::Tensor, at::Tensor> do_rnnt_pruning(const at::Tensor& am, const at::Tensor& lm, const at::Tensor& ranges) {
  const char* where = "do_rnnt_pruning";
  if (am.dim() != 3 || lm.dim() != 3 || ranges.dim() != 3)
    fail(where, "needs am [B][T][C], lm [B][S+1][C] and ranges [B][T][s_range]");
  const int64_t B = ranges.size(0), T = ranges.size(1), s_range = ranges.size(2), S1 = lm.size(1), C = lm.size(2);
  if (am.size(0) != B || lm.size(0) != B || am.size(1) != T || am.size(2) != C)
    fail(where, "am " + c10::str(am.sizes()) + ", lm " + c10::str(lm.sizes()) + " and ranges " + c10::str(ranges.sizes()) +
                    " disagree in B, T or C");
  // A value past S would take rows of the next item's lm without an error.
  check_ranges(where, ranges, S1 - 1);
  const at::Tensor am_pruned = detail::repeat_rows(am, s_range);  // am.unsqueeze(2).expand({B, T, s_range, C})
  // Rows of lm picked by index: its backward adds into a [B][S+1][C] gradient. (A gather from lm
  // expanded to [B][T][S+1][C], as k2 does it, allocates that full size in the backward.)
  const at::Tensor lm_pruned = detail::pick_rows(lm, ranges.reshape({B, T * s_range})).view({B, T, s_range, C});
  return {am_pruned, lm_pruned};
}

RnntLogprobs get_rnnt_logprobs_pruned(const at::Tensor& logits_in, const at::Tensor& symbols, const at::Tensor& ranges,
                                      int64_t termination_symbol, const std::optional<at::Tensor>& boundary,
                                      RnntType type) {
  const char* where = "get_rnnt_logprobs_pruned";
  if (logits_in.dim() != 4) fail(where, "logits must be [B][T][s_range][C], got " + c10::str(logits_in.sizes()));
  const at::Tensor logits = lifted(logits_in);
  const int64_t B = logits.size(0), T = logits.size(1), s_range = logits.size(2), C = logits.size(3);
  if (!ranges.sizes().equals({B, T, s_range}))
    fail(where, "ranges must be [B][T][s_range] = " + c10::str(logits.sizes().slice(0, 3)) + ", got " +
                    c10::str(ranges.sizes()));
  if (symbols.dim() != 2) fail(where, "symbols must be [B][S], got " + c10::str(symbols.sizes()));
  const int64_t S = symbols.size(1);
  check_symbols(where, symbols, B, S, C, termination_symbol);
  check_boundary_shape(where, boundary, B);
  check_boundary_values(where, boundary, S, T);
  check_frames(where, type, boundary, S, T);
  if (s_range > S + 1) fail(where, "s_range " + std::to_string(s_range) + " exceeds S + 1 = " + std::to_string(S + 1));
  check_ranges(where, ranges, S);

  const at::Tensor with_blank = symbols_and_blank(symbols, termination_symbol);
  const at::Tensor pruned_symbols = at::gather(with_blank.unsqueeze(1).expand({B, T, S + 1}), 2, ranges);  // [B][T][s_range]
  // Values for positions ranges[b][t][0] .. + s_range - 1 put in place in a row of S + 1, -inf elsewhere.
  const at::Tensor shifts = ranges.select(2, 0);
  if (logits.device().is_cpu()) {  // computed in place, one pass per row (rnnt_logprobs.h)
    const auto [px, py] = detail::pruned_logprobs_placed(logits, pruned_symbols, shifts, S, termination_symbol,
                                                         type == RnntType::kRegular);
    return finish(px, py, boundary, type, /*has_end_column=*/type == RnntType::kRegular);
  }
  auto place = [&](const at::Tensor& v) {  // [B][T][s_range] -> [B][T][S+1]
    const at::Tensor padded = at::cat({v, at::full({B, T, S + 1 - s_range}, kNegInf, v.options())}, 2);
    const at::Tensor index = at::remainder(at::arange(S + 1, ranges.options()).reshape({1, 1, S + 1}) - shifts.unsqueeze(2), S + 1);
    return at::gather(padded, 2, index);
  };
  const auto [px_values, py_values] = detail::pruned_logprobs(logits, pruned_symbols, termination_symbol);
  const at::Tensor px = place(px_values).narrow(2, 0, S).permute({0, 2, 1});  // [B][S][T]
  const at::Tensor py = place(py_values).permute({0, 2, 1});                   // [B][S+1][T]
  return finish(px, py, boundary, type);
}

at::Tensor rnnt_loss_pruned(const at::Tensor& logits, const at::Tensor& symbols, const at::Tensor& ranges,
                            const RnntOptions& o) {
  return loss_from(get_rnnt_logprobs_pruned(logits, symbols, ranges, o.termination_symbol, o.boundary, o.rnnt_type), o,
                   false, logits.scalar_type())
      .loss;
}

RnntLogprobs get_rnnt_logprobs_joint(const at::Tensor& logits_in, const at::Tensor& symbols, int64_t termination_symbol,
                                     const std::optional<at::Tensor>& boundary, RnntType type) {
  const char* where = "get_rnnt_logprobs_joint";
  if (logits_in.dim() != 4 || logits_in.size(2) < 1)
    fail(where, "logits must be [B][T][S+1][C], got " + c10::str(logits_in.sizes()));
  const at::Tensor logits = lifted(logits_in);
  const int64_t B = logits.size(0), T = logits.size(1), S = logits.size(2) - 1, C = logits.size(3);
  check_symbols(where, symbols, B, S, C, termination_symbol);
  check_boundary_shape(where, boundary, B);
  check_frames(where, type, boundary, S, T);
  // Each row (b, t, s) is a pruned row whose symbol is y_s (the blank for s = S, whose px is
  // dropped): one fused pass per row each way on the CPU, where logsumexp + gather and their
  // autograd backward made several passes over the [B][T][S+1][C] logits (0.87x fast_rnnt's time).
  const at::Tensor with_blank = symbols_and_blank(symbols, termination_symbol);
  const auto [px_values, py_values] =
      detail::pruned_logprobs(logits, with_blank.unsqueeze(1).expand({B, T, S + 1}), termination_symbol);
  const at::Tensor px = px_values.narrow(2, 0, S).permute({0, 2, 1});  // [B][S][T]
  const at::Tensor py = py_values.permute({0, 2, 1});                   // [B][S+1][T]
  return finish(px, py, boundary, type);
}

at::Tensor rnnt_loss(const at::Tensor& logits, const at::Tensor& symbols, const RnntOptions& o) {
  return loss_from(get_rnnt_logprobs_joint(logits, symbols, o.termination_symbol, o.boundary, o.rnnt_type), o, false,
                   logits.scalar_type())
      .loss;
}

}  // namespace wavetrain::losses
