// Internal to the override parser (override.cpp) and override_values.cpp: the character classes of
// Hydra's override grammar, and the number literals and range() arithmetic that the parser asks about.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "trainer/config/node.h"

namespace wavetrain::config::detail {

inline constexpr size_t npos = std::string::npos;

inline Origin cl() { return Origin::from_command_line(); }

// ASCII only, so that the grammar does not depend on the process locale.
inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_id_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
// Hydra's identifiers allow '-' after the first character (`hydra.job.env-set`).
inline bool is_id_char(char c) { return is_id_start(c) || is_digit(c) || c == '-'; }
inline bool is_ws(char c) { return c == ' ' || c == '\t'; }
// Characters that end an unquoted value: they separate elements or open/close a container.
inline bool is_structural(char c) { return c != '\0' && std::string_view(",[]{}()").find(c) != npos; }
// `\c` gives a literal c in an unquoted value for these; any other backslash is kept as typed,
// so Windows paths and `\${x}` (an escaped interpolation, for the resolver) pass through.
inline bool is_escapable(char c) { return is_structural(c) || c == ':' || c == '=' || c == '\\' || is_ws(c); }
// What Hydra's lexer takes in an unquoted value besides escapes and interpolations: ASCII letters,
// digits, whitespace and / - \ + . $ % * @ ? | _ :, and '=' (wavetrain's addition). Anything else
// (# ~ & ; ! < > ^ `, non-ASCII letters, control characters) needs quotes.
inline bool is_unquoted_char(char c) {
  return is_id_char(c) || is_ws(c) || std::string_view("/\\+.$%*@?|:=").find(c) != npos;
}

// Number literals and range() arithmetic, defined in override_values.cpp.
std::string lower(std::string s);
size_t skip_sign(const std::string& s);
bool is_int_literal(const std::string& s);
bool is_float_literal(const std::string& s);
std::string number_text(const std::string& s);
std::vector<Node> range_values(const Node& start, const Node& stop, const Node& step);

}  // namespace wavetrain::config::detail
