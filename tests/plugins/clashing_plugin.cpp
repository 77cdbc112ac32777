// A test plugin that registers a task under a name wavetrain already has (toy_regression): loading
// it must fail, naming the file and the name.
#include "trainer/plugin.h"
#include "trainer/task.h"

namespace {

std::unique_ptr<wavetrain::Task> no_task(const wavetrain::config::Config&) { return nullptr; }

void register_clash() { static const wavetrain::TaskRegistration clash("toy_regression", no_task); }

}  // namespace

WAVETRAIN_PLUGIN(register_clash);
