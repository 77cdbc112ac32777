// Sweeps: from the command line and the config's `sweep` section to the list of jobs of a multirun.
//
//   command line:  lr=1e-3,3e-4   model=glob(*)   seed=range(0,3)   'zip(lr=[1e-3,3e-4],batch=[16,32])'
//   config:        sweep: {params: {lr: '1e-3,3e-4'}, zip: {lr: [1e-3, 3e-4], batch: [16, 32]}}
//
// Each swept key (or zip group) is one dimension; the jobs are the cartesian product with the first
// dimension varying slowest. Config params come first in their order, and a key given on the
// command line replaces the config's entry for it (a single value there stops that key from
// sweeping). The command line's overrides, fixed and swept, then keep their order, as in Hydra's
// BasicSweeper: `a=1,2 c=5` gives the jobs `a=1 c=5` and `a=2 c=5`, and a second override of the
// same key (`a=1,2 a=5`) takes the first one's place. Each job's `key=value` (with its @package and
// + or ++) is written so that it parses back to the same value; fixed overrides are kept as typed.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "trainer/config/node.h"

namespace wavetrain::config {

struct SweepDimension {
  std::vector<std::string> keys;             // one key (key@package), or the keys of a zip group
  std::vector<std::vector<Node>> values;     // values[k][i]: value i of keys[k]
  std::string prefix;                        // "", "+" or "++" as typed for the key
  size_t size() const { return values.empty() ? 0 : values[0].size(); }
};

struct SweepPlan {
  std::vector<std::string> fixed;              // the command line's non-sweep overrides, as typed
  std::vector<std::vector<std::string>> jobs;  // each job's overrides, in the order above
};

// Options of a config group, for glob(); see compose.h group_options().
using GroupOptionsFn = std::function<std::vector<std::string>(const std::string& group)>;

// `sweep_section` is the composed config's `sweep` node (may be null or absent).
SweepPlan plan_sweep(const std::vector<std::string>& overrides, const Node* sweep_section,
                     const GroupOptionsFn& group_options);

// True when any override (or the sweep section) asks for more than one value.
bool has_sweep(const std::vector<std::string>& overrides);

// `value` written in the override grammar so that parse_override("k=" + text) gives it back.
std::string format_override_value(const Node& value);

}  // namespace wavetrain::config
