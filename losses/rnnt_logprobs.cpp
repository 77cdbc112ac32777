// The symbol and blank log-probabilities of the RNN-T lattice with a written-out gradient
// (rnnt_logprobs.h).
#include "losses/rnnt_logprobs.h"

#include <torch/csrc/autograd/custom_function.h>

#include <limits>

namespace wavetrain::losses::detail {
namespace {

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
    ctx->saved_data["blank"] = blank;
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
    at::Tensor g_n = gpy.neg();  // dL/dN
    g_n.narrow(1, 0, S).sub_(gpx);
    const at::Tensor w = g_n.div_(z);
    at::Tensor g_lm = at::bmm(w, p_am).mul_(p_lm);                   // [B][S+1][C]
    at::Tensor g_am = at::bmm(w.transpose(1, 2), p_lm).mul_(p_am);  // [B][T][C]
    g_lm.narrow(1, 0, S).scatter_add_(2, symbols.unsqueeze(-1), gpx.sum(2, true));
    g_lm.select(2, blank).add_(gpy.sum(2));
    g_am.scatter_add_(2, symbols.unsqueeze(1).expand({B, T, S}), gpx.transpose(1, 2));
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

}  // namespace

std::pair<at::Tensor, at::Tensor> pruned_logprobs(const at::Tensor& logits, const at::Tensor& symbols, int64_t blank) {
  if (logits.device().is_cpu()) {
    const torch::autograd::variable_list out = PrunedLogprobs::apply(logits, symbols, blank);
    return {out[0], out[1]};
  }
  const at::Tensor lse = at::logsumexp(logits, 3);
  return {at::gather(logits, 3, symbols.unsqueeze(3)).squeeze(3) - lse, logits.select(3, blank) - lse};
}

std::pair<at::Tensor, at::Tensor> symbol_logprobs(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols,
                                                  int64_t blank) {
  const torch::autograd::variable_list out = SymbolLogprobs::apply(lm, am, symbols, blank);
  return {out[0], out[1]};
}

}  // namespace wavetrain::losses::detail
