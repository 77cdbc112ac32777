// One training step of the `tiny` ASR transducer (experiments/asr/): Conformer forward, pruned
// RNN-T loss (transducer_loss.h), backward and Adam, on a batch of 16 utterances of 2.55-3.0 s
// (the same batch as bench/asr_step_baseline.py). Prints "median_ms parameters peak_rss_mb" and the
// medians of the parts: encoder forward, loss forward, backward, optimizer step (ms).
// usage: wavetrain_bench_asr [THREADS] [REPEATS]
#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <torch/optim/adam.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "experiments/asr/transducer.h"
#include "experiments/asr/transducer_loss.h"

namespace asr = wavetrain::experiments::asr;

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  at::set_num_threads(threads);
  at::manual_seed(0);
  asr::TransducerConfig c = asr::transducer_preset("tiny");
  c.vocab_size = 500;
  asr::Transducer model(c);
  model->train();
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3));

  const int64_t B = 16, V = c.vocab_size;
  at::Tensor lengths = at::empty({B}, at::kLong), counts = at::empty({B}, at::kLong);
  for (int64_t i = 0; i < B; ++i) {
    lengths[i] = 300 - 3 * i;
    counts[i] = 12 + (7 * i) % 13;
  }
  const int64_t S = counts.max().item<int64_t>();
  at::Tensor tokens = at::empty({B, S}, at::kLong);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < S; ++j) tokens[i][j] = 3 + (31 * i + 17 * j) % (V - 3);
  const at::Tensor feats = at::randn({B, 300, 80});
  asr::TransducerLossOptions options;

  // The step, and its parts: encoder forward, loss forward (predictor, joiner, the losses), backward,
  // optimizer step.
  std::vector<double> ms, parts[4];
  const auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  for (int i = 0; i < repeats + 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    adam.zero_grad();
    auto t = std::chrono::steady_clock::now();
    const auto [enc, frames] = model->encoder->forward(feats, lengths);
    const double encode = since(t);
    t = std::chrono::steady_clock::now();
    const asr::TransducerLoss l = asr::transducer_loss(*model, enc, frames, tokens, counts, options);
    const at::Tensor loss = (0.5 * l.simple + l.pruned) / l.frames;
    const double loss_ms = since(t);
    t = std::chrono::steady_clock::now();
    loss.backward();
    const double backward = since(t);
    t = std::chrono::steady_clock::now();
    adam.step();
    const double step = since(t);
    if (i >= 2) {
      ms.push_back(since(t0));
      for (const auto& [k, v] : {std::pair<int, double>{0, encode}, {1, loss_ms}, {2, backward}, {3, step}}) parts[k].push_back(v);
    }
  }
  const auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  std::printf("%.1f %lld %.0f %.1f %.1f %.1f %.1f\n", median(ms), static_cast<long long>(model->parameter_count()), r.ru_maxrss / 1024.0,
              median(parts[0]), median(parts[1]), median(parts[2]), median(parts[3]));
}
