// Reading YAML config files into config::Node trees, and writing Node trees back as YAML.
//
// Reading uses yaml-cpp for the syntax only; scalars are typed here by the YAML 1.2 core schema
// (so `on`, `yes` and `y` stay strings, and a quoted '123' stays a string), `???` is Missing, and
// explicit tags !!str, !!int, !!float, !!bool, !!null are honoured. Aliases are copied (the Node
// tree never shares nodes), `<<: *anchor` merge keys are applied, and duplicate keys are errors.
// Every node gets the origin file:line it was read from. Dicts and lists nest at most kMaxDepth
// (256) deep, aliases included.
//
// Writing produces block-style YAML that load_yaml_string() reads back to an equal tree:
// strings that would read back as another type (or not at all) are quoted.
#pragma once

#include <optional>
#include <string>

#include "trainer/config/node.h"

namespace wavetrain::config {

// Reads and parses a config file; origins name `path`. An empty (or comment-only) file is a Null
// node. Throws ConfigError: "Cannot read config file 'path': <strerror>", "path:line:column:
// message" for syntax errors, and errors naming file:line for duplicate keys, bad tags and values.
Node load_yaml_file(const std::string& path);

// As load_yaml_file, for text already in memory; `source_name` stands for the file in origins and
// error messages.
Node load_yaml_string(const std::string& text, const std::string& source_name);

// The package named by a Hydra-style "# @package _global_" / "# @package foo.bar" line among the
// comment lines at the top of `text` (before any content); nullopt when there is none.
std::optional<std::string> package_header(const std::string& text);

// Block-style YAML with 2-space indentation, keys in order, ending with a newline. Throws
// ConfigError for a string that is not valid UTF-8 (YAML cannot hold it).
std::string to_yaml(const Node& node);

}  // namespace wavetrain::config
