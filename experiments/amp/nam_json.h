// Reading a .nam file's fields: errors that name the key path, and integer fields (a size must be a
// JSON integer within int64).
//
// nlohmann's get<int64_t>() converts a JSON float with a plain cast, so 3.7 became 3 and 1e114 was
// undefined behaviour (UBSan, found by the nam fuzzer). Python's NAM writes these fields as
// integers; an integral float (16.0) is accepted as PyTorch's json reader would hand it to Python.
#pragma once

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace wavetrain::experiments::amp {

// An error at a key of a .nam model: key() is the key's path within what was parsed
// ("layers[0].channels"; empty for the object itself), what() is "key: problem". A caller that
// parsed the object holding it puts its own path in front ("config.layers[0].channels"), so that
// the message names the whole path from the top of the file.
class NamKeyError : public std::invalid_argument {
 public:
  NamKeyError(const std::string& key, const std::string& problem)
      : std::invalid_argument(key.empty() ? problem : key + ": " + problem), key_(key), problem_(problem) {}
  const std::string& key() const { return key_; }
  const std::string& problem() const { return problem_; }

 private:
  std::string key_, problem_;
};

// What a JSON value is, for "expected ..., found <this>": a number as written, a string quoted
// (both cut to 40 characters), otherwise its kind ("an object", "a list", "null", "true").
inline std::string nam_json_found(const nlohmann::json& v) {
  auto cut = [](std::string text) { return text.size() > 40 ? text.substr(0, 37) + "..." : text; };
  switch (v.type()) {
    case nlohmann::json::value_t::string: return "a string (" + cut(v.dump()) + ")";
    case nlohmann::json::value_t::object: return "an object";
    case nlohmann::json::value_t::array: return "a list";
    case nlohmann::json::value_t::null: return "null";
    case nlohmann::json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    default: return cut(v.dump());  // numbers (dump() writes no newline or control character)
  }
}

// `key` names the value in the error: "layers[0].channels: expected an integer, found 3.5".
inline int64_t nam_integer(const nlohmann::json& v, const std::string& key) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(u);
    throw NamKeyError(key, "expected an integer below 2^63, found " + nam_json_found(v));
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    // 2^63 is exactly representable; every double below it in magnitude fits int64.
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9223372036854775808.0) return static_cast<int64_t>(d);
  }
  throw NamKeyError(key, "expected an integer, found " + nam_json_found(v));
}

inline std::vector<int64_t> nam_integers(const nlohmann::json& v, const std::string& key) {
  if (!v.is_array()) throw NamKeyError(key, "expected a list of integers, found " + nam_json_found(v));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(nam_integer(v[i], key + "[" + std::to_string(i) + "]"));
  return out;
}

inline bool nam_boolean(const nlohmann::json& v, const std::string& where) {
  if (!v.is_boolean()) throw NamKeyError(where, "expected true or false, found " + nam_json_found(v));
  return v.get<bool>();
}

inline const nlohmann::json& nam_required(const nlohmann::json& o, const char* key, const std::string& where) {
  if (!o.contains(key)) throw NamKeyError(where, std::string("no '") + key + "'");
  return o.at(key);
}

// o[key], an integer >= 1; absent (or null, with a fallback) gives `fallback`, or an error when
// there is none (fallback < 0).
inline int64_t nam_positive(const nlohmann::json& o, const char* key, const std::string& where, int64_t fallback = -1) {
  if (!o.contains(key) || (fallback >= 0 && o.at(key).is_null())) {
    if (fallback < 0) throw NamKeyError(where, std::string("no '") + key + "'");
    return fallback;
  }
  const std::string path = where.empty() ? std::string(key) : where + "." + key;
  const int64_t v = nam_integer(o.at(key), path);
  if (v < 1) throw NamKeyError(path, "must be >= 1, found " + std::to_string(v));
  return v;
}

}  // namespace wavetrain::experiments::amp
