// weight_norm: a callback that logs the L2 norm of the model's weights at every logged step
// (`weight_norm` in metrics.csv and TensorBoard), and says so in the run's log when the norm first
// exceeds weight_norm.warn_above (default 100). The largest norm so far is its state in every
// checkpoint (callbacks/weight_norm), so a resumed run warns once, as an uninterrupted one would.
#pragma once

#include <memory>

#include "trainer/callback.h"

namespace custom_task {

std::unique_ptr<wavetrain::Callback> make_weight_norm_callback(const wavetrain::config::Config& cfg);

}  // namespace custom_task
