// The CUDA kernel of the mutual-information recursion (semantics in mutual_information.h), built
// only when LibTorch has CUDA (losses/CMakeLists.txt). One thread block per batch item; its
// threads take the cells of one anti-diagonal (s + t = d) at a time, since those depend only on the
// two previous diagonals, with a __syncthreads() between diagonals. p lives in global memory
// [B][S+1][T+1]; cells outside an item's box are never read (the terms that would read them are
// absent, as in the CPU kernel's -inf padding).
//
// Backward: the occupation of a cell is the sum of what its successors sent through the px and py
// entries at the cell's own position (px_grad[s][t] + py_grad[s][t]), or 1 for the last cell;
// it is split between the cell's predecessors in proportion exp(term - p), with k2's rules for a
// non-finite p (counts as 0), a non-finite share (sends nothing), the first row (all through py)
// and the first column (all through px in regular mode, nothing in modified mode).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <limits>

#include "losses/mutual_information.h"

namespace wavetrain::losses::detail {
namespace {

template <typename T>
__device__ __forceinline__ T log_add(T a, T b) {
  const T ninf = -std::numeric_limits<T>::infinity();
  if (a == ninf && b == ninf) return ninf;
  const T hi = a > b ? a : b;
  const T diff = a > b ? b - a : a - b;
  return hi + log1p(exp(diff));
}

struct Box {
  int64_t sb, tb, se, te;
};

__device__ __forceinline__ Box box_of(const int64_t* boundary, int64_t b) {
  return {boundary[4 * b], boundary[4 * b + 1], boundary[4 * b + 2], boundary[4 * b + 3]};
}

template <typename T>
__global__ void mi_forward(const T* __restrict__ px, const T* __restrict__ py, const int64_t* __restrict__ boundary,
                           T* __restrict__ p, T* __restrict__ scores, int64_t S, int64_t T1, int64_t Tn, bool modified) {
  const int64_t b = blockIdx.x;
  const Box x = box_of(boundary, b);
  const T ninf = -std::numeric_limits<T>::infinity();
  const T* pxb = px + b * S * T1;
  const T* pyb = py + b * (S + 1) * Tn;
  T* pb = p + b * (S + 1) * (Tn + 1);
  const int64_t W = Tn + 1;
  for (int64_t d = x.sb + x.tb; d <= x.se + x.te; ++d) {
    const int64_t lo = max(x.sb, d - x.te), hi = min(x.se, d - x.tb);
    for (int64_t s = lo + threadIdx.x; s <= hi; s += blockDim.x) {
      const int64_t t = d - s;
      T value;
      if (s == x.sb && t == x.tb) {
        value = T(0);
      } else {
        T term1 = ninf, term2 = ninf;
        if (s > x.sb) {
          if (!modified) term1 = pb[(s - 1) * W + t] + pxb[(s - 1) * T1 + t];
          else if (t > x.tb) term1 = pb[(s - 1) * W + t - 1] + pxb[(s - 1) * T1 + t - 1];
        }
        if (t > x.tb) term2 = pb[s * W + t - 1] + pyb[s * Tn + t - 1];
        value = log_add(term1, term2);
      }
      pb[s * W + t] = value;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) scores[b] = pb[x.se * W + x.te];
}

template <typename T>
__global__ void mi_backward(const T* __restrict__ px, const int64_t* __restrict__ boundary, const T* __restrict__ p,
                            T* __restrict__ px_grad, T* __restrict__ py_grad, int64_t S, int64_t T1, int64_t Tn,
                            bool modified) {
  const int64_t b = blockIdx.x;
  const Box x = box_of(boundary, b);
  const T* pxb = px + b * S * T1;
  const T* pb = p + b * (S + 1) * (Tn + 1);
  T* gx = px_grad + b * S * T1;
  T* gy = py_grad + b * (S + 1) * Tn;
  const int64_t W = Tn + 1;
  for (int64_t d = x.se + x.te; d > x.sb + x.tb; --d) {
    const int64_t lo = max(x.sb, d - x.te), hi = min(x.se, d - x.tb);
    for (int64_t s = lo + threadIdx.x; s <= hi; s += blockDim.x) {
      const int64_t t = d - s;
      T g;
      if (s == x.se && t == x.te) {
        g = T(1);
      } else {
        g = T(0);
        if (s < S && t < T1) g += gx[s * T1 + t];
        if (t < Tn) g += gy[s * Tn + t];
      }
      if (s == x.sb) {  // first row: everything through py
        gy[s * Tn + t - 1] = g;
      } else if (t == x.tb) {  // first column
        if (!modified) gx[(s - 1) * T1 + t] = g;
      } else {
        T total = pb[s * W + t];
        if (!(total - total == T(0))) total = T(0);
        const int64_t tp = modified ? t - 1 : t;
        const T term1 = pb[(s - 1) * W + tp] + pxb[(s - 1) * T1 + tp];
        T arg = term1 - total;
        if (arg > T(0)) arg = T(0);
        const T share = exp(arg);
        const bool ok = share == share;
        gx[(s - 1) * T1 + tp] = ok ? share * g : T(0);
        gy[s * Tn + t - 1] = ok ? (T(1) - share) * g : T(0);
      }
    }
    __syncthreads();
  }
}

}  // namespace

void mutual_information_cuda(const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary, at::Tensor& scores,
                             at::Tensor& px_grad, at::Tensor& py_grad) {
  const c10::cuda::CUDAGuard guard(px.device());
  const int64_t B = px.size(0), S = px.size(1), T1 = px.size(2), Tn = py.size(2);
  const bool modified = T1 == Tn;
  const at::Tensor box = boundary.to(px.device(), at::kLong).contiguous();
  const at::Tensor p = at::empty({B, S + 1, Tn + 1}, px.options());
  const int threads = static_cast<int>(std::min<int64_t>(512, ((S + 1 + 31) / 32) * 32));
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(px.scalar_type(), "mutual_information_cuda", [&] {
    mi_forward<scalar_t><<<B, threads, 0, stream>>>(px.data_ptr<scalar_t>(), py.data_ptr<scalar_t>(),
                                                    box.data_ptr<int64_t>(), p.data_ptr<scalar_t>(),
                                                    scores.data_ptr<scalar_t>(), S, T1, Tn, modified);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (px_grad.defined()) {
      mi_backward<scalar_t><<<B, threads, 0, stream>>>(px.data_ptr<scalar_t>(), box.data_ptr<int64_t>(),
                                                       p.data_ptr<scalar_t>(), px_grad.data_ptr<scalar_t>(),
                                                       py_grad.data_ptr<scalar_t>(), S, T1, Tn, modified);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
}

}  // namespace wavetrain::losses::detail
