// Audio files and sample-rate conversion: reading any format libsndfile knows (WAV, FLAC, ...; PCM
// of any width or float) into float32 [channels][samples], writing WAV, and resampling with libsoxr.
//
// Scaling: PCM is read as value / 2^(bits-1), so PCM16 full scale is [-1, 32767/32768]. Writing
// quantises x * 2^(bits-1), rounded, clipped to the integer range: a PCM16 or PCM24 round trip is
// exact to half a step. Files are written to a temporary name beside the target and renamed when
// complete, so a failed write leaves any earlier file in place.
#pragma once

#include <ATen/ATen.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

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

// Audio read, resampled and written a block at a time, so that memory does not grow with a file's
// length (wavetrain infer on an hour of audio).

// Reads a file in blocks. The header is checked as read_audio checks it; a file that ends before
// its header's length throws when the end is reached.
class AudioFileReader {
 public:
  explicit AudioFileReader(const std::string& path);
  ~AudioFileReader();
  AudioFileReader(const AudioFileReader&) = delete;
  AudioFileReader& operator=(const AudioFileReader&) = delete;

  int sample_rate() const { return sample_rate_; }
  int channels() const { return channels_; }
  int64_t frames() const { return frames_; }  // as the header gives it
  // Up to max_frames frames, interleaved ([frames][channels]); 0 at the end of the file.
  int64_t read(float* interleaved, int64_t max_frames);

 private:
  struct File;
  std::string path_;
  std::unique_ptr<File> file_;
  int sample_rate_ = 0, channels_ = 0;
  int64_t frames_ = 0, read_ = 0;
};

// Writes a WAV file in blocks to a temporary beside the target (".NAME.partial", as write_wav),
// whose header libsndfile completes when it is closed; commit() puts it in place. Destroyed
// without commit() (an error on the way), it removes the temporary, leaving any earlier file.
class WavFileWriter {
 public:
  WavFileWriter(const std::string& path, int sample_rate, int channels, WavSubtype subtype = WavSubtype::kPcm16);
  ~WavFileWriter();
  WavFileWriter(const WavFileWriter&) = delete;
  WavFileWriter& operator=(const WavFileWriter&) = delete;

  // Interleaved frames; refuses NaN or infinity, naming the frame, as write_wav does.
  void write(const float* interleaved, int64_t frames);
  void commit();
  int64_t frames_written() const { return written_; }

 private:
  struct File;
  std::string path_, temporary_;
  std::unique_ptr<File> file_;
  int sample_rate_ = 0, channels_ = 0;
  WavSubtype subtype_;
  int64_t written_ = 0;
  bool committed_ = false;
};

// resample() a block at a time (libsoxr's streaming interface): the same samples as resample() on
// the whole signal, and the same count, round(frames * to_rate / from_rate), at finish().
class StreamResampler {
 public:
  StreamResampler(double from_rate, double to_rate, int channels = 1, ResampleQuality quality = ResampleQuality::kHigh);
  ~StreamResampler();
  StreamResampler(const StreamResampler&) = delete;
  StreamResampler& operator=(const StreamResampler&) = delete;

  // Interleaved frames in; appends the frames that are ready to `out`.
  void push(const float* interleaved, int64_t frames, std::vector<float>& out);
  // End of the input: appends the rest (padded with zeros, or cut, to the count above).
  void finish(std::vector<float>& out);

 private:
  struct Soxr;
  std::unique_ptr<Soxr> soxr_;
  double from_rate_, to_rate_;
  int channels_;
  int64_t in_frames_ = 0, out_frames_ = 0;
  bool finished_ = false;
};

}  // namespace wavetrain::data
