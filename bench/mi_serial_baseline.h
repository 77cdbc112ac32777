// The baseline for bench/mi_bench.cpp: the mutual-information recursion one cell at a time, the
// way k2/fast_rnnt's CPU extension computes it (row by row, libm's exp and log1p, a log-add that
// returns the larger term when the other is negligible, the batch in a serial loop; forward
// storing p, backward walking it in reverse). Written here from the published recursion so that
// the benchmark compares algorithms on one machine and one compiler; scores and gradients are
// checked against wavetrain's kernel before anything is timed.
#pragma once

#include <ATen/ATen.h>

#include <cmath>
#include <limits>

namespace wavetrain::bench {

template <typename T>
T serial_log_add(T x, T y) {
  const T min_log_diff = sizeof(T) == 4 ? T(-15.9423847198486328125) : T(-36.0436533891171535515443);
  T diff;
  if (x < y) {
    diff = x - y;
    x = y;
  } else {
    diff = y - x;
  }
  if (diff >= min_log_diff) return x + std::log1p(std::exp(diff));
  return x;
}

// px [B][S][T1], py [B][S+1][T], boundary [B][4] (CPU, contiguous). Fills scores [B] and the
// occupation probabilities px_grad, py_grad (zero-initialised).
template <typename T>
void serial_mutual_information(const at::Tensor& px_t, const at::Tensor& py_t, const at::Tensor& boundary,
                               at::Tensor& scores, at::Tensor& px_grad_t, at::Tensor& py_grad_t) {
  const int64_t B = px_t.size(0), S = px_t.size(1), T1 = px_t.size(2), Tn = py_t.size(2);
  const int64_t offset = T1 == Tn ? -1 : 0;  // modified: px[s-1][t-1]
  const T ninf = -std::numeric_limits<T>::infinity();
  at::Tensor p_t = at::empty({S + 1, Tn + 1}, px_t.options()), pg_t = at::empty({S + 1, Tn + 1}, px_t.options());
  T* p = p_t.data_ptr<T>();
  T* pg = pg_t.data_ptr<T>();
  const int64_t* box = boundary.data_ptr<int64_t>();
  const int64_t W = Tn + 1;
  for (int64_t b = 0; b < B; ++b) {
    const T* px = px_t.data_ptr<T>() + b * S * T1;
    const T* py = py_t.data_ptr<T>() + b * (S + 1) * Tn;
    T* gx = px_grad_t.data_ptr<T>() + b * S * T1;
    T* gy = py_grad_t.data_ptr<T>() + b * (S + 1) * Tn;
    const int64_t sb = box[4 * b], tb = box[4 * b + 1], se = box[4 * b + 2], te = box[4 * b + 3];
    p[sb * W + tb] = 0;
    for (int64_t s = sb + 1; s <= se; ++s)
      p[s * W + tb] = offset == -1 ? ninf : p[(s - 1) * W + tb] + px[(s - 1) * T1 + tb];
    for (int64_t t = tb + 1; t <= te; ++t) p[sb * W + t] = p[sb * W + t - 1] + py[sb * Tn + t - 1];
    for (int64_t s = sb + 1; s <= se; ++s)
      for (int64_t t = tb + 1; t <= te; ++t)
        p[s * W + t] = serial_log_add(p[(s - 1) * W + t + offset] + px[(s - 1) * T1 + t + offset],
                                      p[s * W + t - 1] + py[s * Tn + t - 1]);
    scores.data_ptr<T>()[b] = p[se * W + te];

    for (int64_t s = sb; s <= se; ++s)
      for (int64_t t = tb; t <= te; ++t) pg[s * W + t] = 0;
    pg[se * W + te] = 1;
    for (int64_t s = se; s > sb; --s)
      for (int64_t t = te; t > tb; --t) {
        const T term1 = p[(s - 1) * W + t + offset] + px[(s - 1) * T1 + t + offset];
        T total = p[s * W + t];
        if (total - total != 0) total = 0;
        const T d1 = std::exp(term1 - total), d2 = 1 - d1, g = pg[s * W + t];
        const bool ok = d1 - d1 == 0;
        const T g1 = ok ? d1 * g : T(0), g2 = ok ? d2 * g : T(0);
        gx[(s - 1) * T1 + t + offset] = g1;
        pg[(s - 1) * W + t + offset] += g1;
        gy[s * Tn + t - 1] = g2;
        pg[s * W + t - 1] += g2;
      }
    for (int64_t t = te; t > tb; --t) {
      pg[sb * W + t - 1] += pg[sb * W + t];
      gy[sb * Tn + t - 1] = pg[sb * W + t];
    }
    if (offset == 0)
      for (int64_t s = se; s > sb; --s) {
        pg[(s - 1) * W + tb] += pg[s * W + tb];
        gx[(s - 1) * T1 + tb] = pg[s * W + tb];
      }
  }
}

}  // namespace wavetrain::bench
