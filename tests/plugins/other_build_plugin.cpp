// A test plugin linked, besides this build's wavetrain, against a library that has the name of
// another build's (tests/CMakeLists.txt: once libtorch_cpu.so.9.9, once libwavetrain_trainer.so.0.0.9).
// Its wavetrain_plugin_info is right: only its linked libraries give it away.
#include "trainer/plugin.h"

extern "C" int wavetrain_test_fake_library();

namespace {
void register_nothing() { wavetrain_test_fake_library(); }
}  // namespace

WAVETRAIN_PLUGIN(register_nothing);
