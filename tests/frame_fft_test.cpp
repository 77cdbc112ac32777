// The 8-frame real FFT behind fbank and the STFT losses (data/frame_fft.h) against LibTorch's
// at::fft_rfft and at::fft_irfft: in float64 to 1e-12 of the largest value, and in float32 within
// 2x LibTorch's own float32 error, in both the AVX2 + FMA and the baseline-ISA build.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "data/frame_fft.h"

namespace wavetrain::data {
namespace {

constexpr int64_t L = kFrameFftLanes;

// Lane l of a [bins][8] array as a [bins] tensor.
at::Tensor lane(const std::vector<double>& a, int64_t bins, int64_t l) {
  return at::from_blob(const_cast<double*>(a.data()), {bins, L}, at::kDouble).select(1, l).clone();
}

TEST(FrameFft, EqualsLibTorchsRealFftInFloat64ForEveryLane) {
  at::manual_seed(4);
  for (int64_t n : {4, 8, 16, 32, 256, 512, 1024}) {
    const at::Tensor x = at::randn({L, n}, at::kDouble);
    const at::Tensor expected = at::fft_rfft(x, n, 1);  // [8][bins] complex
    std::vector<const double*> rows;
    for (int64_t l = 0; l < L; ++l) rows.push_back(x[l].data_ptr<double>());
    FrameFft<double> fft(n);
    const int64_t bins = fft.bins();
    ASSERT_EQ(bins, n / 2 + 1);
    std::vector<double> re(static_cast<size_t>(bins * L)), im(re.size()), power(re.size());
    fft.spectrum(rows.data(), nullptr, re.data(), im.data());
    fft.power(rows.data(), power.data());
    const double scale = at::abs(expected).max().item<double>();
    for (int64_t l = 0; l < L; ++l) {
      const at::Tensor e = expected[l];
      EXPECT_LE((lane(re, bins, l) - at::real(e)).abs().max().item<double>(), 1e-12 * scale) << n << " lane " << l;
      EXPECT_LE((lane(im, bins, l) - at::imag(e)).abs().max().item<double>(), 1e-12 * scale) << n << " lane " << l;
      EXPECT_LE((lane(power, bins, l) - at::abs(e).square()).abs().max().item<double>(), 1e-12 * scale * scale) << n << " lane " << l;
    }
  }
}

TEST(FrameFft, Float32WithinLibTorchsOwnErrorInBothBuilds) {
  at::manual_seed(5);
  for (bool baseline : {false, true}) {
    detail::force_baseline_frame_fft(baseline);
    for (int64_t n : {8, 64, 512}) {
      // Frames as fbank makes them: windowed speech-scale samples, zero-padded.
      const at::Tensor x = at::randn({L, n}, at::kFloat) * 3000;
      const at::Tensor truth = at::abs(at::fft_rfft(x.to(at::kDouble), n, 1)).square();  // [8][bins]
      const double scale = truth.max().item<double>();
      const double libtorch_error = (at::abs(at::fft_rfft(x, n, 1)).square().to(at::kDouble) - truth).abs().max().item<double>() / scale;
      // Rows repeated, as fbank does past a block's last frame: lanes 5-7 read row 4.
      std::vector<const float*> rows;
      for (int64_t l = 0; l < L; ++l) rows.push_back(x[std::min<int64_t>(l, 4)].data_ptr<float>());
      FrameFft<float> fft(n);
      std::vector<float> power(static_cast<size_t>(fft.bins() * L));
      fft.power(rows.data(), power.data());
      const at::Tensor got = at::from_blob(power.data(), {fft.bins(), L}, at::kFloat).t().to(at::kDouble);  // [8][bins]
      for (int64_t l = 0; l < L; ++l) {
        const double error = (got[l] - truth[std::min<int64_t>(l, 4)]).abs().max().item<double>() / scale;
        EXPECT_LE(error, std::max(2 * libtorch_error, 1e-7)) << n << " lane " << l << (baseline ? " baseline" : " avx2");
      }
    }
  }
  detail::force_baseline_frame_fft(false);
}

// Lane l of an [n][8] array, and lanes of a [8][n] tensor as [n][8] (the transform's layout).
std::vector<double> lanes_of(const at::Tensor& rows) {
  const at::Tensor t = rows.t().contiguous().to(at::kDouble);
  return std::vector<double>(t.data_ptr<double>(), t.data_ptr<double>() + t.numel());
}

TEST(FrameFft, WindowedSpectrumEqualsLibTorchsOnTheProductInFloat64) {
  at::manual_seed(6);
  for (int64_t n : {4, 16, 512}) {
    const at::Tensor x = at::randn({L, n}, at::kDouble), window = at::rand({n}, at::kDouble);
    const at::Tensor expected = at::fft_rfft(x * window, n, 1);
    std::vector<const double*> rows;
    for (int64_t l = 0; l < L; ++l) rows.push_back(x[l].data_ptr<double>());
    FrameFft<double> fft(n);
    std::vector<double> re(static_cast<size_t>(fft.bins() * L)), im(re.size());
    fft.spectrum(rows.data(), window.data_ptr<double>(), re.data(), im.data());
    const double scale = at::abs(expected).max().item<double>();
    for (int64_t l = 0; l < L; ++l) {
      EXPECT_LE((lane(re, fft.bins(), l) - at::real(expected[l])).abs().max().item<double>(), 1e-12 * scale) << n << " lane " << l;
      EXPECT_LE((lane(im, fft.bins(), l) - at::imag(expected[l])).abs().max().item<double>(), 1e-12 * scale) << n << " lane " << l;
    }
  }
}

// Any half spectrum, imaginary parts of the edge bins included (irfft ignores them; so must we).
TEST(FrameFft, InverseEqualsLibTorchsIrfftInFloat64ForEveryLane) {
  at::manual_seed(7);
  for (int64_t n : {4, 8, 16, 32, 256, 512, 1024, 2048}) {
    const int64_t bins = n / 2 + 1;
    const at::Tensor re = at::randn({L, bins}, at::kDouble), im = at::randn({L, bins}, at::kDouble);
    const at::Tensor expected = at::fft_irfft(at::complex(re, im), n, 1, "forward");  // [8][n]
    const std::vector<double> re_lanes = lanes_of(re), im_lanes = lanes_of(im);
    FrameFft<double> fft(n);
    std::vector<double> out(static_cast<size_t>(n * L));
    fft.inverse(re_lanes.data(), im_lanes.data(), out.data());
    const double scale = expected.abs().max().item<double>();
    for (int64_t l = 0; l < L; ++l)
      EXPECT_LE((lane(out, n, l) - expected[l]).abs().max().item<double>(), 1e-12 * scale) << n << " lane " << l;
    // Round trip: the inverse of the forward is n x.
    const at::Tensor x = at::randn({L, n}, at::kDouble);
    std::vector<const double*> rows;
    for (int64_t l = 0; l < L; ++l) rows.push_back(x[l].data_ptr<double>());
    std::vector<double> xr(static_cast<size_t>(bins * L)), xi(xr.size());
    fft.spectrum(rows.data(), nullptr, xr.data(), xi.data());
    fft.inverse(xr.data(), xi.data(), out.data());
    for (int64_t l = 0; l < L; ++l)
      EXPECT_LE((lane(out, n, l) / static_cast<double>(n) - x[l]).abs().max().item<double>(), 1e-12 * x.abs().max().item<double>())
          << n << " lane " << l;
  }
}

TEST(FrameFft, Float32InverseWithinLibTorchsOwnErrorInBothBuilds) {
  at::manual_seed(8);
  for (bool baseline : {false, true}) {
    detail::force_baseline_frame_fft(baseline);
    for (int64_t n : {8, 512, 2048}) {
      const int64_t bins = n / 2 + 1;
      // A gradient's scale: spectra of unit noise over n.
      const at::Tensor z = at::fft_rfft(at::randn({L, n}, at::kFloat), n, 1) / static_cast<double>(n);
      const at::Tensor truth = at::fft_irfft(z.to(at::kComplexDouble), n, 1, "forward");
      const double scale = truth.abs().max().item<double>();
      const double libtorch_error = (at::fft_irfft(z, n, 1, "forward").to(at::kDouble) - truth).abs().max().item<double>() / scale;
      const at::Tensor re = at::real(z).t().contiguous(), im = at::imag(z).t().contiguous();  // [bins][8]
      FrameFft<float> fft(n);
      std::vector<float> out(static_cast<size_t>(n * L));
      fft.inverse(re.data_ptr<float>(), im.data_ptr<float>(), out.data());
      const at::Tensor got = at::from_blob(out.data(), {n, L}, at::kFloat).t().to(at::kDouble);
      ASSERT_EQ(re.size(0), bins);
      const double error = (got - truth).abs().max().item<double>() / scale;
      EXPECT_LE(error, std::max(2 * libtorch_error, 1e-7)) << n << (baseline ? " baseline" : " avx2");
    }
  }
  detail::force_baseline_frame_fft(false);
}

TEST(FrameFft, OnlyPowersOfTwoFromFour) {
  for (int64_t n : {4, 8, 512}) EXPECT_TRUE(FrameFft<float>::supports(n)) << n;
  for (int64_t n : {-8, 0, 1, 2, 6, 400, 513}) {
    EXPECT_FALSE(FrameFft<float>::supports(n)) << n;
    EXPECT_THROW(FrameFft<float>{n}, std::invalid_argument) << n;
  }
}

}  // namespace
}  // namespace wavetrain::data
