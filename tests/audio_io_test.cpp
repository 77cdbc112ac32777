// Audio files and resampling: WAV round trips at each subtype, libsoxr's 22050 -> 16000 on a sine
// (frequency kept, no images), and errors that name the file.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
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

// A 16-bit mono WAV of `frames` samples whose header says `rate` Hz and, when given, a data
// chunk of `declared_bytes` (the audit's damaged headers are rebuilt here, byte by byte).
std::string wav_bytes(uint32_t rate, uint32_t frames, std::optional<uint32_t> declared_bytes = std::nullopt) {
  auto u32 = [](uint32_t v) { return std::string{char(v & 0xFF), char(v >> 8 & 0xFF), char(v >> 16 & 0xFF), char(v >> 24 & 0xFF)}; };
  auto u16 = [](uint16_t v) { return std::string{char(v & 0xFF), char(v >> 8 & 0xFF)}; };
  const uint32_t data = frames * 2;
  std::string w = "RIFF" + u32(36 + data) + "WAVE";
  w += "fmt " + u32(16) + u16(1) + u16(1) + u32(rate) + u32(rate * 2) + u16(2) + u16(16);
  w += "data" + u32(declared_bytes.value_or(data));
  for (uint32_t i = 0; i < frames; ++i) w += u16(static_cast<uint16_t>(i * 37));
  return w;
}

std::string write_bytes(const std::string& name, const std::string& bytes) {
  const std::string path = temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

// The audit's crashes and hangs: rates of 268,483,456 Hz and 2^31 - 1 Hz crashed in libsoxr, 1 and
// 2 Hz made a 4.8 KB file resample to 115 M and 58 M samples. Each is now an error naming the file
// and the range, before anything is resampled or allocated.
TEST(AudioIo, SampleRateFromTheHeaderIsBounded) {
  for (const uint32_t rate : {268483456u, 2147483647u, 1u, 2u, 999u, 768001u}) {
    const std::string path = write_bytes("rate_" + std::to_string(rate) + ".wav", wav_bytes(rate, 2400));
    ReadOptions o;
    o.sample_rate = 48000;
    try {
      read_audio(path, o);
      FAIL() << rate << " Hz was accepted";
    } catch (const AudioError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
      EXPECT_NE(what.find("sample rate of " + std::to_string(rate) + " Hz; 1000 to 768000 Hz"), std::string::npos) << what;
    }
  }
  // The ends of the range are read and resampled.
  for (const uint32_t rate : {1000u, 768000u}) {
    ReadOptions o;
    o.sample_rate = 48000;
    const Audio a = read_audio(write_bytes("edge.wav", wav_bytes(rate, 2400)), o);
    EXPECT_EQ(a.samples.size(1), std::llround(2400.0 * 48000 / rate));
  }
  EXPECT_THROW(resample(at::zeros({10}), 48000, 1), std::invalid_argument);
  EXPECT_THROW(resample(at::zeros({10}), 1e9, 48000), std::invalid_argument);
}

// A header that declares about 4 GB of data in a 4.8 KB file gave std::bad_alloc without a file
// name; memory now follows what the file holds, and the shortfall is reported with the file.
TEST(AudioIo, DeclaredLengthIsNotTrusted) {
  const std::string path = write_bytes("huge.wav", wav_bytes(48000, 2400, 0xFFFFFFF0u));
  try {
    const Audio a = read_audio(path);
    // libsndfile may clip the data chunk to the file instead: then every real sample is read.
    EXPECT_EQ(a.samples.size(1), 2400);
  } catch (const AudioError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    EXPECT_NE(what.find("truncated"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace wavetrain::data
