// What the serialization sources share and nothing else should use: the kind names of error
// messages, the UTF-8 check both pickle directions need, printable excerpts of untrusted names, and
// the nesting limit. Internal: include it only from trainer/serialization/*.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace wavetrain::serialization::detail {

// "an int", "a list", "None": kind names as they read in a sentence.
inline std::string a(const char* kind) {
  const std::string name = kind;
  if (name == "None") return name;
  return (name == "int" ? "an " : "a ") + name;
}

// Checks UTF-8 as Python's "surrogatepass" decoder does (pickle decodes BINUNICODE that way):
// shortest forms only, code points up to U+10FFFF, but lone surrogates are allowed.
inline bool valid_utf8(const std::string& s) {
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len) return false;
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_len[len] || cp > 0x10FFFF) return false;
    i += len;
  }
  return true;
}

// Names from the input (modules, classes, records); keep error messages printable and short.
inline std::string printable(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size() && i < 120; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F) {
      out.push_back(static_cast<char>(c));
    } else {
      static const char hex[] = "0123456789abcdef";
      out += "\\x";
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  if (s.size() > 120) out += "...";
  return out;
}

// How deeply a Value may nest, both when pickling it and when an unpickled one is built; it bounds
// the recursion over the tree.
constexpr int kMaxDepth = 1000;

}  // namespace wavetrain::serialization::detail
