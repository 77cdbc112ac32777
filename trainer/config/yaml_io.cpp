// YAML reading (yaml-cpp syntax, our own core-schema typing); see yaml_io.h. The writer is in
// yaml_emit.cpp.
#include "trainer/config/yaml_io.h"

// YAML::DeepRecursion, which yaml.h does not include. The library does not export its typeinfo;
// libstdc++ matches exception types by name, so catching it works all the same (tested).
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <sstream>
#include <vector>

#include "trainer/config/yaml_internal.h"

namespace wavetrain::config {
namespace {

// ---------------------------------------------------------------------------------------------
// Scalar typing by the YAML 1.2 core schema. Hand-written rather than std::regex, whose
// recursive matcher can overflow the stack on long strings (and the emitter asks about every one).

bool is_digits(const std::string& s, size_t from, bool (*ok)(char)) {
  if (from >= s.size()) return false;
  for (size_t i = from; i < s.size(); ++i)
    if (!ok(s[i])) return false;
  return true;
}
bool is_dec(char c) { return c >= '0' && c <= '9'; }
bool is_hex(char c) { return is_dec(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_oct(char c) { return c >= '0' && c <= '7'; }

bool is_null_word(const std::string& s) { return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL"; }
bool is_true_word(const std::string& s) { return s == "true" || s == "True" || s == "TRUE"; }
bool is_false_word(const std::string& s) { return s == "false" || s == "False" || s == "FALSE"; }

// [-+]?[0-9]+ | 0x[0-9a-fA-F]+ | 0o[0-7]+
bool is_int_text(const std::string& s) {
  if (s.rfind("0x", 0) == 0) return is_digits(s, 2, is_hex);
  if (s.rfind("0o", 0) == 0) return is_digits(s, 2, is_oct);
  return is_digits(s, !s.empty() && (s[0] == '-' || s[0] == '+') ? 1 : 0, is_dec);
}

bool is_inf_text(const std::string& s) {
  const std::string t = !s.empty() && (s[0] == '-' || s[0] == '+') ? s.substr(1) : s;
  return t == ".inf" || t == ".Inf" || t == ".INF";
}
bool is_nan_text(const std::string& s) { return s == ".nan" || s == ".NaN" || s == ".NAN"; }

// [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?, or an infinity or NaN.
bool is_float_text(const std::string& s) {
  if (is_inf_text(s) || is_nan_text(s)) return true;
  size_t i = (!s.empty() && (s[0] == '-' || s[0] == '+')) ? 1 : 0;
  size_t int_digits = 0, frac_digits = 0;
  while (i < s.size() && is_dec(s[i])) ++i, ++int_digits;
  const bool dot = i < s.size() && s[i] == '.';
  if (dot)
    for (++i; i < s.size() && is_dec(s[i]); ++i) ++frac_digits;
  if (int_digits == 0 && !(dot && frac_digits > 0)) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    return is_digits(s, i, is_dec);
  }
  return i == s.size();
}

}  // namespace

namespace detail {

// What a plain (unquoted, untagged) scalar reads as.
Node::Kind plain_kind(const std::string& s) {
  if (is_null_word(s)) return Node::Kind::Null;
  if (is_true_word(s) || is_false_word(s)) return Node::Kind::Bool;
  if (s == "???") return Node::Kind::Missing;
  if (is_int_text(s)) return Node::Kind::Int;
  if (is_float_text(s)) return Node::Kind::Float;
  return Node::Kind::String;
}

}  // namespace detail

namespace {

// ---------------------------------------------------------------------------------------------
// Reading.

class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  // `fallback_line` (1-based) is used for an empty value, whose yaml-cpp mark points at the next
  // token rather than at the key or dash that introduced it.
  Node convert(const YAML::Node& y, const std::string& path, int fallback_line) {
    count(1, 0, y, path);
    if (y.IsNull()) return Node::null(Origin::in_file(source_, fallback_line));
    if (y.IsScalar()) return convert_scalar(y, path);
    // An alias shares its anchor's yaml-cpp node, and `&a [*a]` even makes a cycle.
    for (const YAML::Node& open : open_) {
      // yaml-cpp gives the alias its anchor's mark.
      if (open.is(y)) throw ConfigError("Recursive alias" + for_key(path) + " (anchor at " + where(y) + ")");
    }
    const std::string& tag = y.Tag();
    const std::string want = y.IsMap() ? "tag:yaml.org,2002:map" : "tag:yaml.org,2002:seq";
    if (tag != "?" && tag != "!" && tag != want) throw unsupported_tag(y, path);
    // yaml-cpp stops at 2000 levels of syntax, but aliases nest without any (each `&aN [*aN-1]`
    // adds a level), and every later walk over the tree recurses once per level.
    if (open_.size() >= kMaxDepth) {
      throw ConfigError("Value" + for_key(abbreviate_path(path)) + " at " + where(y) + " nests deeper than " +
                        std::to_string(kMaxDepth) + " dicts and lists (the limit)");
    }
    open_.push_back(y);
    Node out = y.IsMap() ? convert_mapping(y, path) : convert_sequence(y, path);
    open_.pop_back();
    return out;
  }

 private:
  Origin at(const YAML::Node& y) const { return Origin::in_file(source_, y.Mark().line + 1); }
  std::string where(const YAML::Node& y) const { return at(y).str(); }
  static std::string for_key(const std::string& path) { return path.empty() ? "" : " for '" + path + "'"; }
  static std::string child(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }
  ConfigError unsupported_tag(const YAML::Node& y, const std::string& path) const {
    return ConfigError("Unsupported tag '" + y.Tag() + "'" + for_key(path) + " at " + where(y));
  }

  Node convert_sequence(const YAML::Node& y, const std::string& path) {
    Node out = Node::sequence(at(y));
    size_t index = 0;
    for (const YAML::Node& item : y) {
      out.push_back(convert(item, child(path, std::to_string(index++)), item.Mark().line + 1));
    }
    return out;
  }

  Node convert_mapping(const YAML::Node& y, const std::string& path) {
    Node out = Node::mapping(at(y));
    std::map<std::string, int> first_line;  // keys written in this mapping (not merged in)
    bool merged = false;                     // whether a `<<` has added keys
    for (const auto& entry : y) {
      // Copies (cheap handles): yaml-cpp's iterator hands out a temporary pair.
      const YAML::Node key_node = entry.first;
      const YAML::Node value = entry.second;
      // yaml-cpp turns a plain `null:` or `~:` key into an empty Null node, losing its text.
      if (!key_node.IsScalar()) {
        throw ConfigError("Invalid key" + for_key(path) + " at " + where(key_node) +
                          ": keys must be strings (quote a null key: 'null')");
      }
      const std::string& key = key_node.Scalar();
      const int line = key_node.Mark().line + 1;
      count(0, key.size(), key_node, path);
      const auto [first, inserted] = first_line.emplace(key, line);
      if (!inserted) {
        throw ConfigError("Duplicate key '" + child(path, key) + "' in " + where(key_node) + " (first at " +
                          Origin::in_file(source_, first->second).str() + ")");
      }
      // A plain `<<` is the YAML 1.1 merge key; a quoted '<<' is an ordinary key.
      if (key == "<<" && key_node.Tag() == "?") {
        merge_key(out, convert(value, path, line), path, key_node);
        merged = true;
        continue;
      }
      // Replaces, in place, a value that an earlier `<<` merged in: the mapping's own keys win.
      // Without a merge the key is new (duplicates were refused above): appending keeps a big
      // mapping linear, where set()'s search would make it quadratic.
      if (merged) out.set(key, convert(value, child(path, key), line));
      else out.entries().emplace_back(key, convert(value, child(path, key), line));
    }
    return out;
  }

  // Adds the keys of the merged dict(s) that `out` does not have yet: keys the mapping itself
  // defines win over merged ones, and with `<<: [*a, *b]` a's keys win over b's (as in YAML 1.1
  // and OmegaConf). Merged keys are placed where the `<<` is.
  void merge_key(Node& out, const Node& merged, const std::string& path, const YAML::Node& key_node) {
    std::vector<const Node*> sources;
    if (merged.is_sequence()) {
      for (const Node& item : merged.items()) sources.push_back(&item);
    } else {
      sources.push_back(&merged);
    }
    for (const Node* source : sources) {
      if (!source->is_mapping()) {
        throw ConfigError("Merge key '<<'" + for_key(path) + " at " + where(key_node) +
                          " needs a dict or a list of dicts, not a " + Node::kind_name(source->kind()));
      }
      for (const Node::Entry& e : source->entries())
        if (!out.find(e.first)) out.set(e.first, e.second);
    }
  }

  Node convert_scalar(const YAML::Node& y, const std::string& path) {
    const std::string& text = y.Scalar();
    count(0, text.size(), y, path);
    const std::string& tag = y.Tag();
    const Origin origin = at(y);
    Node::Kind kind;
    if (tag == "!") {
      kind = Node::Kind::String;  // quoted or block scalar: always a string
    } else if (tag == "?") {
      kind = detail::plain_kind(text);
    } else if (tag == "tag:yaml.org,2002:str") {
      kind = Node::Kind::String;
    } else {
      // !!int, !!float, !!bool, !!null: the text must be of that type.
      const std::string name = tag.rfind("tag:yaml.org,2002:", 0) == 0 ? tag.substr(18) : "";
      if (name == "int") kind = Node::Kind::Int;
      else if (name == "float") kind = Node::Kind::Float;
      else if (name == "bool") kind = Node::Kind::Bool;
      else if (name == "null") kind = Node::Kind::Null;
      else throw unsupported_tag(y, path);
      const bool fits = (kind == Node::Kind::Int && is_int_text(text)) ||
                        (kind == Node::Kind::Float && is_float_text(text)) ||  // also takes "1"
                        (kind == Node::Kind::Bool && (is_true_word(text) || is_false_word(text))) ||
                        (kind == Node::Kind::Null && is_null_word(text));
      if (!fits) {
        throw ConfigError("Value '" + text + "'" + for_key(path) + " at " + origin.str() +
                          " is not a valid !!" + name);
      }
    }
    switch (kind) {
      case Node::Kind::Null: return Node::null(origin);
      case Node::Kind::Bool: return Node::boolean(is_true_word(text), origin);
      case Node::Kind::Missing: return Node::missing(origin);
      case Node::Kind::Int: return Node::integer(parse_int(text, path, origin), origin);
      case Node::Kind::Float: return Node::floating(parse_float(text, path, origin), origin);
      default: return Node::string(text, origin);
    }
  }

  static int64_t parse_int(const std::string& text, const std::string& path, const Origin& origin) {
    int base = 10;
    size_t from = text[0] == '+' ? 1 : 0;  // from_chars takes '-' but not '+'
    if (text.rfind("0x", 0) == 0) base = 16, from = 2;
    if (text.rfind("0o", 0) == 0) base = 8, from = 2;
    int64_t v = 0;
    const auto res = std::from_chars(text.data() + from, text.data() + text.size(), v, base);
    if (res.ec != std::errc() || res.ptr != text.data() + text.size()) {
      throw ConfigError("Integer '" + text + "'" + for_key(path) + " at " + origin.str() +
                        " is out of the 64-bit range");
    }
    return v;
  }

  static double parse_float(const std::string& text, const std::string& path, const Origin& origin) {
    if (is_nan_text(text)) return std::numeric_limits<double>::quiet_NaN();
    if (is_inf_text(text)) return (text[0] == '-' ? -1 : 1) * std::numeric_limits<double>::infinity();
    const size_t from = text[0] == '+' ? 1 : 0;
    double v = 0;
    // from_chars, unlike strtod, does not depend on the C locale's decimal point.
    const auto res = std::from_chars(text.data() + from, text.data() + text.size(), v);
    if (res.ec != std::errc() || res.ptr != text.data() + text.size()) {
      throw ConfigError("Float '" + text + "'" + for_key(path) + " at " + origin.str() +
                        " is out of the range of a double");
    }
    return v;
  }

  // Every copy an alias makes is converted anew, so these count the tree as expanded, not the file.
  void count(size_t nodes, size_t bytes, const YAML::Node& y, const std::string& path) {
    nodes_ += nodes;
    bytes_ += bytes;
    if (nodes_ <= kMaxNodes && bytes_ <= kMaxBytes) return;
    too_big(y, path);
  }
  [[noreturn, gnu::noinline]] void too_big(const YAML::Node& y, const std::string& path) const {
    const bool by_nodes = nodes_ > kMaxNodes;
    throw ConfigError(source_ + ": the config expands to more than " +
                      (by_nodes ? std::to_string(kMaxNodes) + " values" : std::to_string(kMaxBytes >> 20) + " MiB of text") +
                      " (the limit; aliases count once per use), reached at " + where(y) + for_key(abbreviate_path(path)));
  }

  std::string source_;
  std::vector<YAML::Node> open_;  // mappings and sequences being converted, to catch cycles
  size_t nodes_ = 0, bytes_ = 0;  // the tree made so far (see kMaxNodes, kMaxBytes)
};

// Counts the documents of a YAML text, and stops yaml-cpp 0.7 where it would loop forever: a ','
// at the start of a document (outside [ ] or { }) makes its parser report an endless series of
// empty documents at the same place, and YAML::LoadAll collects them until memory runs out (found
// by fuzzing: a config file that starts with ',' hung `wavetrain train`). Nothing else is built.
class DocumentCounter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark& mark) override {
    if (documents_ > 0 && mark.pos == last_.pos)
      throw YAML::ParserException(mark, "unexpected ',' (a separator outside a [ ] or { } collection)");
    last_ = mark;
    ++documents_;
  }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t, const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  int documents_ = 0;
  YAML::Mark last_;
};

void check_documents_progress(const std::string& text) {
  std::istringstream in(text);
  YAML::Parser parser(in);
  DocumentCounter counter;
  while (parser.HandleNextDocument(counter)) {
  }
}

}  // namespace

Node load_yaml_string(const std::string& text, const std::string& source_name) {
  std::vector<YAML::Node> documents;
  try {
    check_documents_progress(text);
    documents = YAML::LoadAll(text);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp's own guard (2000 levels) against overflowing its stack; ours is lower, so name
    // that. Its mark is where its scanner had got to (the end of a flow line), so no column.
    throw ConfigError(source_name + ":" + std::to_string(e.mark.line + 1) + ": nests deeper than " +
                      std::to_string(kMaxDepth) + " dicts and lists (the limit)");
  } catch (const YAML::Exception& e) {
    const std::string where = e.mark.is_null() ? source_name
                                               : source_name + ":" + std::to_string(e.mark.line + 1) + ":" +
                                                     std::to_string(e.mark.column + 1);
    throw ConfigError(where + ": " + e.msg);
  }
  if (documents.empty()) return Node::null(Origin::in_file(source_name, 0));  // empty or only comments
  if (documents.size() > 1) {
    throw ConfigError(source_name + ":" + std::to_string(documents[1].Mark().line + 1) +
                      ": a config file must hold a single YAML document");
  }
  return Reader(source_name).convert(documents[0], "", 1);
}

Node load_yaml_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw ConfigError("Cannot read config file '" + path + "': " + std::strerror(errno));
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) text.append(buf, n);
  const int read_error = std::ferror(f) ? errno : 0;  // e.g. EISDIR: fopen accepts a directory
  std::fclose(f);
  if (read_error) throw ConfigError("Cannot read config file '" + path + "': " + std::strerror(read_error));
  return load_yaml_string(text, path);
}

std::optional<std::string> package_header(const std::string& text) {
  size_t pos = text.rfind("\xEF\xBB\xBF", 0) == 0 ? 3 : 0;  // skip a UTF-8 byte-order mark
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    const size_t first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos) continue;  // blank lines may precede the header
    if (line[first] != '#') return std::nullopt;  // content began
    line.erase(0, first + 1);  // up to and including the '#'
    line.erase(0, std::min(line.find_first_not_of(" \t"), line.size()));
    if (line.rfind("@package", 0) != 0) continue;
    std::string rest = line.substr(8);
    if (!rest.empty() && rest[0] == ':') rest = rest.substr(1);  // the old "# @package: foo" form
    else if (!rest.empty() && rest[0] != ' ' && rest[0] != '\t') continue;  // "@packages"
    const size_t b = rest.find_first_not_of(" \t\r"), e = rest.find_last_not_of(" \t\r");
    if (b != std::string::npos) return rest.substr(b, e - b + 1);
  }
  return std::nullopt;
}

}  // namespace wavetrain::config
