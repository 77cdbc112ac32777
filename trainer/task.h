// Tasks: what a run trains (the role of a LightningModule). A task builds its model and data from
// the config; the trainer owns everything around them (device, precision, optimizer, schedule,
// loop, checkpoints, logs). The forward pass and the loss are separate calls so that the trainer
// can run the forward under autocast and the loss in fp32 outside it.
//
// Tasks are chosen by name (`task: toy_regression` in the config). Built-in tasks are listed in
// task.cpp; others register with a TaskRegistration object: the experiments' from the binary, a
// user's from a plugin (plugin.h) while it loads.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace torch::nn {
class Module;
}
namespace torch::optim {
class Optimizer;
}

namespace wavetrain {

using Metrics = std::vector<std::pair<std::string, double>>;

struct Batch {
  at::Tensor input;
  at::Tensor target;
  int64_t size = 0;  // items in the batch (for the progress line's throughput)
  // Variable-length items (speech): each item's length along the padded time axis of input and
  // target (int64 [size]); undefined for fixed-length tasks.
  at::Tensor input_lengths{}, target_lengths{};
  int64_t step = 0;  // the optimizer step this batch trains; set by the trainer (warm-ups read it)
  std::vector<int64_t> indices{};  // the split's items in the batch, in order; set by the trainer
};

// The item order of a training epoch from (seed, epoch) alone: a seeded permutation.
std::vector<int64_t> shuffled_order(int64_t size, int64_t seed, int64_t epoch);

// How the progress line counts the training data a task goes through: each item is `per_item`
// `unit`s. Tasks whose items are not the unit their users count in say so (an amp task's items are
// audio windows; "samples" would read as audio samples).
struct ThroughputUnit {
  std::string unit = "items";
  double per_item = 1.0;
};

enum class Split { Train, Validation };

// A group of parameters the optimizer treats alike (Task::param_groups): its own learning rate and
// weight decay, when set, replace optimizer.lr / optimizer.weight_decay; the schedule scales each
// group's own rate. `name` labels its learning rate in the logs (`lr-<name>`, callbacks/lr_monitor).
struct ParamGroup {
  std::string name;
  std::vector<at::Tensor> params;
  std::optional<double> lr;
  std::optional<double> weight_decay;
};

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
  // The order of the training items in `epoch`, which the trainer cuts into consecutive batches of
  // batch_size (on several ranks, global batch b is ranks' consecutive slices). A pure function of
  // its arguments, so that a resumed run sees the same batches. shuffled_order by default; a task
  // may group items of similar length into the same batch. Called once at the start of every epoch
  // (a resumed one too), before that epoch's make_batch calls: a task may note the epoch (for
  // augmentation drawn from (seed, epoch, item)).
  virtual std::vector<int64_t> train_order(int64_t epoch, int64_t seed, int64_t batch_size);
  // How much a batch's value of validation metric `name` counts in the average over the split:
  // its items by default; a word error rate counts by reference words, so that the average is the
  // split's errors over its words.
  virtual double metric_weight(const std::string& name, const Batch& batch) const;
  // Whether make_batch of Split::Train may run on a second thread while the previous batch trains
  // (the task's make_batch then must not touch the model or other state training changes).
  virtual bool prefetch_batches() const { return false; }
  // Whether the trainer may cut a training batch into parts (trainer.cpu_batch_parts) and run
  // forward and loss on them from several threads at once: the task's forward, loss and model must
  // then be safe to call concurrently, and random operators in the model must draw their seeds from
  // next_random_seed() (trainer/parallel_parts.h), not from ATen's default generator.
  virtual bool parallel_batch_parts() const { return false; }
  // Values the task worked out from its data that a model loaded from a checkpoint needs without
  // that data (the amp task's sample rate, read from the capture store): set in `recorded`, the
  // config each checkpoint of the run records. Export, inference and evaluation then need only the
  // checkpoint. Nothing by default.
  virtual void add_to_recorded_config(config::Node& recorded) const { (void)recorded; }
  // The optimizer's parameter groups: by default one, named "model", of all the model's parameters. A task that trains parts at different rates (a pretrained encoder, a
  // new head) returns several; resuming checks the groups' sizes against the checkpoint.
  virtual std::vector<ParamGroup> param_groups();
  // The task's own optimizer over `groups`, or nullptr (the default) for optimizer.name's. Its
  // state goes into checkpoints when it implements CheckpointedOptimizer (checkpoint.h) or is one
  // of torch's Adam, AdamW or SGD.
  virtual std::unique_ptr<torch::optim::Optimizer> make_optimizer(const std::vector<ParamGroup>& groups,
                                                                  const config::Config& cfg);
  // Metrics the task gathered over training epoch `epoch` (0-based), logged (metrics.csv,
  // TensorBoard) at the epoch's end, after its validation. None by default.
  virtual Metrics train_epoch_metrics(int64_t epoch) {
    (void)epoch;
    return {};
  }
};

using TaskFactory = std::function<std::unique_ptr<Task>(const config::Config&)>;

// Registers a task under `name`. `config_keys` are the keys the task reads that no built-in config
// file sets ("amp.sample_rate", or "nam.*" for a whole section): with the built-in files' keys they
// are what a config may hold (config/known_keys.h). A name that is already taken is not replaced:
// the clash is recorded, and the plugin loader reports it (registration_clashes()).
struct TaskRegistration {
  TaskRegistration(const std::string& name, TaskFactory factory, std::vector<std::string> config_keys = {});
};

// Names registered twice (tasks and callbacks), oldest first; taken (emptied) by the caller.
std::vector<std::string> take_registration_clashes();
void note_registration_clash(const std::string& what);

// The config_keys a task was registered with (none for an unknown name).
std::vector<std::string> task_config_keys(const std::string& name);

// The memory this process may still allocate, in bytes: the least of the system's MemAvailable, the
// room left under its cgroup's memory.max (a Slurm job's limit) and RLIMIT_AS (`ulimit -v`).
double available_memory_bytes();

// For tasks that allocate what the config sizes, before they allocate: throws config::ConfigError
// when `bytes` (a double: sizes from a config can overflow 64 bits) exceed `available`:
//   toy_regression.train_size=1000000000 needs about 37.3 GiB of memory (40 bytes per item); 21.6 GiB is available
// `what` is the first part ("toy_regression.train_size=1000000000"), `detail` the parenthesis.
void check_fits_in_memory(const std::string& what, double bytes, const std::string& detail,
                          double available = available_memory_bytes());

// Throws config::ConfigError naming the known tasks when `name` is not one of them.
std::unique_ptr<Task> make_task(const std::string& name, const config::Config& cfg);
std::vector<std::string> task_names();

}  // namespace wavetrain
