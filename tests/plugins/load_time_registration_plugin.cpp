// A test plugin that registers its task at namespace scope, so the registration would run inside
// dlopen, before the loader's checks: refused (plugin_test.cpp).
#include "trainer/plugin.h"
#include "trainer/task.h"

namespace {

std::unique_ptr<wavetrain::Task> no_task(const wavetrain::config::Config&) { return nullptr; }
const wavetrain::TaskRegistration too_early("registered_too_early", no_task);

void register_nothing() {}

}  // namespace

WAVETRAIN_PLUGIN(register_nothing);
