// One training step of the `tiny` ASR transducer (experiments/asr/): Conformer forward, pruned
// RNN-T loss (transducer_loss.h), backward and Adam (the trainer's, trainer/fused_adam.h), on a batch of 16 utterances of 2.55-3.0 s
// (the same batch as bench/asr_step_baseline.py), in two ways:
//   - one part: the batch as one (forward, loss, backward on ATen's intra-op threads);
//   - in parts: the trainer's trainer.cpu_batch_parts path (trainer/parallel_parts.h: the batch cut
//     into PARTS parts trained at once, one per thread), through the same train_parts the trainer
//     calls.
// Prints "parts_ms one_part_ms parameters peak_rss_mb" and the one-part step's parts: encoder
// forward, loss forward, backward, optimizer step (medians, ms).
// usage: wavetrain_bench_asr [THREADS] [REPEATS] [VOCAB] [PARTS]   (PARTS defaults to THREADS)
#include <ATen/Parallel.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <vector>

#include "bench/timing.h"
#include "experiments/asr/transducer.h"
#include "experiments/asr/transducer_loss.h"
#include "trainer/fused_adam.h"
#include "trainer/parallel_parts.h"
#include "trainer/threads.h"

namespace asr = wavetrain::experiments::asr;

namespace {

// The ASR task's forward and training loss (experiments/asr/asr_task.cpp) on ready-made batches,
// at the final loss scales (simple 0.5, pruned 1).
class StepTask : public wavetrain::Task {
 public:
  explicit StepTask(asr::Transducer model) : model_(std::move(model)) {}
  torch::nn::Module& model() override { return *model_; }
  int64_t size(wavetrain::Split) const override { return 0; }
  wavetrain::Batch make_batch(wavetrain::Split, const std::vector<int64_t>&, const at::Device&) override {
    throw std::logic_error("the benchmark makes its batches itself");
  }
  at::Tensor forward(const wavetrain::Batch& batch) override { return model_->encoder->forward(batch.input, batch.input_lengths).first; }
  at::Tensor loss(const at::Tensor& prediction, const wavetrain::Batch& batch, wavetrain::Metrics&) override {
    const asr::TransducerLoss l = asr::transducer_loss(*model_, prediction, asr::subsampled_frames(batch.input_lengths), batch.target,
                                                       batch.target_lengths, options_);
    return (0.5 * l.simple + l.pruned) / l.frames;
  }
  wavetrain::Metrics validation_metrics(const at::Tensor&, const wavetrain::Batch&) override { return {}; }
  bool parallel_batch_parts() const override { return true; }

 private:
  asr::Transducer model_;
  asr::TransducerLossOptions options_;
};

using wavetrain::bench::median;
using wavetrain::bench::since;

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  const int64_t vocab = argc > 3 ? std::atoll(argv[3]) : 40;
  const int64_t parts = argc > 4 ? std::atoll(argv[4]) : threads;
  wavetrain::configure_threads(threads);  // as the wavetrain binary does (trainer/threads.h)
  at::manual_seed(0);
  asr::TransducerConfig c = asr::transducer_preset("tiny");
  c.vocab_size = vocab;
  asr::Transducer model(c);
  model->train();
  StepTask task(model);
  wavetrain::FusedAdam adam(model->parameters(), torch::optim::AdamOptions(1e-3));  // the trainer's Adam

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
  wavetrain::Batch whole;
  whole.input = feats;
  whole.input_lengths = lengths;
  whole.target = tokens;
  whole.target_lengths = counts;
  whole.size = B;
  // The parts, as the trainer cuts a batch: consecutive items.
  std::vector<wavetrain::Batch> cut;
  std::vector<int64_t> all(B);
  for (int64_t i = 0; i < B; ++i) all[static_cast<size_t>(i)] = i;
  for (const std::vector<int64_t>& p : wavetrain::cut_into_parts(all, parts)) {
    wavetrain::Batch b;
    const int64_t first = p.front(), n = static_cast<int64_t>(p.size());
    b.input_lengths = lengths.narrow(0, first, n);
    b.target_lengths = counts.narrow(0, first, n);
    b.input = feats.narrow(0, first, n).narrow(1, 0, b.input_lengths.max().item<int64_t>()).contiguous();
    b.target = tokens.narrow(0, first, n).narrow(1, 0, b.target_lengths.max().item<int64_t>()).contiguous();
    b.size = n;
    b.indices = p;
    cut.push_back(b);
  }
  std::vector<at::Tensor> parameters = model->parameters();
  const wavetrain::AmpPolicy fp32;
  wavetrain::GradScalerOptions no_scaling;
  no_scaling.enabled = false;
  wavetrain::GradScaler scaler(no_scaling);

  // One part, and its parts: encoder forward, loss forward (predictor, joiner, the losses),
  // backward, optimizer step.
  std::vector<double> one_part, in_parts, split[4];
  for (int i = 0; i < repeats + 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    adam.zero_grad();
    auto t = std::chrono::steady_clock::now();
    const at::Tensor enc = task.forward(whole);
    const double encode = since(t);
    t = std::chrono::steady_clock::now();
    wavetrain::Metrics logged;
    const at::Tensor loss = task.loss(enc, whole, logged);
    const double loss_ms = since(t);
    t = std::chrono::steady_clock::now();
    loss.backward();
    const double backward = since(t);
    t = std::chrono::steady_clock::now();
    adam.step();
    const double step = since(t);
    if (i >= 2) {
      one_part.push_back(since(t0));
      for (const auto& [k, v] : {std::pair<int, double>{0, encode}, {1, loss_ms}, {2, backward}, {3, step}}) split[k].push_back(v);
    }
  }
  for (int i = 0; i < repeats + 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    adam.zero_grad();
    const wavetrain::PartsResult r = wavetrain::train_parts(task, cut, parameters, fp32, scaler, 1.0 / static_cast<double>(cut.size()),
                                                            wavetrain::next_random_seed());
    if (!r.finite) throw std::runtime_error("non-finite loss in the benchmark");
    adam.step();
    if (i >= 2) in_parts.push_back(since(t0));
  }
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  std::printf("%.1f %.1f %lld %.0f %.1f %.1f %.1f %.1f\n", median(in_parts), median(one_part),
              static_cast<long long>(model->parameter_count()), r.ru_maxrss / 1024.0, median(split[0]), median(split[1]), median(split[2]),
              median(split[3]));
}
