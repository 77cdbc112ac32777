// The simple RNN-T loss's own matrix products (losses/small_matmul.h) against ATen's mm, in float64
// and float32, with every build of the kernels this CPU runs, on shapes that exercise each partial
// tile, strided and transposed operands, padded output rows (left untouched) and K = 0; and the
// loss itself the same for one item alone (its columns split over the threads) as inside a batch.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <gtest/gtest.h>

#include <tuple>
#include <vector>

#include "losses/mutual_information.h"
#include "losses/rnnt_loss.h"
#include "losses/small_matmul.h"

namespace wavetrain::losses {
namespace {

const detail::VectorIsa kMatmulIsas[] = {detail::VectorIsa::kAvx512, detail::VectorIsa::kAvx2Fma,
                                   detail::VectorIsa::kBaseline};

// Restores the best build when a test ends, whatever it capped.
struct MatmulIsaCap {
  explicit MatmulIsaCap(detail::VectorIsa isa) { detail::cap_vector_kernels(isa); }
  ~MatmulIsaCap() { detail::cap_vector_kernels(detail::VectorIsa::kAvx512); }
};

// (M, N, K): one of everything, the loss's own sizes (S + 1 = 51, C = 500, T = 300), and sizes
// one off each tile (5 x 4 and 4 x 3 and 3 x 3 for matmul_nt; 6 rows and 32, 16 or 8 columns for
// matmul_times) with K not a multiple of any vector's lanes.
const std::vector<std::tuple<int64_t, int64_t, int64_t>> kMatmulShapes = {
    {1, 1, 1}, {51, 300, 500}, {51, 500, 300}, {300, 500, 51}, {7, 37, 19}, {13, 33, 17},
    {6, 32, 16}, {5, 4, 64}, {11, 65, 3}, {2, 9, 1}, {4, 5, 0}};

// |got - want| <= tolerance * (|a| |b|)[i][j], the bound a sum's rounding obeys whatever its order.
void expect_within_rounding(const at::Tensor& got, const at::Tensor& want, const at::Tensor& magnitude, double tolerance,
                  const std::string& what) {
  const at::Tensor excess = (got.to(at::kDouble) - want).abs() - tolerance * magnitude;
  EXPECT_LE(excess.max().item<double>(), 0.0) << what << " worst error "
                                              << (got.to(at::kDouble) - want).abs().max().item<double>();
}

template <typename T>
void check_matmul_products(at::ScalarType dtype, double tolerance) {
  at::manual_seed(3);
  for (const detail::VectorIsa isa : kMatmulIsas) {
    MatmulIsaCap cap(isa);
    for (const auto& shape : kMatmulShapes) {
      // Not a structured binding: in a template, that would make every expression using it dependent.
      const int64_t M = std::get<0>(shape), N = std::get<1>(shape), K = std::get<2>(shape);
      const std::string what = "isa " + std::to_string(static_cast<int>(isa)) + " dtype " +
                               std::string(c10::toString(dtype)) + " M " + std::to_string(M) + " N " +
                               std::to_string(N) + " K " + std::to_string(K);
      // Operands inside wider buffers, so that each stride is honoured: a is [M][K + 3], b [N][K + 2].
      const at::Tensor a_buf = at::randn({M, K + 3}, dtype), b_buf = at::randn({N, K + 2}, dtype);
      const at::Tensor a = a_buf.narrow(1, 0, K), b = b_buf.narrow(1, 0, K);
      const at::Tensor ad = a.to(at::kDouble), bd = b.to(at::kDouble);

      // matmul_nt: out = a b^T, out's rows padded by 5 that must stay as they were.
      at::Tensor out = at::full({M, N + 5}, 7.0, dtype);
      detail::matmul_nt(M, N, K, a.data_ptr<T>(), K + 3, b.data_ptr<T>(), K + 2, out.data_ptr<T>(), N + 5);
      expect_within_rounding(out.narrow(1, 0, N), at::mm(ad, bd.t()), at::mm(ad.abs(), bd.abs().t()), tolerance,
                   "matmul_nt " + what);
      EXPECT_TRUE(out.narrow(1, N, 5).eq(7.0).all().item<bool>()) << "matmul_nt wrote past N: " << what;

      // matmul_times with a as it is (a_row = K + 3, a_col = 1) and b2 [K][N + 4] read as [K][N].
      const at::Tensor b2_buf = at::randn({K, N + 4}, dtype), factor_buf = at::randn({M, N + 1}, dtype);
      const at::Tensor b2 = b2_buf.narrow(1, 0, N), factor = factor_buf.narrow(1, 0, N);
      const at::Tensor b2d = b2.to(at::kDouble), fd = factor.to(at::kDouble);
      const at::Tensor product = at::mm(ad, b2d), magnitude = at::mm(ad.abs(), b2d.abs());
      at::Tensor times = at::full({M, N + 5}, 7.0, dtype);
      detail::matmul_times(M, N, K, a.data_ptr<T>(), K + 3, 1, b2.data_ptr<T>(), N + 4, factor.data_ptr<T>(), N + 1,
                           times.data_ptr<T>(), N + 5);
      expect_within_rounding(times.narrow(1, 0, N), product * fd, magnitude * fd.abs(), tolerance, "matmul_times " + what);
      EXPECT_TRUE(times.narrow(1, N, 5).eq(7.0).all().item<bool>()) << "matmul_times wrote past N: " << what;
      // No factor.
      detail::matmul_times(M, N, K, a.data_ptr<T>(), K + 3, 1, b2.data_ptr<T>(), N + 4, nullptr, 0,
                           times.data_ptr<T>(), N + 5);
      expect_within_rounding(times.narrow(1, 0, N), product, magnitude, tolerance, "matmul_times, no factor, " + what);

      // matmul_times with a read transposed: at [K][M] in a buffer [K][M + 2], a(i, k) = at[k][i].
      const at::Tensor at_buf = at::randn({K, M + 2}, dtype);
      const at::Tensor a_t = at_buf.narrow(1, 0, M), a_td = a_t.to(at::kDouble);
      detail::matmul_times(M, N, K, a_t.data_ptr<T>(), 1, M + 2, b2.data_ptr<T>(), N + 4, factor.data_ptr<T>(), N + 1,
                           times.data_ptr<T>(), N + 5);
      expect_within_rounding(times.narrow(1, 0, N), at::mm(a_td.t(), b2d) * fd, at::mm(a_td.t().abs(), b2d.abs()) * fd.abs(),
                   tolerance, "matmul_times, a transposed, " + what);
    }
  }
}

TEST(SmallMatmul, EqualsAtenMmInDouble) { check_matmul_products<double>(at::kDouble, 1e-13); }

TEST(SmallMatmul, EqualsAtenMmInFloat) { check_matmul_products<float>(at::kFloat, 1e-5); }

// An item alone (B = 1: its products split their columns over the threads, in blocks of 64) gives
// the loss and gradients it has inside a batch (B = 3: one item per thread), to the last bit.
TEST(SmallMatmul, SimpleLossOfOneItemEqualsItsRowInABatch) {
  at::manual_seed(5);
  const int64_t B = 3, S = 20, T = 150, C = 90;
  const at::Tensor lm = at::randn({B, S + 1, C}), am = at::randn({B, T, C});
  const at::Tensor symbols = at::randint(1, C, {B, S}, at::kLong);
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  RnntOptions o;
  o.reduction = Reduction::kNone;
  const at::Tensor lm_batch = lm.clone().requires_grad_(true), am_batch = am.clone().requires_grad_(true);
  const at::Tensor loss_batch = rnnt_loss_simple(lm_batch, am_batch, symbols, o);
  loss_batch.sum().backward();
  for (int64_t b = 0; b < B; ++b) {
    const at::Tensor lm_one = lm.narrow(0, b, 1).clone().requires_grad_(true);
    const at::Tensor am_one = am.narrow(0, b, 1).clone().requires_grad_(true);
    const at::Tensor loss_one = rnnt_loss_simple(lm_one, am_one, symbols.narrow(0, b, 1), o);
    loss_one.sum().backward();
    EXPECT_TRUE(at::equal(loss_one, loss_batch.narrow(0, b, 1))) << b;
    EXPECT_TRUE(at::equal(lm_one.grad(), lm_batch.grad().narrow(0, b, 1))) << b;
    EXPECT_TRUE(at::equal(am_one.grad(), am_batch.grad().narrow(0, b, 1))) << b;
  }
  at::set_num_threads(threads);
}

}  // namespace
}  // namespace wavetrain::losses
