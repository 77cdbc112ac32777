// The mutual-information recursion behind k2's RNN-T losses, with k2's semantics.
//
// Shapes (B batch, S symbols, T frames):
//   px        [B][S][T+1] "regular" or [B][S][T] "modified" (inferred from the shape): log-prob of
//             emitting symbol s at frame t
//   py        [B][S+1][T]: log-prob of moving on a frame without a symbol
//   boundary  optional int64 [B][4] = (s_begin, t_begin, s_end, t_end), 0 <= s_begin <= s_end <= S,
//             0 <= t_begin <= t_end <= T; without it (0, 0, S, T) for every item
//
// Recursion over p [S+1][T+1] inside each item's box:
//   p[s_begin][t_begin] = 0
//   regular   p[s][t] = logaddexp(p[s-1][t] + px[s-1][t],   p[s][t-1] + py[s][t-1])
//   modified  p[s][t] = logaddexp(p[s-1][t-1] + px[s-1][t-1], p[s][t-1] + py[s][t-1])
// where a term whose predecessor lies outside the box is absent (-inf). In modified mode the first
// column (t = t_begin, s > s_begin) is therefore -inf. The score is p[s_end][t_end].
//
// -inf: logaddexp(-inf, -inf) = -inf; a sequence with no finite path scores -inf and still gets
// finite gradients (k2's rule: where p[s][t] is not finite it counts as 0 in the backward, so the
// occupation follows the py direction). NaN in px or py on a cell of the box makes that item's score
// NaN.
//
// Gradients are occupation probabilities: d score / d px[s][t] is the probability that the best
// paths' distribution uses that arc. Per item sum(px_grad) = s_end - s_begin, and in regular mode
// sum(px_grad) + sum(py_grad) = (s_end - s_begin) + (t_end - t_begin). Outside the box they are 0.
//
// Precision: float32 and float64 are computed as given; half and bfloat16 are computed in float32
// and the results cast back to the input type.
#pragma once

#include <ATen/ATen.h>

#include <optional>

namespace wavetrain::losses {

enum class MiImplementation {
  kAuto,      // the CPU kernel on the CPU, the CUDA kernel on CUDA (when built with CUDA), else portable
  kCpu,       // vectorised, parallel over the batch (CPU tensors only)
  kPortable,  // ATen tensor ops over anti-diagonals: any device (MPS), and the tests' oracle
  kCuda,      // CUDA tensors, LibTorch built with CUDA
};

struct MutualInformation {
  at::Tensor scores;   // [B]
  at::Tensor px_grad;  // d scores[b] / d px, like px; defined when asked for
  at::Tensor py_grad;  // d scores[b] / d py, like py
};

// The scores; differentiable (autograd) in px and py. Backward may run more than once
// (retain_graph): the saved occupation probabilities are never modified.
// Throws std::invalid_argument naming the tensor, the batch item and the rule broken.
at::Tensor mutual_information_recursion(const at::Tensor& px, const at::Tensor& py,
                                        const std::optional<at::Tensor>& boundary = std::nullopt,
                                        MiImplementation implementation = MiImplementation::kAuto);

// k2's return_grad=true: the scores (differentiable as above) and the occupation probabilities.
MutualInformation mutual_information_with_grad(const at::Tensor& px, const at::Tensor& py,
                                               const std::optional<at::Tensor>& boundary = std::nullopt,
                                               MiImplementation implementation = MiImplementation::kAuto);

namespace detail {

// The kernels, outside autograd. `boundary` is int64 [B][4] on the CPU, already validated; px and
// py are contiguous float32/float64 on the kernel's device. Fill scores [B] and, when px_grad is
// defined, px_grad and py_grad (zero-initialised by the caller, except for the CPU kernel, which
// writes every entry).
void mutual_information_cpu(const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary, at::Tensor& scores,
                            at::Tensor& px_grad, at::Tensor& py_grad);
// mutual_information_cpu runs one of these two: items in vector lanes, a group of 8 items a strip of
// rows at a time (mutual_information_lanes.cpp), or one item at a time, diagonal by diagonal
// (mutual_information_cpu.cpp). Same contract; tests run both.
void mutual_information_cpu_lanes(const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary,
                                  at::Tensor& scores, at::Tensor& px_grad, at::Tensor& py_grad);
void mutual_information_cpu_diagonals(const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary,
                                      at::Tensor& scores, at::Tensor& px_grad, at::Tensor& py_grad);
// The CPU kernels of losses/ (this one and the transducer losses' rows) run the best build the CPU
// has: AVX-512 (F, VL, DQ, BW), AVX2 + FMA, or the baseline ISA. Tests cap it lower, for every
// later call until capped again (kAvx512: no cap), to compare the builds; vector_kernel_isa says
// which one runs.
enum class VectorIsa : int { kBaseline = 0, kAvx2Fma = 1, kAvx512 = 2 };
void cap_vector_kernels(VectorIsa highest);
VectorIsa vector_kernel_isa();
void mutual_information_portable(const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary,
                                 at::Tensor& scores, at::Tensor& px_grad, at::Tensor& py_grad);
#ifdef WAVETRAIN_LOSSES_WITH_CUDA
void mutual_information_cuda(const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary, at::Tensor& scores,
                             at::Tensor& px_grad, at::Tensor& py_grad);
#endif

}  // namespace detail
}  // namespace wavetrain::losses
