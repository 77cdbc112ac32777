// The per-thread work of the mutual-information CUDA kernels (mutual_information_cuda.cu), as
// __host__ __device__ functions: the kernels are a loop over anti-diagonals around these, with a
// __syncthreads() between diagonals, and tests/mutual_information_cuda_test.cpp runs the same
// functions in a host emulation of the launch against the CPU kernel, so the arithmetic the GPU
// runs is checked on machines without one. Semantics: mutual_information.h.
//
// Launch: one block per batch item; a block's threads split each anti-diagonal d = s + t of the
// item's box, thread k taking s = lo + k, lo + k + threads, ... Cells on one diagonal depend only on
// the two previous diagonals (forward) or the next one (backward), so any split and any order of
// threads within a diagonal gives the same result.
//
// Layout (all contiguous): px [B][S][T1] with T1 = T + 1 (regular) or T (modified); py [B][S+1][T];
// p [B][S+1][T+1] holds the forward's log-probabilities; px_grad/py_grad like px/py, zeroed before
// the backward. Cells outside an item's box are never read or written: a term whose predecessor lies
// outside the box is absent, as the CPU kernel's -inf padding makes it.
#pragma once

#include <math.h>

#include <cstdint>
#include <limits>

#if defined(__CUDACC__)
#define WAVETRAIN_HOST_DEVICE __host__ __device__
#else
#define WAVETRAIN_HOST_DEVICE
#endif

namespace wavetrain::losses::mi_cells {

// C's float and double functions exist with these names in host and device code alike.
WAVETRAIN_HOST_DEVICE inline float exp_of(float x) { return expf(x); }
WAVETRAIN_HOST_DEVICE inline double exp_of(double x) { return exp(x); }
WAVETRAIN_HOST_DEVICE inline float log1p_of(float x) { return log1pf(x); }
WAVETRAIN_HOST_DEVICE inline double log1p_of(double x) { return log1p(x); }

// log(exp(a) + exp(b)), with log_add(-inf, -inf) = -inf (not NaN from -inf - -inf).
template <typename T>
WAVETRAIN_HOST_DEVICE inline T log_add(T a, T b) {
  const T ninf = -std::numeric_limits<T>::infinity();
  if (a == ninf && b == ninf) return ninf;
  const T hi = a > b ? a : b;
  const T diff = a > b ? b - a : a - b;
  return hi + log1p_of(exp_of(diff));
}

// An item's box (s_begin, t_begin, s_end, t_end), inclusive.
struct Box {
  int64_t sb, tb, se, te;
};

struct Dims {
  int64_t S, T1, T;  // px [S][T1], py [S+1][T], p [S+1][T+1]
  bool modified;     // T1 == T
};

WAVETRAIN_HOST_DEVICE inline Box box_of(const int64_t* boundary, int64_t b) {
  return {boundary[4 * b], boundary[4 * b + 1], boundary[4 * b + 2], boundary[4 * b + 3]};
}

// Threads per block: a warp multiple covering one diagonal's cells (at most S + 1), capped at 512.
WAVETRAIN_HOST_DEVICE inline int threads_per_item(int64_t S) {
  const int64_t warps = (S + 1 + 31) / 32;
  return static_cast<int>(warps * 32 < 512 ? warps * 32 : 512);
}

// One item's slices of the batch tensors.
template <typename T>
struct Item {
  const T* px;
  const T* py;
  T* p;
};

template <typename T>
WAVETRAIN_HOST_DEVICE inline Item<T> item_of(const T* px, const T* py, T* p, const Dims& n, int64_t b) {
  return {px + b * n.S * n.T1, py + b * (n.S + 1) * n.T, p + b * (n.S + 1) * (n.T + 1)};
}

// The rows s of anti-diagonal d (t = d - s) that lie inside the box: first..last, inclusive.
struct RowSpan {
  int64_t first, last;
};
WAVETRAIN_HOST_DEVICE inline RowSpan rows_on_diagonal(const Box& x, int64_t d) {
  return {x.sb > d - x.te ? x.sb : d - x.te, x.se < d - x.tb ? x.se : d - x.tb};
}

// Forward, thread `thread` of `threads` on anti-diagonal d: fills p on its cells of the diagonal.
template <typename T>
WAVETRAIN_HOST_DEVICE void forward_diagonal(const Item<T>& item, const Box& x, const Dims& n, int64_t d,
                                            int64_t thread, int64_t threads) {
  const T ninf = -std::numeric_limits<T>::infinity();
  const int64_t W = n.T + 1;
  const RowSpan rows = rows_on_diagonal(x, d);
  for (int64_t s = rows.first + thread; s <= rows.last; s += threads) {
    const int64_t t = d - s;
    T value;
    if (s == x.sb && t == x.tb) {
      value = T(0);
    } else {
      T through_px = ninf, through_py = ninf;
      if (s > x.sb) {
        if (!n.modified) through_px = item.p[(s - 1) * W + t] + item.px[(s - 1) * n.T1 + t];
        else if (t > x.tb) through_px = item.p[(s - 1) * W + t - 1] + item.px[(s - 1) * n.T1 + t - 1];
      }
      if (t > x.tb) through_py = item.p[s * W + t - 1] + item.py[s * n.T + t - 1];
      value = log_add(through_px, through_py);
    }
    item.p[s * W + t] = value;
  }
}

template <typename T>
WAVETRAIN_HOST_DEVICE inline T score_of(const Item<T>& item, const Box& x, const Dims& n) {
  return item.p[x.se * (n.T + 1) + x.te];
}

// Backward, thread `thread` of `threads` on anti-diagonal d (run from the last diagonal down to the
// first but one). A cell's occupation is what its successors sent through the px and py entries at
// its own position (or 1 for the last cell); it is split between its predecessors in proportion
// exp(term - p). k2's rules: a non-finite p counts as 0, a non-finite share sends nothing, the first
// row sends everything through py, the first column everything through px (regular) or nothing
// (modified, where that column is unreachable).
template <typename T>
WAVETRAIN_HOST_DEVICE void backward_diagonal(const Item<T>& item, T* px_grad, T* py_grad, const Box& x, const Dims& n,
                                             int64_t d, int64_t thread, int64_t threads) {
  const int64_t W = n.T + 1;
  const RowSpan rows = rows_on_diagonal(x, d);
  for (int64_t s = rows.first + thread; s <= rows.last; s += threads) {
    const int64_t t = d - s;
    T g;
    if (s == x.se && t == x.te) {
      g = T(1);
    } else {
      g = T(0);
      if (s < n.S && t < n.T1) g += px_grad[s * n.T1 + t];
      if (t < n.T) g += py_grad[s * n.T + t];
    }
    if (s == x.sb) {
      py_grad[s * n.T + t - 1] = g;
    } else if (t == x.tb) {
      if (!n.modified) px_grad[(s - 1) * n.T1 + t] = g;
    } else {
      T total = item.p[s * W + t];
      if (!(total - total == T(0))) total = T(0);  // inf or NaN
      const int64_t tp = n.modified ? t - 1 : t;
      T arg = item.p[(s - 1) * W + tp] + item.px[(s - 1) * n.T1 + tp] - total;
      if (arg > T(0)) arg = T(0);
      const T share = exp_of(arg);
      const bool finite_share = share == share;
      px_grad[(s - 1) * n.T1 + tp] = finite_share ? share * g : T(0);
      py_grad[s * n.T + t - 1] = finite_share ? (T(1) - share) * g : T(0);
    }
  }
}

}  // namespace wavetrain::losses::mi_cells
