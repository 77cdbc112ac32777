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

// The tree of test_basic-like configs most cases use: groups at the root, one with a package.
std::string groups_tree(const std::string& name) {
  return write_tree(name, {{"config.yaml",
                            "defaults:\n  - model: a\n  - optimizer@opt: adam\n  - optional extras: none\n  - _self_\n"
                            "trainer: {seed: 0, lr: 0.5, ref: '${trainer.seed}'}\n"},
                           {"model/a.yaml", "name: a\n"},
                           {"model/b.yaml", "name: b\n"},
                           {"optimizer/adam.yaml", "name: adam\n"},
                           {"optimizer/sgd.yaml", "name: sgd\n"},
                           {"extras/x.yaml", "extra: true\n"}});
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
  // Its override key carries that package, as Hydra's does.
  EXPECT_EQ(yaml_of(dir, {"act@model.act=gelu"}), "model:\n  act:\n    fn: gelu\n  name: a\n");
  EXPECT_EQ(error_of(dir, {"act=gelu"}).rfind("Could not override 'act'.\nDid you mean to override act@model.act?", 0),
            0u);
}

// defaults_config_entry_subdir: a config (not group) entry's folder is part of its package.
TEST(ConfigHydraCompose, ConfigEntryInASubfolderIsPlacedUnderTheFolder) {
  const std::string dir = write_tree("subdir", {{"config.yaml", "defaults:\n  - sub/thing\n  - model: a\n  - _self_\ntop: 1\n"},
                                                {"sub/thing.yaml", "th: 2\n"},
                                                {"model/a.yaml", "defaults:\n  - /sub/thing\n  - other\nname: a\n"},
                                                {"model/other.yaml", "o: 3\n"}});
  EXPECT_EQ(yaml_of(dir), "sub:\n  th: 2\nmodel:\n  sub:\n    th: 2\n  o: 3\n  name: a\ntop: 1\n");
}

// package_in_defaults_plain_key: `group=x` names the entry `group`, not `group@pkg`.
TEST(ConfigHydraCompose, GroupChoiceMustNameThePackageToo) {
  const std::string dir = groups_tree("plain_key");
  EXPECT_EQ(error_of(dir, {"optimizer=sgd"}),
            "Could not override 'optimizer'.\nDid you mean to override optimizer@opt?\n"
            "To append to your defaults list use +optimizer=sgd");
  EXPECT_EQ(error_of(dir, {"~optimizer"}), "Could not delete 'optimizer'. No match in the defaults list");
  EXPECT_EQ(compose({{dir}, "config", {"optimizer@opt=sgd"}}).config.find_path("opt.name")->string_value(), "sgd");
  // Two entries of one group: the plain key changes neither.
  std::ofstream(dir + "/two.yaml") << "defaults:\n  - optimizer@opt: adam\n  - optimizer@opt2: adam\n";
  EXPECT_EQ(error_of(dir, {"optimizer=sgd"}, "two").rfind(
                "Could not override 'optimizer'.\nDid you mean to override one of optimizer@opt, optimizer@opt2?", 0),
            0u);
  // `+optimizer=sgd` is another entry, at `optimizer`.
  EXPECT_EQ(compose({{dir}, "config", {"+optimizer=sgd"}}).config.find_path("optimizer.name")->string_value(), "sgd");
}

// An `override` entry in a file without `@package _global_` lives under that file's package, so
// it names `model@experiment.model`, which nothing in the tree is.
TEST(ConfigHydraCompose, OverrideEntriesMustMatchAnEntry) {
  const std::string dir = groups_tree("override_key");
  std::filesystem::create_directories(dir + "/experiment");
  std::ofstream(dir + "/experiment/local.yaml") << "defaults:\n  - override /model: b\n";
  std::ofstream(dir + "/experiment/global.yaml") << "# @package _global_\ndefaults:\n  - override /model: b\n";
  EXPECT_EQ(error_of(dir, {"+experiment=local"}),
            "In 'experiment/local': Could not override 'model@experiment.model'.\nDid you mean to override model?");
  EXPECT_EQ(compose({{dir}, "config", {"+experiment=global"}}).config.find_path("model.name")->string_value(), "b");
}

// package_on_value_error: `key@pkg` is a group override; on a value key Hydra refuses it (wavetrain
// took `trainer.max_steps@x=1` as `trainer.max_steps=1`).
TEST(ConfigHydraCompose, APackageOnAValueKeyIsAnError) {
  const std::string dir = groups_tree("package_on_value");
  EXPECT_EQ(error_of(dir, {"trainer.seed@x=1"}),
            "Override trainer.seed@x=1 looks like a config group override, but config group 'trainer.seed' does not exist.");
  EXPECT_EQ(error_of(dir, {"+trainer.new@x=1"}),
            "Override +trainer.new@x=1 looks like a config group override, but config group 'trainer.new' does not exist.");
  EXPECT_NE(yaml_of(dir, {"optimizer@opt=sgd"}).find("opt:\n  name: sgd\n"), std::string::npos);  // a group's still works
}

// add_group_optional_absent: an entry whose file is absent (or that is null) is still in the
// defaults list, so `+group=x` cannot add a second one.
TEST(ConfigHydraCompose, AppendingAGroupThatIsOptionalAndAbsentIsAnError) {
  const std::string dir = groups_tree("optional_absent");
  EXPECT_EQ(error_of(dir, {"+extras=x"}),
            "Could not append to the defaults list: 'extras' is already in it. Use extras=x to change its option");
  EXPECT_EQ(compose({{dir}, "config", {"extras=x"}}).config.find_path("extras.extra")->bool_value(), true);
  // As in Hydra, `~extras` deletes every `extras` entry, the appended one too.
  EXPECT_EQ(compose({{dir}, "config", {"~extras", "+extras=x"}}).config.find("extras"), nullptr);
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

// interp_string_bool_null: inside a string, values print as Python's str() does.
TEST(ConfigHydraResolve, BoolsAndNullInsideStringsPrintAsPython) {
  const Node root = load_yaml_string("t: true\nf: false\nn: null\nx: 1.5\ns: flag_${t}_${f}\nu: none_${n}_${x}\n"
                                     "w: ${t}\n",
                                     "test.yaml");
  const ResolveContext ctx;
  EXPECT_EQ(resolve_path(root, "s", ctx).string_value(), "flag_True_False");
  EXPECT_EQ(resolve_path(root, "u", ctx).string_value(), "none_None_1.5");
  EXPECT_TRUE(resolve_path(root, "w", ctx).bool_value());  // a whole-value interpolation keeps its type
  EXPECT_EQ(resolve_all(root, ctx).find("s")->string_value(), "flag_True_False");
}

// What wavetrain writes, PyYAML and OmegaConf read with YAML 1.1, where these plain strings are
// ints, floats or dates: they are quoted. Strings that YAML 1.1 keeps as strings stay plain.
TEST(ConfigHydraYaml, StringsThatYaml11ReadsAsNumbersOrDatesAreQuoted) {
  for (const char* s : {"1_000", "+1_0", "-0b101", "0b1_0", "017", "0x_1F", "1:30", "-1:30:59", "1_0.5", "1.5e3", "1e5",
                        ".5_0", "1:30.5", "1.", "2001-12-14", "2001-12-14t21:59:43.10-05:00", "2001-1-2 1:00:00 Z", "="}) {
    const Node tree = load_yaml_string("k: x\n", "t.yaml");
    Node written = tree;
    *written.find("k") = Node::string(s);
    const std::string text = to_yaml(written);
    EXPECT_NE(text.find("k: '"), std::string::npos) << s << " written as " << text;
    EXPECT_EQ(load_yaml_string(text, "t.yaml").find("k")->string_value(), s);
  }
  for (const char* s : {"1-2", "1:60", "0b", "0x", "1_0_x", "2001-12-14x", "12-00-00", "1.2.3", "v1.0", "0o17x", "._5"})
    EXPECT_EQ(to_yaml(Node::string(s)), std::string(s) + "\n") << s;
}

}  // namespace
}  // namespace wavetrain::config
