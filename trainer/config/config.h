// Typed access to a composed config. Reading resolves interpolations; a value of the wrong type is
// an error that names the value, the wanted type, the key and where the value came from:
//   Value 'abc' could not be converted to int (trainer.max_epochs, from the command line)
// Conversions are strict: 12.0 is not an int, the quoted '123' is a string, `on` is not a bool.
// An int is accepted where a float is wanted.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "trainer/config/interpolation.h"
#include "trainer/config/node.h"

namespace wavetrain::config {

// Number: an int or a float (`limit_val_batches: 10` or `0.5`). Scalar: a number or a string
// (`max_time: 3600` or `'01:00:00'`, `cpu_batch_parts: auto`).
enum class ValueType { Bool, Int, Float, String, List, Dict, Number, Scalar };
const char* value_type_name(ValueType t);

// A key a component reads, with its type: components declare these so that a composed config is
// checked before any work starts, not when the key is first read.
struct KeySpec {
  std::string key;
  ValueType type;
  bool required = false;  // absent keys are an error only when required
};

class Config {
 public:
  Config() : tree_(Node::mapping()), ctx_(ResolveContext::current()) {}
  explicit Config(Node tree, ResolveContext ctx = ResolveContext::current());

  const Node& tree() const { return tree_; }
  Node& tree() { return tree_; }
  const ResolveContext& context() const { return ctx_; }

  bool has(const std::string& key) const { return tree_.find_path(key) != nullptr; }
  Node value(const std::string& key) const;  // resolved; throws if absent

  bool get_bool(const std::string& key) const;
  int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  std::string get_string(const std::string& key) const;

  // The same, with a fallback when the key is absent (a present value of the wrong type still throws).
  bool get_bool(const std::string& key, bool fallback) const;
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key, double fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;

  // get_int(key, fallback), refused above `most` with the key, the value and where it came from:
  //   trainer.devices=9223372036854775807 (the command line) is too large: at most 4096
  // For ints that size a loop, an allocation or a count of threads or processes, or that are cast
  // to int: the bound keeps a typo from becoming an overflow, a hang or the OOM killer.
  int64_t get_int_at_most(const std::string& key, int64_t fallback, int64_t most) const;

  // Checks every declared key that is present (and every required one) for its type.
  void check(const std::vector<KeySpec>& specs) const;

 private:
  Node tree_;
  ResolveContext ctx_;
};

// Strict conversions of an already resolved node; `key` is used in the error message.
bool to_bool(const Node& n, const std::string& key);
int64_t to_int(const Node& n, const std::string& key);
double to_float(const Node& n, const std::string& key);
std::string to_string(const Node& n, const std::string& key);

}  // namespace wavetrain::config
