// Kaldi-compatible fbank against torchaudio 0.13.1's kaldi.fbank: the six settings of
// tests/data/reference/fbank_vectors.json on both waveform scalings, the frame-0 intermediates,
// and random option combinations computed live by Debian's python3-torchaudio (test-only client).
// Plus SpecAugment and global CMVN.
#include <ATen/ATen.h>
#include <torch/version.h>
#include <gtest/gtest.h>

#include "tests/run_process.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

#include "data/fbank.h"
#include "data/frame_fft.h"
#include "tests/reference_json.h"

namespace wavetrain::data {
namespace {

using wavetrain::testing::json_tensor;
using wavetrain::testing::load_json;

// The stored vectors were made by torchaudio 0.13.1 on torch 1.13, Debian's LibTorch. Other torch
// versions round float32 log and cos differently: torchaudio 2.11's own fbank differs from them by up
// to 2.8e-4 (log-mel) and its mel banks by 1.1e-5, and so does wavetrain's on LibTorch 2.11, which
// shares those ops. On another LibTorch, the features and mel banks are therefore recomputed by the
// torchaudio of the test Python (the same torch version: checked) and compared at the same
// tolerances; everything else comes from the stored file.
constexpr bool kStoredVectorsTorch = TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR == 13;

const nlohmann::json& reference() {
  static const nlohmann::json j = [] {
    const std::string path = std::string(WAVETRAIN_TEST_DATA) + "/reference/fbank_vectors.json";
    nlohmann::json stored = load_json(path);
    if (kStoredVectorsTorch) return stored;
    const std::string out = wavetrain::testing::python_output("torchaudio_fbank_reference.py " + path);
    if (out.empty()) {
      ADD_FAILURE() << WAVETRAIN_TEST_PYTHON << " could not recompute the fbank vectors with torchaudio";
      return stored;
    }
    const nlohmann::json live = nlohmann::json::parse(out);
    const std::string torch = live["torch"];
    const std::string ours = std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + ".";
    EXPECT_EQ(torch.rfind(ours, 0), 0u) << "the test Python's torch " << torch << " is not LibTorch " << TORCH_VERSION;
    for (const auto& [name, c] : live["cases"].items())
      for (const char* scaling : {"int16", "unit"}) stored["cases"][name][scaling] = c[scaling];
    for (int bins : {23, 80, 128}) {
      const std::string b = std::to_string(bins);
      stored["intermediates_case_a_int16"]["mel_banks_" + b + "x256"] = live["mel_banks_" + b + "x256"];
      stored["intermediates_case_a_int16"]["mel_center_freqs_" + b] = live["mel_center_freqs_" + b];
    }
    return stored;
  }();
  return j;
}

// torchaudio's keyword arguments onto FbankOptions (whose defaults are torchaudio's).
FbankOptions options_from(const nlohmann::json& kwargs) {
  FbankOptions o;
  for (const auto& [key, v] : kwargs.items()) {
    if (key == "blackman_coeff") o.blackman_coeff = v;
    else if (key == "dither") o.dither = v;
    else if (key == "energy_floor") o.energy_floor = v;
    else if (key == "frame_length") o.frame_length = v;
    else if (key == "frame_shift") o.frame_shift = v;
    else if (key == "high_freq") o.high_freq = v;
    else if (key == "htk_compat") o.htk_compat = v;
    else if (key == "low_freq") o.low_freq = v;
    else if (key == "num_mel_bins") o.num_mel_bins = v;
    else if (key == "preemphasis_coefficient") o.preemphasis_coefficient = v;
    else if (key == "raw_energy") o.raw_energy = v;
    else if (key == "remove_dc_offset") o.remove_dc_offset = v;
    else if (key == "round_to_power_of_two") o.round_to_power_of_two = v;
    else if (key == "sample_frequency") o.sample_frequency = v;
    else if (key == "snip_edges") o.snip_edges = v;
    else if (key == "subtract_mean") o.subtract_mean = v;
    else if (key == "use_energy") o.use_energy = v;
    else if (key == "use_log_fbank") o.use_log_fbank = v;
    else if (key == "use_power") o.use_power = v;
    else if (key == "window_type") o.window_type = v;
    else if (key == "vtln_low") o.vtln_low = v;
    else if (key == "vtln_high") o.vtln_high = v;
    else if (key == "vtln_warp") o.vtln_warp = v;
    else ADD_FAILURE() << "unknown option " << key;
  }
  return o;
}

at::Tensor reference_waveform(bool unit) {
  const at::Tensor w = json_tensor(reference()["waveform_int16"], at::kFloat);
  return unit ? w / 32768.0 : w;
}

TEST(Fbank, SixReferenceSettingsOnBothScalings) {
  int checked = 0;
  for (const auto& [name, c] : reference()["cases"].items()) {
    const FbankOptions o = options_from(c["kwargs"]);
    for (const char* scaling : {"int16", "unit"}) {
      const at::Tensor expected = json_tensor(c[scaling]["data"]).view({c[scaling]["shape"][0], c[scaling]["shape"][1]});
      const at::Tensor got = fbank(reference_waveform(std::string(scaling) == "unit"), o);
      ASSERT_EQ(got.sizes(), expected.sizes()) << name << " " << scaling;
      // fbank's FFT (data/frame_fft.h) is not LibTorch's, so the two round differently where a
      // bin's power is at float32's noise floor: torchaudio's own float32 features are up to 2.2e-4
      // from its float64 ones on these cases (case c; a narrow low mel bin 17 nepers under the
      // frame's peak), and wavetrain's are as far, on other bins. The mean error is what a wrong
      // step would move: it is about 1e-6 (about 4e-8 with LibTorch's FFT).
      const at::Tensor error = (got.to(at::kDouble) - expected).abs();
      EXPECT_LE(error.max().item<double>(), 4e-4) << name << " " << scaling;
      EXPECT_LE(error.mean().item<double>(), 5e-6) << name << " " << scaling;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 12);
}

TEST(Fbank, FrameZeroIntermediates) {
  const nlohmann::json& m = reference()["intermediates_case_a_int16"];
  FbankOptions o;  // case a: torchaudio's defaults, dither 0
  const FbankFrameStages st = fbank_frame_stages(reference_waveform(false), o, 0);
  auto close = [](const std::vector<double>& got, const nlohmann::json& expected, double tol) {
    const at::Tensor e = json_tensor(expected);
    return (at::tensor(got, at::kDouble) - e).abs().max().item<double>() <= tol * std::max(1.0, e.abs().max().item<double>());
  };
  EXPECT_TRUE(close(st.raw, m["frame0_raw"], 1e-7));
  EXPECT_TRUE(close(st.after_dc, m["frame0_after_dc"], 1e-6));
  EXPECT_NEAR(st.raw_log_energy, m["frame0_raw_log_energy"].get<double>(), 1e-5);
  EXPECT_TRUE(close(st.after_preemphasis, m["frame0_after_preemph"], 1e-6));
  const at::Tensor window = kaldi_window(o);
  EXPECT_LE((window - json_tensor(m["povey_window_400"])).abs().max().item<double>(), 1e-6);
  const at::Tensor power = json_tensor(m["frame0_power_spectrum_257"]);
  EXPECT_LE(((st.power_spectrum - power).abs() / power.abs().max()).max().item<double>(), 1e-5);
  for (int bins : {23, 80, 128}) {
    FbankOptions b = o;
    b.num_mel_bins = bins;
    const auto [banks, centres] = kaldi_mel_banks(b);
    const nlohmann::json& eb = m["mel_banks_" + std::to_string(bins) + "x256"];
    const at::Tensor expected = json_tensor(eb["data"]).view({eb["shape"][0], eb["shape"][1]});
    EXPECT_LE((banks - expected).abs().max().item<double>(), 1e-5) << bins;
    EXPECT_LE(((centres - json_tensor(m["mel_center_freqs_" + std::to_string(bins)])).abs()).max().item<double>(), 1e-2) << bins;
  }
  const at::Tensor frame0 = fbank(reference_waveform(false), o)[0];
  EXPECT_LE((frame0.to(at::kDouble) - json_tensor(m["frame0_logmel23_float64"])).abs().max().item<double>(), 1e-4);
}

// The cases a test-only torchaudio script prints, one JSON object a line; none when the test
// Python cannot run it.
std::vector<nlohmann::json> torchaudio_cases(const std::string& script) {
  std::istringstream lines(wavetrain::testing::python_output(script));
  std::vector<nlohmann::json> cases;
  for (std::string line; std::getline(lines, line);) cases.push_back(nlohmann::json::parse(line));
  return cases;
}

// wavetrain's fbank of a case's waveform against torchaudio's features: the absolute error of log
// values, relative to the magnitude for linear (use_log_fbank=false) ones; infinite for another shape.
double feature_error(const nlohmann::json& c, const FbankOptions& o) {
  const at::Tensor expected = json_tensor(c["features"]).view({c["shape"][0], c["shape"][1]});
  const at::Tensor got = fbank(json_tensor(c["waveform"], at::kFloat), o).to(at::kDouble);
  if (got.sizes() != expected.sizes()) return INFINITY;
  return ((got - expected).abs() / expected.abs().clamp_min(1.0)).max().item<double>();
}

TEST(Fbank, MatchesTorchaudioOnRandomOptions) {
  const std::vector<nlohmann::json> cases = torchaudio_cases("torchaudio_fbank.py");
  if (cases.empty()) GTEST_SKIP() << WAVETRAIN_TEST_PYTHON << " cannot import torchaudio: install Debian's python3-torchaudio";
  for (const nlohmann::json& c : cases) EXPECT_LE(feature_error(c, options_from(c["options"])), 1e-3) << c["options"].dump();
  EXPECT_EQ(cases.size(), 12u);
}

// VTLN: the warped triangles and features against torchaudio's get_mel_banks and fbank, for warp
// factors 0.8-1.25 with the cut-offs and the band varied (tests/python/torchaudio_fbank_vtln.py).
TEST(Fbank, VtlnWarpMatchesTorchaudio) {
  const std::vector<nlohmann::json> cases = torchaudio_cases("torchaudio_fbank_vtln.py");
  if (cases.empty()) GTEST_SKIP() << WAVETRAIN_TEST_PYTHON << " cannot import torchaudio: install Debian's python3-torchaudio";
  for (const nlohmann::json& c : cases) {
    const FbankOptions o = options_from(c["options"]);
    ASSERT_EQ(o.padded_window_size(), c["padded"].get<int64_t>());
    const at::Tensor banks = kaldi_mel_banks(o).first;
    const at::Tensor expected_banks = json_tensor(c["banks"]).view({c["banks_shape"][0], c["banks_shape"][1]});
    ASSERT_EQ(banks.sizes(), expected_banks.sizes()) << c["options"].dump();
    EXPECT_LE((banks - expected_banks).abs().max().item<double>(), 1e-5) << c["options"].dump();
    FbankOptions unwarped = o;
    unwarped.vtln_warp = 1.0;
    EXPECT_GT((banks - kaldi_mel_banks(unwarped).first).abs().max().item<double>(), 0.1) << "the warp moved nothing";
    EXPECT_LE(feature_error(c, o), 1e-3) << c["options"].dump();
  }
  EXPECT_EQ(cases.size(), 8u);
}

TEST(Fbank, PerUtteranceWarpsAndBadWarps) {
  at::manual_seed(4);
  const std::vector<at::Tensor> waves = {at::randn({16000}) * 1000, at::randn({9000}) * 1000};
  FbankOptions o;
  o.num_mel_bins = 80;
  const std::vector<double> warps = {0.9, 1.1};
  const std::vector<at::Tensor> batch = fbank(waves, o, {1, 2}, warps);
  for (size_t i = 0; i < waves.size(); ++i) {
    FbankOptions one = o;
    one.vtln_warp = warps[i];
    at::Generator g = at::detail::createCPUGenerator(i + 1);
    EXPECT_TRUE(at::equal(batch[i], fbank(waves[i], one, g))) << i;
  }
  EXPECT_FALSE(at::equal(batch[0], fbank(waves, o, {1, 2})[0]));
  EXPECT_THROW(fbank(waves, o, {1, 2}, {1.0}), std::invalid_argument);
  FbankOptions bad = o;
  bad.vtln_warp = 0.0;
  EXPECT_THROW(fbank(waves[0], bad), std::invalid_argument);
  bad.vtln_warp = 1.1;
  bad.vtln_low = 10.0;  // below low_freq (20 Hz)
  try {
    fbank(waves[0], bad);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("low_freq < vtln_low < vtln_high < high_freq"), std::string::npos) << e.what();
  }
  bad.vtln_warp = 1.0;  // without a warp the cut-offs are not used
  EXPECT_NO_THROW(fbank(waves[0], bad));
}

TEST(Fbank, ShortWaveformsAndBadOptions) {
  FbankOptions o;
  EXPECT_EQ(fbank(at::zeros({400}), o).sizes(), (std::vector<int64_t>{1, 23}));
  try {
    fbank(at::zeros({399}), o);
    ADD_FAILURE() << "no error";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("399 samples, fewer than one 400-sample frame"), std::string::npos) << e.what();
  }
  o.min_duration = 0.1;
  EXPECT_EQ(fbank(at::zeros({1000}), o).size(0), 0);
  FbankOptions w;
  w.window_type = "kaiser";
  EXPECT_THROW(fbank(at::zeros({1000}), w), std::invalid_argument);
  FbankOptions h;
  h.high_freq = 9000;
  EXPECT_THROW(fbank(at::zeros({1000}), h), std::invalid_argument);
  // Dither: reproducible with a seeded generator, and different from no dither.
  FbankOptions d = FbankOptions::kaldi();
  at::Generator g1 = at::detail::createCPUGenerator(5), g2 = at::detail::createCPUGenerator(5);
  const at::Tensor x = reference_waveform(false);
  EXPECT_TRUE(at::equal(fbank(x, d, g1), fbank(x, d, g2)));
}

TEST(Fbank, BatchedEqualsOneByOne) {
  at::manual_seed(3);
  std::vector<at::Tensor> waves = {at::randn({16000}), at::randn({8123}), at::randn({400})};
  FbankOptions o;
  o.num_mel_bins = 80;
  const std::vector<at::Tensor> batch = fbank(waves, o);
  for (size_t i = 0; i < waves.size(); ++i) EXPECT_TRUE(at::equal(batch[i], fbank(waves[i], o))) << i;
}

// fbank's two FFT paths: the 8-frame FFT (where it runs vectorised) and LibTorch's (elsewhere, and
// for frames that are not a power of two). They round differently, as far apart as the reference
// test allows each to be from torchaudio.
TEST(Fbank, TheEightFrameFftAndLibTorchsGiveTheSameFeatures) {
  if (!frame_fft_vectorised()) GTEST_SKIP() << "no AVX2 + FMA here: fbank uses LibTorch's FFT only";
  const at::Tensor x = reference_waveform(false);
  FbankOptions o;
  o.num_mel_bins = 80;
  const at::Tensor ours = fbank(x, o);
  detail::force_baseline_frame_fft(true);
  EXPECT_FALSE(frame_fft_vectorised());
  const at::Tensor libtorch = fbank(x, o);
  detail::force_baseline_frame_fft(false);
  const at::Tensor difference = (ours - libtorch).abs();
  EXPECT_GT(difference.max().item<double>(), 0.0) << "the paths should round differently: is the 8-frame FFT in use?";
  EXPECT_LE(difference.max().item<double>(), 4e-4);
  EXPECT_LE(difference.mean().item<double>(), 5e-6);
}

TEST(SpecAugment, MasksAreBoundedAndSeeded) {
  const at::Tensor f = at::ones({300, 80});
  SpecAugmentOptions o;
  at::Generator g1 = at::detail::createCPUGenerator(11), g2 = at::detail::createCPUGenerator(11);
  const at::Tensor a = spec_augment(f, o, g1), b = spec_augment(f, o, g2);
  EXPECT_TRUE(at::equal(a, b));
  const at::Tensor masked = a == 0;
  // Masked bins are whole columns or rows; at most 2 x 27 columns and 2 x 100 rows.
  const int64_t full_columns = masked.all(0).sum().item<int64_t>(), full_rows = masked.all(1).sum().item<int64_t>();
  EXPECT_LE(full_columns, 54);
  EXPECT_LE(full_rows, 200);
  const at::Tensor explained = masked.all(0).unsqueeze(0) | masked.all(1).unsqueeze(1);
  EXPECT_TRUE(at::equal(masked, explained));
  EXPECT_GT(masked.sum().item<int64_t>(), 0);
}

TEST(GlobalCmvn, NormalisesToZeroMeanUnitVariance) {
  at::manual_seed(4);
  GlobalCmvn cmvn;
  std::vector<at::Tensor> parts = {at::randn({100, 5}) * 3 + 2, at::randn({50, 5}) * 3 + 2};
  for (const at::Tensor& p : parts) cmvn.accumulate(p);
  cmvn.finalize();
  const at::Tensor all = cmvn.apply(at::cat(parts, 0)).to(at::kDouble);
  EXPECT_LE(all.mean(0).abs().max().item<double>(), 1e-6);
  EXPECT_LE((all.std(0, false) - 1).abs().max().item<double>(), 1e-6);
  EXPECT_EQ(cmvn.frames(), 150);
  EXPECT_THROW(GlobalCmvn().finalize(), std::logic_error);
}

}  // namespace
}  // namespace wavetrain::data
