// YAML writing (our own emitter: block style, quoting only the strings that need it); see yaml_io.h.
#include "trainer/config/yaml_io.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "trainer/config/yaml_internal.h"

namespace wavetrain::config {
namespace {

// Decodes the UTF-8 code point at s[i] and advances i; -1 for bytes that are not valid UTF-8.
long next_code_point(const std::string& s, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char b = byte(i);
  const int len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) return ++i, -1;
  long cp = len == 1 ? b : b & (0x7F >> len);
  for (int k = 1; k < len; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return ++i, -1;
    cp = (cp << 6) | (byte(i + k) & 0x3F);
  }
  i += len;
  static const long min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_for_len[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;  // overlong, surrogate
  return cp;
}

// Characters that only a double-quoted scalar can hold (as escapes): control characters, line and
// paragraph separators, the byte-order mark and other YAML non-printables.
bool needs_escape(long cp) {
  const bool printable = (cp >= 0x20 && cp <= 0x7E) || (cp >= 0xA0 && cp <= 0xD7FF) ||
                         (cp >= 0xE000 && cp <= 0xFFFD) || cp >= 0x10000;
  return !printable || cp == 0x2028 || cp == 0x2029 || cp == 0xFEFF;
}

// A cursor over a plain scalar, for the YAML 1.1 patterns below (written out rather than as
// std::regex, whose matcher recurses once per character).
struct Scan {
  const std::string& s;
  size_t i = 0;
  bool end() const { return i == s.size(); }
  bool eat(const char* set) {  // one character of `set`
    if (end() || s[i] == '\0' || !std::strchr(set, s[i])) return false;
    ++i;
    return true;
  }
  size_t run(const char* set, size_t most = std::string::npos) {  // as many as there are, up to `most`
    size_t n = 0;
    while (n < most && eat(set)) ++n;
    return n;
  }
  bool exponent(bool sign_optional) {  // [eE][-+]?[0-9]+, or with the sign required
    return eat("eE") && (eat("-+") || sign_optional) && run("0123456789") > 0;
  }
  bool base60() {  // (:[0-5]?[0-9])+
    size_t groups = 0;
    while (eat(":")) {
      const size_t first = i;
      if (!eat("0123456789")) return false;
      if (s[first] <= '5') eat("0123456789");
      ++groups;
    }
    return groups > 0;
  }
};

constexpr const char* kDigits = "0123456789";
constexpr const char* kDigitsUnderscore = "0123456789_";

// Whether PyYAML (YAML 1.1, which OmegaConf reads with) may take the plain scalar `s` for an int,
// a float or a date: PyYAML's int, float and timestamp patterns and OmegaConf's float, matched
// whole (the floats a little more loosely than either: quoting more costs nothing). `1_000`,
// `+1_0`, `0b101`, `0x_1F`, `1:30` (90, in base 60), `1_0.5` and `2001-12-14` are strings in YAML 1.2.
bool yaml11_reads_as_other(const std::string& s) {
  const auto whole = [&s](size_t from, const auto& pattern) {
    Scan c{s, from};
    return pattern(c) && c.end();
  };
  if (s.empty() || s[0] == '\0' || !std::strchr("-+.0123456789", s[0])) return false;  // every pattern starts so
  const size_t body = s[0] == '-' || s[0] == '+' ? 1 : 0;
  const auto leading = [](Scan& c) { return c.eat(kDigits) && (c.run(kDigitsUnderscore), true); };  // [0-9][0-9_]*
  return
      // ints: 0b..., 0..., 0 or [1-9][0-9_]*, 0x..., base 60
      whole(body, [](Scan& c) { return c.eat("0") && c.eat("b") && c.run("01_") > 0; }) ||
      whole(body, [](Scan& c) { return c.eat("0") && c.run("01234567_") > 0; }) ||
      whole(body, [](Scan& c) { return c.eat("0") || (c.eat("123456789") && (c.run(kDigitsUnderscore), true)); }) ||
      whole(body, [](Scan& c) { return c.eat("0") && c.eat("x") && c.run("0123456789abcdefABCDEF_") > 0; }) ||
      whole(body, [](Scan& c) { return c.eat("123456789") && (c.run(kDigitsUnderscore), true) && c.base60(); }) ||
      // floats: 1_0.5e+3, 1e5, .5 (no sign), 1:30.5
      whole(body, [&](Scan& c) {
        return leading(c) && c.eat(".") && (c.run(kDigitsUnderscore), true) && (c.end() || c.exponent(true));
      }) ||
      whole(body, [&](Scan& c) { return leading(c) && c.exponent(true); }) ||
      whole(0, [&](Scan& c) { return c.eat(".") && leading(c) && (c.end() || c.exponent(false)); }) ||
      whole(body, [&](Scan& c) {
        return leading(c) && c.base60() && c.eat(".") && (c.run(kDigitsUnderscore), true);
      }) ||
      // dates, maybe with a time and a zone
      whole(0, [](Scan& c) {
        if (!(c.run(kDigits, 4) == 4 && c.eat("-") && c.run(kDigits, 2) > 0 && c.eat("-") && c.run(kDigits, 2) > 0))
          return false;
        if (c.end()) return true;
        if (!c.eat("Tt") && c.run(" \t") == 0) return false;
        if (!(c.run(kDigits, 2) > 0 && c.eat(":") && c.run(kDigits, 2) == 2 && c.eat(":") && c.run(kDigits, 2) == 2))
          return false;
        if (c.eat(".")) c.run(kDigits);
        c.run(" \t");
        if (c.end()) return true;
        return c.eat("Z") || (c.eat("-+") && c.run(kDigits, 2) > 0 && (!c.eat(":") || c.run(kDigits, 2) == 2));
      });
}

// Whether `s` can be written unquoted and reads back as this same string, in YAML 1.2 and in the
// YAML 1.1 of PyYAML and OmegaConf. Conservative: quoting a string that did not need it costs nothing.
bool can_be_plain(const std::string& s) {
  if (s.empty() || detail::plain_kind(s) != Node::Kind::String || yaml11_reads_as_other(s)) return false;
  if (s == "=") return false;  // PyYAML's `value` tag, which its safe loader cannot build
  // YAML 1.1 booleans: strings to us, but PyYAML (OmegaConf) would read them as bools.
  static const char* const yaml11_bools[] = {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
                                             "on", "On", "ON", "off", "Off", "OFF"};
  for (const char* word : yaml11_bools)
    if (s == word) return false;
  if (std::strchr("-?:,[]{}#&*!|>'\"%@` ", s.front()) || s.back() == ' ' || s.back() == ':') return false;
  if (s.find(": ") != std::string::npos || s.find(" #") != std::string::npos) return false;
  return s.rfind("...", 0) != 0;  // a document end marker when written at the start of a line
}

std::string double_quoted(const std::string& s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    const size_t start = i;
    const long cp = next_code_point(s, i);
    if (cp == '"' || cp == '\\') {
      out += '\\';
      out += static_cast<char>(cp);
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (needs_escape(cp)) {
      char buf[16];
      const char* format = cp <= 0xFF ? "\\x%02lX" : cp <= 0xFFFF ? "\\u%04lX" : "\\U%08lX";
      std::snprintf(buf, sizeof(buf), format, cp);
      out += buf;
    } else {
      out.append(s, start, i - start);
    }
  }
  return out + "\"";
}

// A string as a YAML scalar: plain if possible, else single-quoted ('' for a quote), else
// double-quoted with escapes when it holds line breaks, tabs or other non-printables.
std::string string_yaml(const std::string& s, bool is_key, const std::string& path) {
  bool escape = false;
  for (size_t i = 0; i < s.size();) {
    const long cp = next_code_point(s, i);
    if (cp < 0) throw ConfigError("Cannot write '" + path + "' as YAML: the string is not valid UTF-8");
    escape = escape || needs_escape(cp);
  }
  if (escape) return double_quoted(s);
  if (can_be_plain(s) && !(is_key && s == "<<")) return s;  // a plain `<<` key is a merge key
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string scalar_yaml(const Node& n, const std::string& path) {
  switch (n.kind()) {
    case Node::Kind::Null: return "null";
    case Node::Kind::Bool: return n.bool_value() ? "true" : "false";
    case Node::Kind::Int: return std::to_string(n.int_value());
    case Node::Kind::Float: {
      const std::string f = format_float(n.float_value());
      return f == "inf" ? ".inf" : f == "-inf" ? "-.inf" : f == "nan" ? ".nan" : f;
    }
    case Node::Kind::Missing: return "???";
    case Node::Kind::String: return string_yaml(n.string_value(), false, path);
    case Node::Kind::Sequence: return "[]";  // only called for empty containers
    case Node::Kind::Mapping: return "{}";
  }
  return "null";
}

bool is_block(const Node& n) {
  return (n.is_mapping() && !n.entries().empty()) || (n.is_sequence() && !n.items().empty());
}

// Writes a non-empty mapping or sequence with its lines indented by `indent`; when `after_dash`, the
// first line goes right after a "- " already written.
void emit_block(const Node& n, size_t indent, bool after_dash, const std::string& path, std::string& out) {
  bool first = true;
  const auto begin_line = [&] {
    if (!(first && after_dash)) out.append(indent, ' ');
    first = false;
  };
  // The value after "key:" or "-": a block mapping goes on the next lines after a key but on the
  // same line after a dash ("- a: 1\n  b: 2"); scalars and empty containers stay on the line.
  const auto value = [&](const Node& v, bool after_key, const std::string& child_path) {
    if (!is_block(v)) {
      out += " " + scalar_yaml(v, child_path) + "\n";
    } else if (after_key) {
      out += "\n";
      emit_block(v, indent + 2, false, child_path, out);
    } else {
      out += " ";
      emit_block(v, indent + 2, true, child_path, out);
    }
  };
  const std::string prefix = path.empty() ? "" : path + ".";
  if (n.is_mapping()) {
    for (const Node::Entry& e : n.entries()) {
      begin_line();
      const std::string key = string_yaml(e.first, true, prefix + e.first);
      // YAML limits an implicit key to 1024 characters; a longer one needs the explicit "? " form.
      if (key.size() > 1000) {
        out += "? " + key + "\n" + std::string(indent, ' ') + ":";
      } else {
        out += key + ":";
      }
      value(e.second, true, prefix + e.first);
    }
  } else {
    for (size_t i = 0; i < n.items().size(); ++i) {
      begin_line();
      out += "-";
      value(n.items()[i], false, prefix + std::to_string(i));
    }
  }
}

}  // namespace

std::string to_yaml(const Node& node) {
  if (!is_block(node)) return scalar_yaml(node, "") + "\n";
  std::string out;
  emit_block(node, 0, false, "", out);
  return out;
}

}  // namespace wavetrain::config
