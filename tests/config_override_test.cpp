// Hydra's command-line override grammar (trainer/config/override.h): keys and override types,
// typed values, escapes and quotes, containers, sweeps and their expansion, zip(), and errors.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "trainer/config/override.h"
#include "tests/nested_text.h"

namespace {

using wavetrain::config::ConfigError;
using wavetrain::config::expand_sweep;
using wavetrain::config::format_float;
using wavetrain::config::Node;
using wavetrain::config::Override;
using wavetrain::config::OverrideType;
using wavetrain::config::parse_override;
using wavetrain::config::parse_zip;
using wavetrain::config::Sweep;
using K = Node::Kind;

// The value of a non-sweep override.
Node value(const std::string& text) {
  const Override o = parse_override(text);
  EXPECT_FALSE(o.is_sweep()) << text;
  EXPECT_TRUE(o.value.has_value()) << text;
  return o.value.value_or(Node());
}

std::string str(const std::string& text) {
  const Node n = value(text);
  EXPECT_EQ(n.kind(), K::String) << text;
  return n.kind() == K::String ? n.string_value() : "<" + std::string(Node::kind_name(n.kind())) + ">";
}

// The expanded values of a sweep, as displayed: "1,2,3".
std::string sweep(const std::string& text, const std::vector<std::string>& options = {}) {
  const Override o = parse_override(text);
  EXPECT_TRUE(o.is_sweep()) << text;
  if (!o.is_sweep()) return "<not a sweep>";
  std::string out;
  for (const Node& n : expand_sweep(*o.sweep, options)) out += (out.empty() ? "" : ",") + n.to_display();
  return out;
}

// The message of the ConfigError that parsing `text` throws.
std::string error(const std::string& text) {
  try {
    parse_override(text);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error for: " << text;
  return "";
}

TEST(Override, ChangeAddForceAddDelete) {
  Override o = parse_override("trainer.max_epochs=10");
  EXPECT_EQ(o.type, OverrideType::Change);
  EXPECT_EQ(o.key, "trainer.max_epochs");
  EXPECT_EQ(o.text, "trainer.max_epochs=10");
  EXPECT_EQ(o.package, "");
  EXPECT_EQ(o.value->int_value(), 10);

  o = parse_override("+a.b.c=1");
  EXPECT_EQ(o.type, OverrideType::Add);
  EXPECT_EQ(o.key, "a.b.c");
  o = parse_override("++seed=3");
  EXPECT_EQ(o.type, OverrideType::ForceAdd);
  EXPECT_EQ(o.key, "seed");

  o = parse_override("~model.dropout");
  EXPECT_EQ(o.type, OverrideType::Delete);
  EXPECT_EQ(o.key, "model.dropout");
  EXPECT_FALSE(o.value.has_value());
  EXPECT_FALSE(o.is_sweep());

  o = parse_override("~model.dropout=0.1");
  EXPECT_EQ(o.type, OverrideType::Delete);
  EXPECT_EQ(o.value->float_value(), 0.1);
}

TEST(Override, KeysGroupsPackagesAndIndices) {
  Override o = parse_override("hydra/launcher=basic");
  EXPECT_EQ(o.key, "hydra/launcher");
  EXPECT_EQ(o.value->string_value(), "basic");

  o = parse_override("+db@backup.db=mysql");
  EXPECT_EQ(o.type, OverrideType::Add);
  EXPECT_EQ(o.key, "db");
  EXPECT_EQ(o.package, "backup.db");

  o = parse_override("model@_global_=lstm");
  EXPECT_EQ(o.package, "_global_");

  EXPECT_EQ(parse_override("model.layers.0.channels=64").key, "model.layers.0.channels");
  EXPECT_EQ(parse_override("hydra.job.env-set=1").key, "hydra.job.env-set");
  EXPECT_EQ(parse_override("_private=1").key, "_private");
}

TEST(Override, EmptyValueIsEmptyString) {
  EXPECT_EQ(str("name="), "");
  EXPECT_EQ(str("name=   "), "");
  EXPECT_EQ(str("name=''"), "");
  EXPECT_EQ(parse_override("+name=").value->kind(), K::String);
}

TEST(Override, NullBoolAndSpecialFloatsIgnoreCase) {
  EXPECT_EQ(value("a=null").kind(), K::Null);
  EXPECT_EQ(value("a=NULL").kind(), K::Null);
  EXPECT_EQ(value("a=Null").kind(), K::Null);
  EXPECT_TRUE(value("a=true").bool_value());
  EXPECT_TRUE(value("a=TRUE").bool_value());
  EXPECT_FALSE(value("a=False").bool_value());
  EXPECT_EQ(value("a=inf").float_value(), INFINITY);
  EXPECT_EQ(value("a=+inf").float_value(), INFINITY);
  EXPECT_EQ(value("a=-Inf").float_value(), -INFINITY);
  EXPECT_TRUE(std::isnan(value("a=nan").float_value()));
  EXPECT_TRUE(std::isnan(value("a=NaN").float_value()));
  EXPECT_TRUE(value("a=???").is_missing());
  EXPECT_EQ(str("a=nulls"), "nulls");
  EXPECT_EQ(str("a=infinity"), "infinity");
  EXPECT_EQ(str("a=truee"), "truee");
}

TEST(Override, Integers) {
  EXPECT_EQ(value("a=0").int_value(), 0);
  EXPECT_EQ(value("a=42").int_value(), 42);
  EXPECT_EQ(value("a=-7").int_value(), -7);
  EXPECT_EQ(value("a=+7").int_value(), 7);
  EXPECT_EQ(value("a=1_000").int_value(), 1000);
  EXPECT_EQ(value("a=1_000_000").int_value(), 1000000);
  EXPECT_EQ(value("a=9223372036854775807").int_value(), INT64_MAX);
  EXPECT_EQ(value("a=-9223372036854775808").int_value(), INT64_MIN);
  // Not numbers in Hydra's grammar, so strings.
  EXPECT_EQ(str("a=007"), "007");
  EXPECT_EQ(str("a=1__0"), "1__0");
  EXPECT_EQ(str("a=_1"), "_1");
  EXPECT_EQ(str("a=1_"), "1_");
  EXPECT_EQ(str("a=0x10"), "0x10");
}

TEST(Override, Floats) {
  EXPECT_EQ(value("a=1.5").float_value(), 1.5);
  EXPECT_EQ(value("a=-0.5").float_value(), -0.5);
  EXPECT_EQ(value("a=1e-3").float_value(), 1e-3);
  EXPECT_EQ(value("a=1E5").float_value(), 1e5);
  EXPECT_EQ(value("a=1.5E+3").float_value(), 1500.0);
  EXPECT_EQ(value("a=.5").float_value(), 0.5);
  EXPECT_EQ(value("a=-.5").float_value(), -0.5);
  EXPECT_EQ(value("a=5.").float_value(), 5.0);
  EXPECT_EQ(value("a=1_000.000_5").float_value(), 1000.0005);
  EXPECT_EQ(value("a=0.1").float_value(), 0.1);
  EXPECT_EQ(value("a=2.0").kind(), K::Float);
  EXPECT_EQ(str("a=1.2.3"), "1.2.3");
  EXPECT_EQ(str("a=1e"), "1e");
  EXPECT_EQ(str("a=."), ".");
  EXPECT_EQ(str("a=1._5"), "1._5");
}

TEST(Override, UnquotedStrings) {
  EXPECT_EQ(str("model=lstm"), "lstm");
  EXPECT_EQ(str("data.root=/abs/path/to/data"), "/abs/path/to/data");
  EXPECT_EQ(str("a=a-b_c.d"), "a-b_c.d");
  EXPECT_EQ(str("a=-"), "-");
  EXPECT_EQ(str("a=1.5abc"), "1.5abc");
  EXPECT_EQ(str("a=C:\\dir\\file"), "C:\\dir\\file");  // other backslashes are kept
  EXPECT_EQ(str("a=x*?|%+"), "x*?|%+");
  // ':' needs no escape (as in Hydra), nor does '=' (unlike Hydra): a device string works as typed.
  EXPECT_EQ(str("trainer.device=cuda:0"), "cuda:0");
  EXPECT_EQ(str("a=b=c"), "b=c");
  // Hydra's lexer has no token for other characters outside quotes; quoted, they are fine.
  for (const char* c : {"#", "~", "&", ";", "!", "<", "^", "`", "\xC3\xA9"}) {
    EXPECT_NE(error(std::string("s=a") + c + "b").find(std::string("'") + c + "' cannot appear in an unquoted value"),
              std::string::npos) << c;
    EXPECT_EQ(str(std::string("s='a") + c + "b'"), std::string("a") + c + "b");
  }
}

TEST(Override, WhitespaceTrimmedAroundValuesKeptInside) {
  EXPECT_EQ(str("a=hello world"), "hello world");
  EXPECT_EQ(str("a=  hello  world  "), "hello  world");
  EXPECT_EQ(value("a= 5 ").int_value(), 5);
  EXPECT_EQ(str("a=\thi\t"), "hi");
  EXPECT_EQ(str("a=1 2"), "1 2");  // two tokens are not a number
}

TEST(Override, Interpolations) {
  EXPECT_EQ(str("a=${model.name}"), "${model.name}");
  EXPECT_TRUE(value("a=${model.name}").is_interpolation());
  EXPECT_EQ(str("hydra.run.dir=run_${now:%H-%M}"), "run_${now:%H-%M}");
  EXPECT_EQ(str("a=${oc.env:HOME,/tmp}"), "${oc.env:HOME,/tmp}");  // its comma does not split
  EXPECT_EQ(str("a=${a.${b}}/x"), "${a.${b}}/x");
  EXPECT_EQ(str("a=${f:'}'}"), "${f:'}'}");
  EXPECT_EQ(str("a=\\${literal}"), "\\${literal}");  // the resolver's escape, kept
  EXPECT_EQ(str("a=${x}\\\\y"), "${x}\\\\y");       // `\\` left for the resolver to un-escape
  EXPECT_EQ(str("a=${x}\\,y"), "${x},y");
  EXPECT_EQ(str("a=5${x}"), "5${x}");
  EXPECT_EQ(sweep("a=${x},${y}"), "${x},${y}");
}

TEST(Override, EscapesInUnquotedValues) {
  EXPECT_EQ(str("a=a\\,b"), "a,b");
  EXPECT_EQ(str("a=\\[x\\]"), "[x]");
  EXPECT_EQ(str("a=\\{x\\}"), "{x}");
  EXPECT_EQ(str("a=f\\(x\\)"), "f(x)");
  EXPECT_EQ(str("a=k\\:v"), "k:v");
  EXPECT_EQ(str("a=k\\=v"), "k=v");
  EXPECT_EQ(str("a=\\ x\\ "), " x ");  // escaped spaces are not trimmed
  EXPECT_EQ(str("a=x\\\\y"), "x\\y");
  EXPECT_EQ(str("a=1\\,000"), "1,000");  // an escape makes it a string
  EXPECT_EQ(str("a=\\5"), "\\5");
}

TEST(Override, QuotedStrings) {
  EXPECT_EQ(str("a=\"5\""), "5");
  EXPECT_EQ(str("a='true'"), "true");
  EXPECT_EQ(str("a='null'"), "null");
  EXPECT_EQ(str("a='??" "?'"), "???");  // split: `??'` is a trigraph
  EXPECT_EQ(str("a='a,b'"), "a,b");
  EXPECT_EQ(str("a=' padded '"), " padded ");
  EXPECT_EQ(str("a=  'x'  "), "x");
  EXPECT_EQ(str("a='it\\'s'"), "it's");
  EXPECT_EQ(str("a=\"say \\\"hi\\\"\""), "say \"hi\"");
  EXPECT_EQ(str("a=\"it's\""), "it's");
  EXPECT_EQ(str("a='C:\\dir\\\\'"), "C:\\dir\\");  // two backslashes before the quote are one
  EXPECT_EQ(str("a='x\\\\\\''"), "x\\'");       // three: one, then an escaped quote
  EXPECT_EQ(str("a='a\\\\b'"), "a\\\\b");          // elsewhere backslashes are kept
  EXPECT_EQ(str("a='${x}'"), "${x}");
}

TEST(Override, Lists) {
  Node n = value("a=[1,2,[3,'x']]");
  ASSERT_TRUE(n.is_sequence());
  EXPECT_EQ(n.to_display(), "[1, 2, [3, x]]");
  EXPECT_EQ(n.items()[0].kind(), K::Int);
  EXPECT_EQ(n.items()[2].items()[1].string_value(), "x");
  EXPECT_TRUE(value("a=[]").items().empty());
  EXPECT_TRUE(value("a=[ ]").items().empty());
  EXPECT_EQ(value("a=[ 1 , two words , 3.5 ]").to_display(), "[1, two words, 3.5]");
  EXPECT_EQ(value("a=[null,true,'1']").items()[2].kind(), K::String);
  EXPECT_EQ(value("a=[a\\,b]").items().size(), 1u);
  EXPECT_EQ(value("a=[{x:1}]").items()[0].find("x")->int_value(), 1);
}

TEST(Override, Dicts) {
  Node n = value("d={a:1,b:{c:2}}");
  ASSERT_TRUE(n.is_mapping());
  EXPECT_EQ(n.to_display(), "{a: 1, b: {c: 2}}");
  EXPECT_EQ(n.find_path("b.c")->int_value(), 2);
  EXPECT_EQ(value("d={x:1}").find("x")->int_value(), 1);  // not YAML's {'x:1': null}
  EXPECT_TRUE(value("d={}").entries().empty());
  n = value("d={ 'k 1' : [1, 2] , \"k2\":x y, 3: null, my-key: '' }");
  ASSERT_EQ(n.entries().size(), 4u);
  EXPECT_EQ(n.entries()[0].first, "k 1");
  EXPECT_EQ(n.entries()[1].second.string_value(), "x y");
  EXPECT_EQ(n.entries()[2].first, "3");
  EXPECT_TRUE(n.entries()[2].second.is_null());
  EXPECT_EQ(n.entries()[3].first, "my-key");
  EXPECT_EQ(value("d={url:http://x}").find("url")->string_value(), "http://x");
}

TEST(Override, EveryNodeComesFromTheCommandLine) {
  const Node n = value("d={a:[1,{b:x}]}");
  EXPECT_TRUE(n.origin().command_line);
  EXPECT_TRUE(n.find("a")->origin().command_line);
  EXPECT_TRUE(n.find_path("a.1.b")->origin().command_line);
  const Override o = parse_override("a=range(0,2)");
  for (const Node& v : expand_sweep(*o.sweep)) EXPECT_TRUE(v.origin().command_line);
  EXPECT_TRUE(parse_override("a=1,x").sweep->choices[1].origin().command_line);
}

TEST(Override, ChoiceSweeps) {
  Override o = parse_override("a=1,2,3");
  ASSERT_TRUE(o.is_sweep());
  EXPECT_FALSE(o.value.has_value());
  EXPECT_EQ(o.sweep->kind, Sweep::Kind::Choice);
  EXPECT_EQ(o.sweep->choices[0].kind(), K::Int);
  EXPECT_EQ(sweep("a=1,2,3"), "1,2,3");
  EXPECT_EQ(sweep("db=mysql, postgresql"), "mysql,postgresql");
  EXPECT_EQ(sweep("a=choice(1,2)"), "1,2");
  EXPECT_EQ(sweep("a=choice (x)"), "x");
  EXPECT_EQ(sweep("a=[1,2],[3]"), "[1, 2],[3]");
  EXPECT_EQ(sweep("a='a,b',c"), "a,b,c");
  EXPECT_EQ(sweep("a=choice({x:1},'y')"), "{x: 1},y");
  EXPECT_EQ(parse_override("+a=1,2").type, OverrideType::Add);
  EXPECT_EQ(parse_override("++a=choice(1,2)").type, OverrideType::ForceAdd);
}

TEST(Override, RangeSweeps) {
  const Override o = parse_override("a=range(1,4)");
  ASSERT_TRUE(o.is_sweep());
  EXPECT_EQ(o.sweep->kind, Sweep::Kind::Range);
  EXPECT_EQ(o.sweep->start.int_value(), 1);
  EXPECT_EQ(o.sweep->stop.int_value(), 4);
  EXPECT_EQ(o.sweep->step.int_value(), 1);
  EXPECT_EQ(sweep("a=range(1,4)"), "1,2,3");
  EXPECT_EQ(sweep("a=range(5,0,-2)"), "5,3,1");
  EXPECT_EQ(sweep("a=range(0,10,3)"), "0,3,6,9");
  EXPECT_EQ(sweep("a=range(4,1)"), "");  // empty, as in Python
  EXPECT_EQ(sweep("a=range(start=1,stop=3)"), "1,2");
  EXPECT_EQ(sweep("a=range(0,5,step=2)"), "0,2,4");
  EXPECT_EQ(sweep("a=range(3)"), "0,1,2");  // one argument is the stop, as in Python and Hydra
  EXPECT_EQ(sweep("a=range(4,step=2)"), "0,2");
  EXPECT_EQ(sweep("a=range( 1 , 3 )"), "1,2");
  EXPECT_EQ(sweep("a=range(0,1,0.25)"), "0.0,0.25,0.5,0.75");
  EXPECT_EQ(sweep("a=range(0.1,0.5,0.1)"), "0.1,0.2,0.3,0.4");  // not 0.30000000000000004
  EXPECT_EQ(sweep("a=range(1.0,0.0,-0.3)"), "1.0,0.7,0.4,0.1");
  EXPECT_EQ(sweep("a=range(1e-3,4e-3,1e-3)"), "0.001,0.002,0.003");
  EXPECT_EQ(sweep("a=range(-9223372036854775808,9223372036854775807,9223372036854775807)"),
            "-9223372036854775808,-1,9223372036854775806");
  for (const Node& v : expand_sweep(*parse_override("a=range(0,1,0.5)").sweep)) EXPECT_EQ(v.kind(), K::Float);
}

TEST(Override, GlobSweeps) {
  const std::vector<std::string> options{"lstm", "wavenet", "tcn", "transformer", "wavenet_small"};
  const Override o = parse_override("model=glob(*,exclude=lstm)");
  ASSERT_TRUE(o.is_sweep());
  EXPECT_EQ(o.sweep->kind, Sweep::Kind::Glob);
  EXPECT_EQ(o.sweep->include, std::vector<std::string>{"*"});
  EXPECT_EQ(o.sweep->exclude, std::vector<std::string>{"lstm"});
  EXPECT_EQ(sweep("model=glob(*)", options), "lstm,wavenet,tcn,transformer,wavenet_small");
  EXPECT_EQ(sweep("model=glob(*,exclude=lstm)", options), "wavenet,tcn,transformer,wavenet_small");
  EXPECT_EQ(sweep("model=glob([w*,t*],exclude=[tcn])", options), "wavenet,transformer,wavenet_small");
  EXPECT_EQ(sweep("model=glob(*,exclude=[l*,*_small])", options), "wavenet,tcn,transformer");
  EXPECT_EQ(sweep("model=glob(include=t?n)", options), "tcn");
  EXPECT_EQ(sweep("model=glob(*)"), "");  // nothing to select from
}

TEST(Override, SweepValuesExpandThemselves) {
  Sweep s;
  s.kind = Sweep::Kind::Range;
  s.start = Node::integer(0);
  s.stop = Node::integer(3);
  s.step = Node::integer(0);
  EXPECT_THROW(expand_sweep(s), ConfigError);
  s.step = Node::integer(1);
  EXPECT_EQ(expand_sweep(s).size(), 3u);
  s.stop = Node::integer(1000000);
  EXPECT_THROW(expand_sweep(s), ConfigError);  // over the 100000-value guard
}

TEST(OverrideError, MessageNamesTextExpectationAndPosition) {
  EXPECT_EQ(error("a=[1,2"), "Error parsing override 'a=[1,2': expected ',' or ']' at position 6 (end of text)");
  EXPECT_EQ(error("a=[1 2]x"), "Error parsing override 'a=[1 2]x': expected ',' or the end of the value at position 7 (found 'x')");
  EXPECT_EQ(error("a=1]"), "Error parsing override 'a=1]': expected ',' or the end of the value at position 3 (found ']')");
}

TEST(OverrideError, NestingDeeperThanTheLimit) {
  using wavetrain::testing::nested;
  EXPECT_EQ(value("a=" + nested("[", "1", "]", 256)).depth(), 256u);
  EXPECT_EQ(value("a=" + nested("{a:", "1", "}", 256)).depth(), 256u);
  // The parser recurses once per level: 10,000 levels must be an error, not a stack overflow. The
  // message shows the start of a long text and the position of the 257th '[' or '{'.
  EXPECT_EQ(error("a=" + nested("[", "", "]", 10000)),
            "Error parsing override 'a=" + std::string(58, '[') + "...' (20002 characters): more than 256 nested "
            "lists and dicts (the limit) at position 258");
  EXPECT_EQ(error("a=" + nested("{a:", "1", "}", 10000)),
            "Error parsing override 'a=" + nested("{a:", "", "", 19) + "{...' (40003 characters): more than 256 "
            "nested lists and dicts (the limit) at position 770");
  EXPECT_NE(error("a=1," + nested("[", "", "]", 300)).find("more than 256 nested lists and dicts (the limit) at "
                                                          "position 260"),
            std::string::npos);
  EXPECT_NE(error("a=choice(" + nested("[", "", "]", 300) + ")").find("more than 256 nested lists and dicts"),
            std::string::npos);
  EXPECT_THROW(parse_zip("zip(a=" + nested("[", "", "]", 300) + ")"), ConfigError);
}

TEST(OverrideError, UnbalancedBracketsAndQuotes) {
  EXPECT_NE(error("a={x:1").find("expected ',' or '}' at position 6"), std::string::npos);
  EXPECT_NE(error("a=[[1]").find("expected ',' or ']' at position 6"), std::string::npos);
  EXPECT_NE(error("a='abc").find("unclosed quote ' (expected a matching ') at position 2"), std::string::npos);
  EXPECT_NE(error("a=[\"x]").find("unclosed quote \" (expected a matching \") at position 3"), std::string::npos);
  EXPECT_NE(error("a=${x").find("unclosed interpolation '${' (expected '}') at position 2"), std::string::npos);
  EXPECT_NE(error("a=x'y'").find("a quote must enclose the whole value at position 3"), std::string::npos);
  EXPECT_NE(error("a={x}").find("expected ':' after the dict key 'x' at position 4 (found '}')"), std::string::npos);
  EXPECT_NE(error("a={:1}").find("expected a dict key at position 3 (found ':')"), std::string::npos);
  EXPECT_NE(error("a={x:1,x:2}").find("duplicate dict key 'x' at position 7"), std::string::npos);
  EXPECT_NE(error("a=[1,]").find("expected a value at position 5 (found ']')"), std::string::npos);
  EXPECT_NE(error("a=1,").find("expected a value at position 4 (end of text)"), std::string::npos);
  EXPECT_NE(error("a=,1").find("expected a value at position 2 (found ',')"), std::string::npos);
  EXPECT_NE(error("a=(1)").find("expected a value at position 2 (found '(')"), std::string::npos);
  EXPECT_NE(error("a=[x(1)]").find("function call"), std::string::npos);
  EXPECT_NE(error("a=1.5(1)").find("'(' must be escaped as '\\(' or the value quoted at position 5"), std::string::npos);
  EXPECT_NE(error("a='C:\\dir\\'").find("unclosed quote"), std::string::npos);  // \' escapes the quote
}

TEST(OverrideError, Keys) {
  EXPECT_NE(error("=5").find("expected a key at position 0 (found '=')"), std::string::npos);
  EXPECT_NE(error("").find("expected a key at position 0 (end of text)"), std::string::npos);
  EXPECT_NE(error("+=5").find("expected a key at position 1"), std::string::npos);
  EXPECT_NE(error("~").find("expected a key at position 1 (end of text)"), std::string::npos);
  EXPECT_NE(error("model").find("expected '=' after the key at position 5 (end of text)"), std::string::npos);
  EXPECT_NE(error("a b=1").find("invalid character ' ' in key at position 1"), std::string::npos);
  EXPECT_NE(error("a[0]=1").find("invalid character '[' in key at position 1"), std::string::npos);
  EXPECT_NE(error("+++a=1").find("invalid character '+' in key at position 2"), std::string::npos);
  EXPECT_NE(error("a..b=1").find("empty part in key at position 2"), std::string::npos);
  EXPECT_NE(error("a.=1").find("empty part in key at position 2"), std::string::npos);
  EXPECT_NE(error("1a=1").find("a key part must start with a letter or '_' at position 0"), std::string::npos);
  EXPECT_NE(error("5=1").find("a key part must start with a letter or '_' at position 0"), std::string::npos);
  EXPECT_NE(error("a/b.c=1").find("not both at position 0"), std::string::npos);
  EXPECT_NE(error("db@=x").find("expected a package name after '@'"), std::string::npos);
  EXPECT_NE(error("db@a/b=x").find("invalid character '/' in key at position 4"), std::string::npos);
  EXPECT_NE(error("db@a@b=x").find("invalid character '@' in key at position 4"), std::string::npos);
}

TEST(OverrideError, Sweeps) {
  EXPECT_NE(error("~a=1,2").find("a delete (~key) cannot take a sweep at position 3"), std::string::npos);
  EXPECT_NE(error("~a=range(1,3)").find("a delete (~key) cannot take a sweep"), std::string::npos);
  EXPECT_NE(error("a=range(stop=1)")
                .find("range() is missing its first argument: range(stop) or range(start, stop[, step]) at position 2"),
            std::string::npos);
  EXPECT_NE(error("a=range(1,2,3,4)").find("range() takes at most 3 arguments (start, stop, step) at position 14"),
            std::string::npos);
  EXPECT_NE(error("a=range(0,1,0)").find("range() step must not be 0 at position 2"), std::string::npos);
  EXPECT_NE(error("a=range(0,1,0.0)").find("range() step must not be 0"), std::string::npos);
  EXPECT_NE(error("a=range(0,x)").find("range() stop must be a number, not 'x' at position 10"), std::string::npos);
  EXPECT_NE(error("a=range(0,true)").find("range() stop must be a number"), std::string::npos);
  EXPECT_NE(error("a=range(0,2,size=1)").find("range() has no argument 'size'"), std::string::npos);
  EXPECT_NE(error("a=range(stop=2,1)").find("a positional argument cannot follow a named one"), std::string::npos);
  EXPECT_NE(error("a=range(1,stop=2,start=0)").find("range() got 'start' twice"), std::string::npos);
  EXPECT_NE(error("a=range(0,10000000)").find("more than 100000 values"), std::string::npos);
  EXPECT_NE(error("a=range(0,1,inf)").find("finite"), std::string::npos);
  EXPECT_NE(error("a=foo(1)").find("unknown function 'foo' (supported: choice, range, glob) at position 2"),
            std::string::npos);
  EXPECT_NE(error("a=choice()").find("choice() needs at least one value"), std::string::npos);
  EXPECT_NE(error("a=choice(x=1)").find("choice() takes values, not named arguments"), std::string::npos);
  EXPECT_NE(error("a=choice(1,2),3").find("a function call must be the whole value"), std::string::npos);
  EXPECT_NE(error("a=1,range(1,2)").find("a function call (choice, range, glob) must be the whole value"),
            std::string::npos);
  EXPECT_NE(error("a=[range(1,2)]").find("must be the whole value"), std::string::npos);
  EXPECT_NE(error("a=choice(1,2").find("expected ',' or ')' at position 12 (end of text)"), std::string::npos);
  EXPECT_NE(error("a=glob(exclude=x)").find("glob() needs include patterns"), std::string::npos);
  EXPECT_NE(error("a=glob([[x]])").find("glob() patterns must be strings"), std::string::npos);
}

TEST(OverrideError, NumbersOutOfRange) {
  EXPECT_NE(error("a=9223372036854775808").find("the integer 9223372036854775808 does not fit in 64 bits at position 2"),
            std::string::npos);
  EXPECT_NE(error("a=-9_223_372_036_854_775_809").find("does not fit in 64 bits"), std::string::npos);
  EXPECT_NE(error("a=[1,99999999999999999999]").find("at position 5"), std::string::npos);
  EXPECT_NE(error("a=1e999").find("the float 1e999 is out of range"), std::string::npos);
}

TEST(Zip, EqualLengthLists) {
  const auto z = parse_zip("zip(optim.lr=[1e-3,3e-4],batch=[16,32])");
  ASSERT_TRUE(z.has_value());
  ASSERT_EQ(z->keys.size(), 2u);
  EXPECT_EQ(z->keys[0].first, "optim.lr");
  EXPECT_EQ(z->keys[0].second[1].float_value(), 3e-4);
  EXPECT_EQ(z->keys[1].first, "batch");
  EXPECT_EQ(z->keys[1].second[0].int_value(), 16);
  EXPECT_TRUE(z->keys[1].second[0].origin().command_line);
  const auto spaced = parse_zip(" zip ( a = [x, [1,2]] ) ");
  ASSERT_TRUE(spaced.has_value());
  EXPECT_EQ(spaced->keys[0].second[1].to_display(), "[1, 2]");
}

TEST(Zip, NotAZip) {
  EXPECT_FALSE(parse_zip("zip=1").has_value());
  EXPECT_FALSE(parse_zip("zipper(a=[1])").has_value());
  EXPECT_FALSE(parse_zip("a=zip(b=[1])").has_value());
  EXPECT_FALSE(parse_zip("").has_value());
}

TEST(Zip, Errors) {
  auto zip_error = [](const std::string& text) -> std::string {
    try {
      parse_zip(text);
    } catch (const ConfigError& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error for: " << text;
    return "";
  };
  EXPECT_EQ(zip_error("zip(lr=[1,2],batch=[16,32,64])"),
            "Error parsing zip 'zip(lr=[1,2],batch=[16,32,64])': the lists must have the same length, "
            "but lr has 2, batch has 3");
  EXPECT_NE(zip_error("zip(lr=[1,2]").find("expected ',' or ')' at position 12 (end of text)"), std::string::npos);
  EXPECT_NE(zip_error("zip(lr=1)").find("expected a list [...] of values for 'lr' at position 7"), std::string::npos);
  EXPECT_NE(zip_error("zip()").find("zip() needs at least one key=[...]"), std::string::npos);
  EXPECT_NE(zip_error("zip([1])").find("expected a key at position 4"), std::string::npos);
  EXPECT_NE(zip_error("zip(a=[1],a=[2])").find("the key 'a' appears twice at position 10"), std::string::npos);
  EXPECT_NE(zip_error("zip(a=[],b=[])").find("the lists are empty"), std::string::npos);
  EXPECT_NE(zip_error("zip(a=[1]) x").find("expected the end of the text after zip(...)"), std::string::npos);
  EXPECT_NE(zip_error("zip(a b=[1])").find("expected '=' after the key 'a' at position 6 (found 'b')"),
            std::string::npos);
}

}  // namespace
