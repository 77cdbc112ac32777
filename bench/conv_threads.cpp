// Thread-count benchmark for the CPU default (issue 2, item 6).
//
// Times forward+backward of one WaveNet-sized dilated conv1d (16 -> 16 channels, kernel 3,
// dilation 8, batch 16 x 8192 samples), the op that dominates amp-model training on CPU.
// libgomp reads OMP_WAIT_POLICY once, when it is loaded, so each setting needs its own process:
// bench/threads.sh runs this binary under every (threads, OMP_WAIT_POLICY, machine load) case and
// prints the ratios against one thread. This program only measures one case.
//
// usage: wavetrain_bench_conv_threads THREADS [ITERATIONS]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s THREADS [ITERATIONS]\n", argv[0]);
    return 2;
  }
  const int threads = std::atoi(argv[1]);
  const int iterations = argc > 2 ? std::atoi(argv[2]) : 20;
  if (threads < 1 || iterations < 1) {
    std::fprintf(stderr, "THREADS and ITERATIONS must be positive integers\n");
    return 2;
  }
  at::set_num_threads(threads);
  at::manual_seed(0);

  at::Tensor input = at::randn({16, 16, 8192});
  at::Tensor weight = at::randn({16, 16, 3}).mul_(0.1).requires_grad_(true);
  at::Tensor bias = at::zeros({16}).requires_grad_(true);

  auto step = [&] {
    at::Tensor out = at::conv1d(input, weight, bias, /*stride=*/at::IntArrayRef{1},
                                  /*padding=*/at::IntArrayRef{0}, /*dilation=*/at::IntArrayRef{8});
    out.square().mean().backward();
    weight.mutable_grad().zero_();
    bias.mutable_grad().zero_();
  };
  for (int i = 0; i < 3; ++i) step();  // warm-up: thread pool start, allocator

  std::vector<double> ms;
  for (int i = 0; i < iterations; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    step();
    auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const char* policy = std::getenv("OMP_WAIT_POLICY");
  std::printf("threads=%d omp_wait_policy=%s median_ms=%.3f min_ms=%.3f max_ms=%.3f\n", at::get_num_threads(),
              policy ? policy : "(unset)", ms[ms.size() / 2], ms.front(), ms.back());
  return 0;
}
