// What the ASR model meets beyond clean 16 kHz synthetic speech: band-limited input (the features'
// dither), and the training augmentation (augment.h) that teaches it the rest.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "data/audio_io.h"
#include "data/fbank.h"
#include "experiments/asr/asr_task.h"
#include "experiments/asr/augment.h"
#include "trainer/config/config.h"
#include "trainer/config/yaml_io.h"

namespace {

namespace asr = wavetrain::experiments::asr;
namespace data = wavetrain::data;
namespace fs = std::filesystem;

// A voiced sound at 16 kHz: harmonics of 150 Hz up to 7.8 kHz with a falling spectrum, syllable by
// syllable (amplitude-modulated), as speech has energy in every mel band.
at::Tensor voiced(int64_t samples) {
  const at::Tensor t = at::arange(samples, at::kDouble) / 16000.0;
  at::Tensor x = at::zeros({samples}, at::kDouble);
  for (int h = 1; 150 * h < 7800; ++h) x += at::sin(2 * M_PI * 150 * h * t + h) / h;
  x = x * (0.6 + 0.4 * at::sin(2 * M_PI * 4 * t));
  return (x / x.abs().max() * 0.5).to(at::kFloat);
}

// 80-bin features of `audio` (16 kHz, [-1, 1]) as the ASR model reads them before CMVN.
at::Tensor asr_fbank(const at::Tensor& audio, double dither, uint64_t seed) {
  asr::TransducerConfig config;
  data::FbankOptions o = asr::asr_fbank_options(config);
  o.dither = dither;
  return data::fbank({audio * 32768.0}, o, {seed})[0];
}

double band_rate_cutoff_bin(double rate) {  // the first mel bin wholly above rate / 2
  asr::TransducerConfig config;
  const at::Tensor centres = data::kaldi_mel_banks(asr::asr_fbank_options(config)).second;
  for (int64_t b = 0; b < centres.size(0); ++b)
    if (centres[b].item<double>() > rate / 2 + 300) return static_cast<double>(b);
  return static_cast<double>(centres.size(0));
}

// Audio that was recorded at 8 or 11.025 kHz and resampled to 16 kHz has nothing above its old
// Nyquist frequency. Without dither those mel bins hold only the window's leakage, far below where
// the empty band of any 16-bit recording lies (and at log(FLT_EPSILON) = -15.9 in digital
// silence); with the ASR features' dither (Kaldi's: one int16 step) they lie where the dither
// alone puts them, as in a quiet 16 kHz recording.
TEST(AsrFeatures, DitherPutsABandLimitedInputsEmptyBandAtTheNoiseFloor) {
  asr::TransducerConfig config;
  EXPECT_EQ(asr::asr_fbank_options(config).dither, 1.0);
  const at::Tensor speech = voiced(32000);
  const at::Tensor floor_only = asr_fbank(at::zeros({32000}), 1.0, 9).mean(0);  // the dither alone, per bin
  for (const double rate : {8000.0, 11025.0}) {
    const at::Tensor limited = data::resample(data::resample(speech, 16000, rate).view({-1}), rate, 16000).view({-1});
    const int64_t first = static_cast<int64_t>(band_rate_cutoff_bin(rate));
    ASSERT_LT(first, 79) << rate;
    const at::Tensor undithered = asr_fbank(limited, 0.0, 1).narrow(1, first, 80 - first);
    const at::Tensor dithered = asr_fbank(limited, 1.0, 1).narrow(1, first, 80 - first);
    const at::Tensor floor_band = floor_only.narrow(0, first, 80 - first);
    EXPECT_LT((undithered.mean(0) - floor_band).mean().item<double>(), -4) << rate;  // the failure: far below any recording
    // Dithered: every empty bin within 1 nat of the dither's own level, and no frame below it by 3.
    const at::Tensor gap = dithered.mean(0) - floor_only.narrow(0, first, 80 - first);
    EXPECT_LT(gap.abs().max().item<double>(), 1.0) << rate << ": " << gap;
    EXPECT_GT((dithered - floor_only.narrow(0, first, 80 - first)).min().item<double>(), -3.0) << rate;
    // Below the old Nyquist frequency the speech is all but unchanged by the dither.
    const at::Tensor low_plain = asr_fbank(limited, 0.0, 1).narrow(1, 0, 20), low_dithered = asr_fbank(limited, 1.0, 1).narrow(1, 0, 20);
    EXPECT_LT((low_plain - low_dithered).abs().mean().item<double>(), 0.01) << rate;
    EXPECT_LT((low_plain - low_dithered).abs().max().item<double>(), 0.1) << rate;
  }
  // 22.05 kHz input resampled to 16 kHz fills every band: dither changes nothing that matters.
  const at::Tensor from_22k = data::resample(data::resample(speech, 16000, 22050).view({-1}), 22050, 16000).view({-1});
  const at::Tensor plain = asr_fbank(from_22k, 0.0, 1), dithered = asr_fbank(from_22k, 1.0, 1);
  EXPECT_GT(plain.min().item<double>(), -5.0);
  EXPECT_LT((plain - dithered).abs().max().item<double>(), 0.05);
  // The same seed gives the same features; another seed other dither.
  EXPECT_TRUE(at::equal(asr_fbank(speech, 1.0, 4), asr_fbank(speech, 1.0, 4)));
  EXPECT_FALSE(at::equal(asr_fbank(at::zeros({8000}), 1.0, 4), asr_fbank(at::zeros({8000}), 1.0, 5)));
}

// The seeded batch fbank equals the one-waveform fbank with a generator of that seed, whatever the
// other waveforms in the batch.
TEST(AsrFeatures, EachWaveformsDitherComesFromItsOwnSeed) {
  data::FbankOptions o = data::FbankOptions::kaldi();
  const at::Tensor a = voiced(8000) * 32768.0, b = voiced(12000) * 1000.0;
  const std::vector<at::Tensor> pair = data::fbank({a, b}, o, {11, 12});
  const std::vector<at::Tensor> alone = data::fbank({b}, o, {12});
  at::Generator g = at::detail::createCPUGenerator(11);
  EXPECT_TRUE(at::equal(pair[0], data::fbank(a, o, g)));
  EXPECT_TRUE(at::equal(pair[1], alone[0]));
  EXPECT_THROW(data::fbank({a, b}, o, {11}), std::invalid_argument);
}

wavetrain::config::Config config_of(const std::string& yaml) {
  return wavetrain::config::Config(wavetrain::config::load_yaml_string(yaml, "test"));
}

double power(const at::Tensor& x) { return x.to(at::kDouble).pow(2).mean().item<double>(); }

TEST(AsrAugment, SilenceNoiseGainAndBandLimitDoWhatTheySayFromTheSeed) {
  const at::Tensor speech = voiced(24000);
  // Silence alone: 0-1.5 s of zeros before and 0-0.5 s after, the speech untouched between them.
  asr::WaveAugmentOptions silence;
  silence.silence_prob = 1.0;
  const asr::WaveAugmenter padder(silence);
  int64_t longest_lead = 0;
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const at::Tensor out = padder.apply(speech, seed, {});
    ASSERT_GE(out.numel(), speech.numel());
    ASSERT_LE(out.numel(), speech.numel() + 24000 + 8000);
    const at::Tensor nonzero = out.nonzero();
    const int64_t lead = nonzero[0].item<int64_t>();
    longest_lead = std::max(longest_lead, lead);
    EXPECT_TRUE(at::equal(out.narrow(0, lead, speech.numel()), speech)) << seed;
    EXPECT_TRUE(at::equal(padder.apply(speech, seed, {}), out));  // the seed decides
  }
  EXPECT_GT(longest_lead, 16000);  // up to 1.5 s: 20 draws reach past 1 s
  // Noise: at the drawn SNR against the speech's power, for every built-in type.
  for (const std::string type : {"white", "brown", "babble"}) {
    asr::WaveAugmentOptions o;
    o.noise_prob = 1.0;
    o.snr_min = o.snr_max = 10;
    o.noise_types = {type};
    const asr::WaveAugmenter noisy(o);
    const asr::UtteranceSource others = [](uint64_t pick) { return voiced(9000 + static_cast<int64_t>(pick % 5000)) * 0.3; };
    const at::Tensor out = noisy.apply(speech, 3, others);
    const double snr = 10 * std::log10(power(speech) / power(out - speech));
    EXPECT_NEAR(snr, 10.0, 0.3) << type;
  }
  // Gain within its range in dB.
  asr::WaveAugmentOptions g;
  g.gain_prob = 1.0;
  g.gain_min_db = -12;
  g.gain_max_db = -6;
  for (uint64_t seed = 0; seed < 10; ++seed) {
    const double db = 10 * std::log10(power(asr::WaveAugmenter(g).apply(speech, seed, {})) / power(speech));
    EXPECT_GE(db, -12.01);
    EXPECT_LE(db, -5.99);
  }
  // Band limit: the energy above 5.5 kHz (the 11.025 kHz rate's Nyquist is 5.5 kHz) is gone.
  asr::WaveAugmentOptions b;
  b.band_limit_prob = 1.0;
  const at::Tensor limited = asr::WaveAugmenter(b).apply(speech, 1, {});
  ASSERT_EQ(limited.numel(), speech.numel());
  const at::Tensor spectrum = at::fft_rfft(limited.to(at::kDouble)).abs().pow(2), original = at::fft_rfft(speech.to(at::kDouble)).abs().pow(2);
  const int64_t bin = static_cast<int64_t>(5600.0 / 8000.0 * static_cast<double>(spectrum.size(0)));
  EXPECT_LT(spectrum.narrow(0, bin, spectrum.size(0) - bin).sum().item<double>(),
            1e-4 * original.narrow(0, bin, original.size(0) - bin).sum().item<double>());
  // Off: the audio as it was.
  EXPECT_TRUE(at::equal(asr::WaveAugmenter(asr::WaveAugmentOptions{}).apply(speech, 1, {}), speech));
}

// The room: the impulse response decays by 60 dB over rt60, and convolving with it is the direct
// sum, up to the float32 the audio is in.
TEST(AsrAugment, RoomResponseDecaysByItsRt60AndConvolutionIsTheDirectSum) {
  for (const double rt60 : {0.3, 0.7}) {
    const at::Tensor h = asr::room_impulse_response(rt60, 7).to(at::kDouble);
    EXPECT_EQ(h[0].item<double>(), 1.0);
    const int64_t step = static_cast<int64_t>(0.1 * rt60 * 16000);  // energies of windows 0.1 rt60 wide
    const double early = h.narrow(0, 40, step).pow(2).sum().item<double>();
    const double late = h.narrow(0, 40 + static_cast<int64_t>(0.9 * rt60 * 16000) - step, step).pow(2).sum().item<double>();
    // 0.8 rt60 apart: 48 dB, within the noise of a Gaussian tail's window energies.
    EXPECT_NEAR(10 * std::log10(early / late), 48.0, 4.0) << rt60;
  }
  const at::Tensor x = at::randn({300}, at::kFloat), h = at::randn({50}, at::kFloat);
  const at::Tensor y = asr::convolve(x, h).to(at::kDouble);
  ASSERT_EQ(y.numel(), 300);
  for (const int64_t n : {0, 7, 49, 50, 299}) {
    double sum = 0;
    for (int64_t k = 0; k <= std::min<int64_t>(n, 49); ++k) sum += x[n - k].item<double>() * h[k].item<double>();
    EXPECT_NEAR(y[n].item<double>(), sum, 1e-4) << n;
  }
}

// VTLP: off leaves every utterance unwarped; on, the factors are seeded, inside the range, spread
// over it, and drawn for about the given share of utterances.
TEST(AsrAugment, VtlpFactorsAreSeededAndInRange) {
  asr::WaveAugmentOptions o = asr::WaveAugmentOptions::from(config_of("asr:\n  augment:\n    vtlp: 0.5\n    vtlp_min: 0.85\n    vtlp_max: 1.15\n"));
  EXPECT_EQ(o.vtlp_prob, 0.5);
  EXPECT_FALSE(o.any());  // a feature warp: the waveform is not touched
  int warped = 0, low = 0, high = 0;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    const double f = asr::vtlp_factor(o, seed);
    EXPECT_EQ(f, asr::vtlp_factor(o, seed));
    if (f == 1.0) continue;
    ++warped;
    EXPECT_GE(f, 0.85);
    EXPECT_LE(f, 1.15);
    low += f < 0.9;
    high += f > 1.1;
  }
  EXPECT_NEAR(warped, 1000, 100);
  EXPECT_NEAR(low, warped / 6, 60);  // a sixth of the range at each end
  EXPECT_NEAR(high, warped / 6, 60);
  o.vtlp_prob = 0;
  for (uint64_t seed = 0; seed < 100; ++seed) EXPECT_EQ(asr::vtlp_factor(o, seed), 1.0);
  EXPECT_THROW(asr::WaveAugmentOptions::from(config_of("asr:\n  augment:\n    vtlp_min: 0.5\n")), std::exception);
  EXPECT_THROW(asr::WaveAugmentOptions::from(config_of("asr:\n  augment:\n    vtlp_min: 1.2\n    vtlp_max: 1.1\n")), std::exception);
}

TEST(AsrAugment, OptionsComeFromTheConfigAndBadOnesNameTheirKey) {
  const asr::WaveAugmentOptions o = asr::WaveAugmentOptions::from(config_of(
      "asr:\n  augment:\n    noise: 0.5\n    snr_min: 0\n    snr_max: 20\n    noise_types: [white]\n    silence: 1\n    band_limit: 0.25\n"));
  EXPECT_EQ(o.noise_prob, 0.5);
  EXPECT_EQ(o.snr_max, 20);
  EXPECT_EQ(o.noise_types, std::vector<std::string>{"white"});
  EXPECT_EQ(o.silence_prob, 1.0);
  EXPECT_EQ(o.band_limit_prob, 0.25);
  EXPECT_FALSE(asr::WaveAugmentOptions::from(config_of("a: 1\n")).any());
  const auto error_of = [](const std::string& yaml) {
    try {
      asr::WaveAugmentOptions::from(config_of(yaml));
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error_of("asr:\n  augment:\n    noise: 1.5\n").find("asr.augment.noise is a probability"), std::string::npos);
  EXPECT_NE(error_of("asr:\n  augment:\n    snr_min: 30\n    snr_max: 5\n").find("asr.augment.snr_min and asr.augment.snr_max"), std::string::npos);
  EXPECT_NE(error_of("asr:\n  augment:\n    noise_types: [pink]\n").find("'pink' is not a noise type"), std::string::npos);
  EXPECT_NE(error_of("asr:\n  augment:\n    noise_types: [dir]\n").find("asr.augment.noise_dir is not set"), std::string::npos);
  // A noise directory: its files are the noise; an empty one is an error naming it.
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_noise_dir_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "empty");
  EXPECT_THROW(asr::WaveAugmenter(asr::WaveAugmentOptions::from(config_of("asr:\n  augment:\n    noise_dir: " + (dir / "empty").string() + "\n"))),
               std::exception);
  const at::Tensor hum = (at::sin(at::arange(16000, at::kDouble) * (2 * M_PI * 60 / 16000)) * 0.5).to(at::kFloat);
  data::write_wav((dir / "hum.wav").string(), hum.view({1, -1}), 16000, data::WavSubtype::kFloat32);
  asr::WaveAugmentOptions from_dir = asr::WaveAugmentOptions::from(
      config_of("asr:\n  augment:\n    noise: 1\n    snr_min: 20\n    snr_max: 20\n    noise_types: []\n    noise_dir: " + dir.string() + "\n"));
  EXPECT_EQ(from_dir.noise_types, std::vector<std::string>{"dir"});
  const at::Tensor speech = voiced(20000);
  const at::Tensor added = asr::WaveAugmenter(from_dir).apply(speech, 2, {}) - speech;
  EXPECT_NEAR(10 * std::log10(power(speech) / power(added)), 20.0, 0.3);
  // The noise is the hum: all its power at 60 Hz.
  const at::Tensor spectrum = at::fft_rfft(added.to(at::kDouble)).abs().pow(2);
  const int64_t peak = spectrum.argmax().item<int64_t>();
  EXPECT_NEAR(static_cast<double>(peak) * 16000.0 / 20000.0, 60.0, 1.0);
  fs::remove_all(dir);
}

}  // namespace
