// Validation metrics over a split (trainer.h): what the loop validates with, and `wavetrain eval`.
#include <torch/nn/module.h>

#include <algorithm>

#include "trainer/trainer.h"

namespace wavetrain {

Metrics evaluate(Task& task, Split split, const at::Device& device, const AmpPolicy& amp, int64_t batch_size,
                 int64_t max_batches) {
  task.model().eval();
  at::NoGradGuard no_grad;
  const int64_t n = task.size(split);
  Metrics sums;
  std::vector<double> weights;  // per metric: the summed weights of its batches (task.metric_weight)
  for (int64_t b = 0; (max_batches < 0 || b < max_batches) && b * batch_size < n; ++b) {
    std::vector<int64_t> indices;
    for (int64_t i = b * batch_size; i < std::min(n, (b + 1) * batch_size); ++i) indices.push_back(i);
    Batch batch = task.make_batch(split, indices, device);
    batch.indices = indices;
    at::Tensor prediction;
    {
      AutocastGuard autocast(amp);
      prediction = task.forward(batch);
    }
    const Metrics m = task.validation_metrics(prediction, batch);
    if (sums.empty())
      for (const auto& [k, v] : m) sums.emplace_back(k, 0.0);
    weights.resize(sums.size(), 0.0);
    for (size_t i = 0; i < m.size() && i < sums.size(); ++i) {
      const double w = task.metric_weight(m[i].first, batch);
      sums[i].second += m[i].second * w;
      weights[i] += w;
    }
  }
  for (size_t i = 0; i < sums.size(); ++i) sums[i].second /= weights[i] > 0 ? weights[i] : 1.0;
  return sums;
}

}  // namespace wavetrain
