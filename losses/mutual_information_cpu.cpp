// The CPU kernel of the mutual-information recursion (semantics in mutual_information.h).
//
// Each batch item is independent and items run in parallel. Within an item the cells of one
// anti-diagonal (s + t = d) depend only on the two previous anti-diagonals, so the item is
// processed diagonal by diagonal with the arrays stored "skewed": row d holds the cells of
// anti-diagonal d, indexed by s. A row is then a contiguous loop without a loop-carried dependency,
// which the compiler vectorises, given exp and log1p it can vectorise: libm's calls block that, so
// they are written here as branch-free polynomials (exp_nonpositive, log1p_unit).
//
// Layout of one item, in coordinates relative to its box (s' = s - s_begin, t' = t - t_begin,
// d = s' + t', S' = s_end - s_begin, T' = t_end - t_begin), rows d = -1 .. S'+T', columns s' = -1 .. S':
//   P[d][s']   p of cell (s', d - s'); -inf outside the box (row -1 and column -1 are such padding)
//   X[d][s']   px of (s', d - s') (regular: term1 of cell (s'+1, t') reads X[d][s'] with d = s'+t'),
//              0 where px has no entry for it, so that -inf + X stays -inf
//   Y[d][s']   py of (s', d - s'); term2 of cell (s', t'+1) reads Y[d][s']
//   E[d][s']   the share of cell (s', d - s')'s p that came through term1, k2's exp(term1 - p),
//              made by the forward for the backward's split (log_add_share_row)
//   GX, GY     the gradients of X and Y. Every cell except the last sends its occupation to its
//              successors through exactly one px and one py entry, both stored at the cell's own
//              position, so the occupation of cell (s', t') is GX[d][s'] + GY[d][s'].
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "losses/mutual_information.h"
#include "losses/vector_math.h"

namespace wavetrain::losses::detail {

namespace {

// Backward over the interior cells s in [a, b] of one diagonal (free functions with restrict
// pointers: inside Item::run GCC did not vectorise them): cell s has occupation g = gx[s] + gy[s];
// term1 gets share[s] of it and term2 the rest (a NaN share sends nothing).
template <typename T>
WAVETRAIN_VECTOR_INLINE void split_occupation_impl(const T* __restrict__ gx, const T* __restrict__ gy, const T* __restrict__ share,
                                  T* __restrict__ gx1, T* __restrict__ gy2, int64_t a, int64_t b) {
  for (int64_t s = a; s <= b; ++s) split_by_share(gx[s] + gy[s], share[s], gx1[s], gy2[s]);
}
WAVETRAIN_VECTOR_KERNEL(void, split_occupation,
                        (const float* gx, const float* gy, const float* share, float* gx1, float* gy2, int64_t a,
                         int64_t b),
                        (gx, gy, share, gx1, gy2, a, b))
WAVETRAIN_VECTOR_KERNEL(void, split_occupation,
                        (const double* gx, const double* gy, const double* share, double* gx1, double* gy2,
                         int64_t a, int64_t b),
                        (gx, gy, share, gx1, gy2, a, b))

// Forward over the cells s in [lo, hi] of one diagonal: out[s] = log_add(p1[s] + x1[s], p2[s] + y2[s]).
template <typename T>
WAVETRAIN_VECTOR_INLINE void log_add_row_impl(const T* __restrict__ p1, const T* __restrict__ x1, const T* __restrict__ p2,
                             const T* __restrict__ y2, T* __restrict__ out, int64_t lo, int64_t hi) {
  for (int64_t s = lo; s <= hi; ++s) out[s] = log_add(p1[s] + x1[s], p2[s] + y2[s]);
}
WAVETRAIN_VECTOR_KERNEL(void, log_add_row,
                        (const float* p1, const float* x1, const float* p2, const float* y2, float* out, int64_t lo,
                         int64_t hi),
                        (p1, x1, p2, y2, out, lo, hi))
WAVETRAIN_VECTOR_KERNEL(void, log_add_row,
                        (const double* p1, const double* x1, const double* p2, const double* y2, double* out,
                         int64_t lo, int64_t hi),
                        (p1, x1, p2, y2, out, lo, hi))

// The same, and the backward's share of each cell's p that came through term1: k2's rule is
// exp(term1 - p), with a non-finite p counted as 0 and the exponent capped at 0. With
// e = exp(-|term1 - term2|), the one log_add computes anyway, p = max + log(1 + e), so for a finite
// p the share is 1 / (1 + e) when term1 is the larger term and e / (1 + e) otherwise: a division
// instead of a second exp (the backward's exp was a quarter of the kernel's time). Returns whether
// some p was not finite; those cells need k2's formula (share_where_not_finite).
template <typename T>
WAVETRAIN_VECTOR_INLINE bool log_add_share_row_impl(const T* __restrict__ p1, const T* __restrict__ x1, const T* __restrict__ p2,
                                   const T* __restrict__ y2, T* __restrict__ out, T* __restrict__ share, int64_t lo,
                                   int64_t hi) {
  const T ninf = -std::numeric_limits<T>::infinity();
  int not_finite = 0;  // an int, not a bool: GCC vectorises an int OR reduction, not a bool one
  for (int64_t s = lo; s <= hi; ++s) {
    const T a = p1[s] + x1[s], b = p2[s] + y2[s];
    const T larger = a > b ? a : b;
    const T diff = a > b ? b - a : a - b;  // <= 0
    const T e = exp_nonpositive(diff);
    const T p = ((a == ninf) & (b == ninf)) ? ninf : larger + log1p_unit(e);  // log_add(a, b)
    out[s] = p;
    share[s] = (a > b ? T(1) : e) / (T(1) + e);
    not_finite |= (p - p == T(0)) ? 0 : 1;
  }
  return not_finite != 0;
}
WAVETRAIN_VECTOR_KERNEL(bool, log_add_share_row,
                        (const float* p1, const float* x1, const float* p2, const float* y2, float* out, float* share,
                         int64_t lo, int64_t hi),
                        (p1, x1, p2, y2, out, share, lo, hi))
WAVETRAIN_VECTOR_KERNEL(bool, log_add_share_row,
                        (const double* p1, const double* x1, const double* p2, const double* y2, double* out,
                         double* share, int64_t lo, int64_t hi),
                        (p1, x1, p2, y2, out, share, lo, hi))

// k2's rule where p is not finite (-inf where no path reaches a cell; +inf or NaN from such input).
template <typename T>
void share_where_not_finite(const T* p1, const T* x1, const T* out, T* share, int64_t lo, int64_t hi) {
  for (int64_t s = lo; s <= hi; ++s) {
    if (out[s] - out[s] == T(0)) continue;
    const T arg = p1[s] + x1[s];  // term1 - 0
    share[s] = exp_nonpositive(arg > T(0) ? T(0) : arg);
  }
}

// One item. px [S][T1] (T1 = T + 1 regular, T modified) and py [S+1][T] rows of this item.
template <typename T>
struct Item {
  int64_t px_rows, T1, Tn;  // px rows (S) and columns, py columns
  bool modified;
  int64_t sb, tb, se, te;   // box
  int64_t Sb, Tb, D, W;     // box sizes, number of diagonals (0 .. Sb + Tb), row width (Sb + 2)
  std::vector<T> X, Y, P, E, GX, GY;  // E: each cell's term1 share

  // Row d (-1 .. D-1), column s' (-1 .. Sb).
  int64_t at(int64_t d, int64_t s) const { return (d + 1) * W + (s + 1); }

  // grads: compute px_grad and py_grad. (Not px_grad != nullptr: with no symbols px has no
  // elements, its data pointer is null, and py still has a gradient.)
  void run(const T* px, const T* py, T* score, bool grads, T* px_grad, T* py_grad) {
    const T ninf = -std::numeric_limits<T>::infinity();
    Sb = se - sb;
    Tb = te - tb;
    D = Sb + Tb + 1;
    W = Sb + 2;
    const size_t n = static_cast<size_t>((D + 1) * W);
    X.assign(n, T(0));
    Y.assign(n, T(0));
    P.assign(n, ninf);
    // E is read only where the forward wrote it.
    if (grads && E.size() < n) E.resize(n);
    // px entries used in the box: rows s in [sb, se), columns t in [tb, te] (regular) or [tb, te)
    // (modified: cell (s+1, t+1) reads px[s][t]).
    // Copied diagonal by diagonal: the writes are contiguous and the strided reads touch one cache
    // line per row of px, reused by the next 15 diagonals. (Row by row, the writes touched one line
    // per diagonal, ~500 of them, too many to stay in L1 until the next row: 29% of the time.)
    const int64_t px_cols = modified ? Tb : Tb + 1;
    skew(px + sb * T1 + tb, T1, Sb, px_cols, X.data());
    skew(py + sb * Tn + tb, Tn, Sb + 1, Tb, Y.data());

    // Forward. Cell (s', t') on diagonal d: term1 from (s'-1, t') [regular, diagonal d-1] or
    // (s'-1, t'-1) [modified, d-2] through X at the predecessor's position; term2 from (s', t'-1)
    // through Y[d-1][s'].
    const int64_t back = modified ? 2 : 1;
    P[at(0, 0)] = T(0);
    for (int64_t d = 1; d < D; ++d) {
      const int64_t lo = d - Tb > 0 ? d - Tb : 0, hi = d < Sb ? d : Sb;
      // p1[s'] = P[d-back][s'-1], x1 likewise; p2[s'] = P[d-1][s'], y2 likewise.
      const T *p1 = &P[at(d - back, -1)], *x1 = &X[at(d - back, -1)], *p2 = &P[at(d - 1, 0)], *y2 = &Y[at(d - 1, 0)];
      T* out = &P[at(d, 0)];
      if (!grads) {
        log_add_row(p1, x1, p2, y2, out, lo, hi);
      } else if (log_add_share_row(p1, x1, p2, y2, out, &E[at(d, 0)], lo, hi)) {
        share_where_not_finite(p1, x1, out, &E[at(d, 0)], lo, hi);
      }
    }
    *score = P[at(D - 1, Sb)];
    if (!grads) return;

    // Backward: occupation G of each cell, split between its two predecessors by the shares E the
    // forward computed (k2's rule, exp(term - p); a non-finite share sends nothing).
    // The first row (s' = 0) sends everything through py, the first column through px (regular)
    // or nothing (modified), as k2's edge loops do.
    GX.assign(n, T(0));
    GY.assign(n, T(0));
    // The last cell's occupation is 1 (d score / d score). Its own py entry (s_end, t_end) is read by
    // no cell of the box and is not copied back, so it can hold that 1.
    GY[at(D - 1, Sb)] = T(1);
    for (int64_t d = D - 1; d >= 1; --d) {
      const int64_t lo = d - Tb > 0 ? d - Tb : 0, hi = d < Sb ? d : Sb;
      const T* __restrict__ gx = &GX[at(d, 0)];
      const T* __restrict__ gy = &GY[at(d, 0)];
      T* __restrict__ gx1 = &GX[at(d - back, -1)];  // gx1[s'] = GX[d-back][s'-1]: px entry of term1
      T* __restrict__ gy2 = &GY[at(d - 1, 0)];      // gy2[s'] = GY[d-1][s']: py entry of term2
      // Interior cells: s' in [max(lo, 1), min(hi, d - 1)] (not on the first row or column).
      const int64_t a = lo > 1 ? lo : 1, b = hi < d - 1 ? hi : d - 1;
      split_occupation(gx, gy, &E[at(d, 0)], gx1, gy2, a, b);
      if (lo == 0 && d <= Tb) {  // first row, cell (0, d): everything through py
        gy2[0] = gx[0] + gy[0];
      }
      if (hi == d && d <= Sb) {  // first column, cell (d, 0)
        if (!modified) gx1[d] = gx[d] + gy[d];
      }
    }
    // Back to px / py layout; entries the box does not use are 0 (the caller's tensors are not
    // initialised: writing each entry once is cheaper than zeroing them all first).
    if (sb > 0 || se < px_rows || tb > 0 || te < Tn) {
      std::fill(px_grad, px_grad + px_rows * T1, T(0));
      std::fill(py_grad, py_grad + (px_rows + 1) * Tn, T(0));
    }
    unskew(GX.data(), Sb, px_cols, px_grad + sb * T1 + tb, T1);
    unskew(GY.data(), Sb + 1, Tb, py_grad + sb * Tn + tb, Tn);
  }

  // Each diagonal touches one element in each of up to S rows of px (or py), and a row's cache line
  // serves the next 64 / sizeof(T) diagonals. The hardware prefetcher does not follow a hundred
  // strided streams, so every new line was a miss to memory (a quarter of the kernel's time).
  // Prefetching each row's line two lines ahead, once per line (rows whose column is a multiple of
  // the line's element count), hides that.
  static constexpr int64_t kLine = 64 / sizeof(T);
  static void prefetch_rows(const T* row0, int64_t stride, int64_t d, int64_t lo, int64_t hi, bool write) {
    // The address is made as an integer: it may lie past the tensor, which a pointer may not.
    const auto origin = reinterpret_cast<std::uintptr_t>(row0);
    // Rows s with (d - s) % kLine == 0, from the first such s >= lo.
    for (int64_t s = lo + ((d - lo) % kLine); s <= hi; s += kLine) {
      const auto offset = static_cast<std::uintptr_t>((s * stride + (d - s) + 2 * kLine) * int64_t{sizeof(T)});
      const void* line = reinterpret_cast<const void*>(origin + offset);
      if (write)
        __builtin_prefetch(line, 1);
      else
        __builtin_prefetch(line, 0);
    }
  }

  // dst[at(s + t, s)] = src[s * stride + t] for s < rows, t < cols, diagonal by diagonal.
  void skew(const T* src, int64_t stride, int64_t rows, int64_t cols, T* dst) const {
    if (rows == 0 || cols == 0) return;
    for (int64_t d = 0; d + 1 < rows + cols; ++d) {
      const int64_t lo = d - cols + 1 > 0 ? d - cols + 1 : 0, hi = d < rows - 1 ? d : rows - 1;
      prefetch_rows(src, stride, d, lo, hi, false);
      T* out = dst + at(d, 0);
      const T* in = src + d;  // src[s * stride + d - s]
      for (int64_t s = lo; s <= hi; ++s) out[s] = in[s * (stride - 1)];
    }
  }
  void unskew(const T* src, int64_t rows, int64_t cols, T* dst, int64_t stride) const {
    if (rows == 0 || cols == 0) return;
    for (int64_t d = 0; d + 1 < rows + cols; ++d) {
      const int64_t lo = d - cols + 1 > 0 ? d - cols + 1 : 0, hi = d < rows - 1 ? d : rows - 1;
      prefetch_rows(dst, stride, d, lo, hi, true);
      const T* in = src + at(d, 0);
      T* out = dst + d;
      for (int64_t s = lo; s <= hi; ++s) out[s * (stride - 1)] = in[s];
    }
  }
};

}  // namespace

void mutual_information_cpu(const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary, at::Tensor& scores,
                            at::Tensor& px_grad, at::Tensor& py_grad) {
  // The lanes kernel runs 8 items per group and one group per thread, whatever the groups' fill:
  // with fewer than 8 items per thread, items one per thread diagonal by diagonal finish first
  // (measured at (8, 50, 300): lanes 0.55 ms at 1 or 2 threads, diagonals 0.80 ms at 1, 0.40 at 2).
  const int64_t threads = at::in_parallel_region() ? 1 : at::get_num_threads();
  if (px.size(0) >= 8 * threads)
    mutual_information_cpu_lanes(px, py, boundary, scores, px_grad, py_grad);
  else
    mutual_information_cpu_diagonals(px, py, boundary, scores, px_grad, py_grad);
}

void mutual_information_cpu_diagonals(const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary,
                                      at::Tensor& scores, at::Tensor& px_grad, at::Tensor& py_grad) {
  const int64_t B = px.size(0), S = px.size(1), T1 = px.size(2), Tn = py.size(2);
  const bool modified = T1 == Tn;
  const int64_t* box = boundary.data_ptr<int64_t>();
  const bool grads = px_grad.defined();
  AT_DISPATCH_FLOATING_TYPES(px.scalar_type(), "mutual_information_cpu", [&] {
    const scalar_t* x = px.data_ptr<scalar_t>();
    const scalar_t* y = py.data_ptr<scalar_t>();
    scalar_t* out = scores.data_ptr<scalar_t>();
    scalar_t* gx = grads ? px_grad.data_ptr<scalar_t>() : nullptr;
    scalar_t* gy = grads ? py_grad.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, B, 1, [&](int64_t begin, int64_t end) {
      Item<scalar_t> item;  // buffers reused across this thread's items
      for (int64_t b = begin; b < end; ++b) {
        item.px_rows = S;
        item.T1 = T1;
        item.Tn = Tn;
        item.modified = modified;
        item.sb = box[4 * b];
        item.tb = box[4 * b + 1];
        item.se = box[4 * b + 2];
        item.te = box[4 * b + 3];
        item.run(x + b * S * T1, y + b * (S + 1) * Tn, out + b, grads, grads && gx ? gx + b * S * T1 : nullptr,
                 grads ? gy + b * (S + 1) * Tn : nullptr);
      }
    });
  });
}

}  // namespace wavetrain::losses::detail
