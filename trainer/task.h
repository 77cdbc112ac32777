// Tasks: what a run trains (the role of a LightningModule). A task builds its model and data from
// the config; the trainer owns everything around them (device, precision, optimizer, schedule,
// loop, checkpoints, logs). The forward pass and the loss are separate calls so that the trainer
// can run the forward under autocast and the loss in fp32 outside it.
//
// Tasks are chosen by name (`task: toy_regression` in the config). Built-in tasks are listed in
// task.cpp; others register with a TaskRegistration object in code the binary references.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace torch::nn {
class Module;
}

namespace wavetrain {

using Metrics = std::vector<std::pair<std::string, double>>;

struct Batch {
  at::Tensor input;
  at::Tensor target;
  int64_t size = 0;  // items in the batch (for the progress line's throughput)
};

// How the progress line counts the training data a task goes through: each item is `per_item`
// `unit`s. Tasks whose items are not the unit their users count in say so (an amp task's items are
// audio windows; "samples" would read as audio samples).
struct ThroughputUnit {
  std::string unit = "items";
  double per_item = 1.0;
};

enum class Split { Train, Validation };

class Task {
 public:
  virtual ~Task() = default;

  virtual torch::nn::Module& model() = 0;
  virtual int64_t size(Split split) const = 0;  // items in the split
  // The items `indices` of `split` as one batch on `device`. Feature work happens on the CPU;
  // only the finished tensors move.
  virtual Batch make_batch(Split split, const std::vector<int64_t>& indices, const at::Device& device) = 0;
  // The prediction; called under autocast when the run's precision asks for it.
  virtual at::Tensor forward(const Batch& batch) = 0;
  // The training loss of a prediction (computed in fp32, outside autocast) and what to log with it.
  virtual at::Tensor loss(const at::Tensor& prediction, const Batch& batch, Metrics& logged) = 0;
  // Validation metrics of one batch; the trainer averages them over the split, weighted by size.
  virtual Metrics validation_metrics(const at::Tensor& prediction, const Batch& batch) = 0;
  // The progress line's throughput unit; items by default.
  virtual ThroughputUnit throughput_unit() const { return {}; }
};

using TaskFactory = std::function<std::unique_ptr<Task>(const config::Config&)>;

// Registers a task under `name` when the program starts.
struct TaskRegistration {
  TaskRegistration(const std::string& name, TaskFactory factory);
};

// Throws config::ConfigError naming the known tasks when `name` is not one of them.
std::unique_ptr<Task> make_task(const std::string& name, const config::Config& cfg);
std::vector<std::string> task_names();

}  // namespace wavetrain
