// Composition, interpolation and typed access against the fixture tree in tests/data/configs/.
// Hydra's documented behaviour is the oracle for the rules and the error texts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "trainer/config/compose.h"
#include "trainer/config/config.h"
#include "trainer/config/interpolation.h"
#include "trainer/config/yaml_io.h"

namespace wavetrain::config {
namespace {

const std::string kBasic = std::string(WAVETRAIN_TEST_DATA) + "/configs/basic";
const std::string kExtra = std::string(WAVETRAIN_TEST_DATA) + "/configs/extra";

Composition compose_basic(std::vector<std::string> overrides, const std::string& name = "config",
                          std::vector<std::string> dirs = {kBasic}) {
  return compose({dirs, name, std::move(overrides)});
}

// Writes `files` (path relative to the folder, text) into a fresh folder under the test temp dir.
std::string write_configs(const std::string& name, const std::vector<std::pair<std::string, std::string>>& files) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("wavetrain_compose_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  for (const auto& [path, text] : files) {
    fs::create_directories((dir / path).parent_path());
    std::ofstream(dir / path) << text;
  }
  return dir.string();
}

std::string error_of(std::vector<std::string> overrides, const std::string& name = "config") {
  try {
    compose_basic(std::move(overrides), name);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Compose, ThreeLevelDefaultsTreeGivesExactYaml) {
  const Composition c = compose_basic({});
  EXPECT_EQ(to_yaml(c.config),
            "model:\n"
            "  encoder:\n"
            "    width: 8\n"
            "  name: wavenet\n"
            "  channels: 16\n"
            "optimizer:\n"
            "  lr: 0.004\n"
            "  betas:\n"
            "    - 0.9\n"
            "    - 0.999\n"
            "trainer:\n"
            "  max_epochs: 10\n"
            "  max_steps: -1\n"
            "  lr: ${optimizer.lr}\n"
            "name: run_${model.name}\n");
  EXPECT_EQ(c.choices.at("model"), "wavenet");
  EXPECT_EQ(c.choices.at("model/encoder"), "small");
  EXPECT_EQ(c.choices.at("optimizer"), "adam");
  EXPECT_EQ(c.choices.count("extras"), 0u);  // optional and absent
}

TEST(Compose, GroupAndValueOverridesFromTheCommandLine) {
  const Composition c =
      compose_basic({"model=lstm", "optimizer=sgd", "trainer.max_epochs=3", "+trainer.patience=5", "~trainer.max_steps"});
  EXPECT_EQ(to_yaml(c.config),
            "model:\n"
            "  name: lstm\n"
            "  hidden: 24\n"
            "optimizer:\n"
            "  lr: 0.1\n"
            "  momentum: 0.9\n"
            "trainer:\n"
            "  max_epochs: 3\n"
            "  lr: ${optimizer.lr}\n"
            "  patience: 5\n"
            "name: run_${model.name}\n");
  EXPECT_EQ(c.config.find_path("trainer.max_epochs")->origin().str(), "the command line");
  EXPECT_EQ(c.config.find_path("model.hidden")->origin().str(), kBasic + "/model/lstm.yaml:2");
}

TEST(Compose, NestedGroupOverrideAndDelete) {
  const Composition big = compose_basic({"model/encoder=big"});
  EXPECT_EQ(big.config.find_path("model.encoder.width")->int_value(), 64);
  const Composition none = compose_basic({"~model/encoder"});
  EXPECT_EQ(none.config.find_path("model.encoder"), nullptr);
  EXPECT_EQ(none.config.find_path("model.name")->string_value(), "wavenet");
  const Composition no_optimizer = compose_basic({"~optimizer"});
  EXPECT_EQ(no_optimizer.config.find("optimizer"), nullptr);
}

TEST(Compose, AppendedExperimentOverridesGroupAndValues) {
  const Composition c = compose_basic({"+experiment=fast"});
  EXPECT_EQ(c.choices.at("model"), "lstm");  // `override /model: lstm` inside the experiment
  EXPECT_EQ(c.config.find_path("model.name")->string_value(), "lstm");
  EXPECT_EQ(c.config.find_path("trainer.max_epochs")->int_value(), 2);  // @package _global_, after _self_
  EXPECT_EQ(c.config.find("experiment"), nullptr);
  // The command line still wins over the experiment's override entry.
  EXPECT_EQ(compose_basic({"+experiment=fast", "model=wavenet"}).choices.at("model"), "wavenet");
  EXPECT_EQ(compose_basic({"++experiment=fast"}).choices.at("model"), "lstm");
}

TEST(Compose, PackagesFromTheDefaultsList) {
  const Composition c = compose_basic({}, "packages");
  EXPECT_EQ(c.config.find_path("first.lr")->float_value(), 0.004);
  EXPECT_EQ(c.config.find_path("second.lr")->float_value(), 0.5);  // _self_ after the group
  EXPECT_EQ(c.config.find_path("second.momentum")->float_value(), 0.9);
  EXPECT_EQ(compose_basic({"optimizer@first=sgd"}, "packages").config.find_path("first.lr")->float_value(), 0.1);
  const Composition appended = compose_basic({"+optimizer@backup=sgd"}, "packages");
  EXPECT_EQ(appended.config.find_path("backup.momentum")->float_value(), 0.9);
}

TEST(Compose, ConfigDirComesBeforeTheOthers) {
  const Composition c = compose_basic({}, "config", {kExtra, kBasic});
  EXPECT_EQ(c.config.find_path("model.name")->string_value(), "wavenet_from_extra");
  EXPECT_EQ(group_options({kExtra, kBasic}, "model"), (std::vector<std::string>{"lstm", "tcn", "wavenet"}));
  EXPECT_EQ(compose_basic({"model=tcn"}, "config", {kExtra, kBasic}).config.find_path("model.name")->string_value(),
            "tcn");
}

TEST(Compose, DefaultsTreeNamesEachFile) {
  const std::string tree = format_defaults_tree(compose_basic({"+experiment=fast"}).defaults);
  EXPECT_EQ(tree,
            "config  (package: _global_, " + kBasic + "/config.yaml)\n"
            "  model/lstm  (package: model, " + kBasic + "/model/lstm.yaml)\n"
            "    _self_\n"
            "  optimizer/adam  (package: optimizer, " + kBasic + "/optimizer/adam.yaml)\n"
            "    _self_\n"
            "  _self_\n"
            "  experiment/fast  (package: _global_, " + kBasic + "/experiment/fast.yaml)\n"
            "    _self_\n");
}

TEST(ComposeErrors, UnknownOptionListsTheAvailableOnes) {
  EXPECT_EQ(error_of({"model=foo"}), "Could not find 'model/foo'. Available options in 'model': lstm, wavenet");
}

TEST(ComposeErrors, MandatoryGroupChoice) {
  const std::string e = error_of({}, "needs_model");
  EXPECT_EQ(e.rfind("You must specify 'model', e.g. model=<OPTION>\nAvailable options:\n\tlstm\n\twavenet\n", 0), 0u) << e;
  EXPECT_EQ(compose_basic({"model=lstm"}, "needs_model").choices.at("model"), "lstm");
}

TEST(ComposeErrors, UnknownKeyWithDidYouMean) {
  EXPECT_EQ(error_of({"trainer.max_epoch=3"}),
            "Could not override 'trainer.max_epoch'. To append to your config use +trainer.max_epoch=...\n"
            "Did you mean trainer.max_epochs?");
  EXPECT_EQ(error_of({"nothing.like.it=3"}),
            "Could not override 'nothing.like.it'. To append to your config use +nothing.like.it=...");
}

TEST(ComposeErrors, AppendingAnExistingKeyOrGroup) {
  EXPECT_EQ(error_of({"+trainer.lr=1"}).rfind("Could not append to config. An item is already at 'trainer.lr' (from " +
                                                  kBasic + "/config.yaml:11).\nEither remove the + prefix",
                                              0),
            0u)
      << error_of({"+trainer.lr=1"});
  EXPECT_EQ(error_of({"+model=lstm"}),
            "Could not append to the defaults list: 'model' is already in it. Use model=lstm to change its option");
  EXPECT_EQ(error_of({"extras=x"}).rfind("Could not", 0), 0u);
}

TEST(ComposeErrors, DeleteChecksWhatItDeletes) {
  EXPECT_EQ(error_of({"~trainer.nope"}), "Could not delete from config. 'trainer.nope' does not exist.");
  EXPECT_EQ(error_of({"~trainer.max_epochs=11"}),
            "Could not delete from config. The value of 'trainer.max_epochs' is 10 and not 11.");
  EXPECT_EQ(compose_basic({"~trainer.max_epochs=10"}).config.find_path("trainer.max_epochs"), nullptr);
}

TEST(ComposeErrors, SweepWithoutMultirun) {
  EXPECT_EQ(error_of({"trainer.lr=1e-3,3e-4"}),
            "'trainer.lr=1e-3,3e-4' is a sweep (it gives several values). Add -m to run one job per value");
}

TEST(ComposeErrors, MissingPrimaryConfig) {
  EXPECT_EQ(error_of({}, "nope"), "Primary config 'nope.yaml' not found in the search path (" + kBasic + ")");
}

TEST(ComposeErrors, DidYouMeanFindsTheKeyAtAnyDepth) {
  // The unknown key's last part at any depth comes first, even when a top-level key is spelt
  // nearer (`seed` is two edits from `sweep`).
  const std::string dir = write_configs("did_you_mean", {{"config.yaml",
                                                         "trainer: {seed: 0, mode: min, max_epochs: 3}\n"
                                                         "sweep: {mode: max}\n"
                                                         "model: {channels: 16, early: {mode: x}}\n"
                                                         "many: {a: {x: 1}, b: {x: 1}, c: {x: 1}, d: {x: 1}, "
                                                         "e: {x: 1}, f: {x: 1}, g: {x: 1}}\n"}});
  const auto message = [&](const std::string& override_text) {
    try {
      compose({{dir}, "config", {override_text}});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(message("seed=3"),
            "Could not override 'seed'. To append to your config use +seed=...\nDid you mean trainer.seed?");
  EXPECT_EQ(message("model.seed=3"),
            "Could not override 'model.seed'. To append to your config use +model.seed=...\n"
            "Did you mean trainer.seed?");
  EXPECT_EQ(message("~seed"), "Could not delete from config. 'seed' does not exist.\nDid you mean trainer.seed?");
  // Several: all of them, nearest full path first.
  EXPECT_EQ(message("mode=max"),
            "Could not override 'mode'. To append to your config use +mode=...\n"
            "Did you mean one of: sweep.mode, trainer.mode, model.early.mode?");
  EXPECT_EQ(message("x=2"),
            "Could not override 'x'. To append to your config use +x=...\n"
            "Did you mean one of: many.a.x, many.b.x, many.c.x, many.d.x, many.e.x (and 2 more)?");
  // Near spellings of the last part or of the whole path.
  EXPECT_EQ(message("chanels=8"),
            "Could not override 'chanels'. To append to your config use +chanels=...\nDid you mean model.channels?");
  EXPECT_EQ(message("trainer.max_epoch=3"),
            "Could not override 'trainer.max_epoch'. To append to your config use +trainer.max_epoch=...\n"
            "Did you mean trainer.max_epochs?");
  EXPECT_EQ(message("nothing_like_it=3"),
            "Could not override 'nothing_like_it'. To append to your config use +nothing_like_it=...");
}

TEST(ComposeErrors, DefaultsCyclesNameTheChainOfFiles) {
  const std::string dir = write_configs("cycles", {{"self.yaml", "defaults:\n  - self\n"},
                                                   {"a.yaml", "defaults:\n  - b\nx: 1\n"},
                                                   {"b.yaml", "defaults:\n  - _self_\n  - a\n"},
                                                   {"grp/opt.yaml", "defaults:\n  - /grp: opt\n"},
                                                   {"uses_grp.yaml", "defaults:\n  - grp: opt\n"}});
  const auto message = [&](const std::string& name) {
    try {
      compose({{dir}, name, {}});
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(message("self"), "Defaults cycle: " + dir + "/self.yaml -> " + dir + "/self.yaml (the defaults list at " +
                                 dir + "/self.yaml:2 includes a file that is already being read)");
  EXPECT_EQ(message("a"), "Defaults cycle: " + dir + "/a.yaml -> " + dir + "/b.yaml -> " + dir +
                              "/a.yaml (the defaults list at " + dir + "/b.yaml:3 includes a file that is already being read)");
  EXPECT_EQ(message("uses_grp"), "Defaults cycle: " + dir + "/grp/opt.yaml -> " + dir +
                                     "/grp/opt.yaml (the defaults list at " + dir +
                                     "/grp/opt.yaml:2 includes a file that is already being read)");
  // The same file reached through another path is the same file.
  std::ofstream(dir + "/dots.yaml") << "defaults:\n  - grp/../dots\n";
  EXPECT_EQ(message("dots").rfind("Defaults cycle: " + dir + "/dots.yaml -> " + dir + "/grp/../dots.yaml (", 0), 0u)
      << message("dots");
}

TEST(ComposeErrors, DefaultsNestedDeeperThanTheLimit) {
  // 300 distinct files, each including the next: no cycle, but a recursion as deep as the chain.
  std::vector<std::pair<std::string, std::string>> files;
  for (int i = 0; i < 300; ++i)
    files.emplace_back("c" + std::to_string(i) + ".yaml", "defaults:\n  - c" + std::to_string(i + 1) + "\n");
  files.emplace_back("c300.yaml", "x: 1\n");
  const std::string dir = write_configs("chain", files);
  try {
    compose({{dir}, "c0", {}});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "Defaults lists nest more than 256 files deep (the limit): " + dir + "/c0.yaml -> " +
                                         dir + "/c1.yaml -> ... -> " + dir + "/c255.yaml -> " + dir +
                                         "/c256.yaml (included by the defaults list at " + dir + "/c255.yaml:2)");
  }
  EXPECT_EQ(compose({{dir}, "c60", {}}).config.find("x")->int_value(), 1);  // 241 files deep is fine
}

TEST(ComposeErrors, NestingDeeperThanTheLimit) {
  std::string deep_package = "p";
  for (int i = 0; i < 299; ++i) deep_package += ".p";
  const std::string dir = write_configs("nesting", {{"config.yaml", "defaults:\n  - grp@" + deep_package + ": opt\n"},
                                                    {"grp/opt.yaml", "a: {b: 1}\n"}});
  try {
    compose({{dir}, "config", {}});
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "Config file " + dir + "/grp/opt.yaml placed at 'p.p.p.p....(300 parts)' would "
                                     "nest 302 levels deep; the limit is 256 nested dicts and lists");
  }
  // A key of many parts: every part is a dict on the way to the value.
  std::string deep_key = "a";
  for (int i = 0; i < 9999; ++i) deep_key += ".a";
  EXPECT_EQ(error_of({"++" + deep_key + "=1"}), "The override of 'a.a.a.a....(10000 parts)' on the command line would "
                                                "nest 10000 levels deep; the limit is 256 nested dicts and lists");
  const std::string key_250 = deep_key.substr(0, 2 * 250 - 1);
  EXPECT_EQ(error_of({"++" + key_250 + "=[[[[[[[1]]]]]]]"}),
            "The override of 'a.a.a.a....(250 parts)' on the command line would nest 257 levels deep; the limit is "
            "256 nested dicts and lists");
  EXPECT_EQ(compose_basic({"++" + key_250 + "=[[[[[[1]]]]]]"}).config.depth(), 256u);
}

TEST(ComposeValues, DictsMergeAndListsReplace) {
  const Composition c = compose_basic({"optimizer={lr:0.5,extra:{a:1}}", "optimizer.betas=[0.8]"});
  EXPECT_EQ(to_yaml(*c.config.find("optimizer")),
            "lr: 0.5\n"
            "betas:\n"
            "  - 0.8\n"
            "extra:\n"
            "  a: 1\n");
}

// ---- interpolation ----------------------------------------------------------------------------

ResolveContext fixed_context() {
  ResolveContext ctx;
  ctx.now = 1790000000;  // 2026-09-21 (UTC)
  ctx.getenv = [](const std::string& name) -> std::optional<std::string> {
    if (name == "WT_HOME") return std::string("/home/wt");
    return std::nullopt;
  };
  return ctx;
}

Node yaml(const std::string& text) { return load_yaml_string(text, "test.yaml"); }

TEST(Interpolation, WholeValueKeepsTypeAndStringsConcatenate) {
  const Node root = yaml("a: {b: 3, f: 0.5, l: [1, 2]}\nx: ${a.b}\ny: ${a.l}\ns: run_${a.b}_${a.f}\n");
  const ResolveContext ctx = fixed_context();
  EXPECT_EQ(resolve_path(root, "x", ctx).int_value(), 3);
  EXPECT_EQ(resolve_path(root, "y", ctx).items().size(), 2u);
  EXPECT_EQ(resolve_path(root, "s", ctx).string_value(), "run_3_0.5");
  EXPECT_EQ(Config(compose_basic({}).config, ctx).get_string("name"), "run_wavenet");
  EXPECT_EQ(Config(compose_basic({"optimizer=sgd"}).config, ctx).get_float("trainer.lr"), 0.1);
}

TEST(Interpolation, RelativeKeys) {
  const Node root = yaml("x: 7\na: {b: 1, c: '${.b}', d: {e: '${..b}', f: '${...x}'}}\n");
  const ResolveContext ctx = fixed_context();
  EXPECT_EQ(resolve_path(root, "a.c", ctx).int_value(), 1);
  EXPECT_EQ(resolve_path(root, "a.d.e", ctx).int_value(), 1);
  EXPECT_EQ(resolve_path(root, "a.d.f", ctx).int_value(), 7);
}

TEST(Interpolation, EnvironmentAndNow) {
  const Node root = yaml("h: ${oc.env:WT_HOME}/x\nd: ${env:WT_NOPE,fallback}\nn: ${oc.env:WT_NOPE,null}\n"
                         "t: ${now:%Y}\nu: ${oc.env:WT_NOPE}\nesc: \\${a.b}\n");
  const ResolveContext ctx = fixed_context();
  EXPECT_EQ(resolve_path(root, "h", ctx).string_value(), "/home/wt/x");
  EXPECT_EQ(resolve_path(root, "d", ctx).string_value(), "fallback");
  EXPECT_TRUE(resolve_path(root, "n", ctx).is_null());
  EXPECT_EQ(resolve_path(root, "t", ctx).string_value(), "2026");
  EXPECT_EQ(resolve_path(root, "esc", ctx).string_value(), "${a.b}");
  try {
    resolve_path(root, "u", ctx);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "Environment variable 'WT_NOPE' is not set (u, from test.yaml:5); give a default: ${oc.env:WT_NOPE,DEFAULT}");
  }
}

TEST(Interpolation, CyclesPrintTheChain) {
  const Node root = yaml("a: ${b}\nb: ${c}\nc: ${a}\n");
  try {
    resolve_path(root, "a", fixed_context());
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "Interpolation cycle: a -> b -> c -> a");
  }
}

// Interpolation can double a value per line (`b: [${a}, ${a}]`): resolving counts every value and
// every byte it makes, against kMaxNodes and kMaxBytes. Empty strings make no text but still cost
// time, so references followed count as values.
TEST(Interpolation, ExpansionIsBoundedInValuesAndBytes) {
  const auto doubling = [](const std::string& first, const std::string& form, int levels) {
    std::string text = "a0: " + first + "\n";
    for (int i = 1; i <= levels; ++i) {
      const std::string prev = "${a" + std::to_string(i - 1) + "}";
      std::string line = form;
      for (size_t at; (at = line.find("@")) != std::string::npos;) line.replace(at, 1, prev);
      text += "a" + std::to_string(i) + ": " + line + "\n";
    }
    return yaml(text);
  };
  const auto error = [](const Node& root, const std::string& key) -> std::string {
    try {
      resolve_path(root, key, fixed_context());
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "(no error)";
  };
  // Lists: 2^40 values.
  const Node lists = doubling("x", "['@', '@']", 40);
  EXPECT_EQ(error(lists, "a40").rfind("Interpolation expands the config to more than 1000000 values (the limit), resolving 'a", 0), 0u)
      << error(lists, "a40");
  EXPECT_EQ(resolve_path(lists, "a10", fixed_context()).items().size(), 2u);  // 2^10 leaves resolve
  EXPECT_THROW(resolve_all(lists, fixed_context()), ConfigError);
  // Strings: 2^40 bytes.
  const Node strings = doubling("xxxxxxxx", "'@@'", 40);
  EXPECT_EQ(error(strings, "a40").rfind("Interpolation expands the config to more than 64 MiB of text (the limit), resolving 'a", 0), 0u)
      << error(strings, "a40");
  EXPECT_EQ(resolve_path(strings, "a10", fixed_context()).string_value().size(), 8u << 10);
  // Empty strings: no text, 2^60 references.
  const Node empty = doubling("''", "'@@'", 60);
  EXPECT_EQ(error(empty, "a60").rfind("Interpolation expands the config to more than 1000000 values (the limit), resolving 'a", 0), 0u)
      << error(empty, "a60");
}

// Resolution recurses once per reference followed: the depth is bounded (kMaxResolveDepth).
TEST(Interpolation, ChainsDeeperThanTheLimitAreAnErrorNamingTheChain) {
  std::string text;
  for (int i = 0; i < 100000; ++i) text += "a" + std::to_string(i) + ": ${a" + std::to_string(i + 1) + "}\n";
  text += "a100000: end\n";
  const Node root = yaml(text);
  const std::string limit =
      "Interpolation nests more than 512 levels deep (the limit, counting each reference followed and each dict or "
      "list entered): ";
  try {
    resolve_path(root, "a0", fixed_context());
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), limit + "a0 -> a1 -> a2 -> ... (507 more) -> a510 -> a511 -> a512 (at test.yaml:513)");
  }
  try {
    resolve_all(root, fixed_context());  // the root dict is one level
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), limit + "a0 -> a1 -> a2 -> ... (506 more) -> a509 -> a510 -> a511 (at test.yaml:512)");
  }
  // The end of the chain is near enough from further down.
  EXPECT_EQ(resolve_path(root, "a99600", fixed_context()).string_value(), "end");
  // `${${${...}}}`: a key named by a key named by ..., one level per brace.
  std::string nested = "${a}";
  for (int i = 0; i < 600; ++i) nested = "${" + nested + "}";
  try {
    resolve_path(yaml("a: a\nn: '" + nested + "'\n"), "n", fixed_context());
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()).rfind("Interpolation nests more than 512 levels deep (the limit, counting each "
                                          "reference followed and each dict or list entered): n (at test.yaml:2)",
                                          0),
              0u)
        << e.what();
  }
}

TEST(Interpolation, MissingValuesFailOnlyWhenRead) {
  const Node root = yaml("task: ???\nother: 1\nref: ${task}\n");
  const Config cfg(root, fixed_context());
  EXPECT_EQ(cfg.get_int("other"), 1);
  EXPECT_TRUE(resolve_all(root, fixed_context()).find("task")->is_missing());
  try {
    cfg.get_string("task");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()),
              "Missing mandatory value: task (set to ??? in test.yaml:1); give it on the command line: task=...");
  }
  EXPECT_THROW(cfg.get_string("ref"), ConfigError);
  try {
    Config(yaml("a: ${nope.x}\n"), fixed_context()).get_int("a");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "Interpolation key 'nope.x' not found (in a)");
  }
}

// ---- typed access -----------------------------------------------------------------------------

TEST(TypedAccess, ConversionErrorsNameValueKeyAndOrigin) {
  auto error = [](const std::vector<std::string>& overrides, const std::function<void(const Config&)>& read) {
    try {
      read(Config(compose_basic(overrides).config, fixed_context()));
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  EXPECT_EQ(error({"trainer.max_epochs=abc"}, [](const Config& c) { c.get_int("trainer.max_epochs"); }),
            "Value 'abc' could not be converted to int (trainer.max_epochs, from the command line)");
  EXPECT_EQ(error({"trainer.max_epochs=12.0"}, [](const Config& c) { c.get_int("trainer.max_epochs"); }),
            "Value '12.0' could not be converted to int (trainer.max_epochs, from the command line)");
  EXPECT_EQ(error({"trainer.max_epochs='12'"}, [](const Config& c) { c.get_int("trainer.max_epochs"); }),
            "Value '12' could not be converted to int (trainer.max_epochs, from the command line)");
  EXPECT_EQ(error({}, [](const Config& c) { c.get_bool("trainer.max_epochs"); }),
            "Value '10' could not be converted to bool (trainer.max_epochs, from " + kBasic + "/config.yaml:9)");
  EXPECT_EQ(error({"trainer.max_epochs=1_000"}, [](const Config& c) { EXPECT_EQ(c.get_int("trainer.max_epochs"), 1000); }),
            "(no error)");
}

TEST(TypedAccess, YamlQuotedNumbersAndOnAreStrings) {
  const Config cfg(yaml("q: '123'\non_: on\nb: true\nf: 1\n"), fixed_context());
  EXPECT_THROW(cfg.get_int("q"), ConfigError);
  EXPECT_EQ(cfg.get_string("q"), "123");
  EXPECT_THROW(cfg.get_bool("on_"), ConfigError);
  EXPECT_TRUE(cfg.get_bool("b"));
  EXPECT_EQ(cfg.get_float("f"), 1.0);  // an int is a valid float
  EXPECT_EQ(cfg.get_int("missing_key", 5), 5);
}

TEST(TypedAccess, DeclaredKeysAreCheckedUpFront) {
  const Config cfg(compose_basic({"trainer.max_epochs=ten"}).config, fixed_context());
  const std::vector<KeySpec> specs = {{"trainer.max_epochs", ValueType::Int, true},
                                      {"trainer.lr", ValueType::Float, true},
                                      {"optimizer.betas", ValueType::List, false}};
  EXPECT_THROW(cfg.check(specs), ConfigError);
  EXPECT_NO_THROW(Config(compose_basic({}).config, fixed_context()).check(specs));
  EXPECT_THROW(Config(compose_basic({}).config).check({{"trainer.nope", ValueType::Int, true}}), ConfigError);
}

}  // namespace
}  // namespace wavetrain::config
