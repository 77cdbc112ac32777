// Value overrides: `key=v`, `+key=v`, `++key=v`, `~key` and `~key=v` applied to a composed config,
// with Hydra's rules, and the "Did you mean ...?" hints for keys that are not there. Group choices
// (`model=lstm`) are composition's business (compose.h); this is what comes after it.
#pragma once

#include <string>

#include "trainer/config/node.h"
#include "trainer/config/override.h"

namespace wavetrain::config {

// Applies one parsed value override to `config`. Throws ConfigError as Hydra does: `key=v` for a
// key that is not there, `+key=v` for one that is, `~key[=v]` for a missing key or another value.
void apply_value(Node& config, const Override& o);

// Whether `a` and `b` are equal the way Hydra compares them for `~key=value` (Python's `==` on the
// plain values): numbers by value whatever their type (0 == 0.0, true == 1), NaN equal to nothing,
// strings only to strings, lists item by item, dicts by key whatever the order.
bool equal_as_hydra(const Node& a, const Node& b);

// "\nDid you mean trainer.seed?" for a `key` that `config` does not have, naming its nearest keys
// (the same last part at any depth first, then near spellings); "" when none is close.
std::string did_you_mean(const Node& config, const std::string& key);

}  // namespace wavetrain::config
