// Audio files and resampling: WAV round trips at each subtype, libsoxr's 22050 -> 16000 on a sine
// (frequency kept, no images), and errors that name the file.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "data/audio_io.h"

namespace wavetrain::data {
namespace {

std::string temp_dir() {
  static const std::string dir = [] {
    const std::string d = (std::filesystem::temp_directory_path() / ("wavetrain_audio_" + std::to_string(::getpid()))).string();
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

at::Tensor test_signal() {  // stereo, 0.9-amplitude sine and noise
  at::manual_seed(1);
  const at::Tensor t = at::arange(4800, at::kDouble) / 48000.0;
  return at::stack({0.9 * at::sin(2 * M_PI * 997.0 * t), (at::rand({4800}, at::kDouble) * 1.6 - 0.8)});
}

TEST(AudioIo, WavRoundTripsAtEachSubtype) {
  const at::Tensor x = test_signal();
  const std::pair<WavSubtype, double> subtypes[] = {
      {WavSubtype::kPcm16, 0.5 / 32768.0}, {WavSubtype::kPcm24, 0.5 / 8388608.0}, {WavSubtype::kFloat32, 6e-8}};
  for (const auto& [subtype, step] : subtypes) {
    const std::string path = temp_dir() + "/round.wav";
    write_wav(path, x, 48000, subtype);
    const Audio a = read_audio(path);
    EXPECT_EQ(a.sample_rate, 48000);
    ASSERT_EQ(a.samples.sizes(), x.sizes());
    EXPECT_EQ(a.samples.scalar_type(), at::kFloat);
    EXPECT_LE((a.samples.to(at::kDouble) - x).abs().max().item<double>(), step * 1.0001) << static_cast<int>(subtype);
  }
  // Full scale clips to the largest code, as the integer range allows.
  write_wav(temp_dir() + "/clip.wav", at::tensor({1.5, -1.5, 1.0}), 8000, WavSubtype::kPcm16);
  const Audio c = read_audio(temp_dir() + "/clip.wav");
  EXPECT_FLOAT_EQ(c.samples[0][0].item<float>(), 32767.0f / 32768.0f);
  EXPECT_FLOAT_EQ(c.samples[0][1].item<float>(), -1.0f);
}

TEST(AudioIo, ResamplingKeepsASine) {
  const double from = 22050, to = 16000, hz = 1000;
  const at::Tensor t = at::arange(22050, at::kDouble) / from;
  const at::Tensor y = resample(at::sin(2 * M_PI * hz * t).to(at::kFloat), from, to);
  ASSERT_EQ(y.numel(), 16000);
  // Spectrum of the middle second's samples (edges excluded from the window by a Hann taper).
  const at::Tensor spectrum = at::fft_rfft(y.to(at::kDouble) * at::hann_window(16000, at::kDouble)).abs();
  const int64_t peak = spectrum.argmax().item<int64_t>();
  EXPECT_EQ(peak, 1000);  // 1 Hz bins
  const double total = spectrum.square().sum().item<double>();
  const double near = spectrum.narrow(0, peak - 3, 7).square().sum().item<double>();
  EXPECT_GT(near / total, 1 - 1e-6);  // everything else (images, noise) below -60 dB
  EXPECT_NEAR(y.narrow(0, 4000, 8000).abs().max().item<double>(), 1.0, 1e-3);
  EXPECT_EQ(parse_resample_quality("very_high"), ResampleQuality::kVeryHigh);
  EXPECT_THROW(parse_resample_quality("best"), std::invalid_argument);
}

TEST(AudioIo, ReadResamplesAndChecksChannels) {
  const std::string path = temp_dir() + "/stereo.wav";
  write_wav(path, test_signal(), 48000, WavSubtype::kFloat32);
  ReadOptions o;
  o.sample_rate = 16000;
  const Audio a = read_audio(path, o);
  EXPECT_EQ(a.sample_rate, 16000);
  EXPECT_EQ(a.samples.sizes(), (std::vector<int64_t>{2, 1600}));
  o.channels = 1;
  try {
    read_audio(path, o);
    ADD_FAILURE() << "no error";
  } catch (const AudioError& e) {
    EXPECT_EQ(std::string(e.what()), path + ": expected 1 channel, found 2");
  }
}

TEST(AudioIo, ErrorsNameTheFile) {
  const std::string missing = temp_dir() + "/missing.wav";
  try {
    read_audio(missing);
    ADD_FAILURE();
  } catch (const AudioError& e) {
    EXPECT_EQ(std::string(e.what()), missing + ": no such file");
  }
  const std::string text = temp_dir() + "/notes.wav";
  std::ofstream(text) << "not audio at all\n";
  try {
    read_audio(text);
    ADD_FAILURE();
  } catch (const AudioError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(text + ": not a readable audio file", 0), 0u) << e.what();
  }
  // A failed write leaves the earlier file alone.
  const std::string keep = temp_dir() + "/keep.wav";
  write_wav(keep, at::zeros({100}), 8000);
  EXPECT_THROW(write_wav(keep, at::full({100}, NAN), 8000), AudioError);
  EXPECT_EQ(read_audio(keep).samples.size(1), 100);
}

}  // namespace
}  // namespace wavetrain::data
