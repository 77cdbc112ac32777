// The config tree: a value type (copying a Node copies the whole subtree, so no two keys ever share
// a node the way a yaml-cpp alias shares one with its anchor). Every node remembers where it came
// from, so that any error can name the file and line, or the command line.
//
// Scalars are typed when they are read from YAML or the command line (null, bool, int, float,
// string); `???` is Missing (a value that must be given before it is read). A string holding
// `${...}` is an interpolation, resolved when read (see interpolation.h).
// Mappings keep their keys in insertion order, which is the order they are written back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace wavetrain::config {

// How many dicts and lists may nest inside each other in a config (a scalar at the top is depth 0,
// `a: [1]` is depth 2). Real configs stay under 10; the limit is what keeps a hostile or generated
// file or override from overflowing the stack, because copying, comparing, merging, printing and
// resolving a tree all recurse once per level. Reading YAML, parsing an override, placing a file
// at its package and setting a key all check it.
inline constexpr size_t kMaxDepth = 256;

// How big one config may grow when aliases (`*a`) or interpolations are expanded: nodes (every
// scalar, dict and list, counted once per copy) and bytes (the text of scalars and keys). Real
// configs hold a few hundred nodes and a few KB. Without a bound, a 1.5 KB file of nested aliases
// ("billion laughs") expands to gigabytes; reading YAML and resolving interpolations check both.
inline constexpr size_t kMaxNodes = 1000000;
inline constexpr size_t kMaxBytes = size_t{64} << 20;

// Where a value came from: "configs/model/wavenet.yaml:3", or the command line.
struct Origin {
  std::string file;  // file path; empty for values made in code
  int line = 0;      // 1-based; 0 when not known
  bool command_line = false;

  static Origin from_command_line() { return Origin{"", 0, true}; }
  static Origin in_file(std::string file, int line) { return Origin{std::move(file), line, false}; }
  // "configs/model/wavenet.yaml:3", "the command line", or "(default)"
  std::string str() const;
};

// Every error the config engine reports; the message names the key and the origin.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Reading a `???` value that was never given.
class MissingValueError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

class Node {
 public:
  enum class Kind { Null, Bool, Int, Float, String, Missing, Sequence, Mapping };
  using Entry = std::pair<std::string, Node>;

  Node() = default;  // Null with no origin
  static Node null(Origin o = {});
  static Node boolean(bool v, Origin o = {});
  static Node integer(int64_t v, Origin o = {});
  static Node floating(double v, Origin o = {});
  static Node string(std::string v, Origin o = {});
  static Node missing(Origin o = {});  // ???
  static Node sequence(Origin o = {});
  static Node mapping(Origin o = {});

  Kind kind() const { return kind_; }
  bool is_null() const { return kind_ == Kind::Null; }
  bool is_scalar() const { return kind_ != Kind::Sequence && kind_ != Kind::Mapping; }
  bool is_mapping() const { return kind_ == Kind::Mapping; }
  bool is_sequence() const { return kind_ == Kind::Sequence; }
  bool is_missing() const { return kind_ == Kind::Missing; }
  // A string that contains "${": resolved when read.
  bool is_interpolation() const;

  const Origin& origin() const { return origin_; }
  void set_origin(Origin o) { origin_ = std::move(o); }
  // Sets this node's origin and that of every node below it.
  void set_origin_recursive(const Origin& o);

  // Scalar values; each throws std::logic_error on the wrong kind (check kind() first).
  bool bool_value() const;
  int64_t int_value() const;
  double float_value() const;
  const std::string& string_value() const;

  // Sequence.
  const std::vector<Node>& items() const;
  std::vector<Node>& items();
  void push_back(Node n);

  // Mapping, in insertion order.
  const std::vector<Entry>& entries() const;
  std::vector<Entry>& entries();
  const Node* find(const std::string& key) const;
  Node* find(const std::string& key);
  // Replaces the value of `key`, or appends it. Returns the stored node.
  Node& set(const std::string& key, Node value);
  bool erase(const std::string& key);

  // Dotted paths ("trainer.max_epochs", "model.layers.0.channels": a number indexes a sequence).
  const Node* find_path(const std::string& path) const;
  Node* find_path(const std::string& path);
  // Creates the mappings along the way; throws ConfigError if a prefix is a non-mapping value.
  Node& set_path(const std::string& path, Node value);
  bool erase_path(const std::string& path);

  // How many dicts and lists nest here: 0 for a scalar, 1 for a dict or list of scalars (or an
  // empty one). Iterative, so it is safe on a tree of any depth.
  size_t depth() const;

  // Human name of the kind: "null", "bool", "int", "float", "string", "???", "list", "dict".
  static const char* kind_name(Kind k);
  // The value as a user would write it on the command line (scalars) or in flow YAML (containers).
  std::string to_display() const;

  // Structural equality of values (origins are ignored).
  friend bool operator==(const Node& a, const Node& b);
  friend bool operator!=(const Node& a, const Node& b) { return !(a == b); }

 private:
  Kind kind_ = Kind::Null;
  Origin origin_;
  std::variant<std::monostate, bool, int64_t, double, std::string> scalar_;
  std::vector<Node> items_;
  std::vector<Entry> entries_;
};

// Merges `src` into `dst` as OmegaConf does: mappings merge key by key (recursively), anything else
// replaces the destination value (lists are replaced, not concatenated).
void merge_into(Node& dst, const Node& src);

// Throws ConfigError when `value`, placed at `path` (a dotted key from the root, "" for the root),
// would nest more than kMaxDepth dicts and lists: "<what> would nest <n> levels deep; the limit is
// 256 nested dicts and lists".
void check_depth(const std::string& path, const Node& value, const std::string& what);

// A long dotted path cut to its first parts for an error message: "a.a.a.a....(300 parts)".
std::string abbreviate_path(const std::string& path);

// Splits "a.b.0.c" into {"a","b","0","c"}; throws ConfigError for an empty part ("a..b").
std::vector<std::string> split_path(const std::string& path);

// Formats a double as Python's repr does: the shortest digits that read back to the same value,
// fixed notation for exponents -4..15 and scientific otherwise, always recognisable as a float:
// 0.1, 1.0, 0.0003, 1e-05, 1e+16, inf, -inf, nan.
std::string format_float(double v);

// Levenshtein distance (insertions, deletions, substitutions), for "did you mean" suggestions.
size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace wavetrain::config
