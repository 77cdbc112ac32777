// Interpolation; see interpolation.h.
//
// Resolution walks from the value being read. For a string it scans for `${...}` (braces nest),
// resolves the inside first (so `${oc.env:${name}}` works), then looks up a key or calls a resolver
// (`oc.env`, `env`, `now`). The stack of keys being resolved detects cycles.
#include "trainer/config/interpolation.h"

#include <cstdlib>
#include <vector>

namespace wavetrain::config {
namespace {

// A scalar as text inside a string (`flag_${t}`), as OmegaConf writes it: Python's str(), so
// True/False/None rather than YAML's true/false/null. Floats already follow Python's repr.
[[gnu::noinline]] std::string as_python_str(const Node& value) {
  if (value.kind() == Node::Kind::Bool) return value.bool_value() ? "True" : "False";
  if (value.is_null()) return "None";
  return value.to_display();
}

class Resolver {
 public:
  Resolver(const Node& root, const ResolveContext& ctx) : root_(root), ctx_(ctx) {}

  // The resolved value of the node found at `path`.
  //
  // value_at, resolve_node, resolve_string and evaluate recurse into each other once per
  // reference followed, so what they need only on an error or for a resolver lives in functions
  // of their own (kept out of line): that keeps each step near 1 KB of stack, not 2.6 KB.
  Node value_at(const std::string& path, const std::string& asked_from) {
    const Node* node = root_.find_path(path);
    if (!node) not_found(path, asked_from);
    for (const std::string& p : stack_)
      if (p == path) cycle(path);
    Visit visit(stack_, path);
    return resolve_node(*node, path);
  }

  // `node` lives at `path`; containers are resolved element by element.
  Node resolve_node(const Node& node, const std::string& path, bool keep_missing = false) {
    const Deeper deeper(*this, node, path);
    count(1, node.kind() == Node::Kind::String ? node.string_value().size() : 0, node, path);
    switch (node.kind()) {
      case Node::Kind::Missing:
        if (keep_missing) return node;
        missing(node, path);
      case Node::Kind::String:
        if (!node.is_interpolation()) return unescape(node);
        if (keep_missing) {
          // Writing the whole tree: a reference to a value not given yet stays as written.
          try {
            return resolve_string(node, path);
          } catch (const MissingValueError&) {
            return node;
          }
        }
        return resolve_string(node, path);
      case Node::Kind::Sequence:
      case Node::Kind::Mapping:
        return resolve_container(node, path, keep_missing);
      default:
        return node;
    }
  }

 private:
  [[gnu::noinline]] Node resolve_container(const Node& node, const std::string& path, bool keep_missing) {
    if (node.is_sequence()) {
      Node out = Node::sequence(node.origin());
      for (size_t i = 0; i < node.items().size(); ++i)
        out.push_back(child(node.items()[i], path + "." + std::to_string(i), keep_missing));
      return out;
    }
    Node out = Node::mapping(node.origin());
    // The keys are already unique: appending keeps this linear in the number of keys.
    for (const Node::Entry& e : node.entries())
      out.entries().emplace_back(e.first, child(e.second, path.empty() ? e.first : path + "." + e.first, keep_missing));
    return out;
  }

  Node child(const Node& n, const std::string& path, bool keep_missing) {
    Visit visit(stack_, path);
    return resolve_node(n, path, keep_missing);
  }

  [[noreturn, gnu::noinline]] static void not_found(const std::string& path, const std::string& asked_from) {
    if (asked_from.empty()) throw ConfigError("Key '" + path + "' not found in the config");
    throw ConfigError("Interpolation key '" + path + "' not found (in " + asked_from + ")");
  }

  [[noreturn, gnu::noinline]] void cycle(const std::string& path) const {
    std::string chain;
    for (const std::string& q : stack_) chain += q + " -> ";
    throw ConfigError("Interpolation cycle: " + chain + path);
  }

  [[noreturn, gnu::noinline]] static void missing(const Node& node, const std::string& path) {
    throw MissingValueError("Missing mandatory value: " + path + " (set to ??? in " + node.origin().str() +
                            "); give it on the command line: " + path + "=...");
  }

  [[noreturn, gnu::noinline]] static void unterminated(const std::string& s, const std::string& where) {
    throw ConfigError("Unterminated interpolation in '" + s + "' (" + where + "): missing '}'");
  }

  [[noreturn, gnu::noinline]] static void not_scalar(const std::string& inside, const Node& value,
                                                      const std::string& where) {
    throw ConfigError("Interpolation '${" + inside + "}' is a " + Node::kind_name(value.kind()) +
                      " and cannot be part of a string (" + where + ")");
  }

  // Counts one step of recursion (see kMaxResolveDepth) for as long as it lives.
  struct Deeper {
    Deeper(Resolver& r, const Node& node, const std::string& path) : depth_(r.depth_) {
      if (depth_ >= kMaxResolveDepth) r.too_deep(node, path);
      ++depth_;
    }
    ~Deeper() { --depth_; }
    size_t& depth_;
  };

  [[noreturn, gnu::noinline]] void too_deep(const Node& node, const std::string& path) const {
    // The keys being resolved, outermost first; a long chain shows its two ends.
    std::vector<std::string> chain = stack_;
    if (chain.empty() || chain.back() != path) chain.push_back(path.empty() ? "(the root)" : path);
    std::string text;
    for (size_t i = 0; i < chain.size(); ++i) {
      if (chain.size() > 8 && i == 3) {
        text += " -> ... (" + std::to_string(chain.size() - 6) + " more)";
        i = chain.size() - 4;
        continue;
      }
      text += (i ? " -> " : "") + chain[i];
    }
    throw ConfigError("Interpolation nests more than " + std::to_string(kMaxResolveDepth) +
                      " levels deep (the limit, counting each reference followed and each dict or list entered): " +
                      text + " (at " + node.origin().str() + ")");
  }

  // Every value resolved (each reference followed, each dict or list entry) and the text made, so
  // that `b: [${a}, ${a}]`, `c: [${b}, ${b}]`, ... cannot double its way to gigabytes (or, with
  // empty strings, to hours): see kMaxNodes and kMaxBytes.
  void count(size_t nodes, size_t bytes, const Node& node, const std::string& path) {
    nodes_ += nodes;
    bytes_ += bytes;
    if (nodes_ > kMaxNodes || bytes_ > kMaxBytes) too_big(node, path);
  }
  [[noreturn, gnu::noinline]] void too_big(const Node& node, const std::string& path) const {
    const bool by_nodes = nodes_ > kMaxNodes;
    throw ConfigError("Interpolation expands the config to more than " +
                      (by_nodes ? std::to_string(kMaxNodes) + " values" : std::to_string(kMaxBytes >> 20) + " MiB of text") +
                      " (the limit), resolving '" + abbreviate_path(path.empty() ? "(the root)" : path) + "' at " +
                      node.origin().str());
  }

  // Keeps `stack_` right when an error unwinds through a lookup that is caught further up.
  struct Visit {
    Visit(std::vector<std::string>& stack, const std::string& path) : stack_(stack) { stack_.push_back(path); }
    ~Visit() { stack_.pop_back(); }
    std::vector<std::string>& stack_;
  };

  static Node unescape(const Node& node) {
    const std::string& s = node.string_value();
    if (s.find("\\${") == std::string::npos) return node;
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && s.compare(i + 1, 2, "${") == 0) continue;
      out += s[i];
    }
    return Node::string(out, node.origin());
  }

  // Finds the '}' closing the "${" at `open`; npos if unbalanced.
  static size_t closing_brace(const std::string& s, size_t open) {
    int depth = 0;
    for (size_t i = open; i < s.size(); ++i) {
      if (s.compare(i, 2, "${") == 0) {
        ++depth;
        ++i;
      } else if (s[i] == '}') {
        if (--depth == 0) return i;
      }
    }
    return std::string::npos;
  }

  Node resolve_string(const Node& node, const std::string& path) {
    const std::string& s = node.string_value();
    const std::string where = path + ", from " + node.origin().str();
    std::string text;
    bool whole = false;
    Node whole_value;
    for (size_t i = 0; i < s.size();) {
      if (s[i] == '\\' && s.compare(i + 1, 2, "${") == 0) {  // escaped: literal "${"
        text += "${";
        i += 3;
        continue;
      }
      if (s.compare(i, 2, "${") != 0) {
        text += s[i++];
        continue;
      }
      const size_t close = closing_brace(s, i);
      if (close == std::string::npos) unterminated(s, where);
      // The inside may itself hold interpolations: resolve them to text first.
      std::string inside = s.substr(i + 2, close - i - 2);
      if (inside.find("${") != std::string::npos) inside = resolve_inside(node, inside, path);
      Node value = evaluate(inside, path, where);
      if (i == 0 && close == s.size() - 1) {
        whole = true;
        whole_value = std::move(value);
      } else {
        if (!value.is_scalar()) not_scalar(inside, value, where);
        text += as_python_str(value);
      }
      i = close + 1;
    }
    if (whole) {
      whole_value.set_origin(node.origin());
      return whole_value;
    }
    count(0, text.size(), node, path);
    return Node::string(text, node.origin());
  }

  // `${${a}}`: the text of the inner interpolations, which name what the outer one looks up.
  [[gnu::noinline]] std::string resolve_inside(const Node& node, const std::string& inside, const std::string& path) {
    const Deeper deeper(*this, node, path);  // `${${${...}}}` recurses once per brace
    return resolve_string(Node::string(inside, node.origin()), path).to_display();
  }

  Node evaluate(const std::string& inside, const std::string& path, const std::string& where) {
    const size_t colon = inside.find(':');
    if (colon != std::string::npos) return call_resolver(inside, colon, where);
    return value_at(absolute_key(inside, path, where), path);
  }

  [[gnu::noinline]] Node call_resolver(const std::string& inside, size_t colon, const std::string& where) const {
    const std::string name = inside.substr(0, colon);
    const std::string args = inside.substr(colon + 1);
    if (name == "oc.env" || name == "env") return env(args, where);
    if (name == "now") return Node::string(format_now(args));
    throw ConfigError("Unknown interpolation resolver '" + name + "' in '${" + inside + "}' (" + where +
                      "). Known: oc.env, env, now");
  }

  // `.b` is a sibling of the node at `path`; each further dot goes one level up.
  [[gnu::noinline]] static std::string absolute_key(const std::string& key, const std::string& path,
                                                    const std::string& where) {
    if (key.empty() || key[0] != '.') return key;
    size_t dots = 0;
    while (dots < key.size() && key[dots] == '.') ++dots;
    std::vector<std::string> parts = split_path(path);
    if (dots > parts.size())
      throw ConfigError("Relative interpolation '${" + key + "}' goes above the config root (" + where + ")");
    parts.resize(parts.size() - dots);
    std::string out;
    for (const std::string& p : parts) out += p + ".";
    return out + key.substr(dots);
  }

  Node env(const std::string& args, const std::string& where) const {
    const size_t comma = args.find(',');
    std::string var = args.substr(0, comma);
    while (!var.empty() && var.back() == ' ') var.pop_back();
    const auto value = ctx_.getenv ? ctx_.getenv(var) : std::nullopt;
    if (value) return Node::string(*value);
    if (comma == std::string::npos)
      throw ConfigError("Environment variable '" + var + "' is not set (" + where + "); give a default: ${oc.env:" +
                        var + ",DEFAULT}");
    std::string def = args.substr(comma + 1);
    while (!def.empty() && def.front() == ' ') def.erase(def.begin());
    if (def == "null") return Node::null();
    if (def.size() >= 2 && (def.front() == '\'' || def.front() == '"') && def.back() == def.front())
      def = def.substr(1, def.size() - 2);
    return Node::string(def);
  }

  std::string format_now(const std::string& pattern) const {
    std::tm tm{};
    localtime_r(&ctx_.now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof(buf), pattern.c_str(), &tm);
    return std::string(buf, n);
  }

  const Node& root_;
  const ResolveContext& ctx_;
  std::vector<std::string> stack_;
  size_t depth_ = 0;  // see Deeper
  size_t nodes_ = 0, bytes_ = 0;  // see count()
};

}  // namespace

ResolveContext ResolveContext::current() {
  ResolveContext ctx;
  ctx.now = std::time(nullptr);
  ctx.getenv = [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  return ctx;
}

Node resolve_path(const Node& root, const std::string& path, const ResolveContext& ctx) {
  Resolver r(root, ctx);
  return r.value_at(path, "");
}

Node resolve_all(const Node& root, const ResolveContext& ctx) {
  Resolver r(root, ctx);
  return r.resolve_node(root, "", /*keep_missing=*/true);
}

}  // namespace wavetrain::config
