// CPU rows of the pruned log-probabilities (rnnt_logprobs.h): per row of C logits, the
// log-sum-exp and the two picked entries; backward softmax(row) * -(gpx + gpy) plus the picked
// entries' own gradients. exp is the vectorisable one from vector_math.h (arguments are <= 0
// after subtracting the row maximum); sums run in 8 fixed lanes so that they vectorise too.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "losses/rnnt_logprobs.h"
#include "losses/vector_math.h"

namespace wavetrain::losses::detail {
namespace {

template <typename T>
inline T row_logsumexp_impl(const T* x, int64_t n) {
  // Maximum and sum in 8 fixed lanes each, so that both loops vectorise.
  T lanes[8];
  for (int l = 0; l < 8; ++l) lanes[l] = x[0];
  int64_t c = 0;
  for (; c + 8 <= n; c += 8)
    for (int l = 0; l < 8; ++l) lanes[l] = x[c + l] > lanes[l] ? x[c + l] : lanes[l];
  T m = lanes[0];
  for (int l = 1; l < 8; ++l) m = lanes[l] > m ? lanes[l] : m;
  for (; c < n; ++c) m = x[c] > m ? x[c] : m;
  if (!(m > -std::numeric_limits<T>::infinity())) return m;  // all -inf (or NaN): as logsumexp
  for (int l = 0; l < 8; ++l) lanes[l] = 0;
  for (c = 0; c + 8 <= n; c += 8)
    for (int l = 0; l < 8; ++l) lanes[l] += exp_nonpositive(x[c + l] - m);
  for (; c < n; ++c) lanes[0] += exp_nonpositive(x[c] - m);
  T sum = 0;
  for (int l = 0; l < 8; ++l) sum += lanes[l];
  return m + std::log(sum);
}

template <typename T>
inline void softmax_times_impl(const T* __restrict__ x, T lse, T g, T* __restrict__ out, int64_t n) {
  for (int64_t c = 0; c < n; ++c) out[c] = exp_nonpositive(x[c] - lse) * g;
}

WAVETRAIN_VECTOR_KERNEL(float, row_logsumexp, (const float* x, int64_t n), (x, n))
WAVETRAIN_VECTOR_KERNEL(double, row_logsumexp, (const double* x, int64_t n), (x, n))
WAVETRAIN_VECTOR_KERNEL(void, softmax_times, (const float* x, float lse, float g, float* out, int64_t n),
                        (x, lse, g, out, n))
WAVETRAIN_VECTOR_KERNEL(void, softmax_times, (const double* x, double lse, double g, double* out, int64_t n),
                        (x, lse, g, out, n))

}  // namespace

void pruned_logprobs_forward_cpu(const at::Tensor& logits, const at::Tensor& symbols, int64_t blank, at::Tensor& lse,
                                 at::Tensor& px, at::Tensor& py) {
  const int64_t C = logits.size(-1), rows = logits.numel() / C;
  const int64_t* sym = symbols.data_ptr<int64_t>();
  AT_DISPATCH_FLOATING_TYPES(logits.scalar_type(), "pruned_logprobs_forward_cpu", [&] {
    const scalar_t* x = logits.data_ptr<scalar_t>();
    scalar_t *l = lse.data_ptr<scalar_t>(), *a = px.data_ptr<scalar_t>(), *b = py.data_ptr<scalar_t>();
    at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const scalar_t* row = x + r * C;
        l[r] = row_logsumexp(row, C);
        a[r] = row[sym[r]] - l[r];
        b[r] = row[blank] - l[r];
      }
    });
  });
}

void pruned_logprobs_backward_cpu(const at::Tensor& logits, const at::Tensor& symbols, int64_t blank,
                                  const at::Tensor& lse, const at::Tensor& gpx, const at::Tensor& gpy, at::Tensor& grad) {
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
        softmax_times(x + r * C, l[r], -(ga[r] + gb[r]), o, C);
        o[sym[r]] += ga[r];
        o[blank] += gb[r];
      }
    });
  });
}

}  // namespace wavetrain::losses::detail
