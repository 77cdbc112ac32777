// The CPU kernel of the mutual-information recursion with batch items in vector lanes
// (semantics in mutual_information.h; the other CPU kernel, diagonal by diagonal within one item,
// is mutual_information_cpu.cpp, and mutual_information_cpu picks between them).
//
// Why lanes: the diagonal kernel needs each item's px and py "skewed" (row d = anti-diagonal d), a
// gather that touches one element in each of S rows per diagonal; at (32, 100, 500) the copies in
// and out were a third of its time and its working arrays were zeroed per item. Here a group of
// kLanes items advances together, lane l holding item l's cell (s, t), so the natural [s][t] order
// works and the layout change is a transpose of kLanes contiguous rows, strip by strip.
//
// Why strips: along a row, cell (s, t) waits for (s, t-1), a chain of log-add-exps (~80 cycles a
// cell). A strip of kStrip rows is walked as a skewed band: step j computes cell (s0 + k, j - k) of
// every row k of the strip, and those kStrip cells depend only on step j - 1, so the CPU overlaps
// kStrip chains.
//
// Coordinates are relative to each lane's box (s' = s - s_begin, t' = t - t_begin). A group walks
// s' in [0, Smax], t' in [0, Tmax], the largest box of its lanes; cells outside a lane's box read
// px = py = 0 and never feed a cell inside it (every dependency goes to larger s' and t'), and the
// backward's occupations start at the lane's last cell, so outside cells carry 0 and write 0.
//
// Buffers, [row][column][lane], a column -1 in front of every row (index 0):
//   R  (kStrip + 1 rows) p of rows s0 - 1 .. s0 + K - 1; R[row s][-1] is the virtual predecessor
//      of cell (s, 0) through py: 0 for s = 0 (so that p(0, 0) = 0), -inf otherwise
//   X, Y (kStrip rows) term1's px and term2's py of each cell: regular: px[s-1][t], modified:
//      px[s-1][t-1] (-inf at t = 0: no predecessor); py[s][t-1] (0 at t = 0, the virtual one)
//   E  (Smax + 1 rows) each cell's share of p that came through term1 (as the diagonal kernel)
//   GX (kStrip + 1 rows), GY (kStrip rows): the gradients of each cell's own px and py entries;
//      cell (s, t)'s occupation is GX[s][t] + GY[s][t] (+ 1 at the lane's last cell)
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "losses/lane_transpose.h"
#include "losses/mutual_information.h"
#include "losses/vector_math.h"

namespace wavetrain::losses::detail {

namespace {

constexpr int64_t kLanes = kTransposeLanes;  // items per group: one AVX2 vector of floats
constexpr int64_t kStrip = 8;  // rows per strip: chains in flight together

// Forward over one strip of K rows: R rows 1..K (s0..s0+K-1) from R row 0 (s0 - 1), X, Y; E rows
// of the strip. m = 1 for the modified recursion (term1 from (s-1, t-1)), 0 for the regular one.
// Tc = Tmax + 1 cells per row; rows are (Tc + 1) columns of kLanes (the column -1 first). Returns
// whether some cell's p is not finite.
template <typename T>
WAVETRAIN_VECTOR_INLINE bool forward_strip_impl(T* R, const T* X, const T* Y, T* E, int64_t K, int64_t Tc, int64_t m) {
  const int64_t row = (Tc + 1) * kLanes;
  const T ninf = -std::numeric_limits<T>::infinity();
  // One flag per lane, ORed in memory: a horizontal OR per cell cost a tenth of the loop.
  int not_finite[kLanes] = {};
  for (int64_t j = 0; j < Tc + K - 1; ++j) {
    const int64_t k_lo = j - Tc + 1 > 0 ? j - Tc + 1 : 0, k_hi = j < K - 1 ? j : K - 1;
    for (int64_t k = k_lo; k <= k_hi; ++k) {
      const int64_t c = j - k + 1;  // column index of cell t = j - k
      const T* up = R + k * row + (c - m) * kLanes;
      const T* left = R + (k + 1) * row + (c - 1) * kLanes;
      T* out = R + (k + 1) * row + c * kLanes;
      const T* x = X + k * row + c * kLanes;
      const T* y = Y + k * row + c * kLanes;
      T* e = E + k * row + c * kLanes;
#pragma GCC ivdep
      for (int64_t l = 0; l < kLanes; ++l) {
        const T a = up[l] + x[l], b = left[l] + y[l];
        const T larger = a > b ? a : b;
        const T diff = a > b ? b - a : a - b;  // <= 0
        const T ex = exp_nonpositive(diff);
        const T p = ((a == ninf) & (b == ninf)) ? ninf : larger + log1p_unit(ex);  // log_add(a, b)
        out[l] = p;
        // k2's rule for a p of -inf (no path reaches the cell; then term1 is -inf too) is a share
        // of exp(-inf) = 0. Non-finite p are flagged; those of +inf or NaN (from such input) need
        // k2's rule (share_where_not_finite). (Telling them from -inf here, one more select, made GCC
        // give up vectorising the loop.)
        const T share = (a > b ? T(1) : ex) / (T(1) + ex);
        e[l] = p == ninf ? T(0) : share;
        not_finite[l] |= (p - p == T(0)) ? 0 : 1;
      }
    }
  }
  int any = 0;
  for (int64_t l = 0; l < kLanes; ++l) any |= not_finite[l];
  return any != 0;
}
WAVETRAIN_VECTOR_KERNEL(bool, forward_strip,
                        (float* R, const float* X, const float* Y, float* E, int64_t K, int64_t Tc, int64_t m),
                        (R, X, Y, E, K, Tc, m))
WAVETRAIN_VECTOR_KERNEL(bool, forward_strip,
                        (double* R, const double* X, const double* Y, double* E, int64_t K, int64_t Tc, int64_t m),
                        (R, X, Y, E, K, Tc, m))

// k2's rule where a cell's p is +inf or NaN (from such input): the share is exp(term1 - 0), capped
// at 0; run on a strip where forward_strip found non-finite cells (R still holds its rows and the
// row above). Branch-free over every cell, so that it vectorises: unreachable cells (p = -inf) are
// common in pruned and modified lattices.
template <typename T>
WAVETRAIN_VECTOR_INLINE void share_where_not_finite_impl(const T* R, const T* X, T* E, int64_t K, int64_t Tc, int64_t m) {
  const T ninf = -std::numeric_limits<T>::infinity();
  const int64_t row = (Tc + 1) * kLanes;
  for (int64_t k = 0; k < K; ++k) {
    const T* __restrict__ out = R + (k + 1) * row + kLanes;
    const T* __restrict__ up = R + k * row + (1 - m) * kLanes;
    const T* __restrict__ x = X + k * row + kLanes;
    T* __restrict__ e = E + k * row + kLanes;
    for (int64_t i = 0; i < Tc * kLanes; ++i) {
      const T a = up[i] + x[i];
      const T k2 = exp_nonpositive(a > T(0) ? T(0) : a);
      const T p = out[i] == ninf ? T(0) : out[i];
      e[i] = p - p == T(0) ? e[i] : k2;
    }
  }
}
WAVETRAIN_VECTOR_KERNEL(void, share_where_not_finite,
                        (const float* R, const float* X, float* E, int64_t K, int64_t Tc, int64_t m),
                        (R, X, E, K, Tc, m))
WAVETRAIN_VECTOR_KERNEL(void, share_where_not_finite,
                        (const double* R, const double* X, double* E, int64_t K, int64_t Tc, int64_t m),
                        (R, X, E, K, Tc, m))

// Backward over one strip, bottom row first, each row right to left: cell (s, t) has occupation
// g = GX[s][t] + GY[s][t] (+ 1 where t equals the lane's `last` of this row, its final cell), and
// sends share E of it to its term1 predecessor's px entry, GX[s-1][t-m], the rest to GY[s][t-1]
// (a NaN share sends nothing). GX rows 0..K are s0-1..s0+K-1, GY rows 0..K-1 are s0..s0+K-1;
// last: K rows of kLanes, the column of each lane's last cell in that row or -1.
template <typename T>
WAVETRAIN_VECTOR_INLINE void backward_strip_impl(T* GX, T* GY, const T* E, const T* last, int64_t K, int64_t Tc, int64_t m) {
  const int64_t row = (Tc + 1) * kLanes;
  for (int64_t i = 0; i < Tc + K - 1; ++i) {
    // Row k (from the bottom, K-1) starts K-1-k steps late: cell t = Tc - 1 - (i - (K - 1 - k)).
    const int64_t k_lo = K - 1 - i > 0 ? K - 1 - i : 0, k_hi = (K - 1) + (Tc - 1) - i < K - 1 ? (K - 1) + (Tc - 1) - i : K - 1;
    for (int64_t k = k_hi; k >= k_lo; --k) {
      const int64_t t = Tc - 1 - (i - (K - 1 - k));
      const int64_t c = t + 1;
      const T* gx = GX + (k + 1) * row + c * kLanes;
      const T* gy = GY + k * row + c * kLanes;
      const T* e = E + k * row + c * kLanes;
      const T* lk = last + k * kLanes;
      T* gx1 = GX + k * row + (c - m) * kLanes;  // px entry of the term1 predecessor (s-1, t-m)
      T* gy2 = GY + k * row + (c - 1) * kLanes;  // py entry of the term2 predecessor (s, t-1)
      const T tf = static_cast<T>(t);
#pragma GCC ivdep
      for (int64_t l = 0; l < kLanes; ++l) {
        split_by_share(gx[l] + gy[l] + (lk[l] == tf ? T(1) : T(0)), e[l], gx1[l], gy2[l]);
      }
    }
  }
}
WAVETRAIN_VECTOR_KERNEL(void, backward_strip,
                        (float* GX, float* GY, const float* E, const float* last, int64_t K, int64_t Tc, int64_t m),
                        (GX, GY, E, last, K, Tc, m))
WAVETRAIN_VECTOR_KERNEL(void, backward_strip,
                        (double* GX, double* GY, const double* E, const double* last, int64_t K, int64_t Tc,
                         int64_t m),
                        (GX, GY, E, last, K, Tc, m))

struct Box {
  int64_t item, sb, tb, se, te;
  int64_t S() const { return se - sb; }
  int64_t T() const { return te - tb; }
};

template <typename T>
struct Group {
  // The tensors: px [B][S][T1], py [B][S+1][Tn] (T1 = Tn + 1 regular, Tn modified).
  int64_t S, T1, Tn;
  bool modified;
  std::vector<T> R, X, Y, E, GX, GY, last;

  // grads: compute px_grad and py_grad (not px_grad != nullptr: a tensor without elements may have
  // a null data pointer, with S = 0 px's, with T = 0 py's, and the other still has a gradient).
  void run(const std::vector<Box>& lanes, const T* px, const T* py, T* scores, bool grads, T* px_grad, T* py_grad) {
    const T ninf = -std::numeric_limits<T>::infinity();
    const int64_t n = static_cast<int64_t>(lanes.size());
    const int64_t m = modified ? 1 : 0;
    int64_t Smax = 0, Tmax = 0;
    for (const Box& b : lanes) {
      Smax = std::max(Smax, b.S());
      Tmax = std::max(Tmax, b.T());
    }
    const int64_t Tc = Tmax + 1, row = (Tc + 1) * kLanes;
    R.assign(static_cast<size_t>((kStrip + 1) * row), ninf);
    X.resize(static_cast<size_t>(kStrip * row));
    Y.resize(static_cast<size_t>(kStrip * row));
    E.resize(static_cast<size_t>((Smax + 1) * row));

    // Forward, strip by strip from the top.
    for (int64_t s0 = 0; s0 <= Smax; s0 += kStrip) {
      const int64_t K = std::min(kStrip, Smax + 1 - s0);
      for (int64_t k = 0; k < K; ++k) {
        const int64_t s = s0 + k;
        // Lane l's cells are columns [0, T'] of rows s <= S'. term1 of (s, t) reads px[s-1][t - m]
        // for t in [m, T'] (row 0's term1 is -inf through R's row -1; the modified (s, 0) has no
        // term1 predecessor: -inf); term2 reads py[s][t-1] for t in [1, T'] (t = 0: the virtual 0).
        // Everything else reads 0.
        const T* xs[kLanes];
        const T* ys[kLanes];
        int64_t hi[kLanes];
        for (int64_t l = 0; l < kLanes; ++l) {
          const Box* b = l < n ? &lanes[l] : nullptr;
          const bool in = b != nullptr && s <= b->S();
          xs[l] = in && s >= 1 ? px + (b->item * S + b->sb + s - 1) * T1 + b->tb : nullptr;
          ys[l] = in ? py + (b->item * (S + 1) + b->sb + s) * Tn + b->tb : nullptr;
          hi[l] = in ? b->T() + 1 : 0;
        }
        T* xr = &X[k * row];
        gather_lanes(xs, hi, m, T(0), xr + kLanes, Tc);
        if (m == 1) std::fill(xr + kLanes, xr + 2 * kLanes, ninf);
        gather_lanes(ys, hi, int64_t{1}, T(0), &Y[k * row] + kLanes, Tc);
      }
      for (int64_t k = 0; k < K; ++k) {
        // The virtual predecessor of (s, 0) through py: 0 for s = 0, -inf below.
        std::fill(&R[(k + 1) * row], &R[(k + 1) * row] + kLanes, s0 + k == 0 ? T(0) : ninf);
      }
      if (s0 == 0) std::fill(R.begin(), R.begin() + row, ninf);  // row -1
      if (forward_strip(R.data(), X.data(), Y.data(), &E[s0 * row], K, Tc, m))
        share_where_not_finite(R.data(), X.data(), &E[s0 * row], K, Tc, m);
      // As k2's edge loops: in the regular recursion a cell of the first column (s >= 1, t = 0)
      // sends all of its occupation through px, whatever its p (-inf or NaN included).
      if (m == 0)
        for (int64_t k = s0 == 0 ? 1 : 0; k < K; ++k) std::fill_n(&E[(s0 + k) * row + kLanes], kLanes, T(1));
      for (int64_t l = 0; l < n; ++l) {
        const Box& b = lanes[l];
        if (b.S() >= s0 && b.S() < s0 + K) scores[b.item] = R[(b.S() - s0 + 1) * row + (b.T() + 1) * kLanes + l];
      }
      std::copy(R.begin() + K * row, R.begin() + (K + 1) * row, R.begin());  // the last row is the next "up"
    }
    if (!grads) return;

    // Backward, strip by strip from the bottom.
    GX.assign(static_cast<size_t>((kStrip + 1) * row), T(0));
    GY.resize(static_cast<size_t>(kStrip * row));
    last.resize(static_cast<size_t>(kStrip * kLanes));
    const int64_t top_of_last = (Smax / kStrip) * kStrip;
    for (int64_t s0 = top_of_last; s0 >= 0; s0 -= kStrip) {
      const int64_t K = std::min(kStrip, Smax + 1 - s0);
      // GX row K (s0+K-1) came from the strip below (or is 0 at the bottom); its rows 0..K-1 are
      // written here, except column Tmax of row 0 in the modified recursion (no (s0, Tmax+1)).
      if (m == 1) std::fill(&GX[Tc * kLanes], &GX[Tc * kLanes] + kLanes, T(0));
      for (int64_t k = 0; k < K; ++k) {
        std::fill(&GY[k * row + Tc * kLanes], &GY[k * row + Tc * kLanes] + kLanes, T(0));  // py entry (s, Tmax)
        for (int64_t l = 0; l < kLanes; ++l)
          last[k * kLanes + l] = l < n && lanes[l].S() == s0 + k ? static_cast<T>(lanes[l].T()) : T(-1);
      }
      backward_strip(GX.data(), GY.data(), &E[s0 * row], last.data(), K, Tc, m);
      // Rows s0..s0+K-1 are final: GX rows 1..K, GY rows 0..K-1, back to each item's layout: px
      // entries of the box are rows [0, S'), columns [0, T'] (modified [0, T')), py's rows [0, S'],
      // columns [0, T').
      for (int64_t k = 0; k < K; ++k) {
        const int64_t s = s0 + k;
        T* xd[kLanes];
        T* yd[kLanes];
        int64_t xhi[kLanes], yhi[kLanes];
        for (int64_t l = 0; l < kLanes; ++l) {
          const Box* b = l < n ? &lanes[l] : nullptr;
          xd[l] = b != nullptr && s < b->S() ? px_grad + (b->item * S + b->sb + s) * T1 + b->tb : nullptr;
          yd[l] = b != nullptr && s <= b->S() ? py_grad + (b->item * (S + 1) + b->sb + s) * Tn + b->tb : nullptr;
          xhi[l] = xd[l] == nullptr ? 0 : modified ? b->T() : b->T() + 1;
          yhi[l] = yd[l] == nullptr ? 0 : b->T();
        }
        scatter_lanes(&GX[(k + 1) * row + kLanes], xd, xhi, Tc);
        scatter_lanes(&GY[k * row + kLanes], yd, yhi, Tc);
      }
      std::copy(GX.begin(), GX.begin() + row, GX.begin() + kStrip * row);  // row s0-1 for the strip above
    }
  }
};

}  // namespace

void mutual_information_cpu_lanes(const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary,
                                  at::Tensor& scores, at::Tensor& px_grad, at::Tensor& py_grad) {
  const int64_t B = px.size(0), S = px.size(1), T1 = px.size(2), Tn = py.size(2);
  const bool modified = T1 == Tn;
  const int64_t* box = boundary.data_ptr<int64_t>();
  const bool grads = px_grad.defined();
  // Items of similar size share a group (a group walks its largest box): sorted by cells, largest first.
  std::vector<Box> boxes(static_cast<size_t>(B));
  for (int64_t b = 0; b < B; ++b) boxes[b] = {b, box[4 * b], box[4 * b + 1], box[4 * b + 2], box[4 * b + 3]};
  std::stable_sort(boxes.begin(), boxes.end(), [](const Box& a, const Box& b) {
    return (a.S() + 1) * (a.T() + 1) > (b.S() + 1) * (b.T() + 1);
  });
  const int64_t groups = (B + kLanes - 1) / kLanes;
  AT_DISPATCH_FLOATING_TYPES(px.scalar_type(), "mutual_information_cpu_lanes", [&] {
    const scalar_t* x = px.data_ptr<scalar_t>();
    const scalar_t* y = py.data_ptr<scalar_t>();
    scalar_t* out = scores.data_ptr<scalar_t>();
    scalar_t* gx = grads ? px_grad.data_ptr<scalar_t>() : nullptr;
    scalar_t* gy = grads ? py_grad.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, groups, 1, [&](int64_t begin, int64_t end) {
      Group<scalar_t> group;  // buffers reused across this thread's groups
      group.S = S;
      group.T1 = T1;
      group.Tn = Tn;
      group.modified = modified;
      for (int64_t g = begin; g < end; ++g) {
        const auto first = boxes.begin() + g * kLanes;
        const std::vector<Box> lanes(first, first + std::min(kLanes, B - g * kLanes));
        if (grads) {
          // Entries outside a box are 0; inside, each is written once.
          for (const Box& b : lanes) {
            if (b.sb == 0 && b.se == S && b.tb == 0 && b.te == Tn) continue;
            if (gx) std::fill(gx + b.item * S * T1, gx + (b.item + 1) * S * T1, scalar_t(0));
            if (gy) std::fill(gy + b.item * (S + 1) * Tn, gy + (b.item + 1) * (S + 1) * Tn, scalar_t(0));
          }
        }
        group.run(lanes, x, y, out, grads, gx, gy);
      }
    });
  });
}

}  // namespace wavetrain::losses::detail
