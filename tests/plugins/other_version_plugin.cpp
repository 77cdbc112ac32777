// A test plugin as a build against another wavetrain would be: its wavetrain_plugin_info says
// version 0.0.1 (written out by hand here; WAVETRAIN_PLUGIN writes the real one).
#include "trainer/plugin.h"

namespace {
void register_nothing() {}
}  // namespace

extern "C" __attribute__((visibility("default"))) const wavetrain::PluginInfo wavetrain_plugin_info{
    wavetrain::kPluginInterface, "0.0.1", TORCH_VERSION, _GLIBCXX_USE_CXX11_ABI, register_nothing};
