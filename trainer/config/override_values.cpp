// Number literals in overrides (which unquoted texts are ints and floats) and the values that a
// sweep expands to; see override.h.
#include "trainer/config/override.h"

#include <fnmatch.h>

#include <algorithm>
#include <charconv>
#include <cmath>

#include "trainer/config/override_internal.h"

namespace wavetrain::config {
namespace {

// Shared with the parser (override.cpp) through override_internal.h.
using detail::cl, detail::is_digit, detail::npos, detail::range_values;

// A guard against a typo such as range(0,1e9) allocating forever; no real multirun is this big.
constexpr uint64_t kMaxSweepValues = 100000;

// DIGIT ('_'? DIGIT)*: digits, optionally grouped by single underscores (1_000). Returns the end.
size_t match_digits(const std::string& s, size_t i) {
  if (i >= s.size() || !is_digit(s[i])) return npos;
  ++i;
  while (i < s.size()) {
    if (is_digit(s[i])) ++i;
    else if (s[i] == '_' && i + 1 < s.size() && is_digit(s[i + 1])) i += 2;
    else break;
  }
  return i;
}
// Hydra's unsigned int: "0", or digits not starting with 0 (so `007` is the string "007").
size_t match_unsigned(const std::string& s, size_t i) {
  return i < s.size() && s[i] == '0' ? i + 1 : match_digits(s, i);
}

double as_double(const Node& n) { return n.kind() == Node::Kind::Int ? double(n.int_value()) : n.float_value(); }

// The fewest decimal places (0..15) that write x exactly enough to read it back; 16 if none do.
int decimals(double x) {
  char buf[400];  // %f of 1e308 needs 309 digits
  for (int d = 0; d <= 15; ++d) {
    const auto w = std::to_chars(buf, buf + sizeof(buf), x, std::chars_format::fixed, d);
    double back = 0;
    std::from_chars(buf, w.ptr, back);
    if (back == x) return d;
  }
  return 16;
}

void check_count(double count) {
  if (count > double(kMaxSweepValues))
    throw ConfigError("range() would give more than " + std::to_string(kMaxSweepValues) + " values");
}

bool glob_matches(const std::vector<std::string>& patterns, const std::string& option) {
  for (const std::string& p : patterns)
    if (fnmatch(p.c_str(), option.c_str(), 0) == 0) return true;
  return false;
}

}  // namespace

namespace detail {

std::string lower(std::string s) {
  for (char& c : s)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return s;
}

size_t skip_sign(const std::string& s) { return !s.empty() && (s[0] == '+' || s[0] == '-') ? 1 : 0; }

bool is_int_literal(const std::string& s) { return match_unsigned(s, skip_sign(s)) == s.size(); }

// 1.5, -0.5, .5, 5., 1e-3, 1.5E+3, 1_000.5: a '.' or an exponent is what makes a float.
bool is_float_literal(const std::string& s) {
  const size_t begin = skip_sign(s);
  size_t i = match_unsigned(s, begin);
  const bool has_int = i != npos;
  if (!has_int) i = begin;
  bool has_point = false;
  if (i < s.size() && s[i] == '.') {
    has_point = true;
    const size_t frac = match_digits(s, i + 1);
    if (frac == npos && !has_int) return false;  // a lone "."
    i = frac == npos ? i + 1 : frac;
  } else if (!has_int) {
    return false;
  }
  bool has_exp = false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t e = i + 1;
    if (e < s.size() && (s[e] == '+' || s[e] == '-')) ++e;
    i = match_digits(s, e);
    if (i == npos) return false;
    has_exp = true;
  }
  return i == s.size() && (has_point || has_exp);
}

// from_chars wants no '+' and no '_'.
std::string number_text(const std::string& s) {
  std::string t;
  for (size_t i = s[0] == '+' ? 1 : 0; i < s.size(); ++i)
    if (s[i] != '_') t += s[i];
  return t;
}

std::vector<Node> range_values(const Node& start, const Node& stop, const Node& step) {
  std::vector<Node> out;
  using K = Node::Kind;
  if (start.kind() == K::Int && stop.kind() == K::Int && step.kind() == K::Int) {
    const int64_t a = start.int_value(), b = stop.int_value(), c = step.int_value();
    if (c == 0) throw ConfigError("range() step must not be 0");
    // Unsigned arithmetic: b - a can exceed int64 (range(-2^63, 2^63-1)), never uint64.
    uint64_t count = 0;
    if ((c > 0 && b > a) || (c < 0 && a > b)) {
      const uint64_t diff = c > 0 ? uint64_t(b) - uint64_t(a) : uint64_t(a) - uint64_t(b);
      const uint64_t stride = c > 0 ? uint64_t(c) : 0 - uint64_t(c);
      count = diff / stride + (diff % stride != 0);
    }
    check_count(double(count));
    // The sum wraps around in uint64 but lands on the (in-range) true value.
    for (uint64_t i = 0; i < count; ++i) out.push_back(Node::integer(int64_t(uint64_t(a) + i * uint64_t(c)), cl()));
    return out;
  }
  const double a = as_double(start), b = as_double(stop), c = as_double(step);
  if (!std::isfinite(a) || !std::isfinite(b) || !std::isfinite(c))
    throw ConfigError("range() arguments must be finite numbers");
  if (c == 0) throw ConfigError("range() step must not be 0");
  // Adding 0.1 steps in binary drifts (0.1 + 2*0.1 is 0.30000000000000004, and (0.5-0.1)/0.1 is
  // just over 4, giving a 5th value). So count in units of the finest decimal place the arguments
  // are written with: range(0.1,0.5,0.1) is 1..5 step 1 in tenths, and k/10.0 is the double
  // nearest to the decimal k/10, i.e. exactly what typing that value would give.
  const int d = std::max({decimals(a), decimals(b), decimals(c)});
  const double scale = std::pow(10.0, d);
  const double kExact = 9007199254740992.0;  // 2^53: integers below it are exact doubles
  if (d <= 15 && std::max({std::fabs(a), std::fabs(b), std::fabs(c)}) * scale < kExact) {
    const Node scaled_start = Node::integer(std::llround(a * scale));
    const Node scaled_stop = Node::integer(std::llround(b * scale));
    const Node scaled_step = Node::integer(std::llround(c * scale));
    for (const Node& k : range_values(scaled_start, scaled_stop, scaled_step))
      out.push_back(Node::floating(double(k.int_value()) / scale, cl()));
    return out;
  }
  // Arguments with more than 15 decimals, or huge ones: plain floating point.
  const double n = std::ceil((b - a) / c);
  check_count(n);
  const uint64_t count = n > 0 ? uint64_t(n) : 0;
  for (uint64_t i = 0; i < count; ++i) out.push_back(Node::floating(a + double(i) * c, cl()));
  return out;
}

}  // namespace detail

std::vector<Node> expand_sweep(const Sweep& sweep, const std::vector<std::string>& group_options) {
  switch (sweep.kind) {
    case Sweep::Kind::Choice: return sweep.choices;
    case Sweep::Kind::Range: return range_values(sweep.start, sweep.stop, sweep.step);
    case Sweep::Kind::Glob: {
      std::vector<Node> out;
      for (const std::string& option : group_options)
        if (glob_matches(sweep.include, option) && !glob_matches(sweep.exclude, option))
          out.push_back(Node::string(option, cl()));
      return out;
    }
  }
  return {};
}

}  // namespace wavetrain::config
