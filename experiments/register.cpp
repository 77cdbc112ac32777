// Registers the experiments' tasks (register.h).
#include "experiments/register.h"

#include "experiments/amp/amp_task.h"
#include "experiments/asr/asr_task.h"

namespace wavetrain::experiments {

void register_tasks() {
  static const TaskRegistration amp("amp", amp::make_amp_task);
  static const TaskRegistration asr("asr", asr::make_asr_task);
}

}  // namespace wavetrain::experiments
