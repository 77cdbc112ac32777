// Checkpoints: the full training state in one file that resumes a run exactly.
//
// The file is a torch.save archive (Python can open it with torch.load(weights_only=True): it holds
// only dicts, lists, numbers, strings and tensors) with one extra record, `wavetrain_checksum`:
// CRC-32C over data.pkl and every storage record, verified on load. It is written to a temporary
// file, flushed and renamed, so a crash never leaves a half-written checkpoint under the real name.
//
//   format, format_version            "wavetrain-checkpoint", 1
//   wavetrain_version, torch_version
//   model                             OrderedDict name -> tensor (Python's state_dict order)
//   optimizer                         {type, param_groups: [{options..., params: [i...]}], state: {i: {...}}}
//   scheduler                         whatever the scheduler saves (None without one)
//   scaler                            {scale, growth_tracker} or None
//   epoch, global_step, batch_in_epoch
//   rng                               {cpu: uint8 tensor, cuda: [uint8 tensor per device]}
//   config                            the composed config as YAML
//   metrics                           {name: number}
//   train_seconds                     the run's training time over all its sessions (trainer.max_time)
//   early_stopping                    {monitor, best, wait, stopped} or None (trainer.early_stopping)
//   callbacks                         {name: state} of the callbacks that keep state (callback.h);
//                                     absent when none does
//
// train_seconds and early_stopping came later within format 1: a file without them loads as 0 s
// trained and no early stopping state.
//
// A truncated, corrupted, empty or foreign file gives an error naming the file and what is wrong.
#pragma once

#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "trainer/grad_scaler.h"
#include "trainer/serialization/pickle.h"
#include "trainer/serialization/torch_file.h"

namespace torch::optim {
class Optimizer;
}

namespace wavetrain {

struct RngState {
  at::Tensor cpu;                // the default CPU generator's state
  std::vector<at::Tensor> cuda;  // one per visible CUDA device (empty without CUDA)
};
RngState capture_rng();
void restore_rng(const RngState& state);

// trainer.early_stopping's progress, so that a resumed run stops where an uninterrupted one would.
struct EarlyStoppingState {
  std::string monitor;  // the metric it watched; empty: early stopping was off
  double best = NAN;    // the best value so far (NaN before the first validation)
  int64_t wait = 0;     // validations since the last improvement
  std::string stopped;  // why it stopped the run: "patience" or "nonfinite"; empty while it goes on
};

struct TrainingState {
  serialization::StateDict model;
  serialization::Value optimizer;  // optimizer_state(); None if not saved
  serialization::Value scheduler;
  std::optional<GradScalerState> scaler;
  int64_t epoch = 0;
  int64_t global_step = 0;
  int64_t batch_in_epoch = 0;  // batches of `epoch` already consumed (resume mid-epoch)
  RngState rng;
  std::string config_yaml;
  std::vector<std::pair<std::string, double>> metrics;
  double train_seconds = 0;  // over all the run's sessions so far
  EarlyStoppingState early_stopping;
  std::vector<std::pair<std::string, serialization::Value>> callbacks;  // each callback's own state, by name
  // Filled by Checkpoint::load.
  std::string wavetrain_version;
  std::string torch_version;
};

// A task's own optimizer (Task::make_optimizer) keeps its state in checkpoints by implementing
// this: the Value (dicts, lists, numbers, strings, tensors) goes under `optimizer`, with the
// optimizer's `type` name first, and comes back on resume.
class CheckpointedOptimizer {
 public:
  virtual ~CheckpointedOptimizer() = default;
  virtual std::string type() const = 0;  // saved as optimizer.type; a resume refuses another type
  virtual serialization::Value state_value() = 0;
  // `source` names the checkpoint in errors.
  virtual void load_state_value(const serialization::Value& state, const std::string& source) = 0;
};

// Adam, AdamW and SGD state as a Value (parameters are numbered in param-group order, like
// Python's optimizer.state_dict()); load_optimizer_state() checks the counts and shapes match.
serialization::Value optimizer_state(torch::optim::Optimizer& optimizer);
void load_optimizer_state(torch::optim::Optimizer& optimizer, const serialization::Value& state,
                          const std::string& source);

class Checkpoint {
 public:
  static void save(const std::string& path, const TrainingState& state);
  static TrainingState load(const std::string& path);
  // Human-readable contents for `wavetrain ckpt info`: kind of file, versions, step, metrics, and
  // every tensor with its dtype and shape. Also works on a plain state dict.
  static std::string info(const std::string& path);
  // What a user names a trained model by: a run directory means its checkpoints/best.ckpt, else
  // checkpoints/last.ckpt; anything else is the checkpoint file itself. Throws std::runtime_error
  // naming the directory when it has neither.
  static std::string of_target(const std::string& target);
};

}  // namespace wavetrain
