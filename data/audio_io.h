// Audio files and sample-rate conversion: reading any format libsndfile knows (WAV, FLAC, ...; PCM
// of any width or float) into float32 [channels][samples], writing WAV, and resampling with libsoxr.
//
// Scaling: PCM is read as value / 2^(bits-1), so PCM16 full scale is [-1, 32767/32768]. Writing
// quantises x * 2^(bits-1), rounded, clipped to the integer range: a PCM16 or PCM24 round trip is
// exact to half a step. Files are written to a temporary name beside the target and renamed when
// complete, so a failed write leaves any earlier file in place.
#pragma once

#include <ATen/ATen.h>

#include <stdexcept>
#include <string>

namespace wavetrain::data {

// Every error of this file names the file: "<path>: <what was expected and what was found>".
class AudioError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What is read, and resampled: rates outside this range and lengths past kMaxSamples (channels x
// frames; 2^31 is 12 hours of 48 kHz stereo) are refused before anything is allocated for them.
inline constexpr int kMinSampleRate = 1000;
inline constexpr int kMaxSampleRate = 768000;
inline constexpr int kMaxChannels = 64;
inline constexpr int64_t kMaxSamples = int64_t{1} << 31;

struct Audio {
  at::Tensor samples;  // float32 [channels][samples]
  int sample_rate = 0;
};

// libsoxr's quality recipes, from fastest to best (SOXR_QQ .. SOXR_VHQ). kHigh is soxr's default.
enum class ResampleQuality { kQuick, kLow, kMedium, kHigh, kVeryHigh };

// "quick", "low", "medium", "high", "very_high"; throws std::invalid_argument listing them.
ResampleQuality parse_resample_quality(const std::string& name);

struct ReadOptions {
  int channels = 0;     // required channel count; 0 accepts any
  int sample_rate = 0;  // resample to this rate when the file's differs; 0 keeps the file's
  ResampleQuality quality = ResampleQuality::kHigh;
};

Audio read_audio(const std::string& path, const ReadOptions& options = {});

enum class WavSubtype { kPcm16, kPcm24, kFloat32 };

// samples: [channels][samples] or [samples] (mono), any floating dtype.
void write_wav(const std::string& path, const at::Tensor& samples, int sample_rate,
               WavSubtype subtype = WavSubtype::kPcm16);

// [channels][samples] (or [samples]) at from_rate -> to_rate with libsoxr; float32 out. The output
// has round(samples * to_rate / from_rate) samples. Equal rates return the input as float32. Rates
// outside kMinSampleRate..kMaxSampleRate, or an output past kMaxSamples, throw std::invalid_argument.
at::Tensor resample(const at::Tensor& samples, double from_rate, double to_rate,
                    ResampleQuality quality = ResampleQuality::kHigh);

}  // namespace wavetrain::data
