// The plugin loader; see plugin.h.
#include "trainer/plugin.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>

#include "trainer/callback.h"
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

// The DT_NEEDED entries of a 64-bit little-endian ELF shared object (the libraries it was linked
// against, by soname), read from the file without loading it; empty for anything else (dlopen then
// says what is wrong). Every offset is checked against the file's size: any file may be given.
std::vector<std::string> needed_libraries(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(file, ec);
  if (!in || ec) return {};
  const auto fits = [&](uint64_t offset, uint64_t length) { return offset <= size && length <= size - offset; };
  // Only the parts read: the headers, the dynamic section and its string table.
  const auto read_at = [&](uint64_t offset, uint64_t length, void* out) {
    if (!fits(offset, length)) return false;
    in.seekg(static_cast<std::streamoff>(offset));
    return static_cast<bool>(in.read(static_cast<char*>(out), static_cast<std::streamsize>(length)));
  };
  Elf64_Ehdr header{};
  if (!read_at(0, sizeof header, &header)) return {};
  if (std::memcmp(header.e_ident, ELFMAG, SELFMAG) != 0 || header.e_ident[EI_CLASS] != ELFCLASS64 ||
      header.e_ident[EI_DATA] != ELFDATA2LSB || header.e_phentsize != sizeof(Elf64_Phdr))
    return {};
  std::vector<Elf64_Phdr> segments(header.e_phnum);
  if (!read_at(header.e_phoff, uint64_t{header.e_phnum} * sizeof(Elf64_Phdr), segments.data())) return {};
  // The string table is named by its address once loaded: the file offset is found through the
  // loadable segment that holds that address.
  const auto file_offset = [&](uint64_t address, uint64_t& offset) {
    for (const Elf64_Phdr& s : segments)
      if (s.p_type == PT_LOAD && address >= s.p_vaddr && address - s.p_vaddr < s.p_filesz) {
        offset = s.p_offset + (address - s.p_vaddr);
        return true;
      }
    return false;
  };
  std::vector<uint64_t> needed;
  uint64_t strtab = 0, strsz = 0;
  for (const Elf64_Phdr& s : segments) {
    if (s.p_type != PT_DYNAMIC || !fits(s.p_offset, s.p_filesz)) continue;
    for (uint64_t at = s.p_offset; at + sizeof(Elf64_Dyn) <= s.p_offset + s.p_filesz; at += sizeof(Elf64_Dyn)) {
      Elf64_Dyn entry{};
      if (!read_at(at, sizeof entry, &entry)) break;
      if (entry.d_tag == DT_NULL) break;
      if (entry.d_tag == DT_NEEDED) needed.push_back(entry.d_un.d_val);
      if (entry.d_tag == DT_STRTAB) strtab = entry.d_un.d_ptr;
      if (entry.d_tag == DT_STRSZ) strsz = entry.d_un.d_val;
    }
  }
  uint64_t table = 0;
  if (needed.empty() || strsz > (uint64_t{1} << 26) || !file_offset(strtab, table)) return {};
  std::string strings(strsz, '\0');
  if (!read_at(table, strsz, strings.data())) return {};
  std::vector<std::string> names;
  for (const uint64_t name : needed)
    if (name < strsz) names.emplace_back(strings.c_str() + name, strnlen(strings.c_str() + name, strsz - name));
  return names;
}

// The shared libraries this process has loaded, by path.
std::vector<std::string> loaded_libraries() {
  std::vector<std::string> paths;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* out) {
        if (info->dlpi_name && *info->dlpi_name) static_cast<std::vector<std::string>*>(out)->push_back(info->dlpi_name);
        return 0;
      },
      &paths);
  return paths;
}

// A plugin linked against another LibTorch or another wavetrain would load that one's libraries
// beside this process's (two LibTorch builds in one process crash in their static initialisers,
// before any check of ours could run; a second wavetrain library would hold a second registry).
// Its needed libraries are compared with the loaded ones before it is loaded: the same library
// (libtorch_cpu, libc10, libwavetrain_trainer, ...) under another soname is another build of it.
void check_linked_libraries(const std::string& where, const std::string& file) {
  const auto stem = [](const std::string& name) { return name.substr(0, name.find(".so")); };
  const std::vector<std::string> loaded = loaded_libraries();
  for (const std::string& need : needed_libraries(file)) {
    const bool torch = need.rfind("libtorch", 0) == 0 || need.rfind("libc10", 0) == 0;
    if (!torch && need.rfind("libwavetrain_", 0) != 0) continue;
    for (const std::string& path : loaded) {
      const std::string name = std::filesystem::path(path).filename().string();
      if (stem(name) == stem(need) && name != need)
        throw PluginError(where + ": built against another " + (torch ? "LibTorch" : "wavetrain") + " (it needs " + need +
                          ", and this wavetrain runs on " + path + "); rebuild it against this installation");
    }
  }
}

std::string describe(const PluginInfo& info) {
  return std::string("wavetrain ") + info.wavetrain_version + ", LibTorch " + info.torch_version + ", " +
         (info.cxx11_abi ? "the C++11" : "the pre-C++11") + " std::string ABI";
}

}  // namespace

namespace {

// Files that failed to load, with their error: a second attempt (another sweep job's config in the
// same process) gets the same error, not a half-registered plugin that seems to load.
std::map<std::string, std::string>& failed() {
  static std::map<std::string, std::string> errors;
  return errors;
}

// Every registered name, to see what a plugin registered while it loaded.
std::vector<std::string> registered_names() {
  std::vector<std::string> names = task_names();
  for (const std::string& c : callback_names()) names.push_back("callback " + c);
  return names;
}

void load_checked(const std::string& where, const std::string& file) {
  check_linked_libraries(where, file);
  take_registration_clashes();  // only this plugin's count below
  const std::vector<std::string> before = registered_names();
  void* handle = ::dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char* why = ::dlerror();
    throw PluginError(where + ": cannot be loaded (" + std::string(why ? why : "unknown reason") +
                      "); a plugin built against another wavetrain or LibTorch installation does not load: rebuild it "
                      "against this one (find_package(wavetrain))");
  }
  // Registration belongs in the WAVETRAIN_PLUGIN function, after the checks below: a registration
  // object at namespace scope would run inside dlopen, before them.
  if (registered_names() != before || !take_registration_clashes().empty())
    throw PluginError(where + ": registers tasks or callbacks while it loads (a registration object at namespace scope); "
                      "make them function-local statics of its WAVETRAIN_PLUGIN function (trainer/plugin.h)");
  const auto* info = static_cast<const PluginInfo*>(::dlsym(handle, "wavetrain_plugin_info"));
  // dlsym also searches the plugin's own dependencies: the symbol must be this file's.
  Dl_info origin{};
  std::error_code ec;
  const bool own = info && ::dladdr(info, &origin) != 0 && origin.dli_fname &&
                   std::filesystem::equivalent(origin.dli_fname, file, ec);
  if (!own) {
    ::dlclose(handle);
    throw PluginError(where + ": not a wavetrain plugin (it defines no wavetrain_plugin_info; a plugin says "
                      "WAVETRAIN_PLUGIN(its_registration_function) once, see trainer/plugin.h)");
  }
  const PluginInfo self{kPluginInterface, WAVETRAIN_VERSION, TORCH_VERSION, _GLIBCXX_USE_CXX11_ABI, nullptr};
  if (info->interface != kPluginInterface)
    throw PluginError(where + ": built for plugin interface " + std::to_string(info->interface) + ", this wavetrain has " +
                      std::to_string(kPluginInterface) + "; rebuild it against this installation");
  if (std::string(info->wavetrain_version) != self.wavetrain_version || std::string(info->torch_version) != self.torch_version ||
      info->cxx11_abi != self.cxx11_abi)
    throw PluginError(where + ": built against " + describe(*info) + ", but this is " + describe(self) +
                      "; rebuild it against this installation");
  if (!info->register_all) throw PluginError(where + ": its WAVETRAIN_PLUGIN names no registration function");
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
}

}  // namespace

void load_plugin(const std::string& given) {
  std::error_code ec;
  const std::filesystem::path path = std::filesystem::weakly_canonical(std::filesystem::absolute(given, ec), ec);
  const std::string file = path.string();
  for (const std::string& done : loaded())
    if (done == file) return;
  if (const auto it = failed().find(file); it != failed().end()) throw PluginError(it->second);
  const std::string where = "plugin " + given;
  if (!std::filesystem::is_regular_file(path, ec)) throw PluginError(where + ": no such file");
  try {
    load_checked(where, file);
  } catch (const PluginError& e) {
    failed()[file] = e.what();
    throw;
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
