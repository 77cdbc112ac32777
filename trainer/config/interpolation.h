// Interpolation: `${a.b}` (keeps the referenced value's type when it is the whole value), inside
// strings (`run_${model.name}`), relative `${.b}` (a sibling) and `${..x}` (one level further up),
// `${oc.env:VAR,default}` (alias `${env:...}`), `${now:%Y-%m-%d}` (one instant per run).
// `\${` is a literal "${". A cycle is an error that prints the chain; a `???` value fails only
// when it is read, naming its key.
#pragma once

#include <cstddef>
#include <ctime>
#include <functional>
#include <optional>
#include <string>

#include "trainer/config/node.h"

namespace wavetrain::config {

// How deep one resolution may go, counting every interpolation followed (`a: ${b}`, `b: ${c}`, ...),
// every `${...}` nested inside another, and every dict or list entered on the way. Resolution
// recurses once per step, so a chain of 100,000 references would overflow the stack; real configs
// use a handful. Reaching the limit is an error that names the chain.
inline constexpr size_t kMaxResolveDepth = 512;

struct ResolveContext {
  std::time_t now = 0;  // the run's start: every ${now:...} of a run formats this same instant
  // Environment lookup; tests replace it. Default: std::getenv.
  std::function<std::optional<std::string>(const std::string&)> getenv;

  static ResolveContext current();  // now = time(nullptr), getenv = the process environment
};

// The value at `path` in `root` with every interpolation in it resolved (recursively for dicts and
// lists). Throws ConfigError naming the key: missing key, `???`, unknown resolver, cycle, a
// resolution deeper than kMaxResolveDepth.
Node resolve_path(const Node& root, const std::string& path, const ResolveContext& ctx);

// The whole tree resolved; `???` values are kept as they are (they fail only when read).
Node resolve_all(const Node& root, const ResolveContext& ctx);

}  // namespace wavetrain::config
