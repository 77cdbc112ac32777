// Sweep planning; see sweep.h.
#include "trainer/config/sweep.h"

#include <algorithm>
#include <cctype>

#include "trainer/config/override.h"

namespace wavetrain::config {
namespace {

const char* prefix_of(OverrideType t) {
  switch (t) {
    case OverrideType::Add: return "+";
    case OverrideType::ForceAdd: return "++";
    default: return "";
  }
}

// A string that the override grammar reads back as the same string when written bare.
bool safe_bare(const std::string& s) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!(std::isalnum(c) || c == '_' || c == '-' || c == '.' || c == '/' || c == ':' || c == '%')) return false;
  // Words and numbers that would read back as another type.
  Override probe = parse_override("k=" + s);
  return probe.value && probe.value->kind() == Node::Kind::String && probe.value->string_value() == s;
}

// `key@package`, as the job's override names it (and as two overrides of one key compare).
std::string key_element(const Override& o) { return o.package.empty() ? o.key : o.key + "@" + o.package; }

SweepDimension dimension_from(const Override& o, const GroupOptionsFn& group_options) {
  SweepDimension d;
  d.keys = {key_element(o)};
  d.prefix = prefix_of(o.type);
  std::vector<std::string> options;
  if (o.sweep->kind == Sweep::Kind::Glob) options = group_options(o.key);
  d.values = {expand_sweep(*o.sweep, options)};
  if (d.size() == 0) throw ConfigError("Sweep '" + o.text + "' gives no value");
  return d;
}

SweepDimension dimension_from_zip(const Zip& z, const std::string& where) {
  SweepDimension d;
  for (const auto& [key, values] : z.keys) {
    d.keys.push_back(key);
    d.values.push_back(values);
  }
  if (d.size() == 0) throw ConfigError("zip " + where + " gives no value");
  return d;
}

// `sweep.zip`: a dict of key -> list (one group) or a list of such dicts.
std::vector<SweepDimension> zip_groups_from_config(const Node& zip) {
  std::vector<const Node*> groups;
  if (zip.is_mapping()) groups.push_back(&zip);
  else if (zip.is_sequence())
    for (const Node& g : zip.items()) groups.push_back(&g);
  else if (!zip.is_null())
    throw ConfigError("sweep.zip must be a dict of key: [values] or a list of them (" + zip.origin().str() + ")");
  std::vector<SweepDimension> out;
  for (const Node* g : groups) {
    if (!g->is_mapping()) throw ConfigError("sweep.zip entries must be dicts of key: [values] (" + g->origin().str() + ")");
    SweepDimension d;
    for (const Node::Entry& e : g->entries()) {
      if (!e.second.is_sequence())
        throw ConfigError("sweep.zip." + e.first + " must be a list of values (" + e.second.origin().str() + ")");
      d.keys.push_back(e.first);
      d.values.push_back(e.second.items());
    }
    for (size_t k = 1; k < d.keys.size(); ++k)
      if (d.values[k].size() != d.values[0].size())
        throw ConfigError("sweep.zip: '" + d.keys[0] + "' has " + std::to_string(d.values[0].size()) + " values but '" +
                          d.keys[k] + "' has " + std::to_string(d.values[k].size()) + " (" + g->origin().str() +
                          "); zipped keys need the same number");
    if (!d.keys.empty()) out.push_back(d);
  }
  return out;
}

bool names_key(const std::vector<std::string>& keys, const std::string& key) {
  return std::find(keys.begin(), keys.end(), key) != keys.end();
}

// One place in every job's list of overrides: a fixed override (its one text as typed) or a sweep
// dimension (a text per value, for each key of a zip group).
struct Slot {
  std::string key;  // prefix + key@package: a later override of the same key takes this place; "" never does
  std::vector<std::vector<std::string>> texts;  // texts[z][i]: value i of key z
  size_t size() const { return texts.empty() ? 0 : texts[0].size(); }
};

// Each "key=value" is formatted once (formatting parses the value back to check it), not once per
// job that uses it.
Slot slot_of(const SweepDimension& d, std::string key) {
  Slot slot{std::move(key), {}};
  for (size_t z = 0; z < d.keys.size(); ++z) {
    slot.texts.emplace_back();
    for (const Node& v : d.values[z])
      slot.texts.back().push_back(d.prefix + d.keys[z] + "=" + format_override_value(v));
  }
  return slot;
}

}  // namespace

std::string format_override_value(const Node& value) {
  switch (value.kind()) {
    case Node::Kind::String: {
      const std::string& s = value.string_value();
      if (safe_bare(s)) return s;
      std::string quoted = "'";
      for (char c : s) {
        if (c == '\'' || c == '\\') quoted += '\\';
        quoted += c;
      }
      return quoted + "'";
    }
    case Node::Kind::Sequence: {
      std::string out = "[";
      for (size_t i = 0; i < value.items().size(); ++i) out += (i ? "," : "") + format_override_value(value.items()[i]);
      return out + "]";
    }
    case Node::Kind::Mapping: {
      std::string out = "{";
      for (size_t i = 0; i < value.entries().size(); ++i)
        out += (i ? "," : "") + value.entries()[i].first + ":" + format_override_value(value.entries()[i].second);
      return out + "}";
    }
    default:
      return value.to_display();  // null, true/false, ints, floats (inf, nan), ???
  }
}

bool has_sweep(const std::vector<std::string>& overrides) {
  for (const std::string& text : overrides) {
    if (parse_zip(text)) return true;
    if (parse_override(text).is_sweep()) return true;
  }
  return false;
}

SweepPlan plan_sweep(const std::vector<std::string>& overrides, const Node* sweep_section,
                     const GroupOptionsFn& group_options) {
  SweepPlan plan;
  std::vector<Slot> cli_slots;
  std::vector<std::string> cli_keys;  // every key the command line sets, swept or not

  // Hydra's BasicSweeper: the command line's order, fixed and swept overrides alike; a second
  // override of the same key (and prefix) replaces the first where the first stood.
  const auto place = [&cli_slots](Slot slot) {
    for (Slot& s : cli_slots)
      if (!slot.key.empty() && s.key == slot.key) {
        s = std::move(slot);
        return;
      }
    cli_slots.push_back(std::move(slot));
  };
  for (const std::string& text : overrides) {
    if (auto zip = parse_zip(text)) {
      const SweepDimension d = dimension_from_zip(*zip, "'" + text + "'");
      cli_keys.insert(cli_keys.end(), d.keys.begin(), d.keys.end());
      place(slot_of(d, ""));
      continue;
    }
    Override o = parse_override(text);
    cli_keys.push_back(key_element(o));
    const std::string slot_key = (o.type == OverrideType::Delete ? "~" : prefix_of(o.type)) + key_element(o);
    if (o.is_sweep()) {
      place(slot_of(dimension_from(o, group_options), slot_key));
    } else {
      plan.fixed.push_back(text);
      place(Slot{slot_key, {{text}}});
    }
  }

  std::vector<Slot> slots;
  if (sweep_section && !sweep_section->is_null()) {
    if (!sweep_section->is_mapping())
      throw ConfigError("'sweep' must be a dict with 'params' and/or 'zip' (" + sweep_section->origin().str() + ")");
    std::vector<SweepDimension> config_dims;
    if (const Node* params = sweep_section->find("params"); params && !params->is_null()) {
      if (!params->is_mapping())
        throw ConfigError("sweep.params must be a dict of key: values (" + params->origin().str() + ")");
      for (const Node::Entry& e : params->entries()) {
        // Values are override-grammar text ("1e-3,3e-4", "glob(*)"), or a YAML list of values.
        Override o;
        if (e.second.is_sequence()) {
          o.key = e.first;
          o.text = e.first;
          o.type = OverrideType::Change;
          o.sweep = Sweep{};
          o.sweep->kind = Sweep::Kind::Choice;
          o.sweep->choices = e.second.items();
        } else {
          o = parse_override(e.first + "=" + e.second.to_display());
        }
        if (!o.is_sweep()) {  // one value: a dimension of size 1, so the key is still set
          o.sweep = Sweep{};
          o.sweep->choices = {*o.value};
        }
        config_dims.push_back(dimension_from(o, group_options));
      }
    }
    if (const Node* zip = sweep_section->find("zip"))
      for (SweepDimension& d : zip_groups_from_config(*zip)) config_dims.push_back(std::move(d));
    // Config dimensions come first; one with a key that the command line sets is dropped (the
    // command line wins).
    for (const SweepDimension& d : config_dims)
      if (std::none_of(d.keys.begin(), d.keys.end(), [&](const std::string& k) { return names_key(cli_keys, k); }))
        slots.push_back(slot_of(d, ""));
  }
  for (Slot& s : cli_slots) slots.push_back(std::move(s));

  // Cartesian product, first slot slowest: count in mixed radix with the last digit fastest.
  // Bounded like range(): a product of a few long lists (or a typo) must not plan billions of jobs
  // (found by fuzzing: a minute of planning, and the memory to match).
  constexpr size_t kMaxJobs = 100000;
  size_t total = 1;
  std::string sizes;
  for (const Slot& s : slots) {
    if (s.size() != 1) sizes += (sizes.empty() ? "" : " x ") + std::to_string(s.size());
    total = s.size() == 0 ? 0 : total > kMaxJobs / s.size() ? kMaxJobs + 1 : total * s.size();
  }
  if (total > kMaxJobs)
    throw ConfigError("The sweep would run more than " + std::to_string(kMaxJobs) + " jobs (" + sizes + " values); that is the limit");
  plan.jobs.reserve(total);
  std::vector<size_t> index(slots.size());
  for (size_t job = 0; job < total; ++job) {
    size_t rest = job;
    for (size_t k = slots.size(); k-- > 0;) {
      index[k] = rest % slots[k].size();
      rest /= slots[k].size();
    }
    std::vector<std::string> assignment;
    for (size_t k = 0; k < slots.size(); ++k)
      for (const std::vector<std::string>& texts : slots[k].texts) assignment.push_back(texts[index[k]]);
    plan.jobs.push_back(std::move(assignment));
  }
  return plan;
}

}  // namespace wavetrain::config
