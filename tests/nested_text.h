// Test support: text nested n levels deep ("[[[1]]]"), for the tests of the config engine's
// nesting limits.
#pragma once

#include <string>

namespace wavetrain::testing {

inline std::string nested(const std::string& open, const std::string& inner, const std::string& close, size_t n) {
  std::string s;
  for (size_t i = 0; i < n; ++i) s += open;
  s += inner;
  for (size_t i = 0; i < n; ++i) s += close;
  return s;
}

}  // namespace wavetrain::testing
