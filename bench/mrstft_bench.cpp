// Multi-resolution STFT loss, forward + backward, at the shapes amp-model training uses
// (16 x 8192 and 4 x 65536 samples). bench/mrstft.sh runs this next to a Python baseline written
// from the same definition and prints the ratio.
//
// usage: wavetrain_bench_mrstft THREADS [REPEATS]   prints "batch samples median_ms" lines
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "losses/audio_losses.h"

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 1;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  at::set_num_threads(threads);
  at::manual_seed(0);
  const wavetrain::losses::MultiResolutionStftLoss loss;
  for (const auto& [batch, samples] : std::vector<std::pair<int64_t, int64_t>>{{16, 8192}, {4, 65536}}) {
    const at::Tensor target = at::randn({batch, 1, samples});
    const at::Tensor pred = (target + 0.1 * at::randn({batch, 1, samples})).requires_grad_(true);
    std::vector<double> ms;
    for (int i = 0; i < repeats + 2; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      loss(pred, target).backward();
      pred.mutable_grad().zero_();
      const auto t1 = std::chrono::steady_clock::now();
      if (i >= 2) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());  // 2 warm-up runs
    }
    std::sort(ms.begin(), ms.end());
    std::printf("%lld %lld %.3f\n", static_cast<long long>(batch), static_cast<long long>(samples), ms[ms.size() / 2]);
  }
  return 0;
}
