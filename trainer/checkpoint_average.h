// Averaging the weights of a run's last checkpoints, as icefall decodes (`--epoch E --avg N`): the
// weights at the ends of the last N epochs, averaged, usually decode better than any one of them,
// since the final epochs of a decaying learning rate wander around a minimum the average sits nearer.
//
// The checkpoints are a run's per-epoch ones (checkpoints/epoch=E-step=S.ckpt, written with
// trainer.checkpoint.every_n_epochs=1); `wavetrain eval RUN --avg N` and `wavetrain transcribe RUN
// --avg N` use them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/serialization/torch_file.h"

namespace wavetrain {

// The `count` newest epoch=E-step=S.ckpt files in `dir` whose step is at most `last_step`, oldest
// first. Throws std::runtime_error when fewer exist, naming the directory, the step, what it has
// and the setting that writes them.
std::vector<std::string> epoch_checkpoints_up_to(const std::string& dir, int64_t last_step, int64_t count);

// The element-wise mean of state dicts with the same names and shapes, in the first one's order:
// floating-point tensors averaged in float64 and returned in their own dtype, other tensors (counts,
// flags) taken from the last. Throws std::runtime_error naming the file and the tensor that differs
// (`sources` names each state dict).
serialization::StateDict average_state_dicts(const std::vector<serialization::StateDict>& states,
                                             const std::vector<std::string>& sources);

// The model weights of the `count` epoch checkpoints up to `last_step` in `dir`, averaged; `used`
// receives their paths.
serialization::StateDict averaged_model(const std::string& dir, int64_t last_step, int64_t count, std::vector<std::string>* used = nullptr);

}  // namespace wavetrain
