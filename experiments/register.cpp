// Registers the experiments' tasks (register.h).
#include "experiments/register.h"

#include "experiments/amp/amp_task.h"
#include "experiments/asr/asr_task.h"

namespace wavetrain::experiments {

void register_tasks() {
  // Besides the keys of configs/: what `import nam` records (the model's file, config and metadata)
  // and the loss terms and rate that configs/experiment/amp.yaml leaves at their defaults.
  static const TaskRegistration amp("amp", amp::make_amp_task,
                                    {"amp.sample_rate", "amp.loss.*", "model.nam_config", "nam.*"});
  static const TaskRegistration asr("asr", asr::make_asr_task, {"decoding.method", "decoding.beam"});
}

}  // namespace wavetrain::experiments
