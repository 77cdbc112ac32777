// What makes this library a wavetrain plugin: it registers its task and callback, with the config
// keys each reads, when wavetrain loads it (trainer/plugin.h).
#include "trainer/plugin.h"

#include "sine_task.h"
#include "trainer/callback.h"
#include "weight_norm_callback.h"

namespace {

void register_custom_task() {
  // Each key listed by itself (not "sine_fit.*"), so that a misspelt one is refused before a run starts.
  static const wavetrain::TaskRegistration task(
      "sine_fit", custom_task::make_sine_task,
      {"sine_fit.hidden", "sine_fit.train_size", "sine_fit.val_size", "sine_fit.noise", "sine_fit.head_lr"});
  static const wavetrain::CallbackRegistration callback("weight_norm", custom_task::make_weight_norm_callback,
                                                        {"weight_norm.warn_above"});
}

}  // namespace

WAVETRAIN_PLUGIN(register_custom_task);
