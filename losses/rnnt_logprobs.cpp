// The symbol and blank log-probabilities of the RNN-T lattice with a written-out gradient
// (rnnt_logprobs.h).
#include "losses/rnnt_logprobs.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <limits>

namespace wavetrain::losses::detail {
namespace {

// g_am[b][t][y_s] += gpx[b][s][t] for every s. On the CPU a plain loop: scatter_add_ with the
// index expanded to [B][T][S] took ~2 ms of the pruned pipeline (6% of it) at (8, 50, 300, 500).
void add_symbol_columns(at::Tensor& g_am, const at::Tensor& symbols, const at::Tensor& gpx) {
  const int64_t B = g_am.size(0), T = g_am.size(1), C = g_am.size(2), S = symbols.size(1);
  if (!g_am.device().is_cpu() || !g_am.is_contiguous()) {
    g_am.scatter_add_(2, symbols.unsqueeze(1).expand({B, T, S}), gpx.transpose(1, 2));
    return;
  }
  const at::Tensor g = gpx.contiguous(), y = symbols.contiguous();
  AT_DISPATCH_FLOATING_TYPES(g_am.scalar_type(), "add_symbol_columns", [&] {
    scalar_t* out = g_am.data_ptr<scalar_t>();
    const scalar_t* in = g.data_ptr<scalar_t>();
    const int64_t* sym = y.data_ptr<int64_t>();
    at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b)
        for (int64_t s = 0; s < S; ++s) {
          scalar_t* column = out + b * T * C + sym[b * S + s];
          const scalar_t* row = in + (b * S + s) * T;
          for (int64_t t = 0; t < T; ++t) column[t * C] += row[t];
        }
    });
  });
}

// Gradient, with W = dL/dN / Z, Z = sum_c P_lm[s][c] P_am[t][c] (+ tiny) and P = exp(x - max):
//   dN[s][t]/d lm[s][c] = P_lm[s][c] P_am[t][c] / Z[s][t]   (a softmax weight; likewise for am)
//   d lm = P_lm * (W @ P_am)        d am = P_am * (W^T @ P_lm)
// plus the direct terms: lm[s][y_s] and lm[s][blank] get the row sums of dL/dpx and dL/dpy,
// am[t][y_s] and am[t][blank] the column sums. dL/dN = -(dL/dpx, padded to S+1 rows) - dL/dpy.
// The maxima are constants here: N does not depend on them (their derivatives cancel, up to the
// tiny added inside the log).
struct SymbolLogprobs : public torch::autograd::Function<SymbolLogprobs> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& lm,
                                                const at::Tensor& am, const at::Tensor& symbols, int64_t blank) {
    const int64_t B = am.size(0), T = am.size(1), S = symbols.size(1);
    ctx->saved_data["blank"] = blank;
    if (am.device().is_cpu() && lm.device().is_cpu()) {  // one fused pass per item (rnnt_logprobs_cpu.cpp)
      const at::Tensor lm_c = lm.contiguous(), am_c = am.contiguous(), y = symbols.contiguous();
      const int64_t S1 = lm.size(1), C = am.size(2);
      at::Tensor p_lm = at::empty({B, S1, C}, am.options()), p_am = at::empty({B, T, C}, am.options());
      at::Tensor z = at::empty({B, S1, T}, am.options());
      at::Tensor px = at::empty({B, S, T}, am.options()), py = at::empty({B, S1, T}, am.options());
      symbol_logprobs_forward_cpu(lm_c, am_c, y, blank, p_lm, p_am, z, px, py);
      ctx->save_for_backward({p_lm, p_am, z, y});
      return {px, py};
    }
    const double tiny = am.scalar_type() == at::kDouble ? std::numeric_limits<double>::min()
                                                        : std::numeric_limits<float>::min();
    const at::Tensor am_max = std::get<0>(am.max(2, true)), lm_max = std::get<0>(lm.max(2, true));
    const at::Tensor p_am = (am - am_max).exp_(), p_lm = (lm - lm_max).exp_();
    const at::Tensor z = at::bmm(p_lm, p_am.transpose(1, 2)).add_(tiny);  // [B][S+1][T]
    const at::Tensor normalizers = z.log() + lm_max + am_max.transpose(1, 2);
    const at::Tensor am_symbols = at::gather(am, 2, symbols.unsqueeze(1).expand({B, T, S})).transpose(1, 2);  // [B][S][T]
    const at::Tensor lm_symbols = at::gather(lm.narrow(1, 0, S), 2, symbols.unsqueeze(-1));                    // [B][S][1]
    const at::Tensor px = am_symbols + lm_symbols - normalizers.narrow(1, 0, S);
    const at::Tensor py = am.select(2, blank).unsqueeze(1) + lm.select(2, blank).unsqueeze(2) - normalizers;
    ctx->save_for_backward({p_lm, p_am, z, symbols});
    return {px, py};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor &p_lm = saved[0], &p_am = saved[1], &z = saved[2], &symbols = saved[3];
    const int64_t blank = ctx->saved_data["blank"].toInt();
    const int64_t B = p_am.size(0), T = p_am.size(1), S = symbols.size(1);
    const at::Tensor gpx = grads[0].defined() ? grads[0] : at::zeros({B, S, T}, z.options());
    const at::Tensor gpy = grads[1].defined() ? grads[1] : at::zeros_like(z);
    if (z.device().is_cpu()) {
      at::Tensor g_lm = at::empty_like(p_lm), g_am = at::empty_like(p_am);
      symbol_logprobs_backward_cpu(p_lm, p_am, z, symbols, blank, gpx.contiguous(), gpy.contiguous(), g_lm, g_am);
      return {g_lm, g_am, at::Tensor(), at::Tensor()};
    }
    at::Tensor g_n = gpy.neg();  // dL/dN
    g_n.narrow(1, 0, S).sub_(gpx);
    const at::Tensor w = g_n.div_(z);
    at::Tensor g_lm = at::bmm(w, p_am).mul_(p_lm);                   // [B][S+1][C]
    at::Tensor g_am = at::bmm(w.transpose(1, 2), p_lm).mul_(p_am);  // [B][T][C]
    g_lm.narrow(1, 0, S).scatter_add_(2, symbols.unsqueeze(-1), gpx.sum(2, true));
    g_lm.select(2, blank).add_(gpy.sum(2));
    add_symbol_columns(g_am, symbols, gpx);
    g_am.select(2, blank).add_(gpy.sum(1));
    return {g_lm, g_am, at::Tensor(), at::Tensor()};
  }
};

// The pruned rows (see rnnt_logprobs.h); the CPU kernels are in rnnt_logprobs_cpu.cpp.
struct PrunedLogprobs : public torch::autograd::Function<PrunedLogprobs> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits_in,
                                                const at::Tensor& symbols_in, int64_t blank) {
    const at::Tensor logits = logits_in.contiguous(), symbols = symbols_in.contiguous();
    at::Tensor lse = at::empty(symbols.sizes(), logits.options());
    at::Tensor px = at::empty_like(lse), py = at::empty_like(lse);
    pruned_logprobs_forward_cpu(logits, symbols, blank, lse, px, py);
    ctx->save_for_backward({logits, symbols, lse});
    ctx->saved_data["blank"] = blank;
    return {px, py};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &symbols = saved[1], &lse = saved[2];
    const at::Tensor gpx = grads[0].defined() ? grads[0].contiguous() : at::zeros_like(lse);
    const at::Tensor gpy = grads[1].defined() ? grads[1].contiguous() : at::zeros_like(lse);
    at::Tensor grad = at::empty_like(logits);
    pruned_logprobs_backward_cpu(logits, symbols, ctx->saved_data["blank"].toInt(), lse, gpx, gpy, grad);
    return {grad, at::Tensor(), at::Tensor()};
  }
};

// The pruned rows put in place (rnnt_logprobs.h); CPU only.
struct PrunedLogprobsPlaced : public torch::autograd::Function<PrunedLogprobsPlaced> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, const at::Tensor& logits_in,
                                                const at::Tensor& symbols_in, const at::Tensor& shifts_in, int64_t S,
                                                int64_t blank, bool extra_column) {
    const at::Tensor logits = logits_in.contiguous(), symbols = symbols_in.contiguous(), shifts = shifts_in.contiguous();
    const int64_t B = logits.size(0), T = logits.size(1);
    const double neg_inf = -std::numeric_limits<double>::infinity();
    at::Tensor lse = at::empty(symbols.sizes(), logits.options());
    at::Tensor px = at::full({B, S, T + (extra_column ? 1 : 0)}, neg_inf, logits.options());
    at::Tensor py = at::full({B, S + 1, T}, neg_inf, logits.options());
    pruned_logprobs_placed_forward_cpu(logits, symbols, shifts, blank, lse, px, py);
    ctx->save_for_backward({logits, symbols, shifts, lse});
    ctx->saved_data["blank"] = blank;
    return {px, py};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const torch::autograd::variable_list saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &symbols = saved[1], &shifts = saved[2], &lse = saved[3];
    // An output that did not reach the loss comes as zeros (autograd materialises them).
    const at::Tensor gpx = grads[0].contiguous(), gpy = grads[1].contiguous();
    at::Tensor grad = at::empty_like(logits);
    pruned_logprobs_placed_backward_cpu(logits, symbols, shifts, ctx->saved_data["blank"].toInt(), lse, gpx, gpy, grad);
    return {grad, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct PickRows : public torch::autograd::Function<PickRows> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& lm, const at::Tensor& rows) {
    const int64_t B = lm.size(0), S1 = lm.size(1), C = lm.size(2), M = rows.size(1);
    // Row indices into lm viewed as [B * S1][C]; item b's all lie in its own block [b S1, (b+1) S1).
    const at::Tensor flat = (rows + at::arange(B, rows.options()).view({B, 1}) * S1).reshape({-1}).contiguous();
    ctx->save_for_backward({flat});
    ctx->saved_data["S1"] = S1;
    return lm.reshape({B * S1, C}).index_select(0, flat).view({B, M, C});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const at::Tensor flat = ctx->get_saved_variables()[0];
    const at::Tensor grad = grads[0].contiguous();
    const int64_t B = grad.size(0), M = grad.size(1), C = grad.size(2), S1 = ctx->saved_data["S1"].toInt();
    at::Tensor g_lm = at::zeros({B, S1, C}, grad.options());
    if (!grad.device().is_cpu()) {
      g_lm.view({B * S1, C}).index_add_(0, flat, grad.view({B * M, C}));
      return {g_lm, at::Tensor()};
    }
    AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "pick_rows_backward", [&] {
      const scalar_t* g = grad.data_ptr<scalar_t>();
      const int64_t* r = flat.data_ptr<int64_t>();
      scalar_t* out = g_lm.data_ptr<scalar_t>();
      at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin * M; i < end * M; ++i) {  // item b's rows write only its own block
          scalar_t* __restrict__ o = out + r[i] * C;
          const scalar_t* __restrict__ x = g + i * C;
          for (int64_t c = 0; c < C; ++c) o[c] += x[c];
        }
      });
    });
    return {g_lm, at::Tensor()};
  }
};

// am [B][T][C] seen as [B][T][R][C], each row repeated R times (an expanded view, as k2's
// am.unsqueeze(2).expand). Autograd's backward of expand is a sum over the repeats through ATen's
// reduction, a tenth of the pruned pipeline at 1 thread; on the CPU it is one pass here, the R
// rows of a frame added in cache.
struct RepeatRows : public torch::autograd::Function<RepeatRows> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, const at::Tensor& am, int64_t R) {
    ctx->saved_data["R"] = R;
    return am.unsqueeze(2).expand({am.size(0), am.size(1), R, am.size(2)});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const int64_t R = ctx->saved_data["R"].toInt();
    const at::Tensor& grad_in = grads[0];
    if (!grad_in.device().is_cpu() || !(grad_in.scalar_type() == at::kFloat || grad_in.scalar_type() == at::kDouble))
      return {grad_in.sum(2), at::Tensor()};
    const at::Tensor grad = grad_in.contiguous();
    const int64_t B = grad.size(0), T = grad.size(1), C = grad.size(3);
    at::Tensor g_am = at::empty({B, T, C}, grad.options());
    AT_DISPATCH_FLOATING_TYPES(grad.scalar_type(), "repeat_rows_backward", [&] {
      const scalar_t* g = grad.data_ptr<scalar_t>();
      scalar_t* out = g_am.data_ptr<scalar_t>();
      at::parallel_for(0, B * T, 16, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          scalar_t* __restrict__ o = out + i * C;
          const scalar_t* __restrict__ x = g + i * R * C;
          std::fill(o, o + C, scalar_t(0));
          for (int64_t r = 0; r < R; ++r)
            for (int64_t c = 0; c < C; ++c) o[c] += x[r * C + c];
        }
      });
    });
    return {g_am, at::Tensor()};
  }
};

}  // namespace

at::Tensor pick_rows(const at::Tensor& lm, const at::Tensor& rows) { return PickRows::apply(lm, rows); }

at::Tensor repeat_rows(const at::Tensor& am, int64_t R) { return RepeatRows::apply(am, R); }

std::pair<at::Tensor, at::Tensor> pruned_logprobs(const at::Tensor& logits, const at::Tensor& symbols, int64_t blank) {
  if (logits.device().is_cpu()) {
    const torch::autograd::variable_list out = PrunedLogprobs::apply(logits, symbols, blank);
    return {out[0], out[1]};
  }
  const at::Tensor lse = at::logsumexp(logits, 3);
  return {at::gather(logits, 3, symbols.unsqueeze(3)).squeeze(3) - lse, logits.select(3, blank) - lse};
}

std::pair<at::Tensor, at::Tensor> pruned_logprobs_placed(const at::Tensor& logits, const at::Tensor& symbols,
                                                         const at::Tensor& shifts, int64_t S, int64_t blank,
                                                         bool extra_column) {
  const torch::autograd::variable_list out = PrunedLogprobsPlaced::apply(logits, symbols, shifts, S, blank, extra_column);
  return {out[0], out[1]};
}

std::pair<at::Tensor, at::Tensor> symbol_logprobs(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                                                  int64_t blank) {
  const torch::autograd::variable_list out = SymbolLogprobs::apply(lm, am, symbols, blank);
  return {out[0], out[1]};
}

}  // namespace wavetrain::losses::detail
