// Typed access; see config.h.
#include "trainer/config/config.h"

namespace wavetrain::config {
namespace {

[[noreturn]] void not_convertible(const Node& n, const char* type, const std::string& key) {
  throw ConfigError("Value '" + n.to_display() + "' could not be converted to " + type + " (" + key + ", from " +
                    n.origin().str() + ")");
}

}  // namespace

const char* value_type_name(ValueType t) {
  switch (t) {
    case ValueType::Bool: return "bool";
    case ValueType::Int: return "int";
    case ValueType::Float: return "float";
    case ValueType::String: return "string";
    case ValueType::List: return "list";
    case ValueType::Dict: return "dict";
    case ValueType::Number: return "number";
    case ValueType::Scalar: return "number or string";
  }
  return "?";
}

bool to_bool(const Node& n, const std::string& key) {
  if (n.kind() != Node::Kind::Bool) not_convertible(n, "bool", key);
  return n.bool_value();
}

int64_t to_int(const Node& n, const std::string& key) {
  if (n.kind() != Node::Kind::Int) not_convertible(n, "int", key);
  return n.int_value();
}

double to_float(const Node& n, const std::string& key) {
  if (n.kind() == Node::Kind::Int) return static_cast<double>(n.int_value());
  if (n.kind() != Node::Kind::Float) not_convertible(n, "float", key);
  return n.float_value();
}

std::string to_string(const Node& n, const std::string& key) {
  switch (n.kind()) {
    case Node::Kind::String:
      return n.string_value();
    case Node::Kind::Int:
    case Node::Kind::Float:
    case Node::Kind::Bool:
      return n.to_display();  // a number where a name is wanted (e.g. a file stem "3") is fine
    default:
      not_convertible(n, "string", key);
  }
}

Config::Config(Node tree, ResolveContext ctx) : tree_(std::move(tree)), ctx_(std::move(ctx)) {}

Node Config::value(const std::string& key) const { return resolve_path(tree_, key, ctx_); }

bool Config::get_bool(const std::string& key) const { return to_bool(value(key), key); }
int64_t Config::get_int(const std::string& key) const { return to_int(value(key), key); }
double Config::get_float(const std::string& key) const { return to_float(value(key), key); }
std::string Config::get_string(const std::string& key) const { return to_string(value(key), key); }

bool Config::get_bool(const std::string& key, bool fallback) const { return has(key) ? get_bool(key) : fallback; }
int64_t Config::get_int(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}
int64_t Config::get_int_at_most(const std::string& key, int64_t fallback, int64_t most) const {
  if (!has(key)) return fallback;
  const int64_t v = get_int(key);
  if (v > most)
    throw ConfigError(key + "=" + std::to_string(v) + " (" + tree_.find_path(key)->origin().str() + ") is too large: at most " +
                      std::to_string(most));
  return v;
}
double Config::get_float(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}
std::string Config::get_string(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_string(key) : fallback;
}

void Config::check(const std::vector<KeySpec>& specs) const {
  for (const KeySpec& spec : specs) {
    if (!has(spec.key)) {
      if (spec.required)
        throw ConfigError("Missing key '" + spec.key + "' (a " + value_type_name(spec.type) + ")");
      continue;
    }
    // A `???` fails when it is read, as anywhere else.
    if (tree_.find_path(spec.key)->is_missing()) continue;
    const Node v = value(spec.key);
    switch (spec.type) {
      case ValueType::Bool: to_bool(v, spec.key); break;
      case ValueType::Int: to_int(v, spec.key); break;
      case ValueType::Float: to_float(v, spec.key); break;
      case ValueType::String: to_string(v, spec.key); break;
      case ValueType::List:
        if (!v.is_sequence()) not_convertible(v, "list", spec.key);
        break;
      case ValueType::Dict:
        if (!v.is_mapping()) not_convertible(v, "dict", spec.key);
        break;
      case ValueType::Number: to_float(v, spec.key); break;
      case ValueType::Scalar:
        if (v.kind() != Node::Kind::Int && v.kind() != Node::Kind::Float && v.kind() != Node::Kind::String)
          not_convertible(v, "number or string", spec.key);
        break;
    }
  }
}

}  // namespace wavetrain::config
