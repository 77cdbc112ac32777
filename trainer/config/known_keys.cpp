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
    // `_global_` is the root, `_group_` the group, each also as the start of a longer path.
    for (const auto& [word, meaning] : {std::pair<std::string, std::string>{"_global_", ""}, {"_group_", group}})
      if (package == word || package.rfind(word + ".", 0) == 0) {
        const std::string rest = package.substr(std::min(package.size(), word.size() + 1));
        return meaning.empty() ? rest : rest.empty() ? meaning : meaning + "." + rest;
      }
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

// Every absolute key that an interpolation in `n` refers to (`${sr}`, `${data.root}/x`): a key
// read through another is read. Resolvers (`${oc.env:HOME}`, `${now:...}`) and relative references
// (`${.x}`) are not keys of their own here.
void add_interpolation_targets(KnownKeys& known, const Node& n) {
  if (n.is_mapping()) {
    for (const auto& [key, value] : n.entries()) add_interpolation_targets(known, value);
  } else if (n.is_sequence()) {
    for (const Node& item : n.items()) add_interpolation_targets(known, item);
  } else if (n.kind() == Node::Kind::String) {
    const std::string& text = n.string_value();
    for (size_t at = text.find("${"); at != std::string::npos; at = text.find("${", at + 2)) {
      const size_t end = text.find_first_of("}:$", at + 2);
      if (end == std::string::npos || text[end] != '}') continue;
      const std::string key = text.substr(at + 2, end - at - 2);
      if (!key.empty() && key[0] != '.') known.add(key + ".*");  // the key and whatever is below it
    }
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

void check_known_keys(const Node& config, const KnownKeys& known) {
  KnownKeys with_references = known;
  add_interpolation_targets(with_references, config);
  with_references.add("hydra.*");  // Hydra's own settings, which a config written for Hydra may carry
  check_below(config, "", with_references);
}

}  // namespace wavetrain::config
