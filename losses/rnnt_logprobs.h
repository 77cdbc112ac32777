// Internal to losses/: the log-probabilities the RNN-T losses feed to the recursion, with their
// gradients written out (rnnt_loss.cpp uses them).
#pragma once

#include <ATen/ATen.h>

#include <utility>

namespace wavetrain::losses::detail {

// lm [B][S+1][C], am [B][T][C] (float32/float64), symbols int64 [B][S]:
//   px[b][s][t] = lm[b][s][y_s] + am[b][t][y_s] - N[b][s][t]   [B][S][T], y_s = symbols[b][s]
//   py[b][s][t] = lm[b][s][blank] + am[b][t][blank] - N[b][s][t]   [B][S+1][T]
//   N[b][s][t] = log sum_c exp(lm[b][s][c] + am[b][t][c]), through one [S+1][C] x [C][T] matmul of
//   exponentials with the maxima taken out (k2's way; + the smallest normal number inside the log).
// Differentiable in lm and am. The backward is two matmuls and a few passes over lm and am, where
// autograd through the same ops ran about ten [B][T][C] passes (max, exp, gather backwards). On the
// CPU each item is one task (its products in its own thread), items in parallel.
std::pair<at::Tensor, at::Tensor> symbol_logprobs(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                                                  int64_t blank);

// logits [B][T][R][C] (the pruned joiner output), symbols int64 [B][T][R] (the symbol each
// position would emit):
//   px[b][t][r] = logits[b][t][r][symbols[b][t][r]] - L[b][t][r]     [B][T][R]
//   py[b][t][r] = logits[b][t][r][blank] - L[b][t][r],   L = logsumexp over C
// Differentiable in logits. On the CPU one fused pass per row in each direction (vectorised exp);
// elsewhere ATen ops. LibTorch 1.13's logsumexp and its backward took ~100 ms of the pruned loss
// at (8, 300, 5, 500).
std::pair<at::Tensor, at::Tensor> pruned_logprobs(const at::Tensor& logits, const at::Tensor& symbols, int64_t blank);

// The same rows put in place in the lattice, on the CPU (the other devices use pruned_logprobs
// and ATen's gathers): row r of (b, t) is symbol position s = shifts[b][t] + r (shifts [B][T]:
// ranges[b][t][0]; the ranges are consecutive). Returns
//   px [B][S][T + extra_column]: px[b][s][t] = that row's px for s < S, -inf where no row lies
//                                (and in the extra column: regular RNN-T's "no symbol after T")
//   py [B][S+1][T]:              likewise with the blank.
// Differentiable in logits. One pass per row each way, where the gathers that placed the values
// (a cat, a remainder and a gather per output, and their backwards) took 2 ms of the pruned loss.
std::pair<at::Tensor, at::Tensor> pruned_logprobs_placed(const at::Tensor& logits, const at::Tensor& symbols,
                                                         const at::Tensor& shifts, int64_t S, int64_t blank,
                                                         bool extra_column);

// lm [B][S1][C] rows picked by rows [B][M] (each in [0, S1)): out [B][M][C] = lm[b][rows[b][m]].
// Differentiable in lm; on the CPU the backward adds each item's rows in a loop over its own
// block (items in parallel), where index_select's backward (an index_add over all B * S1 rows)
// took 7% of the pruned pipeline.
at::Tensor pick_rows(const at::Tensor& lm, const at::Tensor& rows);
// am [B][T][C] as [B][T][R][C], every row repeated R times (an expanded view of am); on the CPU its
// backward, the sum over the repeats, is one pass.
at::Tensor repeat_rows(const at::Tensor& am, int64_t R);

// The CPU kernels of symbol_logprobs (rnnt_logprobs_cpu.cpp), every tensor contiguous, items in
// parallel. Forward fills p_lm [B][S+1][C] and p_am [B][T][C] (exp(x - row max)),
// z [B][S+1][T] = p_lm p_am^T + tiny, px and py; backward fills g_lm and g_am from them.
void symbol_logprobs_forward_cpu(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols, int64_t blank,
                                 at::Tensor& p_lm, at::Tensor& p_am, at::Tensor& z, at::Tensor& px, at::Tensor& py);
void symbol_logprobs_backward_cpu(const at::Tensor& p_lm, const at::Tensor& p_am, const at::Tensor& z,
                                  const at::Tensor& symbols, int64_t blank, const at::Tensor& gpx, const at::Tensor& gpy,
                                  at::Tensor& g_lm, at::Tensor& g_am);

// The CPU rows of pruned_logprobs (rnnt_logprobs_cpu.cpp): forward fills lse, px, py [rows];
// backward fills grad [rows][C] from gpx, gpy [rows]. logits contiguous float32/float64.
void pruned_logprobs_forward_cpu(const at::Tensor& logits, const at::Tensor& symbols, int64_t blank, at::Tensor& lse,
                                 at::Tensor& px, at::Tensor& py);
void pruned_logprobs_backward_cpu(const at::Tensor& logits, const at::Tensor& symbols, int64_t blank,
                                  const at::Tensor& lse, const at::Tensor& gpx, const at::Tensor& gpy, at::Tensor& grad);
// Their placed form: px, py (already -inf) get the rows' values at their lattice positions;
// backward reads gpx, gpy there. shifts int64 [B][T], contiguous.
void pruned_logprobs_placed_forward_cpu(const at::Tensor& logits, const at::Tensor& symbols, const at::Tensor& shifts,
                                        int64_t blank, at::Tensor& lse, at::Tensor& px, at::Tensor& py);
void pruned_logprobs_placed_backward_cpu(const at::Tensor& logits, const at::Tensor& symbols, const at::Tensor& shifts,
                                         int64_t blank, const at::Tensor& lse, const at::Tensor& gpx,
                                         const at::Tensor& gpy, at::Tensor& grad);

}  // namespace wavetrain::losses::detail
