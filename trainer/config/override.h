// Command-line overrides in Hydra's grammar: `key=value`, `+key=value`, `++key=value`, `~key`,
// typed values (null, bool, int, float, string, lists, dicts), and the sweeps of a multirun
// (`a=1,2`, `choice(...)`, `range(...)`, `glob(...)`), plus this project's `zip(k1=[...],k2=[...])`.
// This file owns parsing only: applying an override to a config tree lives elsewhere.
//
// Values follow Hydra (https://hydra.cc/docs/advanced/override_grammar/basic), not YAML:
//   5 -> int, 1e-3 -> float, true/NULL/inf/nan (any case) -> bool/null/float, ??? -> missing,
//   '5' or "5" -> string, ${a.b} -> string kept verbatim (an interpolation, resolved later),
//   a\,b -> "a,b" (escapes: \, \[ \] \{ \} \( \) \: \= \<space> \<tab> \\), anything else -> string.
// As in Hydra, ':' needs no escape inside an unquoted value (`device=cuda:0`); unlike Hydra, '='
// needs none either (`s=x=y`). ':' still ends a dict key and `name=` still names a function argument.
// Other characters outside letters, digits, whitespace and / - \ + . $ % * @ ? | _ (for example
// # ~ & ; ! or non-ASCII letters) are an error unless the value is quoted, as in Hydra.
// Errors are ConfigError: "Error parsing override '<text>': <what> at position <n> (found 'c')",
// where n counts characters of the text from 0; a text over 200 characters is shown by its first 60
// and its length. Lists and dicts nest at most kMaxDepth (256) deep.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "trainer/config/node.h"

namespace wavetrain::config {

enum class OverrideType {
  Change,    // key=value: the key must exist
  Add,       // +key=value: the key must not exist
  ForceAdd,  // ++key=value: set, whether or not the key exists
  Delete,    // ~key or ~key=value (deleted only if it has that value)
};

// A value that expands to several jobs in a multirun.
struct Sweep {
  enum class Kind { Choice, Range, Glob };
  Kind kind = Kind::Choice;
  std::vector<Node> choices;  // Choice: `a,b,c` or `choice(a,b,c)`
  // Range: range(stop) or range(start, stop[, step]) with Python's meaning (start 0 and step 1 by
  // default, stop excluded, negative steps count down). Ints give ints; any float argument gives floats.
  Node start, stop, step;
  // Glob: fnmatch patterns over a config group's options: glob(*), glob([a*,b*],exclude=[x,y*]).
  std::vector<std::string> include, exclude;
};

struct Override {
  std::string text;        // as typed
  OverrideType type = OverrideType::Change;
  std::string key;         // "trainer.max_epochs", or a config group "model", "hydra/launcher"
  std::string package;     // from key@package; empty if none
  std::optional<Node> value;  // absent for a plain `~key`, and for a sweep
  std::optional<Sweep> sweep;
  bool is_sweep() const { return sweep.has_value(); }
};

// Parses one override; throws ConfigError naming the text, what was expected, and where.
Override parse_override(const std::string& text);

// The values of a sweep, in order. A Glob selects from `group_options` (kept in their order); it is
// empty without them. Throws ConfigError for a range with step 0 or with more than 100000 values.
std::vector<Node> expand_sweep(const Sweep& sweep, const std::vector<std::string>& group_options = {});

// `zip(lr=[1e-3,3e-4],batch=[16,32])`: keys whose values advance together, job i taking item i of
// every list (rather than the cartesian product of separate sweeps).
struct Zip {
  std::vector<std::pair<std::string, std::vector<Node>>> keys;  // every list has the same length
};

// nullopt if `text` does not start with `zip(`; ConfigError if it is malformed, a value is not a
// list, or the lists differ in length.
std::optional<Zip> parse_zip(const std::string& text);

}  // namespace wavetrain::config
