// Parsing of command-line overrides (Hydra's grammar, a hand-written recursive descent); see
// override.h. Number literals and the expansion of sweeps are in override_values.cpp.
#include "trainer/config/override.h"

#include <algorithm>
#include <charconv>
#include <limits>

#include "trainer/config/override_internal.h"

namespace wavetrain::config {
namespace {

// The character classes (override_internal.h), and the number literals and range() arithmetic
// (override_values.cpp, which also expands sweeps).
using detail::cl, detail::npos;
using detail::is_digit, detail::is_escapable, detail::is_id_char, detail::is_id_start, detail::is_structural,
    detail::is_unquoted_char, detail::is_ws;
using detail::is_float_literal, detail::is_int_literal, detail::lower, detail::number_text, detail::range_values,
    detail::skip_sign;

// A function argument: `value` or `name=value`.
struct Arg {
  std::string name;
  Node value;
  size_t pos;
};

class Parser {
 public:
  Parser(const std::string& text, std::string what) : s_(text), what_(std::move(what)) {}

  Override parse_override() {
    Override o;
    o.text = s_;
    const std::pair<std::string, OverrideType> prefixes[] = {
        {"++", OverrideType::ForceAdd}, {"+", OverrideType::Add}, {"~", OverrideType::Delete}};
    for (const auto& [prefix, type] : prefixes)
      if (s_.compare(0, prefix.size(), prefix) == 0) {
        o.type = type;
        i_ = prefix.size();
        break;
      }
    // A key never contains '=', so the first one ends it.
    const size_t eq = s_.find('=', i_);
    const size_t key_end = eq == npos ? s_.size() : eq;
    const size_t at = s_.find('@', i_);
    if (at < key_end) {
      check_key(i_, at, true);
      if (at + 1 == key_end) expected("a package name after '@' (_global_ for the global package)", key_end);
      check_key(at + 1, key_end, false);
      o.key = s_.substr(i_, at - i_);
      o.package = s_.substr(at + 1, key_end - at - 1);
    } else {
      check_key(i_, key_end, true);
      o.key = s_.substr(i_, key_end - i_);
    }
    if (eq == npos) {
      if (o.type != OverrideType::Delete) expected("'=' after the key", key_end);
      return o;
    }
    i_ = eq + 1;
    parse_value(o);
    if (o.type == OverrideType::Delete && o.sweep) fail("a delete (~key) cannot take a sweep", eq + 1);
    return o;
  }

  // `zip(` has been read: key=[...] pairs up to ')'.
  Zip parse_zip(size_t after_open) {
    i_ = after_open;
    Zip z;
    if (eat(')')) fail("zip() needs at least one key=[...]", i_ - 1);
    while (true) {
      skip_ws();
      const size_t key_pos = i_;
      while (is_id_char(peek()) || peek() == '.') ++i_;
      check_key(key_pos, i_, false);
      const std::string key = s_.substr(key_pos, i_ - key_pos);
      skip_ws();
      if (peek() != '=') expected("'=' after the key '" + key + "'", i_);
      ++i_;
      for (const auto& kv : z.keys)
        if (kv.first == key) fail("the key '" + key + "' appears twice", key_pos);
      skip_ws();
      if (peek() != '[') expected("a list [...] of values for '" + key + "'", i_);
      z.keys.emplace_back(key, parse_list().items());
      if (eat(')')) break;
      if (!eat(',')) expected("',' or ')'", i_);
    }
    skip_ws();
    if (!at_end()) expected("the end of the text after zip(...)", i_);
    const size_t len = z.keys[0].second.size();
    bool same = true;
    std::string lengths;
    for (const auto& kv : z.keys) {
      same = same && kv.second.size() == len;
      lengths += (lengths.empty() ? "" : ", ") + kv.first + " has " + std::to_string(kv.second.size());
    }
    if (!same) fail("the lists must have the same length, but " + lengths, npos);
    if (len == 0) fail("the lists are empty", npos);
    return z;
  }

 private:
  const std::string& s_;
  std::string what_;  // "override" or "zip", for messages
  size_t i_ = 0;      // the cursor
  size_t depth_ = 0;  // lists and dicts open at the cursor

  struct Nested {
    explicit Nested(size_t& depth) : depth_(depth) { ++depth_; }
    ~Nested() { --depth_; }
    size_t& depth_;
  };

  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[i_]; }
  void skip_ws() { i_ = ws_end(i_); }
  // The end of the identifier that starts at j (j if none does), and of the whitespace at j.
  size_t id_end(size_t j) const {
    if (j < s_.size() && is_id_start(s_[j]))
      while (j < s_.size() && is_id_char(s_[j])) ++j;
    return j;
  }
  size_t ws_end(size_t j) const {
    while (j < s_.size() && is_ws(s_[j])) ++j;
    return j;
  }
  // Skips whitespace, then consumes `c` if it is next.
  bool eat(char c) {
    skip_ws();
    if (peek() != c) return false;
    ++i_;
    return true;
  }

  [[noreturn]] void fail(const std::string& msg, size_t pos, const std::string& suffix = "") const {
    const std::string where = pos == npos ? "" : " at position " + std::to_string(pos);
    // A generated override can be huge; its start and the position are enough to find it.
    const std::string text =
        s_.size() <= 200 ? "'" + s_ + "'" : "'" + s_.substr(0, 60) + "...' (" + std::to_string(s_.size()) + " characters)";
    throw ConfigError("Error parsing " + what_ + " " + text + ": " + msg + where + suffix);
  }
  [[noreturn]] void expected(const std::string& what, size_t pos) const {
    fail("expected " + what, pos, pos < s_.size() ? " (found '" + std::string(1, s_[pos]) + "')" : " (end of text)");
  }

  // [begin, end) is a config path `a.b.0.c` or, where `group` allows it, a config group path
  // `hydra/launcher`. Parts are identifiers; in a dotted path they may be list indices.
  void check_key(size_t begin, size_t end, bool group) const {
    if (begin == end) expected("a key", begin);
    for (size_t p = begin; p < end; ++p)
      if (!is_id_char(s_[p]) && s_[p] != '.' && !(group && s_[p] == '/'))
        fail(std::string("invalid character '") + s_[p] + "' in key", p);
    const std::string key = s_.substr(begin, end - begin);
    const bool dotted = key.find('.') != npos;
    if (dotted && key.find('/') != npos)
      fail("a key is a config path with '.' or a config group with '/', not both", begin);
    const char sep = dotted ? '.' : '/';
    size_t part = begin;
    for (size_t p = begin; p <= end; ++p) {
      if (p < end && s_[p] != sep) continue;
      if (p == part) fail("empty part in key", p);
      const bool index = std::all_of(s_.begin() + long(part), s_.begin() + long(p), is_digit);
      if (!is_id_start(s_[part]) && !(index && dotted))
        fail("a key part must start with a letter or '_'", part);
      part = p + 1;
    }
  }

  // After '=': empty (the string ""), a function call, or elements separated by ','.
  void parse_value(Override& o) {
    skip_ws();
    if (at_end()) {  // `key=`
      o.value = Node::string("", cl());
      return;
    }
    if (looks_like_call()) {
      o.sweep = parse_call();
      skip_ws();
      if (!at_end()) expected("the end of the value (a function call must be the whole value)", i_);
      return;
    }
    std::vector<Node> elements{parse_element()};
    while (eat(',')) elements.push_back(parse_element());
    if (!at_end()) expected("',' or the end of the value", i_);
    if (elements.size() == 1) {
      o.value = std::move(elements[0]);
    } else {
      o.sweep = Sweep{};
      o.sweep->choices = std::move(elements);
    }
  }

  // An identifier followed by '(' (Hydra allows spaces between them).
  bool looks_like_call() const {
    const size_t name_end = id_end(i_), j = ws_end(name_end);
    return name_end > i_ && j < s_.size() && s_[j] == '(';
  }

  Node parse_element() {
    skip_ws();
    const char c = peek();
    if (c == '[') return parse_list();
    if (c == '{') return parse_dict();
    if (c == '\'' || c == '"') return Node::string(parse_quoted(), cl());
    if (at_end() || is_structural(c)) expected("a value", i_);
    return parse_unquoted();
  }

  // Lists and dicts are parsed recursively, as every later walk over the value recurses: a '[' or
  // '{' opening more than kMaxDepth containers is an error.
  void check_nesting() const {
    if (depth_ >= kMaxDepth)
      fail("more than " + std::to_string(kMaxDepth) + " nested lists and dicts (the limit)", i_);
  }

  Node parse_list() {
    check_nesting();
    const Nested nested(depth_);
    ++i_;  // '['
    Node list = Node::sequence(cl());
    if (eat(']')) return list;
    while (true) {
      list.push_back(parse_element());
      if (eat(']')) return list;
      if (!eat(',')) expected("',' or ']'", i_);
    }
  }

  Node parse_dict() {
    check_nesting();
    const Nested nested(depth_);
    ++i_;  // '{'
    Node dict = Node::mapping(cl());
    if (eat('}')) return dict;
    while (true) {
      skip_ws();
      const size_t key_pos = i_;
      std::string key;
      if (peek() == '\'' || peek() == '"') {
        key = parse_quoted();
      } else {
        while (is_id_char(peek())) key += s_[i_++];
        if (key.empty()) expected("a dict key", i_);
      }
      if (!eat(':')) expected("':' after the dict key '" + key + "'", i_);
      if (dict.find(key)) fail("duplicate dict key '" + key + "'", key_pos);
      dict.set(key, parse_element());
      if (eat('}')) return dict;
      if (!eat(',')) expected("',' or '}'", i_);
    }
  }

  // '...' or "...": always a string. Backslashes matter only right before the quote character:
  // `\'` is a quote, and 2n backslashes before the closing quote are n backslashes (so 'C:\dir\\'
  // ends in one backslash). Elsewhere a backslash is kept as typed, as in Hydra.
  std::string parse_quoted() {
    const size_t open = i_;
    const char q = s_[i_++];
    std::string out;
    while (!at_end()) {
      if (s_[i_] == q) { ++i_; return out; }
      if (s_[i_] != '\\') { out += s_[i_++]; continue; }
      size_t run = 0;
      while (i_ + run < s_.size() && s_[i_ + run] == '\\') ++run;
      const bool before_quote = i_ + run < s_.size() && s_[i_ + run] == q;
      out.append(before_quote ? run / 2 : run, '\\');
      i_ += run;
      if (before_quote && run % 2 == 1) out += s_[i_++];  // an escaped quote
    }
    fail(std::string("unclosed quote ") + q + " (expected a matching " + q + ")", open);
  }

  // An unquoted value: typed (5 -> int) unless it holds escapes or an interpolation.
  Node parse_unquoted() {
    const size_t start = i_;
    bool plain = true, interpolation = false;
    std::string v = scan_unquoted(false, plain, interpolation);
    if (interpolation) {  // the interpolation resolver un-escapes `\\` itself (as OmegaConf does)
      i_ = start;
      v = scan_unquoted(true, plain, interpolation);
    }
    if (peek() == '(') {
      if (plain && !v.empty() && is_id_start(v[0]) && std::all_of(v.begin(), v.end(), is_id_char))
        fail("a function call (choice, range, glob) must be the whole value", start);
      fail("'(' must be escaped as '\\(' or the value quoted", i_);
    }
    return plain ? typed(v, start) : Node::string(v, cl());
  }

  // Reads up to a structural character; inner whitespace is kept, trailing whitespace is not
  // (unless escaped: `a\ ` is "a ").
  std::string scan_unquoted(bool keep_double_backslash, bool& plain, bool& interpolation) {
    std::string out;
    size_t keep = 0;  // out's length without trailing unescaped whitespace
    while (!at_end()) {
      const char c = s_[i_];
      if (is_structural(c)) break;
      if (c == '\'' || c == '"') fail("a quote must enclose the whole value", i_);
      if (c == '\\' && i_ + 1 < s_.size() && is_escapable(s_[i_ + 1])) {
        out.append(s_[i_ + 1] == '\\' && keep_double_backslash ? 2 : 1, s_[i_ + 1]);
        i_ += 2;
        plain = false;
      } else if (c == '$' && i_ + 1 < s_.size() && s_[i_ + 1] == '{') {
        out += scan_interpolation();
        plain = false;
        interpolation = true;
      } else {
        if (!is_unquoted_char(c)) not_unquoted(i_);
        out += s_[i_++];
        if (is_ws(c)) continue;  // dropped if nothing but whitespace follows
      }
      keep = out.size();
    }
    out.resize(keep);
    return out;
  }

  // Names the character at `pos` whole (all the bytes of a UTF-8 sequence).
  [[noreturn]] void not_unquoted(size_t pos) const {
    size_t end = pos + 1;
    if (static_cast<unsigned char>(s_[pos]) >= 0xC0)
      while (end < s_.size() && (static_cast<unsigned char>(s_[end]) & 0xC0) == 0x80) ++end;
    fail("'" + s_.substr(pos, end - pos) + "' cannot appear in an unquoted value (quote the value, as Hydra wants)",
         pos);
  }

  // `${...}` copied verbatim up to its matching '}', so that the commas and colons of
  // `${oc.env:A,b}` or `${now:%H-%M}` and nested `${a.${b}}` do not split the value.
  std::string scan_interpolation() {
    const size_t start = i_;
    int depth = 0;
    while (!at_end()) {
      const char c = s_[i_];
      if (c == '\\') ++i_;  // skip the escaped character
      if (c == '\'' || c == '"') i_ = std::min(s_.find(c, i_ + 1), s_.size());  // a quoted argument may hold braces
      if (c == '{') ++depth;
      if (c == '}' && --depth == 0) return s_.substr(start, ++i_ - start);
      ++i_;
    }
    fail("unclosed interpolation '${' (expected '}')", start);
  }

  Node typed(const std::string& v, size_t start) const {
    const std::string l = lower(v);
    if (l == "null") return Node::null(cl());
    if (l == "true" || l == "false") return Node::boolean(l == "true", cl());
    if (v == "???") return Node::missing(cl());
    const std::string unsigned_l = l.substr(skip_sign(l));
    if (unsigned_l == "inf" || unsigned_l == "nan") {
      const double x = unsigned_l == "inf" ? std::numeric_limits<double>::infinity()
                                           : std::numeric_limits<double>::quiet_NaN();
      return Node::floating(l[0] == '-' ? -x : x, cl());
    }
    const bool is_int = is_int_literal(v);
    if (!is_int && !is_float_literal(v)) return Node::string(v, cl());
    const std::string t = number_text(v);
    if (is_int) {
      int64_t n = 0;
      if (std::from_chars(t.data(), t.data() + t.size(), n).ec != std::errc())
        fail("the integer " + v + " does not fit in 64 bits", start);
      return Node::integer(n, cl());
    }
    double x = 0;
    if (std::from_chars(t.data(), t.data() + t.size(), x).ec != std::errc())
      fail("the float " + v + " is out of range", start);
    return Node::floating(x, cl());
  }

  std::vector<Arg> parse_args() {
    std::vector<Arg> args;
    if (eat(')')) return args;
    while (true) {
      skip_ws();
      Arg a{"", Node(), i_};
      const size_t name_end = id_end(i_), after = ws_end(name_end);  // `name=value`?
      if (name_end > i_ && after < s_.size() && s_[after] == '=') {
        a.name = s_.substr(i_, name_end - i_);
        i_ = after + 1;
      } else if (!args.empty() && !args.back().name.empty()) {
        fail("a positional argument cannot follow a named one", i_);
      }
      a.value = parse_element();
      args.push_back(std::move(a));
      if (eat(')')) return args;
      if (!eat(',')) expected("',' or ')'", i_);
    }
  }

  // Where argument `a` (the k-th) goes among `names`, by name or by position.
  size_t slot(const std::string& fn, const Arg& a, size_t k, const std::vector<std::string>& names) const {
    std::string all;
    for (const std::string& n : names) all += (all.empty() ? "" : ", ") + n;
    if (a.name.empty()) {
      if (k >= names.size()) fail(fn + "() takes at most " + std::to_string(names.size()) + " arguments (" + all + ")", a.pos);
      return k;
    }
    const auto it = std::find(names.begin(), names.end(), a.name);
    if (it == names.end()) fail(fn + "() has no argument '" + a.name + "' (it takes " + all + ")", a.pos);
    return size_t(it - names.begin());
  }

  std::vector<std::string> patterns(const Arg& a) const {
    std::vector<Node> nodes = a.value.is_sequence() ? a.value.items() : std::vector<Node>{a.value};
    std::vector<std::string> out;
    for (const Node& n : nodes) {
      if (!n.is_scalar()) fail("glob() patterns must be strings", a.pos);
      out.push_back(n.kind() == Node::Kind::String ? n.string_value() : n.to_display());
    }
    return out;
  }

  Sweep parse_call() {
    const size_t start = i_;
    const std::string name = s_.substr(start, id_end(start) - start);
    i_ = ws_end(id_end(start)) + 1;  // past '('
    const std::vector<Arg> args = parse_args();
    Sweep sw;
    if (name == "choice") {
      sw.kind = Sweep::Kind::Choice;
      if (args.empty()) fail("choice() needs at least one value", start);
      for (const Arg& a : args) {
        if (!a.name.empty()) fail("choice() takes values, not named arguments", a.pos);
        sw.choices.push_back(a.value);
      }
    } else if (name == "range") {
      sw.kind = Sweep::Kind::Range;
      Node* slots[] = {&sw.start, &sw.stop, &sw.step};
      bool given[3] = {false, false, false};
      const std::vector<std::string> names{"start", "stop", "step"};
      for (size_t k = 0; k < args.size(); ++k) {
        const size_t s = slot(name, args[k], k, names);
        if (given[s]) fail("range() got '" + names[s] + "' twice", args[k].pos);
        const Node::Kind kind = args[k].value.kind();
        if (kind != Node::Kind::Int && kind != Node::Kind::Float)
          fail("range() " + names[s] + " must be a number, not '" + args[k].value.to_display() + "'", args[k].pos);
        *slots[s] = args[k].value;
        given[s] = true;
      }
      if (!given[0]) fail("range() is missing its first argument: range(stop) or range(start, stop[, step])", start);
      if (!given[1]) {  // range(stop), as in Python: from 0
        sw.stop = sw.start;
        sw.start = Node::integer(0, cl());
      }
      if (!given[2]) sw.step = Node::integer(1, cl());
      try {
        range_values(sw.start, sw.stop, sw.step);  // step 0, too many values
      } catch (const ConfigError& e) {
        fail(e.what(), start);
      }
    } else if (name == "glob") {
      sw.kind = Sweep::Kind::Glob;
      bool has_include = false;
      for (size_t k = 0; k < args.size(); ++k) {
        const size_t s = slot(name, args[k], k, {"include", "exclude"});
        (s == 0 ? sw.include : sw.exclude) = patterns(args[k]);
        has_include = has_include || s == 0;
      }
      if (!has_include) fail("glob() needs include patterns: glob(include[, exclude=...])", start);
    } else {
      fail("unknown function '" + name + "' (supported: choice, range, glob)", start);
    }
    return sw;
  }
};

}  // namespace

Override parse_override(const std::string& text) { return Parser(text, "override").parse_override(); }

std::optional<Zip> parse_zip(const std::string& text) {
  size_t i = 0;
  while (i < text.size() && is_ws(text[i])) ++i;
  if (text.compare(i, 3, "zip") != 0) return std::nullopt;
  i += 3;
  while (i < text.size() && is_ws(text[i])) ++i;
  if (i >= text.size() || text[i] != '(') return std::nullopt;
  return Parser(text, "zip").parse_zip(i + 1);
}

}  // namespace wavetrain::config
