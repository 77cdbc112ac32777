// Plugins: shared libraries that add tasks and callbacks to wavetrain from a user's own project,
// without changing or rebuilding wavetrain (docs/extending.md, examples/custom_task/).
//
// A plugin is a MODULE library linked against the installed package (find_package(wavetrain)) that
// says, once, in one of its files:
//
//   static void register_my_plugin() {
//     static const wavetrain::TaskRegistration task("my_task", make_my_task, {"my_task.*"});
//     static const wavetrain::CallbackRegistration callback("my_callback", make_my_callback, {"my_callback.*"});
//   }
//   WAVETRAIN_PLUGIN(register_my_plugin)
//
// A config loads it with `plugins: [/path/to/libmy_task.so]` (a file in a config folder, or the
// command line's plugins=[...] / +plugins=[...]); train, eval, sweeps and their Slurm jobs load the
// plugins of the config they run, before its keys are checked, so the plugin's task, callbacks and
// keys are known like the built-in ones. Relative paths are from the working directory; a run's
// recorded config has them absolute, so eval of its checkpoint finds them from anywhere.
//
// Loading checks, before the plugin is loaded, that the libraries it was linked against are this
// process's LibTorch and wavetrain libraries (not another build's under another soname); before it
// registers anything, that it is a plugin (it defines wavetrain_plugin_info) built against this
// wavetrain, this LibTorch and this C++ library ABI; after, that it took no name that was already
// registered. Each failure is a
// PluginError naming the file, and nothing is written.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include <torch/version.h>

#include "trainer/config/config.h"
#include "wavetrain_build_config.h"

namespace wavetrain {

// The layout of PluginInfo; changes when it does.
constexpr int kPluginInterface = 1;

struct PluginInfo {
  int interface;                  // kPluginInterface as the plugin was compiled
  const char* wavetrain_version;  // WAVETRAIN_VERSION likewise
  const char* torch_version;      // TORCH_VERSION likewise
  int cxx11_abi;                  // _GLIBCXX_USE_CXX11_ABI likewise (std::string's layout)
  void (*register_all)();         // registers the plugin's tasks and callbacks
};

struct PluginError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Loads `path` (once: a second call for the same file does nothing) and runs its registration.
void load_plugin(const std::string& path);
// Loads every plugin the config's `plugins` list names, in order.
void load_plugins(const config::Config& cfg);
// The `plugins` entries of `tree` made absolute (from the working directory), so that the config
// a run records finds them from anywhere. Throws config::ConfigError when `plugins` is not a list
// of paths.
void make_plugin_paths_absolute(config::Node& tree);
// The files loaded so far, as absolute paths, in load order.
std::vector<std::string> loaded_plugins();

}  // namespace wavetrain

// Defines the plugin's wavetrain_plugin_info: what the loader checks, and its registration function.
#define WAVETRAIN_PLUGIN(register_function)                                                                 \
  extern "C" __attribute__((visibility("default"))) const ::wavetrain::PluginInfo wavetrain_plugin_info{ \
      ::wavetrain::kPluginInterface, WAVETRAIN_VERSION, TORCH_VERSION, _GLIBCXX_USE_CXX11_ABI, register_function}
