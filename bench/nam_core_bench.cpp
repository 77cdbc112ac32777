// Real-time factors of NeuralAmpModelerCore (the NAM plugin's engine) timed the way
// wavetrain_bench_nam times wavetrain's engine: 64-sample buffers, one thread, 48 kHz, the same input
// signal, best of three passes over it, and the same output line per model (NAME RTF).
//
// Our own driver, not part of the CMake build: bench/nam_realtime.sh compiles it together with the
// core's sources from NAM_CORE_DIR. As the plugin does, it switches the core's fast tanh on before
// any model is loaded, and plays the core's sample type (double unless NAM_SAMPLE_FLOAT is defined).
//
// usage: nam_core_bench SECONDS MODEL.nam ...      one line per model: NAME RTF (NAME: file name without .nam)
//        nam_core_bench --describe MODEL.nam ...   one line per model: NAME CLASS (which implementation
//                                                  the core picked for it, e.g. its A2 fast path)
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cxxabi.h>
#include <exception>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <typeinfo>
#include <vector>

#include "NAM/activations.h"
#include "NAM/dsp.h"
#include "NAM/get_dsp.h"

namespace {

constexpr int kBuffer = 64;
constexpr double kRate = 48000;

// The signal wavetrain_bench_nam plays: a 110 Hz sine at 0.3 plus Gaussian noise (sigma 0.05, mt19937
// seeded with 7), computed in float as there.
std::vector<NAM_SAMPLE> input_signal(double seconds) {
  std::vector<NAM_SAMPLE> x(static_cast<size_t>(seconds * kRate));
  std::mt19937 g(7);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = static_cast<NAM_SAMPLE>(0.3f * std::sin(2.0f * 3.14159265f * 110.0f * static_cast<float>(i) / 48000.0f) + noise(g));
  return x;
}

std::string model_name(const std::string& path) {
  std::string name = std::filesystem::path(path).filename().string();
  if (name.size() > 4 && name.compare(name.size() - 4, 4, ".nam") == 0) name.resize(name.size() - 4);
  return name;
}

std::string class_name(const nam::DSP& dsp) {
  const char* mangled = typeid(dsp).name();
  int status = 0;
  char* demangled = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string out = status == 0 && demangled ? demangled : mangled;
  std::free(demangled);
  return out;
}

// Seconds of audio per second of processing, best of three passes (the model's state carries on
// from one pass to the next, as in wavetrain_bench_nam).
double real_time_factor(nam::DSP& dsp, const std::vector<NAM_SAMPLE>& x) {
  const int outputs = dsp.NumOutputChannels();
  std::vector<NAM_SAMPLE> in(kBuffer), out(static_cast<size_t>(outputs) * kBuffer);
  std::vector<NAM_SAMPLE*> in_ptr{in.data()}, out_ptr(static_cast<size_t>(outputs));
  for (int c = 0; c < outputs; ++c) out_ptr[static_cast<size_t>(c)] = out.data() + static_cast<size_t>(c) * kBuffer;
  double best = 1e30;
  NAM_SAMPLE sink = 0;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t s = 0; s < x.size(); s += kBuffer) {
      const int n = static_cast<int>(std::min<size_t>(kBuffer, x.size() - s));
      std::copy(x.begin() + static_cast<std::ptrdiff_t>(s), x.begin() + static_cast<std::ptrdiff_t>(s + static_cast<size_t>(n)), in.begin());
      dsp.process(in_ptr.data(), out_ptr.data(), n);
      sink += out[0];
    }
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  if (!std::isfinite(static_cast<double>(sink))) std::fprintf(stderr, "warning: the output is not finite\n");
  return static_cast<double>(x.size()) / kRate / best;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: nam_core_bench SECONDS MODEL.nam ...\n       nam_core_bench --describe MODEL.nam ...\n");
    return 2;
  }
  const bool describe = std::strcmp(argv[1], "--describe") == 0;
  const double seconds = describe ? 0 : std::atof(argv[1]);
  if (!describe && !(seconds > 0)) {
    std::fprintf(stderr, "nam_core_bench: SECONDS must be positive, got '%s'\n", argv[1]);
    return 2;
  }
  // As the plugin does (its constructor), before any model is built: models pick their activation
  // objects at construction, and the LSTM reads the switch on every sample.
  nam::activations::Activation::enable_fast_tanh();
  const std::vector<NAM_SAMPLE> x = input_signal(seconds);
  for (int i = 2; i < argc; ++i) {
    const std::string name = model_name(argv[i]);
    try {
      std::unique_ptr<nam::DSP> dsp = nam::get_dsp(std::filesystem::path(argv[i]));
      if (!dsp) throw std::runtime_error("the core returned no model");
      if (describe) {
        std::printf("%-20s %s\n", name.c_str(), class_name(*dsp).c_str());
      } else {
        dsp->Reset(kRate, kBuffer);  // prewarms, as the plugin's reset does
        std::printf("%-20s %8.1f\n", name.c_str(), real_time_factor(*dsp, x));
      }
      std::fflush(stdout);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "nam_core_bench: %s: %s\n", argv[i], e.what());
      return 1;
    }
  }
  return 0;
}
