// Learning-rate schedules; see lr_scheduler.h for the formulas.
#include "trainer/lr_scheduler.h"

#include <torch/optim/optimizer.h>

#include <cmath>
#include <stdexcept>

namespace wavetrain {

void LrScheduleOptions::validate() const {
  auto fail = [](const std::string& what) { throw std::invalid_argument("scheduler." + what); };
  if (name != "constant" && name != "exponential" && name != "step" && name != "cosine" && name != "eden")
    fail("name='" + name + "' is not a schedule: expected constant, exponential, step, cosine or eden");
  if (interval != "epoch" && interval != "step") fail("interval='" + interval + "' must be epoch or step");
  if (!(gamma > 0.0)) fail("gamma must be > 0");
  if (step_size < 1) fail("step_size must be >= 1");
  if (name == "cosine") {
    if (warmup < 0) fail("warmup must be >= 0");
    if (total <= warmup) fail("total must be greater than warmup (" + std::to_string(warmup) + ")");
    if (!(warmup_start_factor > 0.0 && warmup_start_factor <= 1.0)) fail("warmup_start_factor must be in (0, 1]");
    if (min_lr < 0.0) fail("min_lr must be >= 0");
  }
  if (name == "eden") {
    if (interval != "step") fail("interval must be step for eden (it counts steps and reads the epoch itself)");
    if (!(lr_batches > 0.0) || !(lr_epochs > 0.0)) fail("lr_batches and lr_epochs must be > 0 for eden");
    if (warmup < 0) fail("warmup must be >= 0");
    if (!(warmup_start_factor > 0.0 && warmup_start_factor <= 1.0)) fail("warmup_start_factor must be in (0, 1]");
  }
}

LrScheduler::LrScheduler(LrScheduleOptions options, std::vector<double> base_lrs)
    : options_(std::move(options)), base_lrs_(std::move(base_lrs)) {
  options_.validate();
}

double LrScheduler::factor(int64_t t, double base) const {
  const LrScheduleOptions& o = options_;
  if (o.name == "exponential") return std::pow(o.gamma, static_cast<double>(t));
  if (o.name == "step") return std::pow(o.gamma, static_cast<double>(t / o.step_size));
  if (o.name == "cosine") {
    if (t < o.warmup)
      return o.warmup_start_factor + (1.0 - o.warmup_start_factor) * static_cast<double>(t) / static_cast<double>(o.warmup);
    const double span = static_cast<double>(o.total - o.warmup);
    const double progress = std::min(1.0, static_cast<double>(t - o.warmup) / span);
    const double lr = o.min_lr + (base - o.min_lr) * (1.0 + std::cos(M_PI * progress)) / 2.0;
    return base > 0 ? lr / base : 0.0;
  }
  if (o.name == "eden") {
    const double b = static_cast<double>(t), e = static_cast<double>(epoch_);
    const double warm = t < o.warmup ? o.warmup_start_factor + (1.0 - o.warmup_start_factor) * b / static_cast<double>(o.warmup) : 1.0;
    return std::pow((b * b + o.lr_batches * o.lr_batches) / (o.lr_batches * o.lr_batches), -0.25) *
           std::pow((e * e + o.lr_epochs * o.lr_epochs) / (o.lr_epochs * o.lr_epochs), -0.25) * warm;
  }
  return 1.0;
}

void LrScheduler::set_epoch(torch::optim::Optimizer& optimizer, int64_t epoch) {
  epoch_ = epoch;
  if (options_.name == "eden") set_count(optimizer, count_);
}

double LrScheduler::lr_at(int64_t count, size_t group) const {
  const double base = base_lrs_.at(group);
  return base * factor(count, base);
}

void LrScheduler::set_count(torch::optim::Optimizer& optimizer, int64_t count) {
  count_ = count;
  auto& groups = optimizer.param_groups();
  if (groups.size() != base_lrs_.size())
    throw std::logic_error("LrScheduler: the optimizer has " + std::to_string(groups.size()) +
                           " parameter groups, the schedule " + std::to_string(base_lrs_.size()));
  for (size_t g = 0; g < groups.size(); ++g) groups[g].options().set_lr(lr_at(count, g));
}

}  // namespace wavetrain
