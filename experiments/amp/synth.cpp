// The built-in capture (synth.h).
#include "experiments/amp/synth.h"

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <vector>

#include "data/audio_io.h"

namespace wavetrain::experiments::amp {
namespace {

constexpr double kRate = 48000;
constexpr double kPi = 3.14159265358979323846;

// Uniform in [0, 1) from the raw engine (the standard distributions differ between libraries).
double uniform(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * (1.0 / 9007199254740992.0); }

void silence(std::vector<float>& s, double seconds) { s.insert(s.end(), static_cast<size_t>(seconds * kRate), 0.0f); }

void sweep(std::vector<float>& s, double seconds, double amplitude) {
  const double f0 = 20, f1 = 20000, n = seconds * kRate, k = std::log(f1 / f0);
  for (int64_t i = 0; i < static_cast<int64_t>(n); ++i) {
    const double t = static_cast<double>(i) / kRate;
    const double phase = 2 * kPi * f0 * seconds / k * (std::exp(t / seconds * k) - 1);
    const double fade = std::min(1.0, std::min(t, seconds - t) / 0.01);  // 10 ms fades, no clicks
    s.push_back(static_cast<float>(amplitude * fade * std::sin(phase)));
  }
}

void noise_burst(std::vector<float>& s, std::mt19937_64& rng, double seconds, double amplitude, bool lowpass) {
  double state = 0;
  const int64_t n = static_cast<int64_t>(seconds * kRate);
  for (int64_t i = 0; i < n; ++i) {
    double v = (uniform(rng) * 2 - 1) * std::sqrt(3.0);  // unit variance
    if (lowpass) v = state = 0.9 * state + 0.1 * v * 3;
    const double fade = std::min(1.0, std::min<double>(static_cast<double>(i), static_cast<double>(n - i)) / 240.0);
    s.push_back(static_cast<float>(amplitude * fade * v / 3));
  }
}

// Karplus-Strong: a noise-filled delay line of one period, averaged and fed back.
std::vector<double> pluck(std::mt19937_64& rng, double hz, double seconds, double velocity) {
  const int64_t period = std::max<int64_t>(2, static_cast<int64_t>(std::lround(kRate / hz)));
  std::vector<double> line(static_cast<size_t>(period));
  for (double& v : line) v = uniform(rng) * 2 - 1;
  std::vector<double> out(static_cast<size_t>(seconds * kRate));
  for (size_t i = 0; i < out.size(); ++i) {
    const size_t j = i % static_cast<size_t>(period);
    const double next = line[(j + 1) % static_cast<size_t>(period)];
    out[i] = velocity * line[j];
    line[j] = 0.996 * 0.5 * (line[j] + next);
  }
  return out;
}

void notes_and_chords(std::vector<float>& s, std::mt19937_64& rng, double seconds) {
  const double e2 = 82.41;
  const int chord_shapes[][4] = {{0, 4, 7, -1}, {0, 3, 7, -1}, {0, 7, 12, 16}, {0, 5, 7, 12}};
  double done = 0;
  while (done < seconds) {
    const bool chord = uniform(rng) < 0.4;
    const double length = 0.4 + 1.1 * uniform(rng), velocity = 0.15 + 0.45 * uniform(rng);
    const int root = static_cast<int>(uniform(rng) * 25);  // semitones above E2
    std::vector<double> mix(static_cast<size_t>(length * kRate), 0.0);
    const int* shape = chord_shapes[static_cast<int>(uniform(rng) * 4) % 4];
    const int voices = chord ? (shape[3] < 0 ? 3 : 4) : 1;
    for (int v = 0; v < voices; ++v) {
      const double hz = e2 * std::pow(2.0, (root + (chord ? shape[v] : 0)) / 12.0);
      const std::vector<double> p = pluck(rng, hz, length, velocity / std::sqrt(static_cast<double>(voices)));
      const size_t offset = static_cast<size_t>(v * 0.015 * kRate);  // a strum
      for (size_t i = 0; i + offset < mix.size(); ++i) mix[i + offset] += p[i];
    }
    for (double m : mix) s.push_back(static_cast<float>(m));
    done += length;
    if (uniform(rng) < 0.2) {
      silence(s, 0.2);
      done += 0.2;
    }
  }
}

}  // namespace

at::Tensor synth_dry_signal(double seconds, uint64_t seed) {
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + 1);
  std::vector<float> s;
  silence(s, 0.5);
  for (int i = 0; i < 4; ++i) {  // clicks
    s.push_back(0.5f);
    silence(s, 0.25);
  }
  silence(s, 0.5);
  for (double amplitude : {0.1, 0.3, 0.6}) {
    sweep(s, 5.0, amplitude);
    silence(s, 0.3);
  }
  const double rest = std::max(4.0, seconds - static_cast<double>(s.size()) / kRate);
  for (double t = 0; t < rest * 0.35; t += 0.6) {
    noise_burst(s, rng, 0.5, 0.05 + 0.65 * uniform(rng), uniform(rng) < 0.5);
    silence(s, 0.1);
  }
  silence(s, 0.5);
  notes_and_chords(s, rng, rest * 0.6);
  silence(s, 0.5);
  at::Tensor x = at::from_blob(s.data(), {static_cast<int64_t>(s.size())}, at::kFloat).clone();
  return x * (0.8 / x.abs().max().item<double>());
}

SynthResult synth_capture(const std::string& dir, double seconds, uint64_t seed) {
  if (std::system("command -v sox >/dev/null 2>&1") != 0)
    throw std::runtime_error("sox not found: the built-in capture renders its reference amp with sox; install Debian's sox "
                             "(scripts/setup does)");
  std::filesystem::create_directories(dir);
  SynthResult r;
  r.dry = (std::filesystem::path(dir) / "dry.wav").string();
  r.amp = (std::filesystem::path(dir) / "amp.wav").string();
  const at::Tensor dry = synth_dry_signal(seconds, seed);
  r.seconds = static_cast<double>(dry.numel()) / kRate;
  data::write_wav(r.dry, dry, static_cast<int>(kRate), data::WavSubtype::kFloat32);
  const std::string partial = r.amp + ".partial.wav";
  // -D: no dither (float output, and the result must not depend on a random generator).
  r.sox_command = "sox -D '" + r.dry + "' -e floating-point -b 32 '" + partial + "' " + kReferenceAmpChain;
  if (std::system((r.sox_command + " 2>/dev/null").c_str()) != 0) {
    std::filesystem::remove(partial);
    throw std::runtime_error("sox failed: " + r.sox_command);
  }
  std::filesystem::rename(partial, r.amp);
  return r;
}

}  // namespace wavetrain::experiments::amp
