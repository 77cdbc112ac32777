// Adds the experiments' training tasks (amp, ...) to the trainer's task registry. The wavetrain
// binary calls this at start: a registration object alone in a static library would be dropped by
// the linker.
#pragma once

namespace wavetrain::experiments {

void register_tasks();

}  // namespace wavetrain::experiments
