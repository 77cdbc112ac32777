// The "amp" training task (amp_task.cpp) and the model a run's config describes.
#pragma once

#include <memory>

#include "experiments/amp/amp_model.h"
#include "trainer/task.h"

namespace wavetrain::experiments::amp {

std::unique_ptr<Task> make_amp_task(const config::Config& cfg);
// The (untrained) model of model.architecture and model.preset, e.g. to load a checkpoint into.
AmpModel amp_model_from_config(const config::Config& cfg);

}  // namespace wavetrain::experiments::amp
