// Audio files through libsndfile, resampling through libsoxr (audio_io.h).
#include "data/audio_io.h"

#include <sndfile.h>
#include <soxr.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

namespace wavetrain::data {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& what) { throw AudioError(path + ": " + what); }

constexpr int64_t kReadBlockFrames = 1 << 16;

struct SndfileCloser {
  void operator()(SNDFILE* f) const { sf_close(f); }
};
using Sndfile = std::unique_ptr<SNDFILE, SndfileCloser>;

soxr_quality_spec_t quality_spec(ResampleQuality q) {
  switch (q) {
    case ResampleQuality::kQuick: return soxr_quality_spec(SOXR_QQ, 0);
    case ResampleQuality::kLow: return soxr_quality_spec(SOXR_LQ, 0);
    case ResampleQuality::kMedium: return soxr_quality_spec(SOXR_MQ, 0);
    case ResampleQuality::kVeryHigh: return soxr_quality_spec(SOXR_VHQ, 0);
    default: return soxr_quality_spec(SOXR_HQ, 0);
  }
}

}  // namespace

ResampleQuality parse_resample_quality(const std::string& name) {
  if (name == "quick") return ResampleQuality::kQuick;
  if (name == "low") return ResampleQuality::kLow;
  if (name == "medium") return ResampleQuality::kMedium;
  if (name == "high") return ResampleQuality::kHigh;
  if (name == "very_high") return ResampleQuality::kVeryHigh;
  throw std::invalid_argument("resample quality '" + name + "' is not one of quick, low, medium, high, very_high");
}

Audio read_audio(const std::string& path, const ReadOptions& options) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(path, "no such file");
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not an audio file");
  SF_INFO info{};
  Sndfile file(sf_open(path.c_str(), SFM_READ, &info));
  if (!file) fail(path, std::string("not a readable audio file (libsndfile: ") + sf_strerror(nullptr) + ")");
  // A header's numbers are not trusted: a damaged rate would make the resampler ask for billions
  // of samples (or crash in libsoxr), a damaged length would allocate gigabytes up front.
  if (info.channels < 1 || info.channels > kMaxChannels)
    fail(path, "its header gives " + std::to_string(info.channels) + " channels (1 to " + std::to_string(kMaxChannels) + " are read)");
  if (info.samplerate < kMinSampleRate || info.samplerate > kMaxSampleRate)
    fail(path, "its header gives a sample rate of " + std::to_string(info.samplerate) + " Hz; " + std::to_string(kMinSampleRate) +
                   " to " + std::to_string(kMaxSampleRate) + " Hz are read (damaged header?)");
  if (options.channels > 0 && info.channels != options.channels)
    fail(path, "expected " + std::to_string(options.channels) + " channel" + (options.channels == 1 ? "" : "s") +
                   ", found " + std::to_string(info.channels));
  const int64_t frames = info.frames, channels = info.channels;
  if (frames < 0 || frames > kMaxSamples / channels)
    fail(path, "its header gives " + std::to_string(frames) + " frames of " + std::to_string(channels) + " channels; at most " +
                   std::to_string(kMaxSamples) + " samples are read");
  // Read in blocks, so that memory follows what the file holds rather than what its header says.
  std::vector<float> interleaved;
  int64_t got = 0;
  while (got < frames) {
    const int64_t want = std::min<int64_t>(frames - got, kReadBlockFrames);
    interleaved.resize(static_cast<size_t>((got + want) * channels));
    const sf_count_t n = sf_readf_float(file.get(), interleaved.data() + got * channels, want);
    if (n <= 0) break;
    got += n;
  }
  if (got != frames)
    fail(path, "truncated or unreadable: its header gives " + std::to_string(frames) + " frames, " + std::to_string(got) +
                   " could be read (libsndfile: " + sf_strerror(file.get()) + ")");
  Audio audio;
  audio.sample_rate = info.samplerate;
  // clone, not contiguous(): for one channel the transpose is already contiguous and would still
  // point into `interleaved`.
  audio.samples = at::from_blob(interleaved.data(), {frames, channels}, at::kFloat).t().clone(at::MemoryFormat::Contiguous);
  if (options.sample_rate > 0 && options.sample_rate != audio.sample_rate) {
    try {
      audio.samples = resample(audio.samples, audio.sample_rate, options.sample_rate, options.quality);
    } catch (const std::invalid_argument& e) {
      fail(path, e.what());
    }
    audio.sample_rate = options.sample_rate;
  }
  return audio;
}

void write_wav(const std::string& path, const at::Tensor& samples_in, int sample_rate, WavSubtype subtype) {
  if (samples_in.dim() != 1 && samples_in.dim() != 2)
    fail(path, "samples must be [channels][samples] or [samples], got " + c10::str(samples_in.sizes()));
  if (sample_rate < 1) fail(path, "sample rate must be positive, got " + std::to_string(sample_rate));
  const at::Tensor samples = (samples_in.dim() == 1 ? samples_in.unsqueeze(0) : samples_in).to(at::kDouble).cpu();
  if (!at::isfinite(samples).all().item<bool>()) fail(path, "samples contain NaN or infinity");
  const int64_t channels = samples.size(0), frames = samples.size(1);
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = static_cast<int>(channels);
  info.format = SF_FORMAT_WAV | (subtype == WavSubtype::kPcm16   ? SF_FORMAT_PCM_16
                                 : subtype == WavSubtype::kPcm24 ? SF_FORMAT_PCM_24
                                                                 : SF_FORMAT_FLOAT);
  const std::filesystem::path target(path);
  const std::string temporary = (target.parent_path() / ("." + target.filename().string() + ".partial")).string();
  {
    Sndfile file(sf_open(temporary.c_str(), SFM_WRITE, &info));
    if (!file) fail(path, std::string("cannot be written (libsndfile: ") + sf_strerror(nullptr) + ")");
    const at::Tensor interleaved = samples.t().contiguous();  // [frames][channels]
    const double* x = interleaved.data_ptr<double>();
    const int64_t n = frames * channels;
    sf_count_t written = 0;
    if (subtype == WavSubtype::kFloat32) {
      std::vector<float> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>(x[i]);
      written = sf_writef_float(file.get(), v.data(), frames);
    } else {
      // Quantise here (round, clip) and hand libsndfile full-scale 32-bit integers, of which it
      // keeps the top 16 or 24 bits exactly.
      const int bits = subtype == WavSubtype::kPcm16 ? 16 : 24;
      const double scale = std::ldexp(1.0, bits - 1), hi = scale - 1, lo = -scale;
      std::vector<int> v(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) {
        const double q = std::min(hi, std::max(lo, std::nearbyint(x[i] * scale)));
        v[static_cast<size_t>(i)] = static_cast<int>(q) * (1 << (32 - bits));
      }
      written = sf_writef_int(file.get(), v.data(), frames);
    }
    if (written != frames) {
      const std::string why = sf_strerror(file.get());
      file.reset();
      std::remove(temporary.c_str());
      fail(path, "write failed after " + std::to_string(written) + " of " + std::to_string(frames) + " frames (" + why + ")");
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, target, ec);
  if (ec) {
    std::remove(temporary.c_str());
    fail(path, "cannot be put in place: " + ec.message());
  }
}

at::Tensor resample(const at::Tensor& samples_in, double from_rate, double to_rate, ResampleQuality quality) {
  for (const double rate : {from_rate, to_rate})
    if (!(rate >= kMinSampleRate && rate <= kMaxSampleRate))
      throw std::invalid_argument("resample: rates must be " + std::to_string(kMinSampleRate) + " to " + std::to_string(kMaxSampleRate) +
                                  " Hz, got " + std::to_string(from_rate) + " -> " + std::to_string(to_rate));
  const bool mono = samples_in.dim() == 1;
  const at::Tensor samples = (mono ? samples_in.unsqueeze(0) : samples_in).to(at::kFloat).cpu().contiguous();
  if (from_rate == to_rate) return mono ? samples.squeeze(0) : samples;
  const int64_t channels = samples.size(0), frames = samples.size(1);
  const double wanted = std::round(static_cast<double>(frames) * to_rate / from_rate);
  if (!(wanted * static_cast<double>(channels) <= static_cast<double>(kMaxSamples)))
    throw std::invalid_argument("resample: " + std::to_string(frames) + " frames from " + std::to_string(from_rate) + " Hz to " +
                                std::to_string(to_rate) + " Hz would give more than " + std::to_string(kMaxSamples) + " samples");
  const int64_t out_frames = static_cast<int64_t>(wanted);
  // libsoxr writes through a null output pointer when asked for no output (found by fuzzing: one
  // frame at 48 kHz asked for at 16 kHz rounds to none).
  if (frames == 0 || out_frames == 0) {
    const at::Tensor none = at::zeros({channels, out_frames}, at::kFloat);
    return mono ? none.squeeze(0) : none;
  }
  const at::Tensor in = samples.t().contiguous();  // soxr works on interleaved frames
  at::Tensor out = at::empty({out_frames, channels}, at::kFloat);
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t q = quality_spec(quality);
  size_t done_out = 0;
  // No count of input used (nullptr): libsoxr then flushes its filter at the end of the input;
  // given one, it kept the last filter delay back (213 samples from 48 kHz to 16 kHz) and the
  // output ended in that many zeros.
  const soxr_error_t error =
      soxr_oneshot(from_rate, to_rate, static_cast<unsigned>(channels), in.data_ptr<float>(), static_cast<size_t>(frames),
                   nullptr, out.data_ptr<float>(), static_cast<size_t>(out_frames), &done_out, &io, &q, nullptr);
  if (error) throw std::runtime_error(std::string("resample: libsoxr failed: ") + error);
  out = out.narrow(0, 0, static_cast<int64_t>(done_out)).t().contiguous();
  if (static_cast<int64_t>(done_out) < out_frames)  // soxr may stop short by a sample or two at the end
    out = at::cat({out, at::zeros({channels, out_frames - static_cast<int64_t>(done_out)}, at::kFloat)}, 1);
  return mono ? out.squeeze(0) : out;
}

}  // namespace wavetrain::data

// Streaming reading, writing and resampling (audio_io.h).
namespace wavetrain::data {

struct AudioFileReader::File {
  Sndfile sndfile;
};

AudioFileReader::AudioFileReader(const std::string& path) : path_(path), file_(std::make_unique<File>()) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) fail(path, "no such file");
  if (std::filesystem::is_directory(path, ec)) fail(path, "is a directory, not an audio file");
  SF_INFO info{};
  file_->sndfile.reset(sf_open(path.c_str(), SFM_READ, &info));
  if (!file_->sndfile) fail(path, std::string("not a readable audio file (libsndfile: ") + sf_strerror(nullptr) + ")");
  // The header's numbers as read_audio checks them.
  if (info.channels < 1 || info.channels > kMaxChannels)
    fail(path, "its header gives " + std::to_string(info.channels) + " channels (1 to " + std::to_string(kMaxChannels) + " are read)");
  if (info.samplerate < kMinSampleRate || info.samplerate > kMaxSampleRate)
    fail(path, "its header gives a sample rate of " + std::to_string(info.samplerate) + " Hz; " + std::to_string(kMinSampleRate) +
                   " to " + std::to_string(kMaxSampleRate) + " Hz are read (damaged header?)");
  if (info.frames < 0) fail(path, "its header gives " + std::to_string(info.frames) + " frames");
  sample_rate_ = info.samplerate;
  channels_ = info.channels;
  frames_ = info.frames;
}

AudioFileReader::~AudioFileReader() = default;

int64_t AudioFileReader::read(float* interleaved, int64_t max_frames) {
  const int64_t want = std::min(max_frames, frames_ - read_);
  if (want <= 0) return 0;
  const sf_count_t n = sf_readf_float(file_->sndfile.get(), interleaved, want);
  if (n <= 0)
    fail(path_, "truncated or unreadable: its header gives " + std::to_string(frames_) + " frames, " + std::to_string(read_) +
                    " could be read (libsndfile: " + sf_strerror(file_->sndfile.get()) + ")");
  read_ += n;
  return n;
}

struct WavFileWriter::File {
  Sndfile sndfile;
};

WavFileWriter::WavFileWriter(const std::string& path, int sample_rate, int channels, WavSubtype subtype)
    : path_(path), file_(std::make_unique<File>()), sample_rate_(sample_rate), channels_(channels), subtype_(subtype) {
  if (sample_rate < 1) fail(path, "sample rate must be positive, got " + std::to_string(sample_rate));
  if (channels < 1 || channels > kMaxChannels) fail(path, "channels must be 1 to " + std::to_string(kMaxChannels) + ", got " + std::to_string(channels));
  const std::filesystem::path target(path);
  temporary_ = (target.parent_path() / ("." + target.filename().string() + ".partial")).string();
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = channels;
  info.format = SF_FORMAT_WAV | (subtype == WavSubtype::kPcm16   ? SF_FORMAT_PCM_16
                                 : subtype == WavSubtype::kPcm24 ? SF_FORMAT_PCM_24
                                                                 : SF_FORMAT_FLOAT);
  // SFM_WRITE truncates: a temporary left by a killed earlier run is replaced.
  file_->sndfile.reset(sf_open(temporary_.c_str(), SFM_WRITE, &info));
  if (!file_->sndfile) fail(path, std::string("cannot be written (libsndfile: ") + sf_strerror(nullptr) + ")");
}

WavFileWriter::~WavFileWriter() {
  if (committed_) return;
  file_->sndfile.reset();
  std::remove(temporary_.c_str());
}

void WavFileWriter::write(const float* x, int64_t frames) {
  if (committed_) fail(path_, "written after it was completed");
  const int64_t n = frames * channels_;
  for (int64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) {
      const int64_t frame = written_ + i / channels_;
      char at[64];
      std::snprintf(at, sizeof(at), "%.6f s", static_cast<double>(frame) / sample_rate_);
      fail(path_, "sample " + std::to_string(frame) + " (at " + at + ") is " + (std::isnan(x[i]) ? "NaN" : "infinite") +
                      "; a WAV file holds finite samples only");
    }
  sf_count_t done = 0;
  if (subtype_ == WavSubtype::kFloat32) {
    done = sf_writef_float(file_->sndfile.get(), x, frames);
  } else {
    // As write_wav: quantised here (round, clip), handed over as full-scale 32-bit integers.
    const int bits = subtype_ == WavSubtype::kPcm16 ? 16 : 24;
    const double scale = std::ldexp(1.0, bits - 1), hi = scale - 1, lo = -scale;
    std::vector<int> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const double q = std::min(hi, std::max(lo, std::nearbyint(static_cast<double>(x[i]) * scale)));
      v[static_cast<size_t>(i)] = static_cast<int>(q) * (1 << (32 - bits));
    }
    done = sf_writef_int(file_->sndfile.get(), v.data(), frames);
  }
  if (done != frames)
    fail(path_, "write failed after " + std::to_string(written_ + std::max<sf_count_t>(done, 0)) + " frames (" +
                    sf_strerror(file_->sndfile.get()) + ")");
  written_ += frames;
}

void WavFileWriter::commit() {
  if (committed_) return;
  // Closing writes the header's sizes; a failure there (a full disk) shows in the error state.
  const int error = sf_error(file_->sndfile.get());
  file_->sndfile.reset();
  if (error != SF_ERR_NO_ERROR) fail(path_, std::string("write failed (libsndfile: ") + sf_error_number(error) + ")");
  std::error_code ec;
  std::filesystem::rename(temporary_, path_, ec);
  if (ec) fail(path_, "cannot be put in place: " + ec.message());
  committed_ = true;
}

struct StreamResampler::Soxr {
  soxr_t soxr = nullptr;
  ~Soxr() {
    if (soxr) soxr_delete(soxr);
  }
};

StreamResampler::StreamResampler(double from_rate, double to_rate, int channels, ResampleQuality quality)
    : soxr_(std::make_unique<Soxr>()), from_rate_(from_rate), to_rate_(to_rate), channels_(channels) {
  for (const double rate : {from_rate, to_rate})
    if (!(rate >= kMinSampleRate && rate <= kMaxSampleRate))
      throw std::invalid_argument("resample: rates must be " + std::to_string(kMinSampleRate) + " to " + std::to_string(kMaxSampleRate) +
                                  " Hz, got " + std::to_string(from_rate) + " -> " + std::to_string(to_rate));
  if (channels < 1 || channels > kMaxChannels) throw std::invalid_argument("resample: " + std::to_string(channels) + " channels");
  if (from_rate == to_rate) return;  // passed through, as resample() returns its input
  const soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  const soxr_quality_spec_t q = quality_spec(quality);
  soxr_error_t error = nullptr;
  soxr_->soxr = soxr_create(from_rate, to_rate, static_cast<unsigned>(channels), &error, &io, &q, nullptr);
  if (error || !soxr_->soxr) throw std::runtime_error(std::string("resample: libsoxr failed: ") + (error ? error : "no resampler"));
}

StreamResampler::~StreamResampler() = default;

void StreamResampler::push(const float* in, int64_t frames, std::vector<float>& out) {
  if (finished_) throw std::logic_error("StreamResampler: push after finish");
  if (frames <= 0) return;  // libsoxr takes no input (a null pointer) as the end of the input
  in_frames_ += frames;
  if (!soxr_->soxr) {
    out.insert(out.end(), in, in + frames * channels_);
    out_frames_ += frames;
    return;
  }
  // Room for what this input gives, and soxr's buffered frames besides; asked again while full.
  const int64_t room = static_cast<int64_t>(std::ceil(static_cast<double>(frames) * to_rate_ / from_rate_)) + 1024;
  std::vector<float> buffer(static_cast<size_t>(room * channels_));
  int64_t used = 0;
  while (true) {
    size_t done_in = 0, done_out = 0;
    const soxr_error_t error = soxr_process(soxr_->soxr, in + used * channels_, static_cast<size_t>(frames - used), &done_in, buffer.data(),
                                            static_cast<size_t>(room), &done_out);
    if (error) throw std::runtime_error(std::string("resample: libsoxr failed: ") + error);
    used += static_cast<int64_t>(done_in);
    out.insert(out.end(), buffer.begin(), buffer.begin() + static_cast<int64_t>(done_out) * channels_);
    out_frames_ += static_cast<int64_t>(done_out);
    if (used >= frames && static_cast<int64_t>(done_out) < room) break;
  }
}

void StreamResampler::finish(std::vector<float>& out) {
  if (finished_) return;
  finished_ = true;
  const int64_t wanted = static_cast<int64_t>(std::round(static_cast<double>(in_frames_) * to_rate_ / from_rate_));
  if (!soxr_->soxr) return;
  if (in_frames_ > 0) {
    std::vector<float> buffer(static_cast<size_t>(4096 * channels_));
    while (out_frames_ < wanted) {
      size_t done_out = 0;
      const soxr_error_t error = soxr_process(soxr_->soxr, nullptr, 0, nullptr, buffer.data(), 4096, &done_out);  // flush
      if (error) throw std::runtime_error(std::string("resample: libsoxr failed: ") + error);
      if (done_out == 0) break;
      const int64_t take = std::min<int64_t>(static_cast<int64_t>(done_out), wanted - out_frames_);
      out.insert(out.end(), buffer.begin(), buffer.begin() + take * channels_);
      out_frames_ += take;
    }
  }
  if (out_frames_ < wanted) {  // soxr may stop short by a sample or two at the end, as in resample()
    out.insert(out.end(), static_cast<size_t>((wanted - out_frames_) * channels_), 0.0f);
    out_frames_ = wanted;
  }
}

}  // namespace wavetrain::data
