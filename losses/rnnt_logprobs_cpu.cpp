// CPU kernels of the RNN-T log-probabilities (rnnt_logprobs.h).
// - The pruned rows: per row of C logits, the log-sum-exp and the two picked entries; backward
//   softmax(row) * -(gpx + gpy) plus the picked entries' own gradients.
// - The simple loss's lattice: per item, the exponentials of lm's and am's rows, their product
//   (small_matmul.h) and everything elementwise around it, with the items in parallel.
// exp is the vectorisable one from vector_math.h (arguments are <= 0 after subtracting the row
// maximum); sums and maxima run in 8 fixed lanes so that they vectorise too.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "losses/rnnt_logprobs.h"
#include "losses/small_matmul.h"
#include "losses/vector_math.h"

namespace wavetrain::losses::detail {
namespace {

// max(x[0 .. n)), n >= 1, ignoring NaN as `x > m ? x : m` does. The 8 lanes are a GCC vector:
// written as 8 scalar lanes, this loop stayed scalar (8 vmaxss a step, half of the row's time).
template <typename T>
__attribute__((always_inline)) inline T row_max(const T* x, int64_t n) {
  typedef T lanes8 __attribute__((vector_size(8 * sizeof(T)), aligned(alignof(T)), may_alias));
  T m = x[0];
  int64_t c = 0;
  if (n >= 8) {
    lanes8 v = *reinterpret_cast<const lanes8*>(x);
    for (c = 8; c + 8 <= n; c += 8) {
      const lanes8 y = *reinterpret_cast<const lanes8*>(x + c);
      v = y > v ? y : v;
    }
    m = v[0];
    for (int l = 1; l < 8; ++l) m = v[l] > m ? v[l] : m;
  }
  for (; c < n; ++c) m = x[c] > m ? x[c] : m;
  return m;
}

template <typename T>
WAVETRAIN_VECTOR_INLINE T row_logsumexp_impl(const T* x, int64_t n) {
  // The sum in 8 fixed lanes, so that its loop vectorises.
  const T m = row_max(x, n);
  if (!(m > -std::numeric_limits<T>::infinity())) return m;  // all -inf (or NaN): as logsumexp
  T lanes[8];
  for (int l = 0; l < 8; ++l) lanes[l] = 0;
  int64_t c = 0;
  for (; c + 8 <= n; c += 8)
    for (int l = 0; l < 8; ++l) lanes[l] += exp_nonpositive(x[c + l] - m);
  for (; c < n; ++c) lanes[0] += exp_nonpositive(x[c] - m);
  T sum = 0;
  for (int l = 0; l < 8; ++l) sum += lanes[l];
  return m + std::log(sum);
}

template <typename T>
WAVETRAIN_VECTOR_INLINE void softmax_times_impl(const T* __restrict__ x, T lse, T g, T* __restrict__ out, int64_t n) {
  for (int64_t c = 0; c < n; ++c) out[c] = exp_nonpositive(x[c] - lse) * g;
}

// out = exp(x - max x), returning max x. A row of -inf, or with a NaN, gives NaN entries (as
// exp(x - x.max()) does in ATen).
template <typename T>
WAVETRAIN_VECTOR_INLINE T row_max_exp_impl(const T* __restrict__ x, int64_t n, T* __restrict__ out) {
  const T m = row_max(x, n);
  for (int64_t c = 0; c < n; ++c) out[c] = exp_nonpositive(x[c] - m);
  return m;
}

WAVETRAIN_VECTOR_KERNEL(float, row_max_exp, (const float* x, int64_t n, float* out), (x, n, out))
WAVETRAIN_VECTOR_KERNEL(double, row_max_exp, (const double* x, int64_t n, double* out), (x, n, out))
WAVETRAIN_VECTOR_KERNEL(float, row_logsumexp, (const float* x, int64_t n), (x, n))
WAVETRAIN_VECTOR_KERNEL(double, row_logsumexp, (const double* x, int64_t n), (x, n))
WAVETRAIN_VECTOR_KERNEL(void, softmax_times, (const float* x, float lse, float g, float* out, int64_t n),
                        (x, lse, g, out, n))
WAVETRAIN_VECTOR_KERNEL(void, softmax_times, (const double* x, double lse, double g, double* out, int64_t n),
                        (x, lse, g, out, n))

// Items [0, B) in parallel, each calling `item(b)`; an item's matrix products then run in its own
// thread. A single item runs outside a parallel region, and its products split their columns over
// the threads instead (for_column_blocks).
template <typename F>
void for_each_item(int64_t B, const F& item) {
  if (B == 1) {
    item(0);
    return;
  }
  at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) item(b);
  });
}

// `columns(begin, end)` over [0, N): at once when the items run in parallel (B > 1), else in blocks
// of 64 over the threads.
template <typename F>
void for_column_blocks(int64_t B, int64_t N, const F& columns) {
  constexpr int64_t kBlock = 64;
  if (B > 1) {
    columns(int64_t{0}, N);
    return;
  }
  at::parallel_for(0, (N + kBlock - 1) / kBlock, 1, [&](int64_t begin, int64_t end) {
    columns(begin * kBlock, std::min(N, end * kBlock));
  });
}

}  // namespace

void symbol_logprobs_forward_cpu(const at::Tensor& lm, const at::Tensor& am, const at::Tensor& symbols, int64_t blank,
                                 at::Tensor& p_lm, at::Tensor& p_am, at::Tensor& z, at::Tensor& px, at::Tensor& py) {
  const int64_t B = am.size(0), T = am.size(1), C = am.size(2), S1 = lm.size(1), S = S1 - 1;
  const int64_t* sym = symbols.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(am.scalar_type(), "symbol_logprobs_forward_cpu", [&] {
    const scalar_t tiny = std::numeric_limits<scalar_t>::min();
    const at::Tensor maxima = at::empty({B, S1 + T}, am.options());  // lm's rows, then am's
    for_each_item(B, [&](int64_t b) {
      const scalar_t* lm_b = lm.data_ptr<scalar_t>() + b * S1 * C;
      const scalar_t* am_b = am.data_ptr<scalar_t>() + b * T * C;
      scalar_t* lm_max = maxima.data_ptr<scalar_t>() + b * (S1 + T);
      scalar_t* am_max = lm_max + S1;
      scalar_t* plm = p_lm.data_ptr<scalar_t>() + b * S1 * C;
      scalar_t* pam = p_am.data_ptr<scalar_t>() + b * T * C;
      for (int64_t s = 0; s < S1; ++s) lm_max[s] = row_max_exp(lm_b + s * C, C, plm + s * C);
      for (int64_t t = 0; t < T; ++t) am_max[t] = row_max_exp(am_b + t * C, C, pam + t * C);
      at::Tensor z_b = z.select(0, b), py_b = py.select(0, b);
      scalar_t* zb = z_b.data_ptr<scalar_t>();
      for_column_blocks(B, T, [&](int64_t begin, int64_t end) {  // z = p_lm p_am^T: [S+1][T]
        matmul_nt(S1, end - begin, C, plm, C, pam + begin * C, C, zb + begin, T);
      });
      z_b.add_(tiny);
      at::log_out(py_b, z_b);  // log Z, overwritten below by py
      scalar_t* pyb = py_b.data_ptr<scalar_t>();
      scalar_t* pxb = px.data_ptr<scalar_t>() + b * S * T;
      const int64_t* y = sym + b * S;
      for (int64_t s = 0; s < S1; ++s) {
        scalar_t* log_z = pyb + s * T;
        const scalar_t blank_lm = lm_b[s * C + blank] - lm_max[s];
        if (s < S) {
          const int64_t ys = y[s];
          const scalar_t symbol_lm = lm_b[s * C + ys] - lm_max[s];
          for (int64_t t = 0; t < T; ++t)
            pxb[s * T + t] = am_b[t * C + ys] + symbol_lm - (log_z[t] + am_max[t]);
        }
        for (int64_t t = 0; t < T; ++t) log_z[t] = am_b[t * C + blank] + blank_lm - (log_z[t] + am_max[t]);
      }
    });
  });
}

void symbol_logprobs_backward_cpu(const at::Tensor& p_lm, const at::Tensor& p_am, const at::Tensor& z,
                                  const at::Tensor& symbols, int64_t blank, const at::Tensor& gpx, const at::Tensor& gpy,
                                  at::Tensor& g_lm, at::Tensor& g_am) {
  const int64_t B = p_am.size(0), T = p_am.size(1), C = p_am.size(2), S1 = p_lm.size(1), S = S1 - 1;
  const int64_t* sym = symbols.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(p_am.scalar_type(), "symbol_logprobs_backward_cpu", [&] {
    const at::Tensor w = at::empty_like(z);  // dL/dN / Z
    for_each_item(B, [&](int64_t b) {
      const scalar_t* zb = z.data_ptr<scalar_t>() + b * S1 * T;
      const scalar_t* gx = gpx.data_ptr<scalar_t>() + b * S * T;
      const scalar_t* gy = gpy.data_ptr<scalar_t>() + b * S1 * T;
      scalar_t* wb = w.data_ptr<scalar_t>() + b * S1 * T;
      for (int64_t i = 0; i < S * T; ++i) wb[i] = -(gx[i] + gy[i]) / zb[i];
      for (int64_t i = S * T; i < S1 * T; ++i) wb[i] = -gy[i] / zb[i];
      // g_lm = (w p_am) * p_lm and g_am = (w^T p_lm) * p_am, the factor applied as each tile is stored.
      const scalar_t* plm = p_lm.data_ptr<scalar_t>() + b * S1 * C;
      const scalar_t* pam = p_am.data_ptr<scalar_t>() + b * T * C;
      scalar_t* glm = g_lm.data_ptr<scalar_t>() + b * S1 * C;
      scalar_t* gam = g_am.data_ptr<scalar_t>() + b * T * C;
      for_column_blocks(B, C, [&](int64_t begin, int64_t end) {
        matmul_times(S1, end - begin, T, wb, T, 1, pam + begin, C, plm + begin, C, glm + begin, C);
        matmul_times(T, end - begin, S1, wb, 1, T, plm + begin, C, pam + begin, C, gam + begin, C);
      });
      // The direct terms: px[s][t] holds lm[s][y_s] and am[t][y_s], py[s][t] lm[s][blank] and
      // am[t][blank], each with weight 1.
      const int64_t* y = sym + b * S;
      for (int64_t s = 0; s < S1; ++s) {
        scalar_t row_y = 0, row_x = 0;
        for (int64_t t = 0; t < T; ++t) {
          row_y += gy[s * T + t];
          gam[t * C + blank] += gy[s * T + t];
        }
        glm[s * C + blank] += row_y;
        if (s == S) continue;
        for (int64_t t = 0; t < T; ++t) {
          row_x += gx[s * T + t];
          gam[t * C + y[s]] += gx[s * T + t];
        }
        glm[s * C + y[s]] += row_x;
      }
    });
  });
}

namespace {

// Where row r's px and py values go: indices into px and py, px = -1 where the row's symbol
// position emits no symbol (position S).
struct RowTarget {
  int64_t px, py;
};

// pruned_logprobs: row r's values at px[r] and py[r].
struct InRow {
  RowTarget operator()(int64_t r) const { return {r, r}; }
};

// pruned_logprobs_placed: rows of logits [B][T][R][C] into px [B][S][px_columns] and py [B][S+1][T],
// row r of (b, t) at symbol position s = shifts[b][t] + r.
struct InLattice {
  int64_t T, R, S, px_columns;
  const int64_t* shifts;
  RowTarget operator()(int64_t row) const {
    const int64_t bt = row / R, b = bt / T, t = bt % T, s = shifts[bt] + row % R;
    return {s < S ? (b * S + s) * px_columns + t : -1, (b * (S + 1) + s) * T + t};
  }
};

InLattice in_lattice(const at::Tensor& logits, const at::Tensor& shifts, const at::Tensor& py, int64_t px_columns) {
  return {logits.size(1), logits.size(2), py.size(1) - 1, px_columns, shifts.data_ptr<int64_t>()};
}

// Per row of C logits: lse, and px, py where `target` puts them.
template <typename Target>
void rows_forward(const at::Tensor& logits, const at::Tensor& symbols, int64_t blank, at::Tensor& lse, at::Tensor& px,
                  at::Tensor& py, const Target& target) {
  const int64_t C = logits.size(-1), rows = logits.numel() / C;
  const int64_t* sym = symbols.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "pruned_logprobs_forward_cpu", [&] {
    const scalar_t* x = logits.data_ptr<scalar_t>();
    scalar_t *l = lse.data_ptr<scalar_t>(), *a = px.data_ptr<scalar_t>(), *b = py.data_ptr<scalar_t>();
    // Each output is written by one row (a frame's rows are distinct symbol positions).
    at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const scalar_t* row = x + r * C;
        l[r] = row_logsumexp(row, C);
        const RowTarget to = target(r);
        if (to.px >= 0) a[to.px] = row[sym[r]] - l[r];
        b[to.py] = row[blank] - l[r];
      }
    });
  });
}

// Per row: softmax(row) * -(gpx + gpy), plus the picked entries' own gradients, gpx and gpy read
// where `target` put the row's values.
template <typename Target>
void rows_backward(const at::Tensor& logits, const at::Tensor& symbols, int64_t blank, const at::Tensor& lse,
                   const at::Tensor& gpx, const at::Tensor& gpy, at::Tensor& grad, const Target& target) {
  const int64_t C = logits.size(-1), rows = logits.numel() / C;
  const int64_t* sym = symbols.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "pruned_logprobs_backward_cpu", [&] {
    const scalar_t *x = logits.data_ptr<scalar_t>(), *l = lse.data_ptr<scalar_t>();
    const scalar_t *ga = gpx.data_ptr<scalar_t>(), *gb = gpy.data_ptr<scalar_t>();
    scalar_t* out = grad.data_ptr<scalar_t>();
    at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        scalar_t* o = out + r * C;
        // A row whose log-sum-exp is not finite has no probabilities to move: gradient 0.
        if (!std::isfinite(l[r])) {
          for (int64_t c = 0; c < C; ++c) o[c] = 0;
          continue;
        }
        const RowTarget to = target(r);
        const scalar_t g_symbol = to.px >= 0 ? ga[to.px] : scalar_t(0), g_blank = gb[to.py];
        softmax_times(x + r * C, l[r], -(g_symbol + g_blank), o, C);
        o[sym[r]] += g_symbol;
        o[blank] += g_blank;
      }
    });
  });
}

}  // namespace

void pruned_logprobs_forward_cpu(const at::Tensor& logits, const at::Tensor& symbols, int64_t blank, at::Tensor& lse,
                                 at::Tensor& px, at::Tensor& py) {
  rows_forward(logits, symbols, blank, lse, px, py, InRow{});
}

void pruned_logprobs_backward_cpu(const at::Tensor& logits, const at::Tensor& symbols, int64_t blank,
                                  const at::Tensor& lse, const at::Tensor& gpx, const at::Tensor& gpy, at::Tensor& grad) {
  rows_backward(logits, symbols, blank, lse, gpx, gpy, grad, InRow{});
}

void pruned_logprobs_placed_forward_cpu(const at::Tensor& logits, const at::Tensor& symbols, const at::Tensor& shifts,
                                        int64_t blank, at::Tensor& lse, at::Tensor& px, at::Tensor& py) {
  rows_forward(logits, symbols, blank, lse, px, py, in_lattice(logits, shifts, py, px.size(2)));
}

void pruned_logprobs_placed_backward_cpu(const at::Tensor& logits, const at::Tensor& symbols, const at::Tensor& shifts,
                                         int64_t blank, const at::Tensor& lse, const at::Tensor& gpx,
                                         const at::Tensor& gpy, at::Tensor& grad) {
  rows_backward(logits, symbols, blank, lse, gpx, gpy, grad, in_lattice(logits, shifts, gpy, gpx.size(2)));
}

}  // namespace wavetrain::losses::detail
