// Waveform augmentation for ASR training (augment.h).
#include "experiments/asr/augment.h"

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>

#include "data/audio_io.h"
#include "experiments/asr/seeding.h"

namespace wavetrain::experiments::asr {
namespace {

namespace fs = std::filesystem;
constexpr double kRate = 16000;

bool chance(std::mt19937_64& rng, double p) { return p > 0 && uniform01(rng) < p; }

// Gaussian from the raw engine (Box-Muller): the standard distributions differ between libraries.
double gaussian(std::mt19937_64& rng) {
  const double u = std::max(uniform01(rng), 1e-300), v = uniform01(rng);
  return std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * v);
}

// Gaussian white noise from ATen's generator seeded by the engine (vectorised: a per-sample
// Box-Muller loop cost 4 ms an utterance, on the thread that makes batches beside training).
at::Tensor coloured_noise(int64_t n, bool brown, std::mt19937_64& rng) {
  at::Generator g = at::detail::createCPUGenerator(rng());
  at::Tensor noise = at::randn({n}, g, at::TensorOptions().dtype(at::kFloat));
  if (brown) {
    // A leaky integrator (-6 dB per octave above ~50 Hz).
    float* p = noise.data_ptr<float>();
    float state = 0;
    for (int64_t i = 0; i < n; ++i) p[i] = state = 0.98f * state + 0.2f * p[i];
  }
  return noise;
}

// The mean power of the frames (25 ms) within 30 dB of the loudest one.
double speech_power(const at::Tensor& audio) {
  const float* x = audio.data_ptr<float>();
  const int64_t n = audio.numel(), window = 400;
  std::vector<double> powers;
  for (int64_t start = 0; start + window <= n || (start == 0 && n > 0); start += window) {
    const int64_t len = std::min(window, n - start);
    double e = 0;
    for (int64_t k = 0; k < len; ++k) e += static_cast<double>(x[start + k]) * x[start + k];
    powers.push_back(e / static_cast<double>(len));
  }
  if (powers.empty()) return 0;
  const double loudest = *std::max_element(powers.begin(), powers.end());
  double sum = 0;
  int64_t count = 0;
  for (double p : powers)
    if (p >= loudest * 1e-3) sum += p, ++count;
  return count ? sum / static_cast<double>(count) : 0;
}

void check_probability(const config::Config& cfg, const std::string& key, double& value) {
  value = cfg.get_float(key, value);
  if (!(value >= 0 && value <= 1))
    throw config::ConfigError(key + " is a probability: expected a number in [0, 1], got " + std::to_string(value));
}

void check_range(const config::Config& cfg, const std::string& lo_key, const std::string& hi_key, double& lo, double& hi,
                 double least, double most) {
  lo = cfg.get_float(lo_key, lo);
  hi = cfg.get_float(hi_key, hi);
  if (!(lo >= least && hi <= most && lo <= hi))
    throw config::ConfigError(lo_key + " and " + hi_key + ": expected " + std::to_string(least) + " <= min <= max <= " +
                              std::to_string(most) + ", got " + std::to_string(lo) + " and " + std::to_string(hi));
}

}  // namespace

WaveAugmentOptions WaveAugmentOptions::from(const config::Config& cfg) {
  WaveAugmentOptions o;
  const std::string p = "asr.augment.";
  check_probability(cfg, p + "band_limit", o.band_limit_prob);
  check_probability(cfg, p + "reverb", o.reverb_prob);
  check_probability(cfg, p + "silence", o.silence_prob);
  check_probability(cfg, p + "noise", o.noise_prob);
  check_probability(cfg, p + "gain", o.gain_prob);
  check_range(cfg, p + "rt60_min", p + "rt60_max", o.rt60_min, o.rt60_max, 0.05, 3.0);
  o.silence_max_seconds = cfg.get_float(p + "silence_max_seconds", o.silence_max_seconds);
  if (!(o.silence_max_seconds >= 0 && o.silence_max_seconds <= 30))
    throw config::ConfigError(p + "silence_max_seconds: expected seconds in [0, 30], got " + std::to_string(o.silence_max_seconds));
  check_range(cfg, p + "snr_min", p + "snr_max", o.snr_min, o.snr_max, -20, 100);
  check_range(cfg, p + "gain_min_db", p + "gain_max_db", o.gain_min_db, o.gain_max_db, -60, 40);
  check_probability(cfg, p + "vtlp", o.vtlp_prob);
  // Bounded to 0.7-1.4: speakers' VTLN factors lie well inside it, and a wider warp would describe no voice.
  check_range(cfg, p + "vtlp_min", p + "vtlp_max", o.vtlp_min, o.vtlp_max, 0.7, 1.4);
  o.noise_dir = cfg.get_string(p + "noise_dir", "");
  if (cfg.has(p + "noise_types")) {
    const config::Node list = cfg.value(p + "noise_types");
    const std::string where = p + "noise_types (" + list.origin().str() + ")";
    if (!list.is_sequence()) throw config::ConfigError(where + ": expected a list of white, brown, babble, dir; found " + list.to_display());
    o.noise_types.clear();
    for (const config::Node& item : list.items()) {
      const std::string t = item.kind() == config::Node::Kind::String ? item.string_value() : item.to_display();
      if (t != "white" && t != "brown" && t != "babble" && t != "dir")
        throw config::ConfigError(where + ": '" + t + "' is not a noise type (white, brown, babble, dir)");
      o.noise_types.push_back(t);
    }
  }
  if (!o.noise_dir.empty() && std::find(o.noise_types.begin(), o.noise_types.end(), "dir") == o.noise_types.end())
    o.noise_types.push_back("dir");
  if (o.noise_dir.empty() && std::find(o.noise_types.begin(), o.noise_types.end(), "dir") != o.noise_types.end())
    throw config::ConfigError(p + "noise_types has 'dir' but " + p + "noise_dir is not set");
  if (o.noise_types.empty() && o.noise_prob > 0)
    throw config::ConfigError(p + "noise_types is empty (and no noise_dir), but " + p + "noise > 0");
  return o;
}

double vtlp_factor(const WaveAugmentOptions& o, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const bool on = chance(rng, o.vtlp_prob);
  const double factor = uniform(rng, o.vtlp_min, o.vtlp_max);  // drawn either way, as apply()'s draws
  return on ? factor : 1.0;
}

WaveAugmenter::WaveAugmenter(WaveAugmentOptions options) : options_(std::move(options)) {
  if (options_.noise_dir.empty()) return;
  const std::string key = "asr.augment.noise_dir";
  if (!fs::is_directory(options_.noise_dir)) throw config::ConfigError(key + ": " + options_.noise_dir + " is not a directory");
  std::set<std::string> files;  // sorted: the same order on every machine
  for (const auto& entry : fs::recursive_directory_iterator(options_.noise_dir)) {
    std::string ext = entry.path().extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    if (entry.is_regular_file() && (ext == ".wav" || ext == ".flac" || ext == ".ogg")) files.insert(entry.path().string());
  }
  data::ReadOptions read;
  read.sample_rate = static_cast<int>(kRate);
  for (const std::string& f : files) {
    at::Tensor mono = data::read_audio(f, read).samples.mean(0).contiguous();  // a bad file throws naming it
    if (mono.numel() < 400) throw config::ConfigError(key + ": " + f + " is shorter than 25 ms");
    noise_files_.push_back(mono);
  }
  if (noise_files_.empty()) throw config::ConfigError(key + ": no .wav, .flac or .ogg file under " + options_.noise_dir);
}

at::Tensor room_impulse_response(double rt60, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t n = std::max<int64_t>(64, static_cast<int64_t>(1.2 * rt60 * kRate)), onset = 40;  // 2.5 ms
  at::Tensor h = at::zeros({n}, at::kFloat);
  float* p = h.data_ptr<float>();
  p[0] = 1;
  // Scaled so that the reverberant energy is about that of the direct path: a moderately wet room.
  double energy = 0;
  std::vector<double> tail(static_cast<size_t>(n), 0.0);
  for (int64_t i = onset; i < n; ++i) {
    const double t = static_cast<double>(i) / kRate;
    tail[static_cast<size_t>(i)] = gaussian(rng) * std::exp(-6.9078 * t / rt60);
    energy += tail[static_cast<size_t>(i)] * tail[static_cast<size_t>(i)];
  }
  const double scale = energy > 0 ? 1 / std::sqrt(energy) : 0;
  for (int64_t i = onset; i < n; ++i) p[i] = static_cast<float>(tail[static_cast<size_t>(i)] * scale);
  return h;
}

at::Tensor convolve(const at::Tensor& audio, const at::Tensor& response) {
  const int64_t n = audio.numel(), m = response.numel();
  int64_t size = 1;
  while (size < n + m - 1) size *= 2;
  const at::Tensor a = at::fft_rfft(audio.to(at::kDouble), size), b = at::fft_rfft(response.to(at::kDouble), size);
  return at::fft_irfft(a * b, size).narrow(0, 0, n).to(at::kFloat).contiguous();
}

at::Tensor add_noise(const at::Tensor& audio, const at::Tensor& noise, double snr_db) {
  const int64_t n = audio.numel();
  at::Tensor fitted = noise.numel() >= n ? noise.narrow(0, 0, n) : noise.repeat({(n + noise.numel() - 1) / noise.numel()}).narrow(0, 0, n);
  const double signal = speech_power(audio.contiguous());
  const double power = fitted.to(at::kDouble).pow(2).mean().item<double>();
  if (signal <= 0 || power <= 0) return audio;
  return audio + fitted * std::sqrt(signal / power * std::pow(10.0, -snr_db / 10));
}

at::Tensor make_noise(const std::string& type, int64_t n, uint64_t seed, const UtteranceSource& others) {
  std::mt19937_64 nrng(seed);
  if (type != "babble" || !others) return coloured_noise(n, type == "brown", nrng);
  // 3 to 5 other utterances, each at its own level and start.
  at::Tensor sound = at::zeros({n}, at::kFloat);
  const int talkers = 3 + static_cast<int>(nrng() % 3);
  for (int t = 0; t < talkers; ++t) {
    at::Tensor other = others(nrng()).to(at::kFloat).contiguous().view({-1});
    if (other.numel() == 0) continue;
    const double level = uniform(nrng, 0.5, 1.0) / std::sqrt(std::max(1e-12, speech_power(other)));
    const int64_t offset = static_cast<int64_t>(nrng() % static_cast<uint64_t>(other.numel()));
    const at::Tensor rolled = at::cat({other.narrow(0, offset, other.numel() - offset), other.narrow(0, 0, offset)});
    const at::Tensor fitted = rolled.numel() >= n ? rolled.narrow(0, 0, n) : rolled.repeat({(n + rolled.numel() - 1) / rolled.numel()}).narrow(0, 0, n);
    sound.add_(fitted, level);
  }
  return sound;
}

at::Tensor WaveAugmenter::apply(const at::Tensor& input, uint64_t seed, const UtteranceSource& others) const {
  const WaveAugmentOptions& o = options_;
  std::mt19937_64 rng(seed);
  at::Tensor audio = input.to(at::kFloat).contiguous().view({-1});
  // Every draw is made whether or not its step runs, so that turning one step on or off leaves the
  // others' draws as they were.
  const bool band = chance(rng, o.band_limit_prob);
  const double band_rate = rng() % 2 ? 8000.0 : 11025.0;
  const bool reverb = chance(rng, o.reverb_prob);
  const double rt60 = uniform(rng, o.rt60_min, o.rt60_max);
  const uint64_t rir_seed = rng();
  const bool silence = chance(rng, o.silence_prob);
  // Trailing silence up to a third as long: leading silence is what made the model drop words, and
  // every second of padding is a second more of encoder work.
  const double lead = uniform(rng, 0, o.silence_max_seconds), trail = uniform(rng, 0, o.silence_max_seconds / 3);
  const bool noise = chance(rng, o.noise_prob) && !o.noise_types.empty();
  const double snr = uniform(rng, o.snr_min, o.snr_max);
  const std::string type = o.noise_types.empty() ? "white" : o.noise_types[rng() % o.noise_types.size()];
  const uint64_t noise_seed = rng();
  const bool gain = chance(rng, o.gain_prob);
  const double gain_db = uniform(rng, o.gain_min_db, o.gain_max_db);

  if (band) {
    const int64_t n = audio.numel();
    audio = data::resample(data::resample(audio, kRate, band_rate).view({-1}), band_rate, kRate).view({-1});
    audio = audio.numel() >= n ? audio.narrow(0, 0, n).contiguous() : at::constant_pad_nd(audio, {0, n - audio.numel()});
  }
  if (reverb) {
    const double peak = audio.abs().max().item<double>();
    audio = convolve(audio, room_impulse_response(rt60, rir_seed));
    const double after = audio.abs().max().item<double>();
    if (after > 0) audio.mul_(peak / after);
  }
  if (silence) {
    audio = at::constant_pad_nd(audio, {static_cast<int64_t>(lead * kRate), static_cast<int64_t>(trail * kRate)});
  }
  if (noise) {
    std::mt19937_64 nrng(noise_seed);
    const int64_t n = audio.numel();
    at::Tensor sound;
    if (type == "dir" && !noise_files_.empty()) {
      const at::Tensor& file = noise_files_[nrng() % noise_files_.size()];
      const int64_t offset = static_cast<int64_t>(nrng() % static_cast<uint64_t>(file.numel()));
      sound = at::cat({file.narrow(0, offset, file.numel() - offset), file.narrow(0, 0, offset)});
    } else {
      sound = make_noise(type, n, nrng(), others);
    }
    audio = add_noise(audio, sound, snr);
  }
  if (gain) audio = audio * std::pow(10.0, gain_db / 20);
  const double peak = audio.numel() ? audio.abs().max().item<double>() : 0;
  if (peak > 0.99) audio = audio * (0.99 / peak);
  return audio.contiguous();
}

}  // namespace wavetrain::experiments::asr
