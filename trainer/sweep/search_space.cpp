// The search space and the trials drawn from it; see search_space.h.
#include "trainer/sweep/search_space.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <regex>

#include "trainer/config/config.h"
#include "trainer/config/override.h"
#include "trainer/config/sweep.h"

namespace wavetrain::sweep {
namespace {

using config::ConfigError;
using config::Node;

// Numbers from the engine alone (not std::uniform_real_distribution, whose algorithm the standard
// leaves open), so that a seed gives the same trials with any standard library.
class Random {
 public:
  explicit Random(uint64_t seed) : engine_(seed) {}
  double uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  uint64_t below(uint64_t n) { return n <= 1 ? 0 : engine_() % n; }  // bias < n / 2^64: immaterial here

 private:
  std::mt19937_64 engine_;
};

void flatten(const Node& node, const std::string& prefix, std::vector<std::pair<std::string, const Node*>>& out) {
  if (node.is_mapping() && !node.entries().empty()) {
    for (const auto& [k, v] : node.entries()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
    return;
  }
  out.emplace_back(prefix, &node);
}

double number_argument(const std::string& text, const std::string& where) {
  const Node v = config::parse_override("x=" + text).value.value_or(Node::null());
  if (v.kind() != Node::Kind::Int && v.kind() != Node::Kind::Float)
    throw ConfigError(where + ": '" + text + "' is not a number");
  return v.kind() == Node::Kind::Int ? static_cast<double>(v.int_value()) : v.float_value();
}

SearchDimension parse_dimension(const std::string& key, const Node& value) {
  const std::string where = "sweep.space." + key;
  SearchDimension d;
  d.key = key;
  if (value.is_sequence()) {  // a YAML list: the values to choose from
    d.kind = SearchDimension::Kind::Choice;
    d.choices = value.items();
    if (d.choices.empty()) throw ConfigError(where + ": the list of values is empty");
    return d;
  }
  const std::string text = value.is_scalar() && value.kind() == Node::Kind::String ? value.string_value() : "";
  static const std::regex call(R"(^\s*([a-z_]+)\s*\((.*)\)\s*$)");
  std::smatch m;
  if (!std::regex_match(text, m, call))
    throw ConfigError(where + "=" + value.to_display() +
                      ": expected uniform(low, high), loguniform(low, high), int(low, high) or choice(a, b, ...)");
  const std::string fn = m[1], args = m[2];
  if (fn == "choice") {
    config::Override o;
    try {
      o = config::parse_override("x=choice(" + args + ")");
    } catch (const ConfigError& e) {
      throw ConfigError(where + "=" + text + ": " + e.what());
    }
    d.kind = SearchDimension::Kind::Choice;
    if (o.sweep) d.choices = config::expand_sweep(*o.sweep);
    else if (o.value) d.choices = {*o.value};
    if (d.choices.empty()) throw ConfigError(where + "=" + text + ": choice() has no values");
    return d;
  }
  if (fn == "uniform") d.kind = SearchDimension::Kind::Uniform;
  else if (fn == "loguniform") d.kind = SearchDimension::Kind::LogUniform;
  else if (fn == "int") d.kind = SearchDimension::Kind::Int;
  else
    throw ConfigError(where + "=" + text + ": unknown distribution '" + fn +
                      "'; expected uniform, loguniform, int or choice");
  const size_t comma = args.find(',');
  if (comma == std::string::npos || args.find(',', comma + 1) != std::string::npos)
    throw ConfigError(where + "=" + text + ": " + fn + "() takes two numbers, low and high");
  d.low = number_argument(args.substr(0, comma), where);
  d.high = number_argument(args.substr(comma + 1), where);
  if (!std::isfinite(d.low) || !std::isfinite(d.high) || !(d.low < d.high || (d.kind == SearchDimension::Kind::Int && d.low == d.high)))
    throw ConfigError(where + "=" + text + ": the range holds no values (low must be below high)");
  if (d.kind == SearchDimension::Kind::LogUniform && d.low <= 0)
    throw ConfigError(where + "=" + text + ": loguniform needs low > 0");
  if (d.kind == SearchDimension::Kind::Int && (d.low != std::floor(d.low) || d.high != std::floor(d.high)))
    throw ConfigError(where + "=" + text + ": int() takes integer bounds");
  return d;
}

Node draw(const SearchDimension& d, Random& rng) {
  switch (d.kind) {
    case SearchDimension::Kind::Uniform: return Node::floating(d.low + (d.high - d.low) * rng.uniform());
    case SearchDimension::Kind::LogUniform:
      return Node::floating(std::exp(std::log(d.low) + (std::log(d.high) - std::log(d.low)) * rng.uniform()));
    case SearchDimension::Kind::Int:
      return Node::integer(static_cast<int64_t>(d.low) + static_cast<int64_t>(rng.below(static_cast<uint64_t>(d.high - d.low) + 1)));
    case SearchDimension::Kind::Choice: return d.choices[rng.below(d.choices.size())];
  }
  return Node::null();
}

}  // namespace

std::vector<SearchDimension> parse_search_space(const Node* space) {
  std::vector<SearchDimension> dims;
  if (!space || space->is_null() || (space->is_mapping() && space->entries().empty())) return dims;
  if (!space->is_mapping()) throw ConfigError("sweep.space must be a mapping of key: distribution, found " + space->to_display());
  std::vector<std::pair<std::string, const Node*>> leaves;
  flatten(*space, "", leaves);
  for (const auto& [key, value] : leaves) dims.push_back(parse_dimension(key, *value));
  return dims;
}

std::vector<std::vector<std::string>> draw_trials(const std::vector<std::vector<std::string>>& grid,
                                                  const std::vector<SearchDimension>& space, int64_t trials, uint64_t seed) {
  const std::vector<std::vector<std::string>> points = grid.empty() ? std::vector<std::vector<std::string>>{{}} : grid;
  bool continuous = false;
  uint64_t space_points = points.size();  // discrete points, saturating
  for (const SearchDimension& d : space) {
    if (d.continuous()) continuous = true;
    const uint64_t n = d.kind == SearchDimension::Kind::Int ? static_cast<uint64_t>(d.high - d.low) + 1 : d.choices.size();
    space_points = n != 0 && space_points > UINT64_MAX / n ? UINT64_MAX : space_points * n;
  }
  if (trials < 0) throw ConfigError("sweep.trials must be >= 0, got " + std::to_string(trials));
  if (trials == 0 && continuous)
    throw ConfigError("sweep.trials: a space with a continuous dimension needs a number of trials (> 0)");
  if (trials == 0 && space_points > 100000)
    throw ConfigError("sweep.trials=0 asks for every point of the space, which has " +
                      (space_points == UINT64_MAX ? std::string("more than 2^64") : std::to_string(space_points)) +
                      " (at most 100000): give sweep.trials");
  if (trials == 0) trials = static_cast<int64_t>(space_points);
  if (!continuous && static_cast<uint64_t>(trials) > space_points)
    throw ConfigError("sweep.trials=" + std::to_string(trials) + ": the space has only " + std::to_string(space_points) +
                      " points (every one is tried once; use sweep.trials=0 for all of them)");
  if (trials > 100000) throw ConfigError("sweep.trials=" + std::to_string(trials) + ": at most 100000 trials");

  Random rng(seed);
  std::vector<std::vector<std::string>> out;
  if (!continuous) {
    // Without replacement: a seeded shuffle of the discrete points' indices (mixed radix: the grid's
    // point, then each dimension's value), taking the first `trials`. Spaces too large to list are
    // drawn with rejection of repeats instead.
    std::vector<uint64_t> radices = {points.size()};
    for (const SearchDimension& d : space)
      radices.push_back(d.kind == SearchDimension::Kind::Int ? static_cast<uint64_t>(d.high - d.low) + 1 : d.choices.size());
    std::vector<uint64_t> chosen;
    if (space_points <= 1000000) {
      std::vector<uint64_t> all(space_points);
      for (uint64_t i = 0; i < space_points; ++i) all[i] = i;
      for (uint64_t i = 0; i < static_cast<uint64_t>(trials); ++i) std::swap(all[i], all[i + rng.below(space_points - i)]);
      chosen.assign(all.begin(), all.begin() + trials);
    } else {
      std::vector<uint64_t> seen;
      while (chosen.size() < static_cast<size_t>(trials)) {
        const uint64_t v = rng.below(space_points);
        if (std::find(seen.begin(), seen.end(), v) == seen.end()) {
          seen.push_back(v);
          chosen.push_back(v);
        }
      }
    }
    for (uint64_t index : chosen) {
      std::vector<uint64_t> digits(radices.size());
      for (size_t k = radices.size(); k-- > 0;) {
        digits[k] = index % radices[k];
        index /= radices[k];
      }
      std::vector<std::string> trial = points[digits[0]];
      for (size_t k = 0; k < space.size(); ++k) {
        const SearchDimension& d = space[k];
        const Node v = d.kind == SearchDimension::Kind::Int ? Node::integer(static_cast<int64_t>(d.low) + static_cast<int64_t>(digits[k + 1]))
                                                            : d.choices[digits[k + 1]];
        trial.push_back(d.key + "=" + config::format_override_value(v));
      }
      out.push_back(std::move(trial));
    }
    return out;
  }
  for (int64_t t = 0; t < trials; ++t) {
    std::vector<std::string> trial = points[rng.below(points.size())];
    for (const SearchDimension& d : space) trial.push_back(d.key + "=" + config::format_override_value(draw(d, rng)));
    out.push_back(std::move(trial));
  }
  return out;
}

}  // namespace wavetrain::sweep
