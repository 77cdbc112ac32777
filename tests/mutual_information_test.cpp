// The mutual-information recursion against k2/fast_rnnt's outputs (tests/data/reference/
// mi_rnnt_vectors.json, copied from shared/reference: fast_rnnt 83e4637, CPU, inputs float32 from
// fixed seeds, outputs in float64), for the CPU kernel and the portable implementation, plus the
// invariants: gradient sums, gradcheck, -inf and NaN, empty sequences, errors, a second backward.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "losses/mutual_information.h"
#include "tests/reference_json.h"
#include "tests/run_process.h"

namespace wavetrain::losses {
namespace {

using wavetrain::testing::json_tensor;
using wavetrain::testing::load_json;
using wavetrain::testing::max_relative_error;

const nlohmann::json& cases() {
  static const nlohmann::json j = load_json(std::string(WAVETRAIN_TEST_DATA) + "/reference/mi_rnnt_vectors.json");
  return j["cases"];
}

struct Setting {
  MiImplementation implementation;
  at::ScalarType dtype;
  double tolerance;
  std::string name() const {
    return std::string(implementation == MiImplementation::kCpu ? "cpu" : "portable") +
           (dtype == at::kFloat ? "_f32" : "_f64");
  }
};

// GoogleTest prints a parameter it cannot format as its raw bytes (in --gtest_list_tests, ctest
// and failure messages): print its name instead.
void PrintTo(const Setting& c, std::ostream* os) { *os << c.name(); }

class MiReference : public ::testing::TestWithParam<Setting> {};

TEST_P(MiReference, MatchesK2) {
  const Setting st = GetParam();
  int checked = 0;
  for (const nlohmann::json& c : cases()) {
    if (c["kind"] != "mutual_information_recursion") continue;
    const std::string name = c["name"];
    const at::Tensor px = json_tensor(c["px"], st.dtype), py = json_tensor(c["py"], st.dtype);
    std::optional<at::Tensor> boundary;
    if (!c["boundary"].is_null()) boundary = json_tensor(c["boundary"], at::kLong);
    const MutualInformation mi = mutual_information_with_grad(px, py, boundary, st.implementation);
    const at::Tensor scores = json_tensor(st.dtype == at::kFloat ? c["scores_f32"] : c["scores"]);
    EXPECT_LE(max_relative_error(mi.scores, scores, 1e-30), st.tolerance) << name << "\n" << mi.scores << scores;
    EXPECT_LE(max_relative_error(mi.px_grad, json_tensor(c["px_grad"])), st.tolerance) << name << "\n" << mi.px_grad;
    EXPECT_LE(max_relative_error(mi.py_grad, json_tensor(c["py_grad"])), st.tolerance) << name << "\n" << mi.py_grad;
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

INSTANTIATE_TEST_SUITE_P(Implementations, MiReference,
                         ::testing::Values(Setting{MiImplementation::kCpu, at::kFloat, 1e-5},
                                           Setting{MiImplementation::kCpu, at::kDouble, 1e-9},
                                           Setting{MiImplementation::kPortable, at::kFloat, 1e-5},
                                           Setting{MiImplementation::kPortable, at::kDouble, 1e-9}),
                         [](const auto& info) { return info.param.name(); });

// The builds of the CPU kernels, best first; on a CPU without one, capping at it runs the next.
const detail::VectorIsa kIsas[] = {detail::VectorIsa::kAvx512, detail::VectorIsa::kAvx2Fma, detail::VectorIsa::kBaseline};
const char* isa_name(detail::VectorIsa isa) {
  return isa == detail::VectorIsa::kAvx512 ? "avx512" : isa == detail::VectorIsa::kAvx2Fma ? "avx2" : "baseline";
}

// Random px, py and boundaries for the invariant tests.
struct Problem {
  at::Tensor px, py, boundary;
};

Problem random_problem(int64_t B, int64_t S, int64_t T, bool modified, at::ScalarType dtype, uint64_t seed) {
  at::manual_seed(seed);
  Problem p;
  p.px = at::randn({B, S, modified ? T : T + 1}, dtype);
  p.py = at::randn({B, S + 1, T}, dtype);
  p.boundary = at::zeros({B, 4}, at::kLong);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t sb = b % 2, tb = b % 3;
    const int64_t se = std::max(sb, S - b % 3), te = std::max(tb, T - b % 4);
    p.boundary[b][0] = sb;
    p.boundary[b][1] = tb;
    p.boundary[b][2] = se;
    p.boundary[b][3] = modified ? std::max(te, tb + (se - sb)) : te;
  }
  return p;
}

TEST(MutualInformation, CpuKernelEqualsPortableOnLargerProblems) {
  for (bool modified : {false, true}) {
    const Problem p = random_problem(7, 23, 41, modified, at::kDouble, 11);
    const MutualInformation a = mutual_information_with_grad(p.px, p.py, p.boundary, MiImplementation::kCpu);
    const MutualInformation b = mutual_information_with_grad(p.px, p.py, p.boundary, MiImplementation::kPortable);
    EXPECT_LE(max_relative_error(a.scores, b.scores, 1e-30), 1e-12) << modified;
    EXPECT_LE(max_relative_error(a.px_grad, b.px_grad), 1e-12) << modified;
    EXPECT_LE(max_relative_error(a.py_grad, b.py_grad), 1e-12) << modified;
  }
}

// The CPU kernels run the best build the CPU has (AVX-512, AVX2 + FMA, the baseline ISA): each that
// this CPU runs against the portable implementation, float64 at 1e-12 and float32 at 1e-5 (FMA
// rounds once where the baseline rounds twice), through autograd with a negative scale (a sign the
// occupations then carry), and the share rule's -inf cells.
TEST(MutualInformation, EveryIsaBuildOfTheKernelsEqualsPortable) {
  for (bool modified : {false, true}) {
    for (at::ScalarType dtype : {at::kDouble, at::kFloat}) {
      Problem p = random_problem(5, 17, 33, modified, dtype, 31);
      p.py.select(0, 2).select(1, 4).fill_(-std::numeric_limits<double>::infinity());
      const MutualInformation reference =
          mutual_information_with_grad(p.px.to(at::kDouble), p.py.to(at::kDouble), p.boundary, MiImplementation::kPortable);
      const double tolerance = dtype == at::kDouble ? 1e-12 : 1e-5;
      for (const detail::VectorIsa isa : kIsas) {
        detail::cap_vector_kernels(isa);
        const std::string what = std::string(modified ? "modified " : "regular ") + c10::toString(dtype) + " " +
                                 isa_name(detail::vector_kernel_isa());
        const MutualInformation mi = mutual_information_with_grad(p.px, p.py, p.boundary, MiImplementation::kCpu);
        EXPECT_LE(max_relative_error(mi.scores.to(at::kDouble), reference.scores, 1e-30), tolerance) << what;
        EXPECT_LE(max_relative_error(mi.px_grad.to(at::kDouble), reference.px_grad), tolerance) << what;
        EXPECT_LE(max_relative_error(mi.py_grad.to(at::kDouble), reference.py_grad), tolerance) << what;
        const at::Tensor px = p.px.clone().requires_grad_(true), py = p.py.clone().requires_grad_(true);
        (mutual_information_recursion(px, py, p.boundary, MiImplementation::kCpu) * -0.5).sum().backward();
        EXPECT_LE(max_relative_error(px.grad().to(at::kDouble), reference.px_grad * -0.5), tolerance) << what;
        EXPECT_LE(max_relative_error(py.grad().to(at::kDouble), reference.py_grad * -0.5), tolerance) << what;
      }
      detail::cap_vector_kernels(detail::VectorIsa::kAvx512);
    }
  }
}

// The two CPU kernels (mutual_information_cpu picks one by batch size and threads), each called
// directly, against the portable implementation: 11 items (a group of 8 lanes and a part-filled
// one), boxes of every kind (offset, empty in S or in T or both, the full lattice), -inf entries
// (an unreachable region in item 3: a p of -inf inside the box; item 8 has no path at all), +inf
// in item 5 and NaN in item 6 (k2's share rule where p is +inf or NaN), every ISA build the CPU has,
// float64 and float32.
TEST(MutualInformation, LanesAndDiagonalsKernelsEqualPortable) {
  const double inf = std::numeric_limits<double>::infinity();
  for (bool modified : {false, true}) {
    for (at::ScalarType dtype : {at::kDouble, at::kFloat}) {
      const int64_t B = 11, S = 13, T = 29;
      Problem p = random_problem(B, S, T, modified, dtype, 41);
      const std::vector<std::vector<int64_t>> boxes = {{0, 0, S, T},  {2, 3, 2, 20}, {1, 0, 9, 0},  {0, 0, S, T},
                                                       {3, 5, 12, 25}, {0, 0, S, T}, {0, 0, S, T},  {4, 2, 4, 2},
                                                       {0, 1, 7, 29},  {5, 0, 13, 17}, {0, 0, 0, 0}};
      for (int64_t b = 0; b < B; ++b)
        for (int64_t i = 0; i < 4; ++i) p.boundary[b][i] = boxes[b][i];
      p.px.select(0, 3).slice(0, 2, 6).slice(1, 0, 15).fill_(-inf);  // item 3: rows 3..6 cut off early
      p.py.select(0, 3).slice(0, 2, 6).slice(1, 0, 15).fill_(-inf);
      // Item 5: +inf into its last cell through py, so that p = +inf with a finite term1 there,
      // where k2's share, exp(term1), differs from the finite-p formula's 0.
      p.py.select(0, 5)[S][T - 1] = inf;
      p.px.select(0, 6)[4][9] = std::numeric_limits<double>::quiet_NaN();
      p.px.select(0, 8).fill_(-inf);  // item 8: no path at all, a score of -inf
      p.py.select(0, 8).fill_(-inf);
      const MutualInformation reference = mutual_information_with_grad(
          p.px.to(at::kDouble), p.py.to(at::kDouble), p.boundary, MiImplementation::kPortable);
      const double tolerance = dtype == at::kDouble ? 1e-12 : 1e-5;
      // NaN where the reference has NaN, equal elsewhere: scores relative, occupations (at most 1)
      // absolute.
      auto same = [&](const at::Tensor& got, const at::Tensor& want, double floor = 1.0) {
        const at::Tensor g = got.to(at::kDouble), nan = at::isnan(want);
        if (!at::equal(at::isnan(g), nan)) return std::numeric_limits<double>::infinity();
        return max_relative_error(g.masked_fill(nan, 0), want.masked_fill(nan, 0), floor);
      };
      // Items 5 and 6 (+inf, NaN): the portable implementation propagates NaN into the gradients
      // differently; there the two kernels, which both follow k2's share rule, must agree.
      const at::Tensor finite_items = at::tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 7, 8, 9, 10});
      const at::Tensor odd_items = at::tensor(std::vector<int64_t>{5, 6});
      at::Tensor odd_px, odd_py;  // from the first kernel run
      for (bool lanes : {true, false}) {
        for (const detail::VectorIsa isa : kIsas) {
          detail::cap_vector_kernels(isa);
          at::Tensor scores = at::empty({B}, p.px.options());
          at::Tensor px_grad = at::full_like(p.px, 7.0), py_grad = at::full_like(p.py, 7.0);  // every entry written
          if (lanes)
            detail::mutual_information_cpu_lanes(p.px, p.py, p.boundary, scores, px_grad, py_grad);
          else
            detail::mutual_information_cpu_diagonals(p.px, p.py, p.boundary, scores, px_grad, py_grad);
          const std::string what = std::string(lanes ? "lanes " : "diagonals ") + (modified ? "modified " : "regular ") +
                                   c10::toString(dtype) + " " + isa_name(detail::vector_kernel_isa());
          EXPECT_LE(same(scores, reference.scores, 1e-30), tolerance) << what << "\n" << scores << reference.scores;
          EXPECT_LE(same(px_grad.index_select(0, finite_items), reference.px_grad.index_select(0, finite_items)),
                    tolerance)
              << what;
          EXPECT_LE(same(py_grad.index_select(0, finite_items), reference.py_grad.index_select(0, finite_items)),
                    tolerance)
              << what;
          if (!odd_px.defined()) {
            odd_px = px_grad.index_select(0, odd_items).to(at::kDouble);
            odd_py = py_grad.index_select(0, odd_items).to(at::kDouble);
          } else {
            EXPECT_LE(same(px_grad.index_select(0, odd_items), odd_px), tolerance) << what;
            EXPECT_LE(same(py_grad.index_select(0, odd_items), odd_py), tolerance) << what;
          }
          // Forward only: the same scores.
          at::Tensor alone = at::empty({B}, p.px.options()), none_x, none_y;
          if (lanes)
            detail::mutual_information_cpu_lanes(p.px, p.py, p.boundary, alone, none_x, none_y);
          else
            detail::mutual_information_cpu_diagonals(p.px, p.py, p.boundary, alone, none_x, none_y);
          EXPECT_LE(same(alone, reference.scores, 1e-30), tolerance) << what;
        }
        detail::cap_vector_kernels(detail::VectorIsa::kAvx512);
      }
      // The problem is what it says: item 3 has unreachable cells, 5 and 6 non-finite scores.
      EXPECT_TRUE(std::isfinite(reference.scores[3].item<double>()));
      EXPECT_FALSE(std::isfinite(reference.scores[5].item<double>()));
      EXPECT_TRUE(std::isnan(reference.scores[6].item<double>()));
      EXPECT_EQ(reference.scores[8].item<double>(), -inf);
    }
  }
}

// A summed loss hands the kernel's occupations to autograd as they are (no multiply): a caller's
// copy of them, and a second backward, are not changed by it.
TEST(MutualInformation, SummedLossGradientsLeaveTheOccupationsAlone) {
  const Problem p = random_problem(9, 6, 11, false, at::kDouble, 43);
  const at::Tensor px = p.px.clone().requires_grad_(true), py = p.py.clone().requires_grad_(true);
  const MutualInformation mi = mutual_information_with_grad(px, py, p.boundary);
  const at::Tensor kept = mi.px_grad.clone();
  (mi.scores.sum() + (px * 2.0).sum()).backward({}, /*retain_graph=*/true);
  EXPECT_TRUE(at::equal(mi.px_grad, kept));
  EXPECT_LE((px.grad() - (kept + 2.0)).abs().max().item<double>(), 1e-12);
  (mi.scores.sum()).backward();
  EXPECT_TRUE(at::equal(mi.px_grad, kept));
  EXPECT_LE((px.grad() - (2.0 * kept + 2.0)).abs().max().item<double>(), 1e-12);
  // Without a caller holding them: the gradient is the occupations, and a later in-place update of
  // it (an optimizer's) changes nothing else.
  const at::Tensor px2 = p.px.clone().requires_grad_(true);
  mutual_information_recursion(px2, p.py, p.boundary).sum().backward();
  EXPECT_LE((px2.grad() - kept).abs().max().item<double>(), 1e-12);
  px2.grad().zero_();
  const at::Tensor again = p.px.clone().requires_grad_(true);
  mutual_information_recursion(again, p.py, p.boundary).sum().backward();
  EXPECT_LE((again.grad() - kept).abs().max().item<double>(), 1e-12);
}

TEST(MutualInformation, GradientsAreOccupationProbabilities) {
  for (bool modified : {false, true}) {
    const Problem p = random_problem(6, 9, 15, modified, at::kDouble, 12);
    const MutualInformation mi = mutual_information_with_grad(p.px, p.py, p.boundary);
    const at::Tensor box = p.boundary;
    for (int64_t b = 0; b < 6; ++b) {
      const int64_t sb = box[b][0].item<int64_t>(), tb = box[b][1].item<int64_t>();
      const int64_t se = box[b][2].item<int64_t>(), te = box[b][3].item<int64_t>();
      const double px_sum = mi.px_grad[b].sum().item<double>(), py_sum = mi.py_grad[b].sum().item<double>();
      EXPECT_NEAR(px_sum, static_cast<double>(se - sb), 1e-10) << b;
      if (!modified) {
        EXPECT_NEAR(px_sum + py_sum, static_cast<double>(se - sb + te - tb), 1e-10) << b;
      }
      EXPECT_GE(mi.px_grad[b].min().item<double>(), 0.0);
      // Zero outside the box.
      const at::Tensor outside_px = mi.px_grad[b].clone();
      outside_px.narrow(0, sb, se - sb).narrow(1, tb, te - tb + (modified ? 0 : 1)).zero_();
      EXPECT_EQ(outside_px.abs().max().item<double>(), 0.0) << b;
      const at::Tensor outside_py = mi.py_grad[b].clone();
      outside_py.narrow(0, sb, se - sb + 1).narrow(1, tb, te - tb).zero_();
      EXPECT_EQ(outside_py.abs().max().item<double>(), 0.0) << b;
    }
  }
}

TEST(MutualInformation, GradcheckInFloat64) {
  for (bool modified : {false, true}) {
    const Problem p = random_problem(3, 3, 5, modified, at::kDouble, 13);
    const MutualInformation mi = mutual_information_with_grad(p.px, p.py, p.boundary);
    const at::Tensor weights = at::tensor({0.7, -1.3, 2.1}, at::kDouble);  // d(weights . scores)
    const double h = 1e-6;
    for (int which = 0; which < 2; ++which) {
      const at::Tensor& x = which == 0 ? p.px : p.py;
      const at::Tensor analytic = (which == 0 ? mi.px_grad : mi.py_grad) * weights.view({3, 1, 1});
      at::Tensor numeric = at::empty_like(x);
      for (int64_t i = 0; i < x.numel(); ++i) {
        at::Tensor up = x.clone(), down = x.clone();
        up.view({-1})[i] += h;
        down.view({-1})[i] -= h;
        auto f = [&](const at::Tensor& v) {
          const at::Tensor s = which == 0 ? mutual_information_recursion(v, p.py, p.boundary)
                                          : mutual_information_recursion(p.px, v, p.boundary);
          return (s * weights).sum().item<double>();
        };
        numeric.view({-1})[i] = (f(up) - f(down)) / (2 * h);
      }
      EXPECT_LE((analytic - numeric).abs().max().item<double>(), 1e-8) << modified << " " << which;
    }
  }
}

TEST(MutualInformation, AutogradAndSecondBackward) {
  const Problem p = random_problem(4, 5, 8, false, at::kDouble, 14);
  const at::Tensor px = p.px.clone().requires_grad_(true), py = p.py.clone().requires_grad_(true);
  const at::Tensor scores = mutual_information_recursion(px, py, p.boundary);
  const at::Tensor w = at::tensor({1.0, 2.0, -1.0, 0.5}, at::kDouble);
  (scores * w).sum().backward({}, /*retain_graph=*/true);
  const at::Tensor first = px.grad().clone();
  (scores * w).sum().backward();  // fast_rnnt scales its saved gradients in place here
  EXPECT_LE((px.grad() - 2 * first).abs().max().item<double>(), 1e-12);
  const MutualInformation mi = mutual_information_with_grad(p.px, p.py, p.boundary);
  EXPECT_LE((first - mi.px_grad * w.view({4, 1, 1})).abs().max().item<double>(), 1e-12);
}

TEST(MutualInformation, InfinitiesNanAndLowPrecision) {
  const double ninf = -std::numeric_limits<double>::infinity();
  Problem p = random_problem(2, 3, 4, false, at::kDouble, 15);
  // px's last column -inf (get_rnnt_logprobs): finite scores, no gradient there.
  at::Tensor px = p.px.clone();
  px.select(2, 4).fill_(ninf);
  MutualInformation mi = mutual_information_with_grad(px, p.py);
  EXPECT_TRUE(at::isfinite(mi.scores).all().item<bool>());
  EXPECT_EQ(mi.px_grad.select(2, 4).abs().max().item<double>(), 0.0);
  // A NaN on a path makes the score NaN.
  at::Tensor py = p.py.clone();
  py[1][2][1] = std::numeric_limits<double>::quiet_NaN();
  for (MiImplementation impl : {MiImplementation::kCpu, MiImplementation::kPortable}) {
    const at::Tensor s = mutual_information_recursion(p.px, py, std::nullopt, impl);
    EXPECT_FALSE(std::isnan(s[0].item<double>()));
    EXPECT_TRUE(std::isnan(s[1].item<double>()));
  }
  // Half and bfloat16 are computed in float32 and returned in their own type.
  for (at::ScalarType low : {at::kHalf, at::kBFloat16}) {
    const MutualInformation m = mutual_information_with_grad(p.px.to(low), p.py.to(low));
    EXPECT_EQ(m.scores.scalar_type(), low);
    EXPECT_EQ(m.px_grad.scalar_type(), low);
    const at::Tensor reference = mutual_information_recursion(p.px.to(low).to(at::kFloat), p.py.to(low).to(at::kFloat));
    EXPECT_LE(max_relative_error(m.scores, reference.to(low), 1e-30), 0.0);
  }
}

// Empty sequences: no symbols (S = 0) or no frames (T = 0), regular and modified. The CPU kernel and
// the portable implementation agree on the scores and on both gradients, which are the occupation
// probabilities (every px / py entry on the only path has occupation 1). Before: the CPU kernel
// returned zero gradients at S = 0, and the portable one failed at T = 0 (index -1).
TEST(MutualInformation, EmptySequencesAgreeAcrossImplementations) {
  at::manual_seed(31);
  for (const auto& [S, T] : std::vector<std::pair<int64_t, int64_t>>{{0, 4}, {3, 0}, {0, 0}}) {
    for (bool modified : {false, true}) {
      if (modified && T < S) continue;  // modified needs a frame per symbol
      const at::Tensor px = at::randn({2, S, modified ? T : T + 1}, at::kDouble), py = at::randn({2, S + 1, T}, at::kDouble);
      std::vector<MutualInformation> results;
      for (MiImplementation impl : {MiImplementation::kCpu, MiImplementation::kPortable})
        results.push_back(mutual_information_with_grad(px, py, std::nullopt, impl));
      const std::string name = "S=" + std::to_string(S) + " T=" + std::to_string(T) + (modified ? " modified" : " regular");
      EXPECT_LE(max_relative_error(results[0].scores, results[1].scores), 1e-12) << name;
      EXPECT_LE(max_relative_error(results[0].px_grad, results[1].px_grad), 1e-12) << name;
      EXPECT_LE(max_relative_error(results[0].py_grad, results[1].py_grad), 1e-12) << name;
      // One path: the score is the sum of the entries on it, each with occupation 1.
      const double on_path = results[0].px_grad.sum().item<double>() + results[0].py_grad.sum().item<double>();
      EXPECT_NEAR(on_path, 2.0 * (S + T), 1e-12) << name;
      if (S == 0) {
        EXPECT_LE(max_relative_error(results[0].scores, py.select(1, 0).sum(1)), 1e-12) << name;
      }
    }
  }
}

TEST(MutualInformation, ErrorsNameTheItemAndTheRule) {
  const Problem p = random_problem(2, 3, 4, false, at::kDouble, 16);
  auto message = [&](const std::function<void()>& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message([&] { mutual_information_recursion(p.px, p.py.narrow(1, 0, 3)); }),
            "mutual_information_recursion: py must be [B][S+1][T] = [2][4][T] for px [2, 3, 5], got [2, 3, 4]");
  EXPECT_EQ(message([&] { mutual_information_recursion(p.px.narrow(2, 0, 3), p.py); }),
            "mutual_information_recursion: px's last dimension must be T+1 (regular) or T (modified) with T = 4 "
            "from py, got 3");
  const at::Tensor bad = at::tensor({0, 0, 3, 4, 1, 2, 3, 5}, at::kLong).view({2, 4});
  EXPECT_EQ(message([&] { mutual_information_recursion(p.px, p.py, bad); }),
            "mutual_information_recursion: boundary[1] = (1, 2, 3, 5) breaks 0 <= t_begin <= t_end <= T = 4");
  EXPECT_EQ(message([&] { mutual_information_recursion(p.px, p.py, bad.to(at::kInt)); }),
            "mutual_information_recursion: boundary must be int64, got Int");
}

}  // namespace
}  // namespace wavetrain::losses

namespace wavetrain::losses {
namespace {

// Every parameterized test of this binary lists its parameter by name, not as raw bytes
// ("GetParam() = 48-byte object <B0-9A ...>"), in --gtest_list_tests and so in ctest's output.
TEST(TestNames, ParametersAreListedByName) {
  const wavetrain::testing::ProcessResult r = wavetrain::testing::run_shell("/proc/" + std::to_string(::getpid()) + "/exe --gtest_list_tests");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.find("-byte object"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GetParam() = cpu_f32"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GetParam() = randn_f64"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace wavetrain::losses
