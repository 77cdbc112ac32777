// The CPU loops of the STFT loss (stft_loss_cpu.h).
#include "losses/stft_loss_cpu.h"

#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace wavetrain::losses::detail {
namespace {

// Clamped powers re^2 + im^2 of `n` interleaved complex values; the caller takes the square root
// (an ATen op: std::sqrt's errno handling keeps the compiler from vectorising a loop around it).
template <typename T>
void clamped_powers(const T* z, T* out, int64_t n, T eps) {
  for (int64_t k = 0; k < n; ++k) {
    const T p = z[2 * k] * z[2 * k] + z[2 * k + 1] * z[2 * k + 1];
    out[k] = p < eps ? eps : p;  // clamp_min keeps a NaN: so does this comparison
  }
}

template <typename T>
MagnitudeSums magnitude_sums(const T* x, const T* y, int64_t rows, int64_t bins) {
  MagnitudeSums sums;
  for (int64_t r = 0; r < rows; ++r) {
    const T* xr = x + r * bins;
    const T* yr = y + r * bins;
    T sq_diff[8] = {}, sq_target[8] = {}, abs_diff[8] = {};
    int64_t k = 0;
    for (; k + 8 <= bins; k += 8) {
      for (int l = 0; l < 8; ++l) {
        const T d = xr[k + l] - yr[k + l];
        sq_diff[l] += d * d;
        sq_target[l] += yr[k + l] * yr[k + l];
        abs_diff[l] += std::abs(d);
      }
    }
    for (; k < bins; ++k) {
      const T d = xr[k] - yr[k];
      sq_diff[0] += d * d;
      sq_target[0] += yr[k] * yr[k];
      abs_diff[0] += std::abs(d);
    }
    for (int l = 0; l < 8; ++l) {
      sums.sq_diff += sq_diff[l];
      sums.sq_target += sq_target[l];
      sums.abs_diff += abs_diff[l];
    }
  }
  return sums;
}

template <typename T>
void bin_gradient_rows(const T* spec, const T* x, const T* y, T* out, int64_t rows, int64_t bins, bool even,
                       const BinGradient& k) {
  const T sc = static_cast<T>(k.sc), log_mag = static_cast<T>(k.log_mag), lin_mag = static_cast<T>(k.lin_mag),
          floor = static_cast<T>(k.floor);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = r * bins;
    for (int64_t b = 0; b < bins; ++b) {  // written without branches, so that it vectorises
      const int64_t i = row + b;
      const T d = x[i] - y[i];
      const T sign = static_cast<T>(d > 0) - static_cast<T>(d < 0);
      const T g = sc * d + log_mag * sign / x[i] + lin_mag * sign;
      const T s = static_cast<T>(x[i] > floor) * T(0.5) * g / x[i];  // x >= floor > 0
      out[2 * i] = s * spec[2 * i];
      out[2 * i + 1] = s * spec[2 * i + 1];
    }
    // Bin 0 and (for even N) bin N/2 are not halved.
    out[2 * row] *= 2;
    out[2 * row + 1] *= 2;
    if (even) {
      out[2 * (row + bins - 1)] *= 2;
      out[2 * (row + bins - 1) + 1] *= 2;
    }
  }
}

}  // namespace

// Magnitudes x, y [items][frames][bins] of the two halves of `spectra`, and their sums.
MagnitudeSums magnitudes_cpu(const at::Tensor& spectra, int64_t items, double eps, at::Tensor& x, at::Tensor& y) {
  const at::Tensor ri = at::view_as_real(spectra);
  x = at::empty({items, spectra.size(1), spectra.size(2)}, ri.options());
  y = at::empty_like(x);
  const int64_t rows = x.numel() / x.size(-1), bins = x.size(-1);
  std::vector<MagnitudeSums> parts(static_cast<size_t>(at::get_num_threads()));
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "magnitudes_cpu", [&] {
    const scalar_t* sx = ri.data_ptr<scalar_t>();
    const scalar_t* sy = sx + 2 * rows * bins;
    scalar_t *xp = x.data_ptr<scalar_t>(), *yp = y.data_ptr<scalar_t>();
    const int64_t grain = std::max<int64_t>(1, 16384 / bins);
    // Fixed ranges per thread, and their sums added in range order: the same result every run.
    const int64_t chunks = std::min<int64_t>(static_cast<int64_t>(parts.size()), std::max<int64_t>(1, rows / grain));
    at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t c = begin; c < end; ++c) {
        const int64_t r0 = rows * c / chunks, n = (rows * (c + 1) / chunks - r0) * bins;
        clamped_powers(sx + 2 * r0 * bins, xp + r0 * bins, n, static_cast<scalar_t>(eps));
        clamped_powers(sy + 2 * r0 * bins, yp + r0 * bins, n, static_cast<scalar_t>(eps));
        x.view({-1}).narrow(0, r0 * bins, n).sqrt_();
        y.view({-1}).narrow(0, r0 * bins, n).sqrt_();
        parts[static_cast<size_t>(c)] = magnitude_sums(xp + r0 * bins, yp + r0 * bins, n / bins, bins);
      }
    });
    parts.resize(static_cast<size_t>(chunks));
  });
  MagnitudeSums total;
  for (const MagnitudeSums& p : parts) {
    total.sq_diff += p.sq_diff;
    total.sq_target += p.sq_target;
    total.abs_diff += p.abs_diff;
  }
  return total;
}

at::Tensor bin_gradient_cpu(const at::Tensor& spectra, const at::Tensor& x, const at::Tensor& y, const BinGradient& k,
                            int64_t fft_size) {
  struct {
    int64_t bins, n;
  } f{x.size(-1), fft_size};
  const at::Tensor spec = at::view_as_real(spectra.contiguous()), xc = x.contiguous(), yc = y.contiguous();
  const at::Tensor out = at::empty_like(spec);
  const int64_t rows = xc.numel() / f.bins;
  AT_DISPATCH_FLOATING_TYPES(xc.scalar_type(), "bin_gradient_cpu", [&] {
    const scalar_t *s = spec.data_ptr<scalar_t>(), *xp = xc.data_ptr<scalar_t>(), *yp = yc.data_ptr<scalar_t>();
    scalar_t* o = out.data_ptr<scalar_t>();
    at::parallel_for(0, rows, std::max<int64_t>(1, 16384 / f.bins), [&](int64_t begin, int64_t end) {
      bin_gradient_rows(s + 2 * begin * f.bins, xp + begin * f.bins, yp + begin * f.bins, o + 2 * begin * f.bins,
                        end - begin, f.bins, f.n % 2 == 0, k);
    });
  });
  return at::view_as_complex(out);
}

}  // namespace wavetrain::losses::detail
