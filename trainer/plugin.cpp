// The plugin loader; see plugin.h.
#include "trainer/plugin.h"

#include <dlfcn.h>

#include <filesystem>

#include "trainer/task.h"

namespace wavetrain {
namespace {

std::vector<std::string>& loaded() {
  static std::vector<std::string> paths;
  return paths;
}

std::vector<std::string> plugin_paths(const config::Node& list) {
  const std::string where = "plugins (" + list.origin().str() + ")";
  std::vector<std::string> paths;
  if (list.is_null()) return paths;
  if (!list.is_sequence()) throw config::ConfigError(where + ": expected a list of plugin files, found " + list.to_display());
  for (const config::Node& item : list.items()) {
    if (item.kind() != config::Node::Kind::String || item.string_value().empty())
      throw config::ConfigError(where + ": expected paths of plugin files, found " + item.to_display());
    paths.push_back(item.string_value());
  }
  return paths;
}

std::string describe(const PluginInfo& info) {
  return std::string("wavetrain ") + info.wavetrain_version + ", LibTorch " + info.torch_version + ", " +
         (info.cxx11_abi ? "the C++11" : "the pre-C++11") + " std::string ABI";
}

}  // namespace

void load_plugin(const std::string& given) {
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::absolute(given, ec);
  const std::string file = path.string();
  for (const std::string& done : loaded())
    if (done == file) return;
  const std::string where = "plugin " + given;
  if (!std::filesystem::is_regular_file(path, ec)) throw PluginError(where + ": no such file");
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw PluginError(where + ": cannot be loaded (" + std::string(why ? why : "unknown reason") +
                      "); a plugin built against another wavetrain or LibTorch installation does not load: rebuild it "
                      "against this one (find_package(wavetrain))");
  }
  const auto* info = static_cast<const PluginInfo*>(::dlsym(handle, "wavetrain_plugin_info"));
  if (!info)
    throw PluginError(where + ": not a wavetrain plugin (it defines no wavetrain_plugin_info; a plugin says "
                      "WAVETRAIN_PLUGIN(its_registration_function) once, see trainer/plugin.h)");
  const PluginInfo self{kPluginInterface, WAVETRAIN_VERSION, TORCH_VERSION, _GLIBCXX_USE_CXX11_ABI, nullptr};
  if (info->interface != kPluginInterface)
    throw PluginError(where + ": built for plugin interface " + std::to_string(info->interface) + ", this wavetrain has " +
                      std::to_string(kPluginInterface) + "; rebuild it against this installation");
  if (std::string(info->wavetrain_version) != self.wavetrain_version || std::string(info->torch_version) != self.torch_version ||
      info->cxx11_abi != self.cxx11_abi)
    throw PluginError(where + ": built against " + describe(*info) + ", but this is " + describe(self) +
                      "; rebuild it against this installation");
  if (!info->register_all) throw PluginError(where + ": its WAVETRAIN_PLUGIN names no registration function");
  take_registration_clashes();  // only this plugin's count below
  try {
    info->register_all();
  } catch (const std::exception& e) {
    throw PluginError(where + ": its registration failed: " + e.what());
  }
  const std::vector<std::string> clashes = take_registration_clashes();
  if (!clashes.empty()) {
    std::string names;
    for (const std::string& c : clashes) names += (names.empty() ? "" : ", ") + c;
    throw PluginError(where + ": registers " + names + ", already registered by wavetrain or an earlier plugin; "
                      "give it another name");
  }
  loaded().push_back(file);
}

void load_plugins(const config::Config& cfg) {
  if (!cfg.has("plugins")) return;
  for (const std::string& path : plugin_paths(cfg.value("plugins"))) load_plugin(path);
}

void make_plugin_paths_absolute(config::Node& tree) {
  config::Node* list = tree.find("plugins");
  if (!list) return;
  const std::vector<std::string> paths = plugin_paths(*list);  // checks the shape
  for (size_t i = 0; i < paths.size(); ++i) {
    if (paths[i].find("${") != std::string::npos) continue;  // an interpolation: resolved where it is read
    std::error_code ec;
    const std::filesystem::path absolute = std::filesystem::absolute(paths[i], ec);
    if (!ec && absolute.string() != paths[i]) {
      config::Node item = config::Node::string(absolute.string());
      item.set_origin(list->items()[i].origin());
      list->items()[i] = item;
    }
  }
}

std::vector<std::string> loaded_plugins() { return loaded(); }

}  // namespace wavetrain
