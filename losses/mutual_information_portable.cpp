// The mutual-information recursion from ATen tensor ops only, for any device (MPS has no kernel of
// its own) and as the tests' oracle for the CPU and CUDA kernels. Semantics: mutual_information.h.
//
// The whole batch advances one anti-diagonal (d = s + t, absolute coordinates) per step; a step is
// a handful of [B][S+1] tensor ops, so the cost is about (S + T) x 25 small ops, independent of B.
// Cells outside an item's box are kept at -inf, which also removes the terms whose predecessor lies
// outside it. Skewed copies of px and py (row d = the entries on anti-diagonal d, indexed by s) make
// every step read contiguous rows.
#include <limits>

#include "losses/mutual_information.h"

namespace wavetrain::losses::detail {
namespace {

// x [B][R][C] -> [B][R + C - 1 + extra][R]: out[b][d][r] = x[b][r][d - r] where 0 <= d - r < C, else `fill`.
at::Tensor skew(const at::Tensor& x, int64_t diagonals, double fill) {
  const int64_t B = x.size(0), R = x.size(1), C = x.size(2);
  if (C == 0) return at::full({B, diagonals, R}, fill, x.options());  // T = 0: no entries to place
  const at::TensorOptions index_options = x.options().dtype(at::kLong);
  const at::Tensor d = at::arange(diagonals, index_options).view({1, diagonals});
  const at::Tensor r = at::arange(R, index_options).view({R, 1});
  const at::Tensor t = d - r;  // [R][D]
  const at::Tensor valid = (t >= 0) & (t < C);
  const at::Tensor gathered = at::gather(x, 2, t.clamp(0, C - 1).unsqueeze(0).expand({B, R, diagonals}));
  return at::where(valid.unsqueeze(0), gathered, at::full({}, fill, x.options())).transpose(1, 2).contiguous();
}

// The inverse for gradients: g [B][D][R] -> [B][R][C] with out[b][r][t] = g[b][r + t][r].
at::Tensor unskew(const at::Tensor& g, int64_t columns) {
  const int64_t B = g.size(0), D = g.size(1), R = g.size(2);
  const at::Tensor index = (at::arange(R, g.options().dtype(at::kLong)).view({R, 1}) +
                            at::arange(columns, g.options().dtype(at::kLong)).view({1, columns}))
                               .clamp_max(D - 1);
  return at::gather(g.transpose(1, 2), 2, index.unsqueeze(0).expand({B, R, columns}));
}

// k2's log-add: both -inf gives -inf (not NaN).
at::Tensor log_add(const at::Tensor& a, const at::Tensor& b) {
  const at::Tensor hi = at::maximum(a, b);
  const at::Tensor r = hi + at::log1p(at::exp(-(a - b).abs()));
  const double ninf = -std::numeric_limits<double>::infinity();
  return at::where((a == ninf) & (b == ninf), at::full({}, ninf, a.options()), r);
}

// Shift along s by one: out[:, s] = x[:, s - 1], out[:, 0] = fill.
at::Tensor shift_s(const at::Tensor& x, int64_t width, double fill) {
  const at::Tensor head = at::full({x.size(0), 1}, fill, x.options());
  return at::cat({head, x.narrow(1, 0, width - 1)}, 1);
}

}  // namespace

void mutual_information_portable(const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary_cpu,
                                 at::Tensor& scores, at::Tensor& px_grad, at::Tensor& py_grad) {
  const int64_t B = px.size(0), S = px.size(1), T1 = px.size(2), T = py.size(2);
  const bool modified = T1 == T;
  const int64_t D = S + T + 1, W = S + 1, back = modified ? 2 : 1;
  const double ninf = -std::numeric_limits<double>::infinity();
  const at::TensorOptions options = px.options();
  const at::Tensor boundary = boundary_cpu.to(px.device());
  const at::Tensor sb = boundary.select(1, 0).view({B, 1}), tb = boundary.select(1, 1).view({B, 1});
  const at::Tensor se = boundary.select(1, 2).view({B, 1}), te = boundary.select(1, 3).view({B, 1});
  const at::Tensor s_index = at::arange(W, options.dtype(at::kLong)).view({1, W});

  // X[b][d][s] = px[b][s][d - s] (S columns: rows of px), padded to W with 0; Y likewise from py.
  const at::Tensor X = at::cat({skew(px, D, 0.0), at::zeros({B, D, 1}, options)}, 2);  // [B][D][W]
  const at::Tensor Y = skew(py, D, 0.0);                                                 // [B][D][W]
  auto in_box = [&](int64_t d) {
    const at::Tensor t = d - s_index;
    return (s_index >= sb) & (s_index <= se) & (t >= tb) & (t <= te);
  };
  auto term1 = [&](const at::Tensor& P, int64_t d) {  // p[s-1][t or t-1] + px[...] on diagonal d
    if (d - back < 0) return at::full({B, W}, ninf, options);
    return shift_s(P.select(1, d - back) + X.select(1, d - back), W, ninf);
  };

  at::Tensor P = at::full({B, D, W}, ninf, options);
  // Cell (s_begin, t_begin) is 0; it lies on diagonal s_begin + t_begin.
  P.select(1, 0).masked_fill_((s_index == sb) & (s_index + tb == 0), 0.0);
  for (int64_t d = 1; d < D; ++d) {
    const at::Tensor term2 = P.select(1, d - 1) + Y.select(1, d - 1);
    at::Tensor p = log_add(term1(P, d), term2);
    const at::Tensor first = (s_index == sb) & (s_index + tb == d);
    p = at::where(in_box(d), p, at::full({}, ninf, options)).masked_fill_(first, 0.0);
    P.select(1, d).copy_(p);
  }
  scores.copy_(at::gather(P.view({B, D * W}), 1, (se + te) * W + se).view({B}));
  if (!px_grad.defined()) return;

  // Backward, diagonal by diagonal from the end (see mutual_information_cpu.cpp for the rules).
  at::Tensor GX = at::zeros({B, D, W}, options), GY = at::zeros({B, D, W}, options);
  for (int64_t d = D - 1; d >= 1; --d) {
    const at::Tensor box = in_box(d) & ~((s_index == sb) & (s_index + tb == d));
    const at::Tensor last = (s_index == se) & (s_index + te == d);
    const at::Tensor g = at::where(last, at::ones({}, options), GX.select(1, d) + GY.select(1, d));
    const at::Tensor p = P.select(1, d);
    const at::Tensor total = at::where(at::isfinite(p), p, at::zeros({}, options));
    at::Tensor share = at::exp(term1(P, d) - total);
    const at::Tensor ok = share == share;
    const at::Tensor t = d - s_index;
    const at::Tensor first_row = s_index == sb, first_column = t == tb;
    at::Tensor g1 = at::where(ok, share * g, at::zeros({}, options));
    at::Tensor g2 = at::where(ok, (1 - share) * g, at::zeros({}, options));
    g1 = at::where(first_row, at::zeros({}, options), g1);
    g2 = at::where(first_row, g, g2);
    g1 = at::where(first_column, modified ? at::zeros({}, options) : g, g1);
    g2 = at::where(first_column, at::zeros({}, options), g2);
    g1 = at::where(box, g1, at::zeros({}, options));
    g2 = at::where(box, g2, at::zeros({}, options));
    // term1's px entry is at (s - 1) on diagonal d - back; term2's py entry at s on d - 1.
    if (d - back >= 0) GX.select(1, d - back).narrow(1, 0, W - 1).add_(g1.narrow(1, 1, W - 1));
    GY.select(1, d - 1).add_(g2);
  }
  px_grad.copy_(unskew(GX.narrow(2, 0, S), T1));
  py_grad.copy_(unskew(GY, T));
}

}  // namespace wavetrain::losses::detail
