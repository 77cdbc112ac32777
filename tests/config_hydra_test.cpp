// Composition and resolution where wavetrain once differed from Hydra 1.3 / OmegaConf 2.3 without
// meaning to (found by tests/python/hydra_differential.py; the case names are in the comments).
// Each expectation is what Hydra gives.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "trainer/config/compose.h"
#include "trainer/config/interpolation.h"
#include "trainer/config/yaml_io.h"

namespace wavetrain::config {
namespace {

// A config tree in a fresh folder under the test temp dir: (path, text) pairs.
std::string write_tree(const std::string& name, const std::vector<std::pair<std::string, std::string>>& files) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_hydra_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (const auto& [path, text] : files) {
    fs::create_directories((dir / path).parent_path());
    std::ofstream(dir / path) << text;
  }
  return dir.string();
}

std::string yaml_of(const std::string& dir, std::vector<std::string> overrides = {}, const std::string& name = "config") {
  return to_yaml(compose({{dir}, name, std::move(overrides)}).config);
}

std::string error_of(const std::string& dir, std::vector<std::string> overrides, const std::string& name = "config") {
  try {
    compose({{dir}, name, std::move(overrides)});
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

// absolute_group_in_option: the leading '/' says where the group's files are, not where its keys
// go; they go under the including option's package like any other group's.
TEST(ConfigHydraCompose, AbsoluteGroupInAnOptionNestsUnderItsPackage) {
  const std::string dir = write_tree("absolute", {{"config.yaml", "defaults:\n  - model: a\n  - _self_\n"},
                                                  {"model/a.yaml", "defaults:\n  - /act: relu\n  - _self_\nname: a\n"},
                                                  {"act/relu.yaml", "fn: relu\n"},
                                                  {"act/gelu.yaml", "fn: gelu\n"}});
  EXPECT_EQ(yaml_of(dir), "model:\n  act:\n    fn: relu\n  name: a\n");
}

// defaults_config_entry_subdir: a config (not group) entry's folder is part of its package.
TEST(ConfigHydraCompose, ConfigEntryInASubfolderIsPlacedUnderTheFolder) {
  const std::string dir = write_tree("subdir", {{"config.yaml", "defaults:\n  - sub/thing\n  - model: a\n  - _self_\ntop: 1\n"},
                                                {"sub/thing.yaml", "th: 2\n"},
                                                {"model/a.yaml", "defaults:\n  - /sub/thing\n  - other\nname: a\n"},
                                                {"model/other.yaml", "o: 3\n"}});
  EXPECT_EQ(yaml_of(dir), "sub:\n  th: 2\nmodel:\n  sub:\n    th: 2\n  o: 3\n  name: a\ntop: 1\n");
}

// delete_value_int_vs_float: `~key=value` compares as Python's `==` does.
TEST(ConfigHydraCompose, DeleteComparesValuesAsHydra) {
  const std::string dir = write_tree("delete", {{"config.yaml", "i: 0\nf: 1.0\nb: true\nx: .nan\ns: '1'\nl: [1, 2.0]\n"
                                                               "d: {a: 0, b: 2}\nr: ${i}\n"}});
  for (const char* o : {"~i=0.0", "~i=false", "~f=1", "~b=1", "~b=1.0", "~l=[1.0,2]", "~d={b:2.0,a:0}", "~r=0", "~s=null",
                        "~s='1'"})
    EXPECT_EQ(compose({{dir}, "config", {o}}).config.find(std::string(1, o[1])), nullptr) << o;
  EXPECT_EQ(error_of(dir, {"~x=nan"}), "Could not delete from config. The value of 'x' is nan and not nan.");
  EXPECT_EQ(error_of(dir, {"~s=1"}), "Could not delete from config. The value of 's' is 1 and not 1.");
  EXPECT_EQ(error_of(dir, {"~i=0.5"}), "Could not delete from config. The value of 'i' is 0 and not 0.5.");
  EXPECT_EQ(error_of(dir, {"~d={a:0}"}), "Could not delete from config. The value of 'd' is {a: 0, b: 2} and not {a: 0}.");
  EXPECT_EQ(error_of(dir, {"~l=[1]"}).rfind("Could not delete from config. The value of 'l'", 0), 0u);
}

}  // namespace
}  // namespace wavetrain::config
