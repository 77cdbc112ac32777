// The config tree; see node.h.
#include "trainer/config/node.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

namespace wavetrain::config {
namespace {

bool is_index(const std::string& s) {
  if (s.empty() || s.size() > 9) return false;
  for (char c : s)
    if (c < '0' || c > '9') return false;
  return true;
}

[[noreturn]] void wrong_kind(const char* wanted, Node::Kind got) {
  throw std::logic_error(std::string("config node is ") + Node::kind_name(got) + ", not " + wanted);
}

}  // namespace

std::string Origin::str() const {
  if (command_line) return "the command line";
  if (file.empty()) return "(default)";
  return line > 0 ? file + ":" + std::to_string(line) : file;
}

Node Node::null(Origin o) {
  Node n;
  n.origin_ = std::move(o);
  return n;
}
Node Node::boolean(bool v, Origin o) {
  Node n = null(std::move(o));
  n.kind_ = Kind::Bool;
  n.scalar_ = v;
  return n;
}
Node Node::integer(int64_t v, Origin o) {
  Node n = null(std::move(o));
  n.kind_ = Kind::Int;
  n.scalar_ = v;
  return n;
}
Node Node::floating(double v, Origin o) {
  Node n = null(std::move(o));
  n.kind_ = Kind::Float;
  n.scalar_ = v;
  return n;
}
Node Node::string(std::string v, Origin o) {
  Node n = null(std::move(o));
  n.kind_ = Kind::String;
  n.scalar_ = std::move(v);
  return n;
}
Node Node::missing(Origin o) {
  Node n = null(std::move(o));
  n.kind_ = Kind::Missing;
  return n;
}
Node Node::sequence(Origin o) {
  Node n = null(std::move(o));
  n.kind_ = Kind::Sequence;
  return n;
}
Node Node::mapping(Origin o) {
  Node n = null(std::move(o));
  n.kind_ = Kind::Mapping;
  return n;
}

bool Node::is_interpolation() const {
  return kind_ == Kind::String && std::get<std::string>(scalar_).find("${") != std::string::npos;
}

void Node::set_origin_recursive(const Origin& o) {
  origin_ = o;
  for (Node& n : items_) n.set_origin_recursive(o);
  for (Entry& e : entries_) e.second.set_origin_recursive(o);
}

bool Node::bool_value() const {
  if (kind_ != Kind::Bool) wrong_kind("bool", kind_);
  return std::get<bool>(scalar_);
}
int64_t Node::int_value() const {
  if (kind_ != Kind::Int) wrong_kind("int", kind_);
  return std::get<int64_t>(scalar_);
}
double Node::float_value() const {
  if (kind_ != Kind::Float) wrong_kind("float", kind_);
  return std::get<double>(scalar_);
}
const std::string& Node::string_value() const {
  if (kind_ != Kind::String) wrong_kind("string", kind_);
  return std::get<std::string>(scalar_);
}

const std::vector<Node>& Node::items() const {
  if (kind_ != Kind::Sequence) wrong_kind("list", kind_);
  return items_;
}
std::vector<Node>& Node::items() {
  if (kind_ != Kind::Sequence) wrong_kind("list", kind_);
  return items_;
}
void Node::push_back(Node n) { items().push_back(std::move(n)); }

const std::vector<Node::Entry>& Node::entries() const {
  if (kind_ != Kind::Mapping) wrong_kind("dict", kind_);
  return entries_;
}
std::vector<Node::Entry>& Node::entries() {
  if (kind_ != Kind::Mapping) wrong_kind("dict", kind_);
  return entries_;
}

const Node* Node::find(const std::string& key) const {
  if (kind_ == Kind::Mapping) {
    for (const Entry& e : entries_)
      if (e.first == key) return &e.second;
  } else if (kind_ == Kind::Sequence && is_index(key)) {
    const size_t i = std::stoul(key);
    if (i < items_.size()) return &items_[i];
  }
  return nullptr;
}
Node* Node::find(const std::string& key) { return const_cast<Node*>(static_cast<const Node*>(this)->find(key)); }

Node& Node::set(const std::string& key, Node value) {
  if (kind_ == Kind::Sequence && is_index(key)) {
    const size_t i = std::stoul(key);
    if (i < items_.size()) return items_[i] = std::move(value);
  }
  for (Entry& e : entries())
    if (e.first == key) return e.second = std::move(value);
  entries_.emplace_back(key, std::move(value));
  return entries_.back().second;
}

bool Node::erase(const std::string& key) {
  if (kind_ != Kind::Mapping) return false;
  for (auto it = entries_.begin(); it != entries_.end(); ++it)
    if (it->first == key) {
      entries_.erase(it);
      return true;
    }
  return false;
}

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) throw ConfigError("Invalid key '" + path + "': empty part between dots");
    parts.push_back(part);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

const Node* Node::find_path(const std::string& path) const {
  const Node* n = this;
  for (const std::string& part : split_path(path)) {
    n = n->find(part);
    if (!n) return nullptr;
  }
  return n;
}
Node* Node::find_path(const std::string& path) {
  return const_cast<Node*>(static_cast<const Node*>(this)->find_path(path));
}

Node& Node::set_path(const std::string& path, Node value) {
  const std::vector<std::string> parts = split_path(path);
  Node* n = this;
  std::string walked;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    walked += (i ? "." : "") + parts[i];
    Node* child = n->find(parts[i]);
    if (!child) {
      if (!n->is_mapping())
        throw ConfigError("Cannot set '" + path + "': '" + walked + "' is not a dict");
      child = &n->set(parts[i], Node::mapping(value.origin()));
    } else if (!child->is_mapping() && !child->is_sequence()) {
      if (child->is_null()) {
        *child = Node::mapping(value.origin());
      } else {
        throw ConfigError("Cannot set '" + path + "': '" + walked + "' is a " + kind_name(child->kind()) +
                          " (from " + child->origin().str() + "), not a dict");
      }
    }
    n = child;
  }
  if (!n->is_mapping() && !(n->is_sequence() && n->find(parts.back())))
    throw ConfigError("Cannot set '" + path + "': its parent is a " + kind_name(n->kind()) + ", not a dict");
  return n->set(parts.back(), std::move(value));
}

bool Node::erase_path(const std::string& path) {
  const std::vector<std::string> parts = split_path(path);
  Node* parent = this;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    parent = parent->find(parts[i]);
    if (!parent) return false;
  }
  if (parent->is_sequence() && is_index(parts.back())) {
    const size_t i = std::stoul(parts.back());
    if (i >= parent->items_.size()) return false;
    parent->items_.erase(parent->items_.begin() + static_cast<std::ptrdiff_t>(i));
    return true;
  }
  return parent->erase(parts.back());
}

size_t Node::depth() const {
  // An explicit stack of (node, its depth) rather than recursion: this is the check that runs
  // before a tree is known to be shallow.
  size_t deepest = 0;
  std::vector<std::pair<const Node*, size_t>> todo{{this, 0}};
  while (!todo.empty()) {
    const auto [n, above] = todo.back();
    todo.pop_back();
    if (n->is_scalar()) continue;
    deepest = std::max(deepest, above + 1);
    for (const Node& item : n->items_) todo.emplace_back(&item, above + 1);
    for (const Entry& e : n->entries_) todo.emplace_back(&e.second, above + 1);
  }
  return deepest;
}

void check_depth(const std::string& path, const Node& value, const std::string& what) {
  // Each part of the path is a dict (or list) that holds the value.
  const size_t above = path.empty() ? 0 : split_path(path).size();
  const size_t total = above + value.depth();
  if (total > kMaxDepth)
    throw ConfigError(what + " would nest " + std::to_string(total) + " levels deep; the limit is " +
                      std::to_string(kMaxDepth) + " nested dicts and lists");
}

std::string abbreviate_path(const std::string& path) {
  constexpr size_t kShown = 4;
  size_t dots = 0, cut = std::string::npos;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] != '.') continue;
    if (++dots == kShown) cut = i;
  }
  if (dots < 2 * kShown) return path;
  return path.substr(0, cut) + "....(" + std::to_string(dots + 1) + " parts)";
}

const char* Node::kind_name(Kind k) {
  switch (k) {
    case Kind::Null: return "null";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Float: return "float";
    case Kind::String: return "string";
    case Kind::Missing: return "???";
    case Kind::Sequence: return "list";
    case Kind::Mapping: return "dict";
  }
  return "?";
}

std::string format_float(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  // Shortest round-trip digits in scientific form, e.g. "3e-04" or "1.2345e+02".
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);
  const size_t e = sci.find('e');
  const int exponent = std::stoi(sci.substr(e + 1));
  std::string digits;
  bool negative = false;
  for (size_t i = 0; i < e; ++i) {
    if (sci[i] == '-') negative = true;
    else if (sci[i] != '.') digits += sci[i];
  }
  std::string out;
  if (exponent < -4 || exponent >= 16) {
    out = digits.substr(0, 1) + (digits.size() > 1 ? "." + digits.substr(1) : "");
    char exp[16];
    std::snprintf(exp, sizeof(exp), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp;
  } else if (exponent < 0) {
    out = "0." + std::string(static_cast<size_t>(-exponent - 1), '0') + digits;
  } else {
    const size_t point = static_cast<size_t>(exponent) + 1;
    if (digits.size() <= point) out = digits + std::string(point - digits.size(), '0') + ".0";
    else out = digits.substr(0, point) + "." + digits.substr(point);
  }
  return (negative ? "-" : "") + out;
}

std::string Node::to_display() const {
  switch (kind_) {
    case Kind::Null: return "null";
    case Kind::Bool: return bool_value() ? "true" : "false";
    case Kind::Int: return std::to_string(int_value());
    case Kind::Float: return format_float(float_value());
    case Kind::String: return string_value();
    case Kind::Missing: return "???";
    case Kind::Sequence: {
      std::string s = "[";
      for (size_t i = 0; i < items_.size(); ++i) s += (i ? ", " : "") + items_[i].to_display();
      return s + "]";
    }
    case Kind::Mapping: {
      std::string s = "{";
      for (size_t i = 0; i < entries_.size(); ++i)
        s += (i ? ", " : "") + entries_[i].first + ": " + entries_[i].second.to_display();
      return s + "}";
    }
  }
  return "";
}

bool operator==(const Node& a, const Node& b) {
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case Node::Kind::Sequence: return a.items_ == b.items_;
    case Node::Kind::Mapping: return a.entries_ == b.entries_;
    case Node::Kind::Float: {
      const double x = a.float_value(), y = b.float_value();
      return x == y || (std::isnan(x) && std::isnan(y));
    }
    default: return a.scalar_ == b.scalar_;
  }
}

void merge_into(Node& dst, const Node& src) {
  if (dst.is_mapping() && src.is_mapping()) {
    // An index of dst's keys: find() per key would make merging a file of many keys quadratic.
    std::vector<Node::Entry>& entries = dst.entries();
    std::unordered_map<std::string, size_t> index;
    for (size_t i = 0; i < entries.size(); ++i) index.emplace(entries[i].first, i);
    for (const Node::Entry& e : src.entries()) {
      const auto [it, added] = index.emplace(e.first, entries.size());
      if (added) entries.push_back(e);
      else merge_into(entries[it->second].second, e.second);
    }
    return;
  }
  dst = src;
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace wavetrain::config
