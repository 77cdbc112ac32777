// The search space of random search and ASHA (sweep.strategy random or asha), and the trials drawn
// from it.
//
//   sweep:
//     strategy: random
//     trials: 16                                # 0: every point of a discrete space, once
//     seed: 0
//     space:
//       optimizer.lr: loguniform(1e-4, 1e-1)    # log-uniform in [low, high]
//       optimizer.weight_decay: uniform(0, 0.1) # uniform in [low, high]
//       toy_regression.hidden: int(8, 64)       # an integer in [low, high], each equally likely
//       optimizer.name: choice(adam, sgd)       # one of the values (a YAML list means the same)
//
// Swept values from the command line or `sweep.params` (`lr=1e-3,1e-2`, `seed=range(3)`) are
// discrete dimensions of the same space: their grid's points are drawn from uniformly. A space
// that has only discrete dimensions is drawn without replacement in a seeded random order (so
// `trials: 0`, or trials equal to the grid's size, tries every point once); one with a continuous
// dimension is sampled `trials` times. Everything is a pure function of the seed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/config/node.h"

namespace wavetrain::sweep {

struct SearchDimension {
  enum class Kind { Uniform, LogUniform, Int, Choice };
  std::string key;                     // as written in the space, e.g. "optimizer.lr" or "+model.extra"
  Kind kind = Kind::Uniform;
  double low = 0, high = 0;            // Uniform, LogUniform, Int (both ends included)
  std::vector<config::Node> choices;   // Choice
  bool continuous() const { return kind == Kind::Uniform || kind == Kind::LogUniform; }
};

// Parses the `sweep.space` mapping (nested mappings give dotted keys). Throws config::ConfigError
// naming sweep.space.KEY, what was found and what is accepted: an unknown function, a range that is
// empty or reversed, a log range that is not positive, a choice with no values.
std::vector<SearchDimension> parse_search_space(const config::Node* space);

// The trials of a random search: each is a point of `grid` (the discrete sweep's jobs, each a list
// of overrides; one empty point when nothing is swept) followed by one `key=value` override per
// dimension of `space`. `trials` 0 means every grid point once (an error when `space` has a
// continuous dimension). Throws config::ConfigError when the space has no values or fewer
// points than `trials` without replacement.
std::vector<std::vector<std::string>> draw_trials(const std::vector<std::vector<std::string>>& grid,
                                                  const std::vector<SearchDimension>& space, int64_t trials,
                                                  uint64_t seed);

}  // namespace wavetrain::sweep
