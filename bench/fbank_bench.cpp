// 80-bin Kaldi fbank of 10 s of 16 kHz audio (wavetrain's data/fbank); bench/fbank.sh runs it next
// to torchaudio's kaldi.fbank (bench/fbank_baseline.py) and prints the ratio.
//
// usage: wavetrain_bench_fbank THREADS [REPEATS]   prints "median_ms"
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "data/fbank.h"

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 20;
  at::set_num_threads(threads);
  at::manual_seed(0);
  const at::Tensor waveform = at::randn({160000}) * 3000;  // int16-range values, as Kaldi expects
  wavetrain::data::FbankOptions o;
  o.num_mel_bins = 80;
  std::vector<double> ms;
  for (int i = 0; i < repeats + 3; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const at::Tensor f = wavetrain::data::fbank(waveform, o);
    const auto t1 = std::chrono::steady_clock::now();
    if (i >= 3) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%.3f\n", ms[ms.size() / 2]);
  return 0;
}
