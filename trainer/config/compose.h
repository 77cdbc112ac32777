// Composition: builds a run's config from a primary config file, its defaults list (recursively),
// and the command-line overrides, with Hydra's rules.
//
//   - Config groups are folders of the search path (`model/wavenet.yaml` is option `wavenet` of group
//     `model`). The search path is the --config-dir folders, then the built-in configs/.
//   - A defaults list holds `_self_` (where the file's own keys are merged; last if absent),
//     `group: option`, `group@pkg: option`, `optional group: option`, `override group: option`,
//     `/group: option` (absolute), `group: null` (none), `group: ???` (must be given), and plain
//     config names. Group paths are relative to the folder of the file holding the list.
//   - A group option's keys go under its package: the parent's package joined with the group path
//     as written (`model`; `/act` inside model/a.yaml is `model.act`: the '/' only says where the
//     files are), replaced by `@pkg` (also joined to the parent's) in the entry or by a
//     `# @package X` header (`_global_` = root). A config entry `sub/thing` goes under `sub`.
//   - Choices on the command line and `override` entries name an entry by Hydra's override key:
//     its group path, plus `@package` when the package is not the group path (`optimizer@opt`,
//     `act@model.act`). One that names no entry is an error, with the keys it could mean.
//   - A file that includes itself, directly or through others, is an error naming the chain of files;
//     defaults lists nest at most kMaxDepth (256) files deep. A package or a key never makes the
//     composed tree nest deeper than kMaxDepth either.
//   - Command line: `model=lstm` changes a choice, `+group=opt` appends to the primary defaults
//     list (not when an entry of that key is met, even a null or absent optional one),
//     `++group=opt` changes or appends, `~group` removes. Every other override sets a value
//     after composition: `key=v` (must exist), `+key=v` (must not exist), `++key=v`, `~key[=v]`.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "trainer/config/node.h"

namespace wavetrain::config {

struct ComposeOptions {
  std::vector<std::string> config_dirs;  // searched in order; the first holding a file wins
  std::string config_name = "config";    // the primary config, without .yaml
  std::vector<std::string> overrides;    // as typed on the command line
};

// One entry of the defaults tree, for `--info defaults` and the run directory.
struct DefaultsNode {
  std::string config_path;  // "config", "model/wavenet", or "_self_"
  std::string package;      // where its keys went ("" is the root)
  std::string file;         // the file it was read from (empty for _self_)
  std::vector<DefaultsNode> children;
};

struct Composition {
  Node config;                                 // composed, value overrides applied, not resolved
  DefaultsNode defaults;                       // the primary config at the root
  std::map<std::string, std::string> choices;  // group -> chosen option ("model" -> "lstm")
};

// Throws ConfigError naming the file and line, or the override, for every problem.
Composition compose(const ComposeOptions& options);

// The options of `group` across the search path, sorted, without duplicates.
std::vector<std::string> group_options(const std::vector<std::string>& config_dirs, const std::string& group);

// The defaults tree as indented text, one config per line with its package and file.
std::string format_defaults_tree(const DefaultsNode& root);

// Applies one value override (not a group choice) to `config`; used by compose() and by tests.
void apply_value_override(Node& config, const std::string& override_text);

}  // namespace wavetrain::config
