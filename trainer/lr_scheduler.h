// Learning-rate schedules as closed-form functions of a count (epochs or optimizer steps, per
// `interval`), matching torch.optim.lr_scheduler:
//
//   constant     lr = base
//   exponential  lr = base * gamma^t                                   (ExponentialLR)
//   step         lr = base * gamma^floor(t / step_size)                (StepLR)
//   cosine       t < warmup: base * (f + (1 - f) * t / warmup)         (LinearLR, start_factor f)
//                after:      min_lr + (base - min_lr) * (1 + cos(pi * (t - warmup) / (total - warmup))) / 2
//                            (CosineAnnealingLR after SequentialLR's switch); from t = total on it
//                            stays at min_lr instead of rising again as PyTorch's periodic cosine does.
//   eden         icefall's Eden (per step; b = steps, e = the 0-based epoch under way):
//                base * ((b^2 + lr_batches^2) / lr_batches^2)^-0.25 * ((e^2 + lr_epochs^2) / lr_epochs^2)^-0.25
//                     * (b < warmup ? f + (1 - f) * b / warmup : 1)            (f = warmup_start_factor)
//                icefall's recipes use lr_batches 7500, lr_epochs 3.5 (LibriSpeech), warmup 500, f 0.5.
//
// A closed form means resuming needs only the count (and for eden the epoch), which the checkpoint
// keeps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torch::optim {
class Optimizer;
}

namespace wavetrain {

struct LrScheduleOptions {
  std::string name = "constant";   // constant, exponential, step, cosine, eden
  std::string interval = "epoch";  // what the count counts: epoch or step
  double gamma = 1.0;              // exponential, step
  int64_t step_size = 1;           // step
  int64_t warmup = 0;              // cosine: counts of linear warmup
  double warmup_start_factor = 1.0 / 3.0;
  int64_t total = 0;               // cosine: counts in the whole schedule, warmup included
  double min_lr = 0.0;             // cosine
  double lr_batches = 7500.0;      // eden
  double lr_epochs = 3.5;          // eden

  // Throws std::invalid_argument naming the option ("scheduler.step_size must be >= 1").
  void validate() const;
};

class LrScheduler {
 public:
  // `base_lrs`: the learning rate of each parameter group at count 0.
  LrScheduler(LrScheduleOptions options, std::vector<double> base_lrs);

  double lr_at(int64_t count, size_t group = 0) const;
  // eden's epoch term: the 0-based epoch under way (the loop sets it at each epoch's start and on
  // resume, before set_count). Other schedules ignore it.
  void set_epoch(torch::optim::Optimizer& optimizer, int64_t epoch);
  int64_t count() const { return count_; }
  const LrScheduleOptions& options() const { return options_; }

  // Sets every group's learning rate for `count` (resume), or advances by one count.
  void set_count(torch::optim::Optimizer& optimizer, int64_t count);
  void step(torch::optim::Optimizer& optimizer) { set_count(optimizer, count_ + 1); }

 private:
  double factor(int64_t t, double base) const;

  LrScheduleOptions options_;
  std::vector<double> base_lrs_;
  int64_t count_ = 0;
  int64_t epoch_ = 0;
};

}  // namespace wavetrain
