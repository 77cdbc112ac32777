// Real-time factors of wavetrain's .nam engine (experiments/amp/nam_dsp.h) as the NAM plugin runs a
// model: 64-sample buffers, one thread, 48 kHz, after a reset. For NAM's presets (random weights:
// the work does not depend on them) and for any .nam files named on the command line.
//
// usage: wavetrain_bench_nam [--no-avx512 | --baseline] [--fast-tanh] [--no-presets] [SECONDS] [MODEL.nam ...]
//          prints one line per model: NAME RTF (a file's NAME is its name without .nam)
//        wavetrain_bench_nam --write-nam DIR [A2.nam]
//          writes the presets it times, with the same weights, as DIR/NAME.nam (standard.nam, ...,
//          LSTM_1x24.nam), for another engine to play (bench/nam_realtime.sh gives them to the NAM
//          core); given the core's A2 container, also its small model as DIR/a2_small.nam (the
//          preset a2_small is that model's shape; its builder needs LibTorch, this binary does not)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench/timing.h"
#include "experiments/amp/dsp_kernels.h"
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

bool g_fast_tanh = false;  // --fast-tanh

void report(const std::string& name, const amp::NamFileModel& model, const std::vector<float>& x) {
  amp::NamDsp dsp(model, kBuffer, /*prewarm=*/true, g_fast_tanh);
  const double rtf = real_time_factor(x, [&](const float* in, float* out, int64_t n) { dsp.process(in, out, n); });
  std::printf("%-20s %8.1f\n", name.c_str(), rtf);
  std::fflush(stdout);
}

// NAM's presets with random weights (the same on every run), by the name the bench prints.
std::vector<std::pair<std::string, amp::NamFileModel>> presets() {
  std::vector<std::pair<std::string, amp::NamFileModel>> out;
  uint32_t seed = 1;
  for (const std::string& preset : amp::wavenet_preset_names()) {
    amp::NamFileModel m;
    m.architecture = "WaveNet";
    m.wavenet = amp::nam_of(amp::wavenet_preset(preset));
    m.weights = random_weights(amp::nam_wavenet_weight_count(m.wavenet), seed++);
    m.weights.back() = 0.02f;
    out.emplace_back(preset, std::move(m));
  }
  for (const std::string& preset : amp::lstm_preset_names()) {
    amp::NamFileModel m;
    m.architecture = "LSTM";
    m.lstm = amp::lstm_preset(preset);
    m.weights = random_weights(amp::lstm_weight_count(m.lstm), seed++);
    out.emplace_back("LSTM " + preset, std::move(m));
  }
  return out;
}

int write_nam(const std::string& dir, const char* a2_container) {
  std::filesystem::create_directories(dir);
  for (auto& [name, m] : presets()) {
    std::string file = name;
    std::replace(file.begin(), file.end(), ' ', '_');
    m.sample_rate = kRate;
    amp::write_nam_file(dir + "/" + file + ".nam", m);
  }
  if (a2_container) {
    const amp::NamFileModel a2 = amp::read_nam_file(a2_container);
    const amp::NamFileModel* small = a2.submodels.empty() ? nullptr : a2.submodels.front().model.get();
    if (!small || small->architecture != "WaveNet" || small->wavenet.arrays.size() != 1 || small->wavenet.arrays[0].channels != 3 ||
        small->wavenet.arrays[0].layers.size() != 23) {
      std::fprintf(stderr, "%s: not the NAM core's A2 container (its first submodel is not A2 with 3 channels)\n", a2_container);
      return 1;
    }
    amp::NamFileModel m = *small;
    if (!m.sample_rate) m.sample_rate = a2.sample_rate;
    amp::write_nam_file(dir + "/a2_small.nam", m);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::strcmp(argv[1], "--write-nam") == 0) {
    if (argc < 3 || argc > 4) {
      std::fprintf(stderr, "usage: wavetrain_bench_nam --write-nam DIR [A2.nam]\n");
      return 2;
    }
    return write_nam(argv[2], argc == 4 ? argv[3] : nullptr);
  }
  // --no-avx512: AVX2 at most, to compare with a core built for AVX2. --baseline: the baseline
  // ISA's variant (SSE2 on x86-64; the code an ARM build runs, where GCC makes it NEON). --fast-tanh:
  // the core's fast tanh (and the LSTM's sigmoids from it), as the plugin plays.
  for (bool more = true; more && argc > 1;) {
    if (std::strcmp(argv[1], "--no-avx512") == 0) amp::dsp::force_no_avx512(true);
    else if (std::strcmp(argv[1], "--baseline") == 0) amp::dsp::force_baseline(true);
    else if (std::strcmp(argv[1], "--fast-tanh") == 0) g_fast_tanh = true;
    else more = false;
    if (more) --argc, ++argv;
  }
  const bool with_presets = !(argc > 1 && std::strcmp(argv[1], "--no-presets") == 0);
  if (!with_presets) {
    --argc;
    ++argv;
  }
  const double seconds = argc > 1 ? std::atof(argv[1]) : 10.0;
  const std::vector<float> x = input_signal(seconds);
  if (with_presets)
    for (const auto& [name, m] : presets()) report(name, m, x);
  for (int i = 2; i < argc; ++i) {
    std::string name = argv[i];
    name = name.substr(name.find_last_of('/') + 1);
    report(name.substr(0, name.size() - 4), amp::read_nam_file(argv[i]), x);
  }
  return 0;
}
