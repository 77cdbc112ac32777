// Real-time factors of wavetrain's .nam engine (experiments/amp/nam_dsp.h) as the NAM plugin runs a
// model: 64-sample buffers, one thread, 48 kHz, after a reset. For NAM's presets (random weights:
// the work does not depend on them) and for any .nam files named on the command line.
//
// usage: wavetrain_bench_nam [SECONDS] [MODEL.nam ...]   prints one line per model: NAME RTF
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "experiments/amp/nam_dsp.h"
#include "experiments/amp/nam_file.h"

namespace amp = wavetrain::experiments::amp;

namespace {

constexpr int64_t kBuffer = 64;
constexpr double kRate = 48000;

std::vector<float> random_weights(int64_t count, uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-0.2f, 0.2f);
  std::vector<float> w(static_cast<size_t>(count));
  for (float& x : w) x = u(g);
  return w;
}

std::vector<float> input_signal(double seconds) {
  std::vector<float> x(static_cast<size_t>(seconds * kRate));
  std::mt19937 g(7);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.3f * std::sin(2.0f * 3.14159265f * 110.0f * static_cast<float>(i) / 48000.0f) + noise(g);
  return x;
}

// Best of three: seconds of audio per second of processing.
template <typename Process>
double real_time_factor(const std::vector<float>& x, Process process) {
  std::vector<float> y(x.size());
  double best = 1e30;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t s = 0; s < x.size(); s += kBuffer) process(x.data() + s, y.data() + s, std::min<int64_t>(kBuffer, static_cast<int64_t>(x.size() - s)));
    best = std::min(best, wavetrain::bench::since(t0) / 1000.0);
  }
  return static_cast<double>(x.size()) / kRate / best;
}

void report(const std::string& name, const amp::NamFileModel& model, const std::vector<float>& x) {
  amp::NamDsp dsp(model, kBuffer);
  const double rtf = real_time_factor(x, [&](const float* in, float* out, int64_t n) { dsp.process(in, out, n); });
  std::printf("%-20s %8.1f\n", name.c_str(), rtf);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10.0;
  const std::vector<float> x = input_signal(seconds);
  uint32_t seed = 1;
  for (const std::string& preset : amp::wavenet_preset_names()) {
    amp::NamFileModel m;
    m.architecture = "WaveNet";
    m.wavenet = amp::nam_of(amp::wavenet_preset(preset));
    m.weights = random_weights(amp::nam_wavenet_weight_count(m.wavenet), seed++);
    m.weights.back() = 0.02f;
    report(preset, m, x);
  }
  for (const std::string& preset : amp::lstm_preset_names()) {
    amp::NamFileModel m;
    m.architecture = "LSTM";
    m.lstm = amp::lstm_preset(preset);
    m.weights = random_weights(amp::lstm_weight_count(m.lstm), seed++);
    report("LSTM " + preset, m, x);
  }
  for (int i = 2; i < argc; ++i) {
    std::string name = argv[i];
    name = name.substr(name.find_last_of('/') + 1);
    report(name.substr(0, name.size() - 4), amp::read_nam_file(argv[i]), x);
  }
  return 0;
}
