// The mutual-information CUDA kernels' per-thread code (losses/mutual_information_cuda_cells.h) run
// in a host emulation of their launch: one block per item, the block's threads over each
// anti-diagonal, a barrier between diagonals. The emulation runs the threads of a diagonal in
// reverse order, so code that read a cell another thread writes on the same diagonal (a race on the
// GPU) would give other numbers here. Checked against k2's vectors and against the CPU kernel, on
// every build: the GPU itself runs the same functions (tests labelled `cuda`, scripts/gpu-check).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "losses/mutual_information.h"
#include "losses/mutual_information_cuda_cells.h"
#include "tests/reference_json.h"

namespace wavetrain::losses {
namespace {

using wavetrain::testing::json_tensor;
using wavetrain::testing::load_json;
using wavetrain::testing::max_relative_error;

// mutual_information_cuda's launch, on the host. threads = 0 takes the kernel's own block size.
template <typename T>
MutualInformation emulate_launch(const at::Tensor& px_in, const at::Tensor& py_in, const at::Tensor& boundary,
                                 int threads) {
  const at::Tensor px = px_in.contiguous(), py = py_in.contiguous();
  const int64_t B = px.size(0);
  const mi_cells::Dims n{px.size(1), px.size(2), py.size(2), px.size(2) == py.size(2)};
  if (threads == 0) threads = mi_cells::threads_per_item(n.S);
  const at::Tensor box = boundary.contiguous();
  at::Tensor p = at::full({B, n.S + 1, n.T + 1}, std::nan(""), px.options());  // unset cells are NaN
  MutualInformation r{at::empty({B}, px.options()), at::zeros_like(px), at::zeros_like(py)};
  const T* x = px.data_ptr<T>();
  const T* y = py.data_ptr<T>();
  for (int64_t b = 0; b < B; ++b) {  // the forward kernel's blocks
    const mi_cells::Box bx = mi_cells::box_of(box.data_ptr<int64_t>(), b);
    const mi_cells::Item<T> item = mi_cells::item_of(x, y, p.data_ptr<T>(), n, b);
    for (int64_t d = bx.sb + bx.tb; d <= bx.se + bx.te; ++d)
      for (int k = threads - 1; k >= 0; --k) mi_cells::forward_diagonal(item, bx, n, d, k, threads);
    r.scores.data_ptr<T>()[b] = mi_cells::score_of(item, bx, n);
  }
  for (int64_t b = 0; b < B; ++b) {  // the backward kernel's blocks
    const mi_cells::Box bx = mi_cells::box_of(box.data_ptr<int64_t>(), b);
    const mi_cells::Item<T> item = mi_cells::item_of(x, y, p.data_ptr<T>(), n, b);
    T* gx = r.px_grad.data_ptr<T>() + b * n.S * n.T1;
    T* gy = r.py_grad.data_ptr<T>() + b * (n.S + 1) * n.T;
    for (int64_t d = bx.se + bx.te; d > bx.sb + bx.tb; --d)
      for (int k = threads - 1; k >= 0; --k) mi_cells::backward_diagonal(item, gx, gy, bx, n, d, k, threads);
  }
  return r;
}

MutualInformation emulate(const at::Tensor& px, const at::Tensor& py, const at::Tensor& boundary, int threads) {
  return px.scalar_type() == at::kDouble ? emulate_launch<double>(px, py, boundary, threads)
                                         : emulate_launch<float>(px, py, boundary, threads);
}

at::Tensor full_boundary(const at::Tensor& px, const at::Tensor& py) {
  const at::Tensor b = at::zeros({px.size(0), 4}, at::kLong);
  b.select(1, 2).fill_(px.size(1));
  b.select(1, 3).fill_(py.size(2));
  return b;
}

TEST(MutualInformationCudaEmulation, BlockSizeIsAWarpMultipleCoveringADiagonal) {
  EXPECT_EQ(mi_cells::threads_per_item(0), 32);
  EXPECT_EQ(mi_cells::threads_per_item(31), 32);
  EXPECT_EQ(mi_cells::threads_per_item(32), 64);
  EXPECT_EQ(mi_cells::threads_per_item(500), 512);
  EXPECT_EQ(mi_cells::threads_per_item(5000), 512);
}

// k2's seven recursion cases (regular, modified, boundaries, -inf, empty), with the kernel's block
// size and with 1 and 3 threads (each thread then takes several cells of a diagonal).
TEST(MutualInformationCudaEmulation, MatchesK2WithAnyBlockSize) {
  const nlohmann::json cases =
      load_json(std::string(WAVETRAIN_TEST_DATA) + "/reference/mi_rnnt_vectors.json")["cases"];
  int checked = 0;
  for (const nlohmann::json& c : cases) {
    if (c["kind"] != "mutual_information_recursion") continue;
    for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
      const double tolerance = dtype == at::kFloat ? 1e-5 : 1e-9;
      const at::Tensor px = json_tensor(c["px"], dtype), py = json_tensor(c["py"], dtype);
      const at::Tensor boundary = c["boundary"].is_null() ? full_boundary(px, py) : json_tensor(c["boundary"], at::kLong);
      const at::Tensor scores = json_tensor(dtype == at::kFloat ? c["scores_f32"] : c["scores"]);
      for (int threads : {0, 1, 3}) {
        const std::string what = std::string(c["name"]) + " " + c10::toString(dtype) + " threads " + std::to_string(threads);
        const MutualInformation mi = emulate(px, py, boundary, threads);
        EXPECT_LE(max_relative_error(mi.scores, scores, 1e-30), tolerance) << what << "\n" << mi.scores << scores;
        EXPECT_LE(max_relative_error(mi.px_grad, json_tensor(c["px_grad"])), tolerance) << what << "\n" << mi.px_grad;
        EXPECT_LE(max_relative_error(mi.py_grad, json_tensor(c["py_grad"])), tolerance) << what << "\n" << mi.py_grad;
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

// Larger random problems with per-item boxes and a -inf column, against the CPU kernel: 1e-12 in
// float64 and the GPU check's 1e-5 in float32.
TEST(MutualInformationCudaEmulation, EqualsTheCpuKernel) {
  for (bool modified : {false, true}) {
    for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
      at::manual_seed(modified ? 21 : 22);
      const int64_t B = 5, S = 37, T = 70;
      const at::Tensor px = at::randn({B, S, modified ? T : T + 1}, dtype);
      const at::Tensor py = at::randn({B, S + 1, T}, dtype);
      py.select(0, 1).select(1, 5).fill_(-std::numeric_limits<double>::infinity());
      const at::Tensor boundary = full_boundary(px, py);
      for (int64_t b = 0; b < B; ++b) {
        boundary[b][0] = b % 2;
        boundary[b][1] = b % 3;
        boundary[b][2] = S - b;
        boundary[b][3] = T - 2 * b;
      }
      const MutualInformation cpu = mutual_information_with_grad(px, py, boundary, MiImplementation::kCpu);
      const double tolerance = dtype == at::kFloat ? 1e-5 : 1e-12;
      for (int threads : {0, 7}) {
        const MutualInformation gpu_code = emulate(px, py, boundary, threads);
        const std::string what = std::string(modified ? "modified " : "regular ") + c10::toString(dtype) + " threads " +
                                 std::to_string(threads);
        EXPECT_LE(max_relative_error(gpu_code.scores, cpu.scores, 1e-30), tolerance) << what;
        EXPECT_LE(max_relative_error(gpu_code.px_grad, cpu.px_grad), tolerance) << what;
        EXPECT_LE(max_relative_error(gpu_code.py_grad, cpu.py_grad), tolerance) << what;
        EXPECT_TRUE(at::isfinite(gpu_code.px_grad).all().item<bool>()) << what;
      }
    }
  }
}

}  // namespace
}  // namespace wavetrain::losses
