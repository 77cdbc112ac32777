// libFuzzer target for the config engine (trainer/config): YAML files, the defaults list,
// composition, command-line overrides, sweeps, interpolation and YAML output. The input is split at
// NUL bytes: the primary config.yaml, then group/a.yaml and group/b.yaml, then one override per
// part. Any input must compose or give a ConfigError; never a crash (a stack overflow included),
// another exception, a leak, undefined behaviour or a hang. What composes and resolves is written
// as YAML and read back: the two trees must be equal. Build and run: docs/fuzzing.md.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "trainer/config/compose.h"
#include "trainer/config/interpolation.h"
#include "trainer/config/sweep.h"
#include "trainer/config/yaml_io.h"

namespace {

const std::string& config_dir() {
  static const std::string dir = [] {
    const char* base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    const std::string d = std::string(base) + "/wavetrain_config_fuzz_" + std::to_string(::getpid());
    std::filesystem::create_directories(d + "/group");
    return d;
  }();
  return dir;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace wavetrain::config;
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) parts.emplace_back();
    else parts.back() += static_cast<char>(data[i]);
  }
  parts.resize(std::max<size_t>(parts.size(), 3));
  const std::string& dir = config_dir();
  std::ofstream(dir + "/config.yaml", std::ios::trunc) << parts[0];
  std::ofstream(dir + "/group/a.yaml", std::ios::trunc) << parts[1];
  std::ofstream(dir + "/group/b.yaml", std::ios::trunc) << parts[2];
  ComposeOptions o;
  o.config_dirs = {dir};
  o.overrides.assign(parts.begin() + 3, parts.end());
  ResolveContext ctx;
  ctx.now = 1700000000;
  ctx.getenv = [](const std::string& name) -> std::optional<std::string> {
    if (name == "HOME") return std::string("/home/fuzz");
    return std::nullopt;
  };
  try {
    (void)plan_sweep(o.overrides, nullptr, [](const std::string&) { return std::vector<std::string>{"a", "b"}; });
  } catch (const ConfigError&) {
  }
  try {
    const Composition c = compose(o);
    (void)format_defaults_tree(c.defaults);
    const Node resolved = resolve_all(c.config, ctx);
    std::string text;
    try {
      text = to_yaml(resolved);
    } catch (const ConfigError&) {
      return 0;  // a string that is not UTF-8: YAML cannot hold it, and to_yaml says so
    }
    if (!(load_yaml_string(text, "round trip") == resolved)) {
      std::fprintf(stderr, "YAML round trip differs:\n%s\n", text.c_str());
      std::abort();
    }
  } catch (const ConfigError&) {
  }
  return 0;
}
