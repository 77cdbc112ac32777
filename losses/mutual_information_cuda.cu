// The CUDA kernels of the mutual-information recursion (semantics in mutual_information.h), built
// only when LibTorch has CUDA (losses/CMakeLists.txt). One thread block per batch item walks the
// item's anti-diagonals (s + t = d), which depend only on their neighbours, with a __syncthreads()
// between diagonals. Each thread's work on a diagonal is in mutual_information_cuda_cells.h, shared
// with the host emulation that tests it on machines without a GPU; only the loop and the launch are here.
#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "losses/mutual_information.h"
#include "losses/mutual_information_cuda_cells.h"

namespace wavetrain::losses::detail {
namespace {

using mi_cells::Box;
using mi_cells::Dims;

template <typename T>
__global__ void mi_forward(const T* __restrict__ px, const T* __restrict__ py, const int64_t* __restrict__ boundary,
                           T* __restrict__ p, T* __restrict__ scores, Dims n) {
  const int64_t b = blockIdx.x;
  const Box x = mi_cells::box_of(boundary, b);
  const mi_cells::Item<T> item = mi_cells::item_of(px, py, p, n, b);
  for (int64_t d = x.sb + x.tb; d <= x.se + x.te; ++d) {
    mi_cells::forward_diagonal(item, x, n, d, threadIdx.x, blockDim.x);
    __syncthreads();
  }
  if (threadIdx.x == 0) scores[b] = mi_cells::score_of(item, x, n);
}

template <typename T>
__global__ void mi_backward(const T* __restrict__ px, const int64_t* __restrict__ boundary, T* __restrict__ p,
                            T* __restrict__ px_grad, T* __restrict__ py_grad, Dims n) {
  const int64_t b = blockIdx.x;
  const Box x = mi_cells::box_of(boundary, b);
  const mi_cells::Item<T> item = mi_cells::item_of(px, static_cast<const T*>(nullptr), p, n, b);
  T* gx = px_grad + b * n.S * n.T1;
  T* gy = py_grad + b * (n.S + 1) * n.T;
  for (int64_t d = x.se + x.te; d > x.sb + x.tb; --d) {
    mi_cells::backward_diagonal(item, gx, gy, x, n, d, threadIdx.x, blockDim.x);
    __syncthreads();
  }
}

}  // namespace

void mutual_information_cuda(const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary, at::Tensor& scores,
                             at::Tensor& px_grad, at::Tensor& py_grad) {
  const c10::cuda::CUDAGuard guard(px.device());
  const int64_t B = px.size(0);
  const Dims n{px.size(1), px.size(2), py.size(2), px.size(2) == py.size(2)};
  const at::Tensor box = boundary.to(px.device(), at::kLong).contiguous();
  const at::Tensor p = at::empty({B, n.S + 1, n.T + 1}, px.options());
  const int threads = mi_cells::threads_per_item(n.S);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES(px.scalar_type(), "mutual_information_cuda", [&] {
    mi_forward<scalar_t><<<B, threads, 0, stream>>>(px.data_ptr<scalar_t>(), py.data_ptr<scalar_t>(),
                                                    box.data_ptr<int64_t>(), p.data_ptr<scalar_t>(),
                                                    scores.data_ptr<scalar_t>(), n);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    if (px_grad.defined()) {
      mi_backward<scalar_t><<<B, threads, 0, stream>>>(px.data_ptr<scalar_t>(), box.data_ptr<int64_t>(),
                                                       p.data_ptr<scalar_t>(), px_grad.data_ptr<scalar_t>(),
                                                       py_grad.data_ptr<scalar_t>(), n);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
  });
}

}  // namespace wavetrain::losses::detail
