// Reading YAML into config::Node and writing it back (trainer/config/yaml_io.h): core-schema typing,
// origins, duplicate keys, aliases and merge keys, error messages, and the write/read round trip.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <limits>
#include <random>

#include "trainer/config/yaml_io.h"
#include "tests/nested_text.h"

namespace wavetrain::config {
namespace {

Node load(const std::string& text) { return load_yaml_string(text, "x.yaml"); }

// The message of the ConfigError that load() throws, or "" if it throws none.
std::string load_error(const std::string& text) {
  try {
    load(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// The single value of "v: <text>".
Node value_of(const std::string& text) { return *load("v: " + text + "\n").find("v"); }

Node map_of(std::vector<Node::Entry> entries) {
  Node m = Node::mapping();
  for (auto& e : entries) m.set(e.first, std::move(e.second));
  return m;
}
Node seq_of(std::vector<Node> items) {
  Node s = Node::sequence();
  for (auto& n : items) s.push_back(std::move(n));
  return s;
}

const double kInf = std::numeric_limits<double>::infinity();

TEST(ConfigYamlRead, PlainScalarsAreTypedByTheCoreSchema) {
  const std::vector<std::pair<std::string, Node>> cases = {
      {"null", Node::null()},          {"Null", Node::null()},           {"NULL", Node::null()},
      {"~", Node::null()},             {"", Node::null()},               {"true", Node::boolean(true)},
      {"True", Node::boolean(true)},   {"TRUE", Node::boolean(true)},    {"false", Node::boolean(false)},
      {"False", Node::boolean(false)}, {"FALSE", Node::boolean(false)},  {"0", Node::integer(0)},
      {"-5", Node::integer(-5)},       {"+7", Node::integer(7)},         {"0x1F", Node::integer(31)},
      {"0o17", Node::integer(15)},     {"007", Node::integer(7)},        {"1.5", Node::floating(1.5)},
      {".5", Node::floating(0.5)},     {"5.", Node::floating(5.0)},      {"-1e3", Node::floating(-1000)},
      {"1E-2", Node::floating(0.01)},  {"+2.5e+2", Node::floating(250)}, {".inf", Node::floating(kInf)},
      {".Inf", Node::floating(kInf)},  {"+.INF", Node::floating(kInf)},  {"-.inf", Node::floating(-kInf)},
      {"???", Node::missing()},        {"on", Node::string("on")},       {"yes", Node::string("yes")},
      {"y", Node::string("y")},        {"off", Node::string("off")},     {"no", Node::string("no")},
      {"0b101", Node::string("0b101")}, {"1_000", Node::string("1_000")}, {"-0x10", Node::string("-0x10")},
      {"1e", Node::string("1e")},      {".", Node::string(".")},         {"inf", Node::string("inf")},
      {"nan", Node::string("nan")},    {"abc", Node::string("abc")},     {"${a.b}", Node::string("${a.b}")},
      {"1.2.3", Node::string("1.2.3")}, {"a:b", Node::string("a:b")},
  };
  for (const auto& [text, expected] : cases) EXPECT_EQ(value_of(text), expected) << "text: " << text;
  for (const char* nan : {".nan", ".NaN", ".NAN"}) {
    const Node n = value_of(nan);
    ASSERT_EQ(n.kind(), Node::Kind::Float) << nan;
    EXPECT_TRUE(std::isnan(n.float_value())) << nan;
  }
}

TEST(ConfigYamlRead, QuotedAndBlockScalarsAreAlwaysStrings) {
  EXPECT_EQ(value_of("'123'"), Node::string("123"));
  EXPECT_EQ(value_of("\"true\""), Node::string("true"));
  EXPECT_EQ(value_of("'null'"), Node::string("null"));
  EXPECT_EQ(value_of("''"), Node::string(""));
  EXPECT_EQ(value_of("'??" "?'"), Node::string("???"));
  EXPECT_EQ(value_of("\"1e3\""), Node::string("1e3"));
  EXPECT_EQ(value_of("'it''s'"), Node::string("it's"));
  EXPECT_EQ(value_of("\"a\\tb\\n\""), Node::string("a\tb\n"));
  EXPECT_EQ(load("v: |\n  12\n").find("v")->string_value(), "12\n");
  EXPECT_EQ(load("v: >-\n  true\n").find("v")->string_value(), "true");
}

TEST(ConfigYamlRead, ExplicitTagsAreHonoured) {
  EXPECT_EQ(value_of("!!str 123"), Node::string("123"));
  EXPECT_EQ(value_of("!!str null"), Node::string("null"));
  EXPECT_EQ(value_of("!!str"), Node::string(""));
  EXPECT_EQ(value_of("!!int 42"), Node::integer(42));
  EXPECT_EQ(value_of("!!int '42'"), Node::integer(42));
  EXPECT_EQ(value_of("!!float 1"), Node::floating(1.0));
  EXPECT_EQ(value_of("!!float -.inf"), Node::floating(-kInf));
  EXPECT_EQ(value_of("!!bool True"), Node::boolean(true));
  EXPECT_EQ(value_of("!!null ~"), Node::null());
  EXPECT_EQ(value_of("!!null ''"), Node::null());
  EXPECT_EQ(value_of("!!map {a: 1}"), map_of({{"a", Node::integer(1)}}));
  EXPECT_EQ(value_of("!!seq [1]"), seq_of({Node::integer(1)}));
}

TEST(ConfigYamlRead, TagMismatchAndUnknownTagsAreErrorsNamingFileAndLine) {
  EXPECT_EQ(load_error("a: 1\nb: !!int abc\n"), "Value 'abc' for 'b' at x.yaml:2 is not a valid !!int");
  EXPECT_EQ(load_error("b: !!bool yes\n"), "Value 'yes' for 'b' at x.yaml:1 is not a valid !!bool");
  EXPECT_EQ(load_error("b: !!float 0x10\n"), "Value '0x10' for 'b' at x.yaml:1 is not a valid !!float");
  EXPECT_EQ(load_error("b: !!null 0\n"), "Value '0' for 'b' at x.yaml:1 is not a valid !!null");
  EXPECT_EQ(load_error("\nb: !foo x\n"), "Unsupported tag '!foo' for 'b' at x.yaml:2");
  EXPECT_EQ(load_error("b: !!binary aGk=\n"), "Unsupported tag 'tag:yaml.org,2002:binary' for 'b' at x.yaml:1");
  EXPECT_EQ(load_error("b: !!seq {a: 1}\n"), "Unsupported tag 'tag:yaml.org,2002:seq' for 'b' at x.yaml:1");
}

TEST(ConfigYamlRead, NumbersOutOfRangeAreErrors) {
  EXPECT_EQ(value_of("9223372036854775807"), Node::integer(INT64_MAX));
  EXPECT_EQ(value_of("-9223372036854775808"), Node::integer(INT64_MIN));
  EXPECT_EQ(load_error("a:\n  b: 9223372036854775808\n"),
            "Integer '9223372036854775808' for 'a.b' at x.yaml:2 is out of the 64-bit range");
  EXPECT_EQ(load_error("- 0x10000000000000000\n"),
            "Integer '0x10000000000000000' for '0' at x.yaml:1 is out of the 64-bit range");
  EXPECT_EQ(load_error("f: 1e400\n"), "Float '1e400' for 'f' at x.yaml:1 is out of the range of a double");
  EXPECT_EQ(load_error("f: -1e-400\n"), "Float '-1e-400' for 'f' at x.yaml:1 is out of the range of a double");
  EXPECT_EQ(value_of("1.7976931348623157e308"), Node::floating(1.7976931348623157e308));
  EXPECT_EQ(value_of("5e-324"), Node::floating(5e-324));
}

TEST(ConfigYamlRead, StructureAndKeyOrder) {
  const Node n = load("z: 1\na:\n  - x\n  - {k: v}\n  - [1, 2]\nm: {}\nl: []\n");
  const Node expected = map_of({{"z", Node::integer(1)},
                                {"a", seq_of({Node::string("x"), map_of({{"k", Node::string("v")}}),
                                              seq_of({Node::integer(1), Node::integer(2)})})},
                                {"m", Node::mapping()},
                                {"l", Node::sequence()}});
  EXPECT_EQ(n, expected);
  ASSERT_EQ(n.entries().size(), 4u);
  EXPECT_EQ(n.entries()[0].first, "z");
  EXPECT_EQ(n.entries()[1].first, "a");
}

TEST(ConfigYamlRead, KeysAreTheirTextAndMustBeScalars) {
  const Node n = load("1: a\ntrue: b\n'null': c\n'': d\n");
  EXPECT_EQ(n.find("1")->string_value(), "a");
  EXPECT_EQ(n.find("true")->string_value(), "b");
  EXPECT_EQ(n.find("null")->string_value(), "c");
  EXPECT_EQ(n.find("")->string_value(), "d");
  EXPECT_EQ(load_error("a:\n  [x]: 1\n"),
            "Invalid key for 'a' at x.yaml:2: keys must be strings (quote a null key: 'null')");
  EXPECT_EQ(load_error("null: 1\n"), "Invalid key at x.yaml:1: keys must be strings (quote a null key: 'null')");
}

TEST(ConfigYamlRead, EveryNodeHasItsFileAndOneBasedLine) {
  const Node n = load("# comment\na: 1\nb:\n  c: x\n  d:\n  e:\n    - 5\nf: ~\n");
  EXPECT_EQ(n.origin().str(), "x.yaml:2");
  EXPECT_EQ(n.find("a")->origin().str(), "x.yaml:2");
  EXPECT_EQ(n.find("b")->origin().str(), "x.yaml:4");
  EXPECT_EQ(n.find_path("b.c")->origin().str(), "x.yaml:4");
  EXPECT_EQ(n.find_path("b.d")->origin().str(), "x.yaml:5");  // an empty value: the key's line
  EXPECT_EQ(n.find_path("b.e.0")->origin().str(), "x.yaml:7");
  EXPECT_EQ(n.find("f")->origin().str(), "x.yaml:8");
  EXPECT_EQ(n.find("f")->origin().file, "x.yaml");
  EXPECT_FALSE(n.find("f")->origin().command_line);
}

TEST(ConfigYamlRead, DuplicateKeysAreErrorsNamingBothLines) {
  EXPECT_EQ(load_error("a: 1\nlr: 0.1\nb: 2\nlr: 0.2\n"), "Duplicate key 'lr' in x.yaml:4 (first at x.yaml:2)");
  EXPECT_EQ(load_error("model:\n  lr: 1\n  other: 2\n  lr: 3\n"),
            "Duplicate key 'model.lr' in x.yaml:4 (first at x.yaml:2)");
  EXPECT_EQ(load_error("layers:\n  - {k: 1, k: 2}\n"), "Duplicate key 'layers.0.k' in x.yaml:2 (first at x.yaml:2)");
  EXPECT_EQ(load_error("a: 1\n'a': 2\n"), "Duplicate key 'a' in x.yaml:2 (first at x.yaml:1)");
  EXPECT_EQ(load_error("<<: {a: 1}\n<<: {b: 1}\n"), "Duplicate key '<<' in x.yaml:2 (first at x.yaml:1)");
}

TEST(ConfigYamlRead, AliasesAreCopiesNotShared) {
  Node n = load("a: &x {k: 1}\nb: *x\nc: &s [1]\nd: *s\n");
  EXPECT_EQ(*n.find("b"), map_of({{"k", Node::integer(1)}}));
  n.find_path("b.k")->set_origin({});
  *n.find_path("b.k") = Node::integer(2);
  n.find("d")->push_back(Node::integer(2));
  EXPECT_EQ(n.find_path("a.k")->int_value(), 1);
  EXPECT_EQ(n.find_path("b.k")->int_value(), 2);
  EXPECT_EQ(n.find("c")->items().size(), 1u);
  EXPECT_EQ(n.find("d")->items().size(), 2u);
}

TEST(ConfigYamlRead, RecursiveAliasIsAnError) {
  EXPECT_EQ(load_error("a: &x [1, *x]\n"), "Recursive alias for 'a.1' (anchor at x.yaml:1)");
  EXPECT_EQ(load_error("z: 0\na: &x\n  b: [*x]\n"), "Recursive alias for 'a.b.0' (anchor at x.yaml:2)");
}

// Nesting is bounded (kMaxDepth) so that no later walk over the tree can overflow the stack.
// yaml-cpp 0.7 loops forever (collecting empty documents until memory runs out) on a ',' that
// starts a document; the config fuzzer found it with a file holding ",ed~effa". Each is an error
// naming the place now, and a ',' inside a flow collection or a string still reads.
TEST(ConfigYamlRead, CommaStartingADocumentIsAnErrorNotAHang) {
  EXPECT_EQ(load_error(",ed~effa"), "x.yaml:1:1: unexpected ',' (a separator outside a [ ] or { } collection)");
  EXPECT_EQ(load_error(", ,"), "x.yaml:1:1: unexpected ',' (a separator outside a [ ] or { } collection)");
  EXPECT_EQ(load_error("- a\n,\n"), "x.yaml:2:1: unexpected ',' (a separator outside a [ ] or { } collection)");
  EXPECT_EQ(load_error("---\n,\n"), "x.yaml:2:1: unexpected ',' (a separator outside a [ ] or { } collection)");
  EXPECT_EQ(load("a: [1, 2]\nb: 'x, y'\n").find_path("b")->string_value(), "x, y");
}

TEST(ConfigYamlRead, NestingDeeperThanTheLimitIsAnError) {
  using wavetrain::testing::nested;
  // 255 lists in the root dict: 256 levels, the most there may be.
  const Node ok = load("a: " + nested("[", "1", "]", 255) + "\n");
  EXPECT_EQ(ok.depth(), 256u);
  EXPECT_EQ(load_error("a: " + nested("[", "1", "]", 256) + "\n"),
            "Value for 'a.0.0.0....(256 parts)' at x.yaml:1 nests deeper than 256 dicts and lists (the limit)");
  EXPECT_EQ(load_error("a: " + nested("{a: ", "1", "}", 300) + "\n"),
            "Value for 'a.a.a.a....(256 parts)' at x.yaml:1 nests deeper than 256 dicts and lists (the limit)");
  // 10,000 levels: yaml-cpp's own guard (2000 levels) stops its parser first.
  EXPECT_EQ(load_error("a: " + nested("[", "", "]", 10000) + "\n"),
            "x.yaml:1: nests deeper than 256 dicts and lists (the limit)");
  EXPECT_EQ(load_error("z: 0\na: " + nested("{a: ", "1", "}", 10000) + "\n"),
            "x.yaml:2: nests deeper than 256 dicts and lists (the limit)");
  std::string block;
  for (size_t i = 0; i < 10000; ++i) block += std::string(i, ' ') + "a:\n";
  const std::string block_error = load_error(block);
  EXPECT_EQ(block_error.rfind("x.yaml:", 0), 0u) << block_error;
  EXPECT_NE(block_error.find(": nests deeper than 256 dicts and lists (the limit)"), std::string::npos) << block_error;
  // Aliases nest without nesting the text: each line adds a level.
  std::string aliases = "k0: &a0 [1]\n";
  for (size_t i = 1; i < 10000; ++i)
    aliases += "k" + std::to_string(i) + ": &a" + std::to_string(i) + " [*a" + std::to_string(i - 1) + "]\n";
  EXPECT_EQ(load_error(aliases),
            "Value for 'k255.0.0.0....(256 parts)' at x.yaml:1 nests deeper than 256 dicts and lists (the limit)");
}

// "Billion laughs": each line holds ten aliases of the line above, so 1.5 KB of text stands for 10^8
// values. Reading counts every copy an alias makes and stops at kMaxNodes (or kMaxBytes of text).
TEST(ConfigYamlRead, AliasBombsAreBoundedInValuesAndBytes) {
  std::string bomb = "l0: &l0 [lol]\n";
  for (int i = 1; i <= 8; ++i) {
    const std::string prev = "*l" + std::to_string(i - 1);
    bomb += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) bomb += (k ? ", " : "") + prev;
    bomb += "]\n";
  }
  EXPECT_LT(bomb.size(), 1500u);
  const std::string error = load_error(bomb);
  EXPECT_EQ(error.rfind("x.yaml: the config expands to more than 1000000 values (the limit; aliases count once per use), "
                        "reached at x.yaml:",
                        0),
            0u)
      << error;
  // Six levels (about 1.1 million values) are over the limit too; five (111,111) read.
  std::string five = bomb.substr(0, bomb.find("l6:"));
  EXPECT_EQ(load(five).find_path("l5")->items().size(), 10u);
  EXPECT_NE(load_error(bomb.substr(0, bomb.find("l7:"))).find("more than 1000000 values"), std::string::npos);
  // Few values but long text: a 1 MiB string used 70 times; 60 uses (61 MiB in all) read.
  const auto uses = [](int n) {
    std::string text = "s: &s '" + std::string(1 << 20, 'x') + "'\nl: [";
    for (int k = 0; k < n; ++k) text += (k ? ", " : "") + std::string("*s");
    return text + "]\n";
  };
  EXPECT_EQ(load_error(uses(70)), "x.yaml: the config expands to more than 64 MiB of text (the limit; aliases count "
                                  "once per use), reached at x.yaml:1 for 'l.62'");  // s and 63 copies
  EXPECT_EQ(load(uses(60)).find_path("l")->items().size(), 60u);
}

TEST(ConfigYamlRead, MergeKeyAddsTheKeysThatTheMappingDoesNotDefine) {
  const Node n = load(
      "base: &base {lr: 0.1, depth: 2}\n"
      "extra: &extra {depth: 9, act: relu}\n"
      "one:\n  <<: *base\n  depth: 4\n"
      "own_first:\n  depth: 5\n  <<: *base\n"
      "two:\n  <<: [*base, *extra]\n  name: m\n"
      "inline:\n  <<: {p: 1}\n  q: 2\n"
      "quoted:\n  '<<': *base\n");
  EXPECT_EQ(*n.find("one"), map_of({{"lr", Node::floating(0.1)}, {"depth", Node::integer(4)}}));
  EXPECT_EQ(*n.find("own_first"), map_of({{"depth", Node::integer(5)}, {"lr", Node::floating(0.1)}}));
  EXPECT_EQ(*n.find("two"), map_of({{"lr", Node::floating(0.1)},
                                    {"depth", Node::integer(2)},
                                    {"act", Node::string("relu")},
                                    {"name", Node::string("m")}}));
  EXPECT_EQ(*n.find("inline"), map_of({{"p", Node::integer(1)}, {"q", Node::integer(2)}}));
  EXPECT_EQ(*n.find("quoted"), map_of({{"<<", map_of({{"lr", Node::floating(0.1)}, {"depth", Node::integer(2)}})}}));
  // Merged values are copies too.
  EXPECT_EQ(n.find_path("one.lr")->origin().str(), "x.yaml:1");
  EXPECT_EQ(load_error("a:\n  <<: 5\n"), "Merge key '<<' for 'a' at x.yaml:2 needs a dict or a list of dicts, not a int");
  EXPECT_EQ(load_error("a:\n  <<: [{b: 1}, 2]\n"),
            "Merge key '<<' for 'a' at x.yaml:2 needs a dict or a list of dicts, not a int");
}

TEST(ConfigYamlRead, SyntaxErrorsNameFileLineAndColumn) {
  EXPECT_EQ(load_error("x: 0\na: b: c\n"), "x.yaml:2:5: illegal map value");
  EXPECT_EQ(load_error("a:\n\t- x\n"), "x.yaml:2:2: illegal block entry");
  const std::string err = load_error("a: 1\nb: [1, 2");
  EXPECT_EQ(err.rfind("x.yaml:2:", 0), 0u) << err;
  EXPECT_NE(err.find("end of sequence flow not found"), std::string::npos) << err;
  // yaml-cpp reads this as two documents rather than reporting the syntax error.
  EXPECT_EQ(load_error("- a\nb: 1\n"), "x.yaml:2: a config file must hold a single YAML document");
  EXPECT_EQ(load_error("a: 1\n---\nb: 2\n"), "x.yaml:3: a config file must hold a single YAML document");
}

TEST(ConfigYamlRead, EmptyTextIsNull) {
  EXPECT_EQ(load(""), Node::null());
  EXPECT_EQ(load("# only a comment\n\n"), Node::null());
  EXPECT_EQ(load("").origin().str(), "x.yaml");
  EXPECT_EQ(load("5\n"), Node::integer(5));
}

TEST(ConfigYamlRead, FilesAndTheirErrors) {
  const std::string path = ::testing::TempDir() + "config_yaml_test_file.yaml";
  {
    std::ofstream out(path);
    out << "a: 1\nb:\n  c: [x]\n";
  }
  const Node n = load_yaml_file(path);
  EXPECT_EQ(n.find_path("b.c.0")->string_value(), "x");
  EXPECT_EQ(n.find_path("b.c")->origin().str(), path + ":3");
  std::remove(path.c_str());

  const auto file_error = [](const std::string& p) -> std::string {
    try {
      load_yaml_file(p);
    } catch (const ConfigError& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(file_error("/nonexistent/x.yaml"), "Cannot read config file '/nonexistent/x.yaml': No such file or directory");
  EXPECT_EQ(file_error("/tmp"), "Cannot read config file '/tmp': Is a directory");
}

TEST(ConfigYamlRead, PackageHeader) {
  EXPECT_EQ(package_header("# @package _global_\na: 1\n"), "_global_");
  EXPECT_EQ(package_header("\n# A config for the model.\n#   @package   model.encoder  \r\n\na: 1\n"), "model.encoder");
  EXPECT_EQ(package_header("\xEF\xBB\xBF# @package foo\n"), "foo");
  EXPECT_EQ(package_header("#@package: db\n"), "db");
  EXPECT_EQ(package_header("a: 1\n# @package foo\n"), std::nullopt);   // after content
  EXPECT_EQ(package_header("# @packages foo\n"), std::nullopt);
  EXPECT_EQ(package_header("# @package\na: 1\n"), std::nullopt);
  EXPECT_EQ(package_header("# nothing here\n"), std::nullopt);
  EXPECT_EQ(package_header(""), std::nullopt);
}

// ---------------------------------------------------------------------------------------------
// Writing.

TEST(ConfigYamlWrite, BlockStyleWithTwoSpaceIndentation) {
  const Node n = map_of({{"name", Node::string("wavenet")},
                         {"lr", Node::floating(0.1)},
                         {"epochs", Node::integer(10)},
                         {"amp", Node::boolean(false)},
                         {"ckpt", Node::null()},
                         {"data", Node::missing()},
                         {"model", map_of({{"layers", seq_of({Node::integer(1), Node::integer(2)})},
                                           {"blocks", seq_of({map_of({{"k", Node::integer(3)}, {"d", Node::integer(1)}}),
                                                              seq_of({Node::string("a"), Node::string("b")})})},
                                           {"empty_map", Node::mapping()},
                                           {"empty_list", Node::sequence()}})},
                         {"bounds", seq_of({Node::floating(kInf), Node::floating(-kInf), Node::floating(1e-08)})}});
  EXPECT_EQ(to_yaml(n),
            "name: wavenet\n"
            "lr: 0.1\n"
            "epochs: 10\n"
            "amp: false\n"
            "ckpt: null\n"
            "data: ???\n"
            "model:\n"
            "  layers:\n"
            "    - 1\n"
            "    - 2\n"
            "  blocks:\n"
            "    - k: 3\n"
            "      d: 1\n"
            "    - - a\n"
            "      - b\n"
            "  empty_map: {}\n"
            "  empty_list: []\n"
            "bounds:\n"
            "  - .inf\n"
            "  - -.inf\n"
            "  - 1e-08\n");
  EXPECT_EQ(load(to_yaml(n)), n);
}

TEST(ConfigYamlWrite, ScalarsAndEmptyContainersAtTheTop) {
  EXPECT_EQ(to_yaml(Node::mapping()), "{}\n");
  EXPECT_EQ(to_yaml(Node::sequence()), "[]\n");
  EXPECT_EQ(to_yaml(Node::null()), "null\n");
  EXPECT_EQ(to_yaml(Node::floating(std::nan(""))), ".nan\n");
  EXPECT_EQ(to_yaml(Node::floating(-0.0)), "-0.0\n");
  EXPECT_EQ(to_yaml(Node::string("3")), "'3'\n");
  EXPECT_EQ(to_yaml(Node::string("it's")), "it's\n");
  EXPECT_EQ(to_yaml(Node::string("'q")), "'''q'\n");
  EXPECT_EQ(to_yaml(Node::string("line\nbreak\t\x01")), "\"line\\nbreak\\t\\x01\"\n");
  EXPECT_EQ(to_yaml(Node::string("${a.b}")), "${a.b}\n");
  EXPECT_EQ(to_yaml(map_of({{"<<", Node::integer(1)}, {"1", Node::integer(2)}})), "'<<': 1\n'1': 2\n");
}

TEST(ConfigYamlWrite, InvalidUtf8IsAnErrorNamingTheKey) {
  try {
    to_yaml(map_of({{"a", seq_of({Node::string("ok"), Node::string("bad\xFF")})}}));
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "Cannot write 'a.1' as YAML: the string is not valid UTF-8");
  }
  EXPECT_THROW(to_yaml(Node::string("\xC0\x80")), ConfigError);      // overlong
  EXPECT_THROW(to_yaml(Node::string("\xED\xA0\x80")), ConfigError);  // surrogate
}

TEST(ConfigYamlWrite, KeysLongerThanYamlImplicitKeysUseTheExplicitForm) {
  const std::string long_key(1500, 'k');
  const Node inner = map_of({{long_key + "'", Node::integer(1)}, {"z", Node::integer(2)}});
  const Node n = map_of({{long_key, Node::string("v")}, {"nested", inner}, {"list", seq_of({inner, inner})}});
  const std::string yaml = to_yaml(n);
  EXPECT_EQ(yaml.rfind("? " + long_key + "\n: v\n", 0), 0u);
  EXPECT_EQ(load(yaml), n);
}

// Strings that YAML would read as something else, or not at all, if they were written plainly.
const std::vector<std::string> kTrickyStrings = {
    "3", "true", "True", "on", "yes", "y", "No", "null", "~", "", " lead", "trail ", "a: b", "a:", ":a", "a:b",
    "#x", "a #b", "a#b", "- x", "-", "-x", "--- x", "---", "...", "[x]", "{x}", "x, y", "${a.b}", "it's", "'",
    "\"", "\\", "line\nbreak", "\n", "trailing\n", "tab\t", "\r", "???", "1e3", ".5", "0x10", "0o7", "+1",
    "-.inf", ".nan", "@x", "`x", "%x", "!x", "&x", "*x", "|", ">", "?", "? x", "<<", "=", "é unicode",
    "\xC2\x85nel", "\xE2\x80\xA8ls", "\xEF\xBB\xBF" "bom", "\x7F", "\x1B[31m", "日本語", "emoji \xF0\x9F\x98\x80",
    "a  b", " ", "  ", "x\n  y", "k: v\n- z", "'quoted'", "\"dq\"", "#", "a\\nb", "%YAML 1.2", "! x",
};

TEST(ConfigYamlWrite, TrickyStringsRoundTripAsValuesKeysItemsAndDocuments) {
  for (const std::string& s : kTrickyStrings) {
    const Node as_value = map_of({{"k", Node::string(s)}});
    EXPECT_EQ(load(to_yaml(as_value)), as_value) << "value [" << s << "] written as:\n" << to_yaml(as_value);
    const Node as_key = map_of({{s, Node::integer(1)}, {"other", Node::string(s)}});
    EXPECT_EQ(load(to_yaml(as_key)), as_key) << "key [" << s << "] written as:\n" << to_yaml(as_key);
    const Node as_item = seq_of({Node::string(s), seq_of({Node::string(s)}), map_of({{s, Node::string(s)}})});
    EXPECT_EQ(load(to_yaml(as_item)), as_item) << "item [" << s << "] written as:\n" << to_yaml(as_item);
    const Node as_document = Node::string(s);
    EXPECT_EQ(load(to_yaml(as_document)), as_document) << "document [" << s << "] written as:\n" << to_yaml(as_document);
  }
}

TEST(ConfigYamlWrite, NumbersRoundTripExactly) {
  const std::vector<double> floats = {0.1, 1.0, 1e-08, 1e+300, -0.0, 0.0, kInf, -kInf, 5e-324, 1.7976931348623157e308,
                                      123456789.125, 1e16, 1e21, -2.5, 1.0 / 3.0};
  for (double f : floats) {
    const Node n = load(to_yaml(map_of({{"f", Node::floating(f)}})));
    ASSERT_EQ(n.find("f")->kind(), Node::Kind::Float) << f;
    EXPECT_EQ(n.find("f")->float_value(), f);
    EXPECT_EQ(std::signbit(n.find("f")->float_value()), std::signbit(f)) << f;
  }
  EXPECT_TRUE(std::isnan(load(to_yaml(Node::floating(std::nan("")))).float_value()));
  for (int64_t i : {int64_t{0}, int64_t{-5}, int64_t{42}, INT64_MAX, INT64_MIN}) {
    EXPECT_EQ(load(to_yaml(seq_of({Node::integer(i)}))), seq_of({Node::integer(i)}));
  }
  const Node others = seq_of({Node::boolean(true), Node::boolean(false), Node::null(), Node::missing()});
  EXPECT_EQ(load(to_yaml(others)), others);
}

// Random trees of random strings (built from characters that matter to YAML), numbers and
// containers: every one must read back equal.
class RandomTree {
 public:
  explicit RandomTree(unsigned seed) : rng_(seed) {}

  std::string random_string() {
    static const std::vector<std::string> pieces = {
        "a", "b", "1", "0", ".", "-", "+", "e", "x", ":", " ", "#", "'", "\"", "\\", "\n", "\t", "[", "]", "{",
        "}", ",", "&", "*", "!", "|", ">", "%", "@", "`", "?", "~", "$", "<", "=", "é", "日", "\x01", "null",
        "true", "???", ".inf", "0x", "\xC2\x85", "\xE2\x80\xA8"};
    std::string s;
    const int length = pick(7);
    for (int i = 0; i < length; ++i) s += pieces[pick(static_cast<int>(pieces.size()))];
    return s;
  }

  Node random_node(int depth) {
    switch (pick(depth > 3 ? 6 : 9)) {
      case 0: return Node::null();
      case 1: return Node::boolean(pick(2) == 1);
      case 2: return Node::integer(static_cast<int64_t>(rng_()) * (pick(2) ? 1 : -1));
      case 3: return Node::floating(std::ldexp(static_cast<double>(rng_()), pick(200) - 100) * (pick(2) ? 1 : -1));
      case 4: return Node::missing();
      case 5: return Node::string(random_string());
      case 6:
      case 7: {
        Node m = Node::mapping();
        for (int i = pick(4); i > 0; --i) m.set(random_string(), random_node(depth + 1));
        return m;
      }
      default: {
        Node s = Node::sequence();
        for (int i = pick(4); i > 0; --i) s.push_back(random_node(depth + 1));
        return s;
      }
    }
  }

 private:
  int pick(int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); }
  std::mt19937_64 rng_;
};

TEST(ConfigYamlWrite, RandomTreesRoundTrip) {
  RandomTree random(20240601);
  for (int i = 0; i < 3000; ++i) {
    const Node n = random.random_node(0);
    const std::string yaml = to_yaml(n);
    Node back;
    ASSERT_NO_THROW(back = load(yaml)) << "written as:\n" << yaml;
    ASSERT_EQ(back, n) << "written as:\n" << yaml;
  }
}

TEST(ConfigYamlWrite, ReadWriteReadKeepsTheTreeAndTheText) {
  const std::string text =
      "# @package _global_\n"
      "defaults: [model: wavenet, _self_]\n"
      "base: &b {lr: 1e-3, sched: cosine}\n"
      "opt:\n  <<: *b\n  lr: 2e-3\n"
      "quoted: 'on'\n"
      "path: ${hydra:runtime.cwd}/data\n";
  const Node first = load(text);
  const std::string written = to_yaml(first);
  EXPECT_EQ(load(written), first);
  EXPECT_EQ(to_yaml(load(written)), written);
  EXPECT_EQ(first.find_path("opt.lr")->float_value(), 2e-3);
  EXPECT_EQ(first.find_path("opt.sched")->string_value(), "cosine");
}

}  // namespace
}  // namespace wavetrain::config
