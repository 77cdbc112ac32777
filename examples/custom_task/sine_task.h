// sine_fit: a small regression task: learn y = sin(x) on [-pi, pi] with a two-layer perceptron.
// Keys: sine_fit.{hidden, train_size, val_size, noise, head_lr}.
#pragma once

#include <memory>

#include "trainer/task.h"

namespace custom_task {

std::unique_ptr<wavetrain::Task> make_sine_task(const wavetrain::config::Config& cfg);

}  // namespace custom_task
