// Registers the experiments' tasks (register.h).
#include "experiments/register.h"

#include "experiments/amp/amp_task.h"

namespace wavetrain::experiments {

void register_tasks() {
  static const TaskRegistration amp("amp", amp::make_amp_task);
}

}  // namespace wavetrain::experiments
