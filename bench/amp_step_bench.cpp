// One training step of a NAM WaveNet (standard by default) at NAM's defaults (batch 16 x 8192 output samples,
// MSE + 2e-4 x MRSTFT on 0.85 pre-emphasised signals, Adam lr 0.004), and inference speed:
// offline chunks and 64-sample buffers, as real-time factors. bench/amp.sh runs it next to the same
// step written in Python PyTorch (bench/amp_step_baseline.py) and prints the ratio.
//
// usage: wavetrain_bench_amp THREADS [REPEATS [PRESET [ACTIVATION [GATING]]]]   (model.preset,
// default standard; model.activation and model.gating, default the preset's)
// prints "step_ms libtorch_step_ms offline_rtf stream64_rtf": the step through the hand-written CPU
// kernels (wavenet_cpu.h), the same step through LibTorch's conv1d, and the inference speeds.
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "experiments/amp/amp_model.h"
#include "experiments/amp/dsp_kernels.h"
#include "experiments/amp/wavenet_cpu.h"
#include "losses/audio_losses.h"
#include "trainer/threads.h"

using namespace wavetrain;

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  wavetrain::configure_threads(threads);  // as the wavetrain binary does (trainer/threads.h)
  // WAVETRAIN_NO_AVX512=1: the kernels held to AVX2 + FMA (to measure what AVX-512 adds).
  if (const char* v = std::getenv("WAVETRAIN_NO_AVX512"); v && std::string(v) == "1") {
    experiments::amp::wavenet_cpu_use_no_avx512(true);
    experiments::amp::dsp::force_no_avx512(true);
  }
  // WAVETRAIN_BASELINE_ISA=1: the kernels' baseline-ISA variant (SSE2 on x86-64; NEON on ARM).
  if (const char* v = std::getenv("WAVETRAIN_BASELINE_ISA"); v && std::string(v) == "1") {
    experiments::amp::wavenet_cpu_use_baseline_isa(true);
    experiments::amp::dsp::force_baseline(true);
  }
  at::manual_seed(0);
  experiments::amp::AmpModel m = experiments::amp::make_amp_model("wavenet", argc > 3 ? argv[3] : "standard", 48000,
                                                                  argc > 4 ? argv[4] : "", argc > 5 ? argv[5] : "");
  torch::optim::Adam adam(m.module().parameters(), torch::optim::AdamOptions(0.004));
  const losses::CombinedLoss loss({{"mse", 1.0}, {"mrstft", 2e-4}, {"pre_emphasis", 0.85}});
  const int64_t rf = m.receptive_field();
  const at::Tensor x = at::randn({16, 1, 8192 + rf - 1}) * 0.3, y = at::tanh(at::randn({16, 1, 8192}));
  auto median_step_ms = [&] {
    std::vector<double> ms;
    for (int i = 0; i < repeats + 2; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      adam.zero_grad();
      loss(m.wavenet->forward(x), y).backward();
      adam.step();
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= 2) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
  };
  const double step_ms = median_step_ms();  // the hand-written CPU forward and backward
  m.wavenet->set_cpu_kernels(false);
  const double libtorch_step_ms = median_step_ms();  // the same model through LibTorch's conv1d
  m.wavenet->set_cpu_kernels(true);

  // Inference: 10 s at 48 kHz in 65536-sample chunks (exact mode: the CPU kernels, chunks across
  // `threads` threads), and in 64-sample buffers as a plugin calls it (stream mode: per-layer
  // state, one thread).
  const at::Tensor audio = at::randn({480000}) * 0.3;
  experiments::amp::ProcessOptions offline;
  auto t0 = std::chrono::steady_clock::now();
  experiments::amp::process(m, audio, offline);
  const double offline_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  experiments::amp::ProcessOptions stream;
  stream.mode = "stream";
  stream.chunk = 64;
  t0 = std::chrono::steady_clock::now();
  experiments::amp::process(m, audio, stream);
  const double stream_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%.1f %.1f %.1f %.1f\n", step_ms, libtorch_step_ms, 10.0 / offline_s, 10.0 / stream_s);
  return 0;
}
