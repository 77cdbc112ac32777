// RNN-T losses on top of the mutual-information recursion, with k2's definitions and names:
// the "simple" loss from separate LM and AM logits, its smoothed variant, prune ranges from the
// simple loss's gradients, the pruned loss on a [B][T][s_range][C] joiner output, and the full loss
// on [B][T][S+1][C] logits.
//
// Shapes: lm [B][S+1][C] (prediction network, one row per symbol context), am [B][T][C] (encoder),
// symbols int64 [B][S], logits [B][T][S+1][C]; boundary int64 [B][4] = (0, 0, S_b, T_b) gives each
// item's symbol and frame counts (k2 also allows nonzero begins). Losses are negated scores
// (log-likelihoods) per item, then reduced.
//
// RNN-T types: regular (any number of symbols per frame), modified (at most one symbol per frame,
// and emitting one also consumes the frame) and constrained (modified, and a symbol's probability
// also includes moving on from it). Modified and constrained need T_b >= S_b for every item.
// S = 0 (no symbols) is allowed everywhere; the loss is then the cost of T blanks.
//
// The simple and pruned paths never build a [B][T][S+1][C] tensor; only rnnt_loss (whose input
// already is one) works at that size. Half and bfloat16 inputs are computed in float32 and the
// loss is returned in the input's type.
#pragma once

#include <ATen/ATen.h>

#include <optional>
#include <utility>

namespace wavetrain::losses {

enum class RnntType { kRegular, kModified, kConstrained };
enum class Reduction { kNone, kMean, kSum };

struct RnntOptions {
  int64_t termination_symbol = 0;  // the blank
  std::optional<at::Tensor> boundary;
  RnntType rnnt_type = RnntType::kRegular;
  double delay_penalty = 0.0;      // > 0 favours emitting symbols early (k2's delay penalty)
  Reduction reduction = Reduction::kMean;
};

// px [B][S][T+1] (regular) or [B][S][T], py [B][S+1][T]: the log-probabilities the recursion
// consumes.
struct RnntLogprobs {
  at::Tensor px, py;
};

// The joint log-softmax of lm[s] + am[t] evaluated only at the symbols and the blank; the
// normaliser is log(exp(lm - lm_max) @ exp(am - am_max)^T) + the maxima (one [S+1][C] x [C][T]
// matmul per item).
RnntLogprobs get_rnnt_logprobs(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                               int64_t termination_symbol, const std::optional<at::Tensor>& boundary = std::nullopt,
                               RnntType rnnt_type = RnntType::kRegular);

at::Tensor rnnt_loss_simple(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                            const RnntOptions& options = {});

// The loss with d score / d px and d score / d py (k2's return_grad=true), for get_rnnt_prune_ranges.
struct RnntLossWithGrad {
  at::Tensor loss, px_grad, py_grad;
};
RnntLossWithGrad rnnt_loss_simple_with_grad(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                                            const RnntOptions& options = {});

// The simple loss interpolated with LM-only and AM-only versions of itself (k2's smoothed loss):
// px = (1 - lm_only_scale - am_only_scale) px + lm_only_scale px_lm_only + am_only_scale px_am_only,
// likewise py; the AM-only part uses a unigram LM averaged over the batch.
RnntLogprobs get_rnnt_logprobs_smoothed(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                                        int64_t termination_symbol, double lm_only_scale, double am_only_scale,
                                        const std::optional<at::Tensor>& boundary = std::nullopt,
                                        RnntType rnnt_type = RnntType::kRegular);
at::Tensor rnnt_loss_smoothed(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                              double lm_only_scale = 0.1, double am_only_scale = 0.1, const RnntOptions& options = {});
RnntLossWithGrad rnnt_loss_smoothed_with_grad(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                                              double lm_only_scale = 0.1, double am_only_scale = 0.1,
                                              const RnntOptions& options = {});

// For each frame, the s_range consecutive symbol positions [B][T][s_range] (int64) where the
// simple loss's occupation is concentrated, made monotonic and gap-free as k2 does, so that every
// path through the pruned lattice stays connected.
// Regular: an item with S_b symbols in T_b frames needs s_range >= ceil(S_b / T_b) + 1 (a frame
// advances at most s_range - 1 symbols); a smaller s_range is widened to that, with a warning on
// stderr, as fast_rnnt does (the returned ranges are then wider), instead of a silent +inf.
at::Tensor get_rnnt_prune_ranges(const at::Tensor& px_grad, const at::Tensor& py_grad, const at::Tensor& boundary,
                                 int64_t s_range);

// lm and am gathered at the ranges: ([B][T][s_range][C] am expanded, [B][T][s_range][C] lm rows).
std::pair<at::Tensor, at::Tensor> do_rnnt_pruning(const at::Tensor& am, const at::Tensor& lm, const at::Tensor& ranges);

// Log-probabilities from the pruned joiner output logits [B][T][s_range][C]; positions outside a
// frame's range are -inf.
RnntLogprobs get_rnnt_logprobs_pruned(const at::Tensor& logits, const at::Tensor& symbols, const at::Tensor& ranges,
                                      int64_t termination_symbol, const std::optional<at::Tensor>& boundary = std::nullopt,
                                      RnntType rnnt_type = RnntType::kRegular);
at::Tensor rnnt_loss_pruned(const at::Tensor& logits, const at::Tensor& symbols, const at::Tensor& ranges,
                            const RnntOptions& options = {});

// The full loss on logits [B][T][S+1][C] (torchaudio's rnnt_loss for the regular type).
RnntLogprobs get_rnnt_logprobs_joint(const at::Tensor& logits, const at::Tensor& symbols, int64_t termination_symbol,
                                     const std::optional<at::Tensor>& boundary = std::nullopt,
                                     RnntType rnnt_type = RnntType::kRegular);
at::Tensor rnnt_loss(const at::Tensor& logits, const at::Tensor& symbols, const RnntOptions& options = {});

}  // namespace wavetrain::losses
