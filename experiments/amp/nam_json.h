// Reading a .nam file's integer fields: a size must be a JSON integer within int64.
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

inline int64_t nam_integer(const nlohmann::json& v, const std::string& what) {
  if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u <= static_cast<uint64_t>(INT64_MAX)) return static_cast<int64_t>(u);
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    // 2^63 is exactly representable; every double below it in magnitude fits int64.
    if (std::isfinite(d) && d == std::floor(d) && std::abs(d) < 9223372036854775808.0) return static_cast<int64_t>(d);
  }
  std::string text = v.dump();
  if (text.size() > 40) text = text.substr(0, 37) + "...";
  throw std::invalid_argument(what + " must be an integer, found " + text);
}

inline std::vector<int64_t> nam_integers(const nlohmann::json& v, const std::string& what) {
  if (!v.is_array()) throw std::invalid_argument(what + " must be a list of integers, found a JSON " + std::string(v.type_name()));
  std::vector<int64_t> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(nam_integer(v[i], what + "[" + std::to_string(i) + "]"));
  return out;
}

}  // namespace wavetrain::experiments::amp
