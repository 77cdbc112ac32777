// The task registry; see task.h.
#include "trainer/task.h"

#include <map>

namespace wavetrain {

std::unique_ptr<Task> make_toy_regression(const config::Config& cfg);  // toy_regression.cpp

namespace {

std::map<std::string, TaskFactory>& registry() {
  // Built on first use (safe from static initialisers). The built-in tasks are added here by an
  // explicit call: a registration object alone in a static library would be dropped by the linker.
  static std::map<std::string, TaskFactory> tasks = {{"toy_regression", make_toy_regression}};
  return tasks;
}

}  // namespace

TaskRegistration::TaskRegistration(const std::string& name, TaskFactory factory) {
  registry()[name] = std::move(factory);
}

std::vector<std::string> task_names() {
  std::vector<std::string> names;
  for (const auto& [name, f] : registry()) names.push_back(name);
  return names;
}

std::unique_ptr<Task> make_task(const std::string& name, const config::Config& cfg) {
  auto it = registry().find(name);
  if (it == registry().end()) {
    std::string known;
    for (const std::string& n : task_names()) known += (known.empty() ? "" : ", ") + n;
    throw config::ConfigError("Unknown task '" + name + "'. Known tasks: " + (known.empty() ? "none" : known));
  }
  return it->second(cfg);
}

}  // namespace wavetrain
