// Value overrides; see value_override.h.
#include "trainer/config/value_override.h"

#include <algorithm>
#include <cmath>
#include <tuple>
#include <vector>

#include "trainer/config/compose.h"
#include "trainer/config/interpolation.h"

namespace wavetrain::config {
namespace {

void collect_keys(const Node& n, const std::string& prefix, std::vector<std::string>& out) {
  if (!n.is_mapping()) return;
  for (const Node::Entry& e : n.entries()) {
    const std::string key = prefix.empty() ? e.first : prefix + "." + e.first;
    out.push_back(key);
    collect_keys(e.second, key, out);
  }
}

std::string last_part(const std::string& path) {
  const size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

bool is_number(const Node& n) {
  return n.kind() == Node::Kind::Int || n.kind() == Node::Kind::Float || n.kind() == Node::Kind::Bool;
}

// Python compares an int with a float exactly (2**53 + 1 != 2.0**53), and a bool as 0 or 1.
bool numbers_equal(const Node& a, const Node& b) {
  const auto as_int = [](const Node& n) {
    return n.kind() == Node::Kind::Bool ? int64_t(n.bool_value()) : n.int_value();
  };
  if (a.kind() != Node::Kind::Float && b.kind() != Node::Kind::Float) return as_int(a) == as_int(b);
  if (a.kind() == Node::Kind::Float && b.kind() == Node::Kind::Float) return a.float_value() == b.float_value();
  const double x = a.kind() == Node::Kind::Float ? a.float_value() : b.float_value();
  const int64_t i = a.kind() == Node::Kind::Float ? as_int(b) : as_int(a);
  // Doubles at or past ±2^63 are outside int64; NaN and the infinities fail the range test too.
  if (!(x >= -9223372036854775808.0 && x < 9223372036854775808.0) || x != std::trunc(x)) return false;
  return static_cast<int64_t>(x) == i;
}

}  // namespace

// "\nDid you mean trainer.seed?" for an unknown key, or "" when nothing is close. In order:
//   1. keys whose last part is the unknown key's last part, at any depth (`seed` -> trainer.seed),
//      nearest full path first;
//   2. else the nearest spellings, of the full path (`trainer.max_epoch` -> trainer.max_epochs) or
//      of the last part (`chanels` -> model.channels).
// Several equally good keys are all named, up to kMaxSuggestions.
std::string did_you_mean(const Node& config, const std::string& key) {
  constexpr size_t kMaxSuggestions = 5;
  std::vector<std::string> keys;
  collect_keys(config, "", keys);
  const std::string leaf = last_part(key);
  // A typo is a few edits: about one per five characters, at least one (two for whole paths).
  const size_t full_limit = std::max<size_t>(2, key.size() / 5);
  const size_t leaf_limit = std::max<size_t>(1, leaf.size() / 5);

  struct Candidate {
    size_t tier, distance, order;
    const std::string* key;
  };
  std::vector<Candidate> candidates;
  for (size_t i = 0; i < keys.size(); ++i) {
    const size_t full = edit_distance(keys[i], key);
    if (last_part(keys[i]) == leaf) {
      candidates.push_back({0, full, i, &keys[i]});
      continue;
    }
    const size_t leaf_distance = edit_distance(last_part(keys[i]), leaf);
    size_t best = std::string::npos;
    if (full <= full_limit) best = full;
    if (leaf_distance <= leaf_limit) best = std::min(best, leaf_distance);
    if (best != std::string::npos) candidates.push_back({1, best, i, &keys[i]});
  }
  if (candidates.empty()) return "";
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    return std::tie(a.tier, a.distance, a.order) < std::tie(b.tier, b.distance, b.order);
  });
  // Exact last parts are all worth naming; of the near spellings, only the nearest.
  std::vector<const std::string*> named;
  for (const Candidate& c : candidates) {
    if (c.tier != candidates[0].tier || (c.tier == 1 && c.distance != candidates[0].distance)) break;
    named.push_back(c.key);
  }
  if (named.size() == 1) return "\nDid you mean " + *named[0] + "?";
  std::string list;
  for (size_t i = 0; i < std::min(named.size(), kMaxSuggestions); ++i) list += (i ? ", " : "") + *named[i];
  if (named.size() > kMaxSuggestions) list += " (and " + std::to_string(named.size() - kMaxSuggestions) + " more)";
  return "\nDid you mean one of: " + list + "?";
}


bool equal_as_hydra(const Node& a, const Node& b) {
  if (is_number(a) && is_number(b)) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Node::Kind::Sequence:
      return a.items().size() == b.items().size() &&
             std::equal(a.items().begin(), a.items().end(), b.items().begin(), equal_as_hydra);
    case Node::Kind::Mapping:
      if (a.entries().size() != b.entries().size()) return false;
      for (const Node::Entry& e : a.entries()) {
        const Node* other = b.find(e.first);
        if (!other || !equal_as_hydra(e.second, *other)) return false;
      }
      return true;
    case Node::Kind::String: return a.string_value() == b.string_value();
    default: return true;  // null, ???
  }
}

void apply_value(Node& config, const Override& o) {
  // The value's own nesting was checked when it was parsed; its key adds one level per part.
  if (o.value) check_depth(o.key, *o.value, "The override of '" + abbreviate_path(o.key) + "' on the command line");
  Node* existing = config.find_path(o.key);
  switch (o.type) {
    case OverrideType::Change:
      if (!existing)
        throw ConfigError("Could not override '" + o.key + "'. To append to your config use +" + o.key + "=..." +
                          did_you_mean(config, o.key));
      if (existing->is_mapping() && o.value->is_mapping()) merge_into(*existing, *o.value);
      else *existing = *o.value;
      return;
    case OverrideType::Add:
      if (existing)
        throw ConfigError("Could not append to config. An item is already at '" + o.key + "' (from " +
                          existing->origin().str() + ").\nEither remove the + prefix: '" + o.key +
                          "=...'\nOr add a second + to add or override '" + o.key + "': '++" + o.key + "=...'");
      config.set_path(o.key, *o.value);
      return;
    case OverrideType::ForceAdd:
      config.set_path(o.key, *o.value);
      return;
    case OverrideType::Delete:
      if (!existing)
        throw ConfigError("Could not delete from config. '" + o.key + "' does not exist." + did_you_mean(config, o.key));
      // `~key=null` is `~key` (Hydra's parser cannot tell them apart). Hydra compares the value
      // with the key's resolved value, so `~b=1` deletes `b: ${a}` when `a` is 1.
      if (o.value && !o.value->is_null()) {
        const Node current =
            existing->is_interpolation() ? resolve_path(config, o.key, ResolveContext::current()) : *existing;
        if (!equal_as_hydra(*o.value, current))
          throw ConfigError("Could not delete from config. The value of '" + o.key + "' is " + current.to_display() +
                            " and not " + o.value->to_display() + ".");
      }
      config.erase_path(o.key);
      return;
  }
}

void apply_value_override(Node& config, const std::string& override_text) {
  apply_value(config, parse_override(override_text));
}

}  // namespace wavetrain::config
