// The task registry; see task.h.
#include "trainer/task.h"

#include <ATen/CPUGeneratorImpl.h>

#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <utility>

namespace wavetrain {

std::unique_ptr<Task> make_toy_regression(const config::Config& cfg);  // toy_regression.cpp

namespace {

std::map<std::string, TaskFactory>& registry() {
  // Built on first use (safe from static initialisers). The built-in tasks are added here by an
  // explicit call: a registration object alone in a static library would be dropped by the linker.
  static std::map<std::string, TaskFactory> tasks = {{"toy_regression", make_toy_regression}};
  return tasks;
}

std::map<std::string, std::vector<std::string>>& config_keys() {
  static std::map<std::string, std::vector<std::string>> keys = {{"toy_regression", {"toy_regression.*"}}};
  return keys;
}

}  // namespace

double available_memory_bytes() {
  double available = std::numeric_limits<double>::infinity();
  const auto least = [&available](double v) {
    if (v > 0) available = std::min(available, v);
  };
  {
    std::ifstream meminfo("/proc/meminfo");
    std::string name;
    double kib = 0;
    std::string unit;
    while (meminfo >> name >> kib >> unit)
      if (name == "MemAvailable:") least(kib * 1024);
  }
  {
    // cgroup v2: this process's group ("0::/PATH" in /proc/self/cgroup: a Slurm job's, a
    // container's), its limit ("max" when there is none) less what the group already uses.
    std::ifstream self("/proc/self/cgroup");
    std::string group;
    for (std::string line; std::getline(self, line);)
      if (line.rfind("0::", 0) == 0) group = line.substr(3);
    std::ifstream max_file("/sys/fs/cgroup" + group + "/memory.max"), current_file("/sys/fs/cgroup" + group + "/memory.current");
    double limit = 0, current = 0;
    if (max_file >> limit && current_file >> current) least(limit - current);  // "max" does not read as a number
  }
  struct rlimit limit {};
  if (getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) least(static_cast<double>(limit.rlim_cur));
  return available;
}

namespace {
std::string gib(double bytes) {
  char text[64];
  if (bytes >= 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024) std::snprintf(text, sizeof text, "%.3g EiB", bytes / std::pow(1024.0, 6));
  else std::snprintf(text, sizeof text, "%.1f GiB", bytes / (1024.0 * 1024 * 1024));
  return text;
}
}  // namespace

void check_fits_in_memory(const std::string& what, double bytes, const std::string& detail, double available) {
  if (bytes <= available) return;
  throw config::ConfigError(what + " needs about " + gib(bytes) + " of memory (" + detail + "); " + gib(available) +
                            " is available");
}

std::vector<int64_t> shuffled_order(int64_t size, int64_t seed, int64_t epoch) {
  at::Generator g = at::detail::createCPUGenerator(static_cast<uint64_t>(seed) * 1000003u + static_cast<uint64_t>(epoch));
  const at::Tensor perm = at::randperm(size, g, at::kLong);
  return std::vector<int64_t>(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + size);
}

std::vector<int64_t> Task::train_order(int64_t epoch, int64_t seed, int64_t batch_size) {
  (void)batch_size;
  return shuffled_order(size(Split::Train), seed, epoch);
}

double Task::metric_weight(const std::string& name, const Batch& batch) const {
  (void)name;
  return static_cast<double>(batch.size);
}

namespace {
std::vector<std::string>& clashes() {
  static std::vector<std::string> names;
  return names;
}
}  // namespace

void note_registration_clash(const std::string& what) { clashes().push_back(what); }

std::vector<std::string> take_registration_clashes() { return std::exchange(clashes(), {}); }

TaskRegistration::TaskRegistration(const std::string& name, TaskFactory factory, std::vector<std::string> keys) {
  if (!registry().emplace(name, std::move(factory)).second) {
    note_registration_clash("task '" + name + "'");
    return;
  }
  config_keys()[name] = std::move(keys);
}

std::vector<std::string> task_config_keys(const std::string& name) {
  const auto it = config_keys().find(name);
  return it == config_keys().end() ? std::vector<std::string>{} : it->second;
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
  std::unique_ptr<Task> task = it->second(cfg);
  if (!task) throw config::ConfigError("task '" + name + "': its factory made no task");
  return task;
}

}  // namespace wavetrain
