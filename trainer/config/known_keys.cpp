// Known keys; see known_keys.h.
#include "trainer/config/known_keys.h"

#include <filesystem>
#include <fstream>

#include "trainer/config/value_override.h"
#include "trainer/config/yaml_io.h"

namespace fs = std::filesystem;

namespace wavetrain::config {
namespace {

std::string join_path(const std::string& prefix, const std::string& key) { return prefix.empty() ? key : prefix + "." + key; }

// The package of a config file: its `# @package X` header among the leading comment lines, else
// its group (the folder path below the config folder, with dots).
std::string package_of(const fs::path& file, const fs::path& dir) {
  std::string group = fs::relative(file.parent_path(), dir).generic_string();
  if (group == ".") group.clear();
  for (char& c : group)
    if (c == '/') c = '.';
  std::ifstream in(file);
  for (std::string line; std::getline(in, line);) {
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;
    if (line[start] != '#') break;
    const size_t at = line.find("@package", start);
    if (at == std::string::npos) continue;
    std::string package = line.substr(at + 8);
    package.erase(0, package.find_first_not_of(" \t"));
    package.erase(package.find_last_not_of(" \t\r") + 1);
    if (package == "_global_") return "";
    if (package == "_group_") return group;
    return package;
  }
  return group;
}

void add_tree(KnownKeys& known, const Node& n, const std::string& prefix) {
  if (!n.is_mapping()) return;
  for (const auto& [key, value] : n.entries()) {
    if (prefix.empty() && key == "defaults") continue;  // composition's, gone from the composed config
    const std::string path = join_path(prefix, key);
    if (value.is_mapping() && value.entries().empty()) {
      known.add(path + ".*");
      continue;
    }
    known.add(path);
    add_tree(known, value, path);
  }
}

void check_below(const Node& n, const std::string& prefix, const KnownKeys& known) {
  if (!n.is_mapping() || known.open(prefix)) return;
  for (const auto& [key, value] : n.entries()) {
    const std::string path = join_path(prefix, key);
    if (!value.origin().command_line && !value.origin().file.empty() && !known.known(path))
      throw ConfigError("Key '" + path + "' (" + value.origin().str() + ") is not a key that wavetrain reads" +
                        " (a typo? a key of another task?)" + did_you_mean(known.as_tree(), path));
    check_below(value, path, known);
  }
}

}  // namespace

void KnownKeys::add(const std::string& key) {
  std::string path = key;
  const bool is_open = path.size() >= 2 && path.compare(path.size() - 2, 2, ".*") == 0;
  if (is_open) {
    path.resize(path.size() - 2);
    open_.insert(path);
  }
  keys_.insert(path);
  for (size_t dot = path.find('.'); dot != std::string::npos; dot = path.find('.', dot + 1)) prefixes_.insert(path.substr(0, dot));
}

void KnownKeys::add_config_dir(const std::string& dir) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (!it->is_regular_file() || it->path().extension() != ".yaml") continue;
    add_tree(*this, load_yaml_file(it->path().string()), package_of(it->path(), dir));
  }
}

bool KnownKeys::open(const std::string& path) const {
  for (std::string p = path;; p = p.substr(0, p.rfind('.'))) {
    if (open_.count(p)) return true;
    if (p.find('.') == std::string::npos) return false;
  }
}

bool KnownKeys::known(const std::string& path) const { return keys_.count(path) || prefixes_.count(path) || open(path); }

Node KnownKeys::as_tree() const {
  Node tree = Node::mapping();
  for (const std::string& k : keys_)
    if (!prefixes_.count(k)) tree.set_path(k, Node::null());  // leaves only: the mappings come with them
  return tree;
}

void check_known_keys(const Node& config, const KnownKeys& known) { check_below(config, "", known); }

}  // namespace wavetrain::config
