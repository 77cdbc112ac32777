// Composition; the rules are in compose.h.
//
// `override` entries in defaults lists (an experiment file changing the model, say) change choices
// made elsewhere in the tree, possibly in files read earlier. So the tree is built, the overrides
// it declared are collected, and it is built again until they no longer change (a few rounds at
// most). Command-line choices always win over `override` entries.
#include "trainer/config/compose.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "trainer/config/override.h"
#include "trainer/config/value_override.h"
#include "trainer/config/yaml_io.h"

namespace fs = std::filesystem;

namespace wavetrain::config {
namespace {

std::string join_path(const std::string& dir, const std::string& name) { return dir.empty() ? name : dir + "/" + name; }
std::string dir_of(const std::string& config_path) {
  const size_t slash = config_path.rfind('/');
  return slash == std::string::npos ? "" : config_path.substr(0, slash);
}
std::string dotted(std::string group_path) {
  std::replace(group_path.begin(), group_path.end(), '/', '.');
  return group_path;
}
std::string join_package(const std::string& a, const std::string& b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return a + "." + b;
}
// `package` placed under `parent`, as Hydra does it: joined, then a `_global_` anywhere in the
// result (the last one) starts again from the root (`model` + `_global_.x` is `x`).
std::string under_package(const std::string& parent, const std::string& package) {
  const std::string joined = join_package(parent, package);
  const size_t global = joined.rfind("_global_");
  if (global == std::string::npos) return joined;
  const size_t rest = global + 9;  // past "_global_."
  return rest >= joined.size() ? "" : joined.substr(rest);
}

// One item of a defaults list, as written.
struct Entry {
  enum class Kind { Self, Config, Group } kind = Kind::Self;
  std::string path;     // group path (Group) or config path (Config), absolute in the search path
  std::string written;  // as written, without a leading '/': relative to the file's folder unless it had one
  std::string option;   // Group: option name; "" = null (none); "???" = must be given
  std::string package;  // from group@pkg; empty if none
  bool optional = false;
  bool is_override = false;
  Origin origin;
};

std::string option_text(const Node& v, const std::string& where) {
  switch (v.kind()) {
    case Node::Kind::Null: return "";
    case Node::Kind::Missing: return "???";
    case Node::Kind::String:
    case Node::Kind::Int:
    case Node::Kind::Float:
    case Node::Kind::Bool: return v.to_display();
    default: throw ConfigError("A defaults list option must be a name, found a " + std::string(Node::kind_name(v.kind())) +
                               " (" + where + ")");
  }
}

std::vector<Entry> parse_defaults(const Node& list, const std::string& dir) {
  std::vector<Entry> out;
  if (list.is_null()) return out;
  if (!list.is_sequence())
    throw ConfigError("'defaults' must be a list (" + list.origin().str() + "), found a " +
                      Node::kind_name(list.kind()));
  for (const Node& item : list.items()) {
    Entry e;
    e.origin = item.origin();
    const std::string where = item.origin().str();
    if (item.kind() == Node::Kind::String) {
      const std::string& name = item.string_value();
      if (name == "_self_") {
        e.kind = Entry::Kind::Self;
      } else {
        e.kind = Entry::Kind::Config;
        const bool relative = name[0] != '/';
        e.written = relative ? name : name.substr(1);
        e.path = relative ? join_path(dir, name) : e.written;
      }
      out.push_back(e);
      continue;
    }
    if (!item.is_mapping() || item.entries().size() != 1)
      throw ConfigError("A defaults list item must be a name or 'group: option' (" + where + ")");
    std::istringstream words(item.entries()[0].first);
    std::vector<std::string> tokens;
    for (std::string w; words >> w;) tokens.push_back(w);
    if (tokens.size() == 2 && (tokens[0] == "optional" || tokens[0] == "override")) {
      (tokens[0] == "optional" ? e.optional : e.is_override) = true;
      tokens.erase(tokens.begin());
    }
    if (tokens.size() != 1)
      throw ConfigError("Invalid defaults list key '" + item.entries()[0].first + "' (" + where +
                        "): expected [optional|override] group[@package]");
    std::string group = tokens[0];
    const size_t at = group.find('@');
    if (at != std::string::npos) {
      e.package = group.substr(at + 1);
      group = group.substr(0, at);
    }
    e.kind = Entry::Kind::Group;
    const bool relative = group[0] != '/';
    e.written = relative ? group : group.substr(1);
    e.path = relative ? join_path(dir, group) : e.written;
    e.option = option_text(item.entries()[0].second, where);
    out.push_back(e);
  }
  return out;
}

// `group@package` (or `group`): the entry a command-line choice names.
std::string cli_key(const Override& o) { return o.package.empty() ? o.key : o.key + "@" + o.package; }

// Command-line choices for groups, kept apart from value overrides.
struct GroupOverride {
  Override parsed;
  std::string option;  // "" = null
  bool used = false;
};

class Composer {
 public:
  explicit Composer(const ComposeOptions& opt) : opt_(opt) {}

  Composition run() {
    split_overrides();
    // Build until the `override` entries found in the tree stop changing.
    for (int round = 0;; ++round) {
      declared_overrides_.clear();
      result_ = Composition{};
      known_.clear();
      known_per_group_.clear();
      used_declared_.clear();
      result_.config = Node::mapping();
      for (auto& [group, g] : cli_choices_) g.used = false;
      result_.defaults = build(opt_.config_name, "", std::nullopt, /*primary=*/true, Origin{});
      if (declared_overrides_ == applied_overrides_) break;
      if (round == 8) throw ConfigError("'override' entries in the defaults lists do not settle after 8 rounds");
      applied_overrides_ = declared_overrides_;
    }
    for (auto& [key, g] : cli_choices_) {
      if (g.used) continue;
      if (g.parsed.type == OverrideType::Delete)
        throw ConfigError("Could not delete '" + key + (g.parsed.value ? "=" + g.option : "") +
                          "'. No match in the defaults list");
      throw ConfigError(no_match(key) + "\nTo append to your defaults list use +" + key + "=" + g.option);
    }
    // An `override` entry must change something, unless the command line chose that group itself.
    for (const auto& [key, option] : applied_overrides_)
      if (!used_declared_.count(key) && !cli_choices_.count(key))
        throw ConfigError("In '" + declared_in_.at(key) + "': " + no_match(key));
    for (const Override& o : value_overrides_) apply_value(result_.config, o);
    return std::move(result_);
  }

 private:
  // Both ask about paths made from what was typed: a name too long for the file system (a key of
  // thousands of parts) is no group and no file, not a filesystem_error.
  bool is_group(const std::string& path) const {
    std::error_code ec;
    for (const std::string& d : opt_.config_dirs)
      if (fs::is_directory(fs::path(d) / path, ec)) return true;
    return false;
  }

  std::optional<std::string> find_file(const std::string& config_path) const {
    std::error_code ec;
    for (const std::string& d : opt_.config_dirs) {
      const fs::path p = fs::path(d) / (config_path + ".yaml");
      if (fs::is_regular_file(p, ec)) return p.string();
    }
    return std::nullopt;
  }

  void split_overrides() {
    for (const std::string& text : opt_.overrides) {
      Override o = parse_override(text);
      if (o.is_sweep())
        throw ConfigError("'" + text + "' is a sweep (it gives several values). Add -m to run one job per value");
      // A group key with an option name (or nothing, for ~group) picks a config; a dict or list
      // for it sets values under the group's package instead.
      const bool names_option = !o.value || o.value->is_scalar();
      if (!o.key.empty() && names_option && is_group(o.key)) {
        std::string option;
        if (o.value) option = option_text(*o.value, "'" + text + "' on the command line");
        // ++group=opt changes the choice where the group is in the tree, and appends it otherwise.
        if (o.type != OverrideType::Add) cli_choices_[cli_key(o)] = GroupOverride{o, option, false};
        if (o.type == OverrideType::Add || o.type == OverrideType::ForceAdd) appended_.push_back({o, option, false});
      } else {
        // `key@pkg` places a group's config; on a value it would be silently dropped (Hydra's words).
        if (!o.package.empty())
          throw ConfigError("Override " + text + " looks like a config group override, but config group '" + o.key +
                            "' does not exist.");
        value_overrides_.push_back(o);
      }
    }
  }

  // Where a group entry goes, and the key that overrides name it by (Hydra's override key): the
  // group path, plus `@package` when the package is not the group path itself. So `optimizer=sgd`
  // does not reach `optimizer@opt: adam`, and `/act: relu` inside model/a.yaml (placed at
  // `model.act`) is `act@model.act`.
  struct Placement {
    std::string package;                // the parent's package + the group as written
    std::optional<std::string> forced;  // from @package (a package header cannot change it)
    std::string key;
  };
  static Placement place(const Entry& e, const std::string& parent_pkg) {
    Placement p;
    p.package = under_package(parent_pkg, dotted(e.written));
    if (!e.package.empty()) p.forced = under_package(parent_pkg, e.package);
    const std::string final_package = p.forced.value_or(p.package);
    p.key = e.path;
    if (final_package != dotted(e.path)) p.key += "@" + (final_package.empty() ? "_global_" : final_package);
    return p;
  }

  // The option chosen for the entry named `key`: the command line, then `override` entries, then
  // the entry itself. nullopt when the command line deletes it.
  std::optional<std::string> choose(const std::string& key, const std::string& written) {
    auto cli = cli_choices_.find(key);
    if (cli != cli_choices_.end()) {
      cli->second.used = true;
      if (cli->second.parsed.type == OverrideType::Delete) {
        if (cli->second.parsed.value && cli->second.option != written)
          throw ConfigError("Could not delete '" + key + "': its option is '" + written + "', not '" +
                            cli->second.option + "'");
        return std::nullopt;
      }
      return cli->second.option;
    }
    auto declared = applied_overrides_.find(key);
    if (declared != applied_overrides_.end()) {
      used_declared_.insert(key);
      return declared->second;
    }
    return written;
  }

  // Hydra's words for an override naming no entry, with the entries of that group it could mean.
  std::string no_match(const std::string& key) const {
    const auto known = known_per_group_.find(key.substr(0, key.find('@')));
    if (known == known_per_group_.end()) return "Could not override '" + key + "'. No match in the defaults list.";
    std::string keys;
    for (const std::string& k : known->second) keys += (keys.empty() ? "" : ", ") + k;
    const std::string one_of = known->second.size() > 1 ? "one of " : "";
    return "Could not override '" + key + "'.\nDid you mean to override " + one_of + keys + "?";
  }

  DefaultsNode build(const std::string& config_path, const std::string& package,
                     const std::optional<std::string>& forced_package, bool primary, const Origin& asked_at) {
    const std::optional<std::string> file = find_file(config_path);
    if (!file) {
      if (primary) {
        std::string dirs;
        for (const std::string& d : opt_.config_dirs) dirs += (dirs.empty() ? "" : ", ") + d;
        throw ConfigError("Primary config '" + config_path + ".yaml' not found in the search path (" + dirs + ")");
      }
      throw ConfigError("Could not find config '" + config_path + "' (in the defaults list at " + asked_at.str() + ")");
    }
    const Including including(including_, *file);
    check_including(asked_at);
    std::ifstream in(*file);
    std::stringstream text;
    text << in.rdbuf();
    Node content = load_yaml_string(text.str(), *file);
    if (content.is_null()) content = Node::mapping(Origin::in_file(*file, 0));
    if (!content.is_mapping())
      throw ConfigError("Config file " + *file + " must hold a dict at the top, found a " +
                        Node::kind_name(content.kind()));

    // Where this file's keys go: the entry's @pkg, else its header, else the package passed in.
    std::string pkg = package;
    if (forced_package) {
      pkg = *forced_package;
    } else if (auto header = package_header(text.str())) {
      if (*header == "_global_") pkg = "";
      else if (header->rfind("_global_.", 0) == 0) pkg = header->substr(9);
      else if (*header == "_group_") pkg = dotted(dir_of(config_path));
      else pkg = *header;
    }

    DefaultsNode node{config_path, pkg, *file, {}};
    std::vector<Entry> entries;
    if (const Node* defaults = content.find("defaults")) entries = parse_defaults(*defaults, dir_of(config_path));
    content.erase("defaults");
    if (std::none_of(entries.begin(), entries.end(), [](const Entry& e) { return e.kind == Entry::Kind::Self; }))
      entries.push_back(Entry{});  // implicit _self_: the file's own keys override its defaults

    std::set<std::string> seen_groups;
    for (const Entry& e : entries) {
      switch (e.kind) {
        case Entry::Kind::Self:
          merge_at(pkg, content, *file);
          node.children.push_back(DefaultsNode{"_self_", pkg, "", {}});
          break;
        case Entry::Kind::Config:  // its folder, as written, is part of its package
          node.children.push_back(build(e.path, under_package(pkg, dotted(dir_of(e.written))), std::nullopt, false,
                                        e.origin));
          break;
        case Entry::Kind::Group:
          if (e.is_override) {
            const std::string key = place(e, pkg).key;
            declared_overrides_[key] = e.option;  // a later (more specific) file wins
            declared_in_[key] = config_path;
            break;
          }
          if (!seen_groups.insert(e.path + "@" + e.package).second)
            throw ConfigError("Group '" + e.path + "' appears twice in the defaults list (" + e.origin.str() + ")");
          include_group(node, e, pkg);
          break;
      }
    }
    if (primary) {
      for (GroupOverride& a : appended_) {
        Entry e;
        e.kind = Entry::Kind::Group;
        e.path = e.written = a.parsed.key;
        e.option = a.option;
        e.package = a.parsed.package;
        e.origin = Origin::from_command_line();
        const std::string key = place(e, pkg).key;
        if (a.parsed.type == OverrideType::ForceAdd) {
          GroupOverride& choice = cli_choices_.at(cli_key(a.parsed));
          if (choice.used) continue;  // the group was in the tree: its choice has been changed
          choice.used = true;
        } else if (known_.count(key) > 0) {  // even null, or optional and absent
          throw ConfigError("Could not append to the defaults list: '" + key + "' is already in it. Use " + key + "=" +
                            a.option + " to change its option");
        }
        include_group(node, e, pkg);
      }
    }
    return node;
  }

  // The files whose defaults lists are being read, outermost first: build() recurses once per
  // nested defaults list.
  struct Included {
    std::string file;      // as found in the search path, for messages
    std::string identity;  // the canonical path: the same file reached through `..` or a link
  };
  struct Including {
    Including(std::vector<Included>& stack, const std::string& file) : stack_(stack) {
      std::error_code ec;
      const fs::path canonical = fs::weakly_canonical(file, ec);
      stack_.push_back({file, ec ? file : canonical.string()});
    }
    ~Including() { stack_.pop_back(); }
    std::vector<Included>& stack_;
  };

  // A file that includes itself, directly or through others, would be read forever (the same
  // file gives the same defaults list); a chain of distinct files is bounded too, for the stack.
  void check_including(const Origin& asked_at) const {
    const Included& last = including_.back();
    for (size_t i = 0; i + 1 < including_.size(); ++i) {
      if (including_[i].identity != last.identity) continue;
      std::string chain;
      for (size_t k = i; k < including_.size(); ++k) chain += (k > i ? " -> " : "") + including_[k].file;
      throw ConfigError("Defaults cycle: " + chain + " (the defaults list at " + asked_at.str() +
                        " includes a file that is already being read)");
    }
    if (including_.size() > kMaxDepth) {
      const size_t n = including_.size();
      throw ConfigError("Defaults lists nest more than " + std::to_string(kMaxDepth) + " files deep (the limit): " +
                        including_[0].file + " -> " + including_[1].file + " -> ... -> " + including_[n - 2].file +
                        " -> " + including_[n - 1].file + " (included by the defaults list at " + asked_at.str() + ")");
    }
  }

  void include_group(DefaultsNode& parent, const Entry& e, const std::string& parent_pkg) {
    const Placement place_at = place(e, parent_pkg);
    const std::optional<std::string> chosen = choose(place_at.key, e.option);
    if (!chosen) return;  // deleted from the command line
    const std::string& option = *chosen;
    known_.insert(place_at.key);
    known_per_group_[e.path].insert(place_at.key);
    if (option.empty()) return;  // null: this group contributes nothing
    if (option == "???") {
      throw ConfigError("You must specify '" + e.path + "', e.g. " + e.path + "=<OPTION>\nAvailable options:\n" +
                        list_options(e.path, "\t", "\n") + "(the defaults list at " + e.origin.str() + ")");
    }
    const std::string config_path = e.path + "/" + option;
    if (!find_file(config_path)) {
      if (e.optional) return;
      throw ConfigError("Could not find '" + config_path + "'. Available options in '" + e.path +
                        "': " + list_options(e.path, "", ", ", true));
    }
    result_.choices[place_at.key] = option;
    // Relative or absolute (`/group`), a group nests under the parent's package: the leading '/'
    // only says where to find its files.
    parent.children.push_back(build(config_path, place_at.package, place_at.forced, false, e.origin));
  }

  std::string list_options(const std::string& group, const std::string& before, const std::string& after,
                           bool trim_last = false) const {
    std::string out;
    for (const std::string& o : group_options(opt_.config_dirs, group)) out += before + o + after;
    if (trim_last && out.size() >= after.size()) out.resize(out.size() - after.size());
    return out;
  }

  void merge_at(const std::string& package, const Node& content, const std::string& file) {
    // A package of many parts (`group@a.b.c...`) deepens the tree as much as the file's own nesting.
    check_depth(package, content, "Config file " + file + " placed at '" + abbreviate_path(package) + "'");
    if (package.empty()) {
      merge_into(result_.config, content);
      return;
    }
    Node* target = result_.config.find_path(package);
    if (!target) target = &result_.config.set_path(package, Node::mapping(content.origin()));
    if (!target->is_mapping())
      throw ConfigError("Cannot merge " + file + " at '" + package + "': that key holds a " +
                        Node::kind_name(target->kind()) + " (from " + target->origin().str() + ")");
    merge_into(*target, content);
  }

  const ComposeOptions& opt_;
  Composition result_;
  // The override keys of the group entries met, even null or absent ones (`+group=x` may not
  // repeat them), and per group path for the messages.
  std::set<std::string> known_;
  std::map<std::string, std::set<std::string>> known_per_group_;
  std::vector<Included> including_;  // see Including
  std::map<std::string, GroupOverride> cli_choices_;
  std::vector<GroupOverride> appended_;
  std::vector<Override> value_overrides_;
  std::map<std::string, std::string> declared_overrides_, applied_overrides_;
  std::map<std::string, std::string> declared_in_;  // override key -> the config that declared it
  std::set<std::string> used_declared_;             // applied overrides that changed an entry
};

void print_tree(const DefaultsNode& n, int depth, std::ostringstream& out) {
  out << std::string(static_cast<size_t>(depth) * 2, ' ') << n.config_path;
  if (n.config_path != "_self_" || depth == 0) {
    out << "  (package: " << (n.package.empty() ? "_global_" : n.package);
    if (!n.file.empty()) out << ", " << n.file;
    out << ")";
  }
  out << "\n";
  for (const DefaultsNode& c : n.children) print_tree(c, depth + 1, out);
}

}  // namespace

Composition compose(const ComposeOptions& options) { return Composer(options).run(); }

std::vector<std::string> group_options(const std::vector<std::string>& config_dirs, const std::string& group) {
  std::set<std::string> names;
  for (const std::string& d : config_dirs) {
    const fs::path dir = fs::path(d) / group;
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (entry.is_regular_file() && entry.path().extension() == ".yaml") names.insert(entry.path().stem().string());
  }
  return {names.begin(), names.end()};
}

std::string format_defaults_tree(const DefaultsNode& root) {
  std::ostringstream out;
  print_tree(root, 0, out);
  return out.str();
}

}  // namespace wavetrain::config
