// Sweep planning: job count and order for product and zipped sweeps, config params, glob, ranges.
#include <gtest/gtest.h>

#include "trainer/config/compose.h"
#include "trainer/config/override.h"
#include "trainer/config/sweep.h"
#include "trainer/config/yaml_io.h"

namespace wavetrain::config {
namespace {

const std::string kBasic = std::string(WAVETRAIN_TEST_DATA) + "/configs/basic";
using Jobs = std::vector<std::vector<std::string>>;

SweepPlan plan(const std::vector<std::string>& overrides, const Node* section = nullptr) {
  return plan_sweep(overrides, section, [](const std::string& group) { return group_options({kBasic}, group); });
}

TEST(Sweep, ProductWithTheFirstKeyVaryingSlowest) {
  EXPECT_EQ(plan({"a=1,2", "fixed=x", "b=x,y,z"}).jobs,
            (Jobs{{"a=1", "fixed=x", "b=x"},
                  {"a=1", "fixed=x", "b=y"},
                  {"a=1", "fixed=x", "b=z"},
                  {"a=2", "fixed=x", "b=x"},
                  {"a=2", "fixed=x", "b=y"},
                  {"a=2", "fixed=x", "b=z"}}));
}

// Hydra's BasicSweeper keeps the command line's order in every job, so a fixed override after a
// sweep of the same keys still wins, as it does without -m.
TEST(Sweep, JobsKeepTheCommandLineOrder) {
  EXPECT_EQ(plan({"a=1,2", "c=5"}).jobs, (Jobs{{"a=1", "c=5"}, {"a=2", "c=5"}}));
  const Jobs jobs = plan({"trainer={max_epochs:1},{max_epochs:2}", "trainer.max_epochs=5"}).jobs;
  ASSERT_EQ(jobs.size(), 2u);
  for (const auto& job : jobs)
    EXPECT_EQ(compose({{kBasic}, "config", job}).config.find_path("trainer.max_epochs")->int_value(), 5) << job[0];
  // A second override of a key takes the first one's place (and its values).
  EXPECT_EQ(plan({"t.seed=1,2", "t.lr=3", "t.seed=5"}).jobs, (Jobs{{"t.seed=5", "t.lr=3"}}));
  EXPECT_EQ(plan({"x=1", "s=1,2", "x=3,4"}).jobs, (Jobs{{"x=3", "s=1"}, {"x=3", "s=2"}, {"x=4", "s=1"}, {"x=4", "s=2"}}));
  EXPECT_EQ(plan({"+x=1", "x=1,2"}).jobs, (Jobs{{"+x=1", "x=1"}, {"+x=1", "x=2"}}));  // another prefix, another key
}

// The package of a swept group stays in each job, with its + or ++.
TEST(Sweep, GroupSweepsKeepTheirPackage) {
  EXPECT_EQ(plan({"optimizer@first=adam,sgd"}).jobs, (Jobs{{"optimizer@first=adam"}, {"optimizer@first=sgd"}}));
  EXPECT_EQ(plan({"+optimizer@backup=adam,sgd"}).jobs, (Jobs{{"+optimizer@backup=adam"}, {"+optimizer@backup=sgd"}}));
  EXPECT_EQ(plan({"optimizer@first=glob(s*)"}).jobs, (Jobs{{"optimizer@first=sgd"}}));
  const Jobs jobs = plan({"+optimizer@backup=adam,sgd"}).jobs;
  const Composition c = compose({{kBasic}, "packages", jobs[1]});
  EXPECT_EQ(c.config.find_path("backup.momentum")->float_value(), 0.9);
  EXPECT_EQ(c.config.find("optimizer"), nullptr);
}

TEST(Sweep, ZipVariesTogether) {
  EXPECT_EQ(plan({"zip(lr=[1e-3,3e-4],batch=[16,32])", "seed=0,1"}).jobs,
            (Jobs{{"lr=0.001", "batch=16", "seed=0"},
                  {"lr=0.001", "batch=16", "seed=1"},
                  {"lr=0.0003", "batch=32", "seed=0"},
                  {"lr=0.0003", "batch=32", "seed=1"}}));
  EXPECT_THROW(plan({"zip(lr=[1,2],batch=[1])"}), ConfigError);
}

// A product of sweeps is bounded like one range(): the config fuzzer planned a sweep for over a
// minute (every job's overrides spelled out) before this limit.
TEST(Sweep, MoreThanTheJobLimitIsAnError) {
  EXPECT_EQ(plan({"a=range(0,1000)", "b=range(0,100)"}).jobs.size(), 100000u);
  try {
    plan({"a=range(0,1000)", "b=range(0,100)", "c=1,2"});
    ADD_FAILURE() << "planned";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "The sweep would run more than 100000 jobs (1000 x 100 x 2 values); that is the limit");
  }
  std::vector<std::string> many;
  for (int k = 0; k < 80; ++k) many.push_back("k" + std::to_string(k) + "=0,1");  // 2^80: no overflow to a small number
  EXPECT_THROW(plan(many), ConfigError);
}

TEST(Sweep, RangesChoiceAndGlob) {
  EXPECT_EQ(plan({"x=range(0.1,0.5,0.1)"}).jobs, (Jobs{{"x=0.1"}, {"x=0.2"}, {"x=0.3"}, {"x=0.4"}}));
  EXPECT_EQ(plan({"c=choice(a,'b c')"}).jobs, (Jobs{{"c=a"}, {"c='b c'"}}));
  EXPECT_EQ(plan({"model=glob(*)"}).jobs, (Jobs{{"model=lstm"}, {"model=wavenet"}}));
  EXPECT_EQ(plan({"model=glob(*,exclude=lstm)"}).jobs, (Jobs{{"model=wavenet"}}));
  EXPECT_EQ(plan({"+extra=1,2"}).jobs, (Jobs{{"+extra=1"}, {"+extra=2"}}));
}

TEST(Sweep, ConfigParamsComeFirstAndTheCommandLineWins) {
  const Node config = compose({{kBasic}, "sweeps", {}}).config;
  const Node* section = config.find("sweep");
  ASSERT_NE(section, nullptr);
  // params (seed) first, then the zip group, then command-line sweeps.
  EXPECT_EQ(plan({"model=lstm,wavenet"}, section).jobs,
            (Jobs{{"trainer.seed=1", "trainer.lr=0.001", "trainer.batch=16", "model=lstm"},
                  {"trainer.seed=1", "trainer.lr=0.001", "trainer.batch=16", "model=wavenet"},
                  {"trainer.seed=1", "trainer.lr=0.0003", "trainer.batch=32", "model=lstm"},
                  {"trainer.seed=1", "trainer.lr=0.0003", "trainer.batch=32", "model=wavenet"},
                  {"trainer.seed=2", "trainer.lr=0.001", "trainer.batch=16", "model=lstm"},
                  {"trainer.seed=2", "trainer.lr=0.001", "trainer.batch=16", "model=wavenet"},
                  {"trainer.seed=2", "trainer.lr=0.0003", "trainer.batch=32", "model=lstm"},
                  {"trainer.seed=2", "trainer.lr=0.0003", "trainer.batch=32", "model=wavenet"}}));
  // A single value on the command line stops that key (and its zip group) from sweeping.
  EXPECT_EQ(plan({"trainer.seed=7", "trainer.lr=0.5"}, section).jobs,
            (Jobs{{"trainer.seed=7", "trainer.lr=0.5"}}));
  EXPECT_EQ(plan({"trainer.seed=5,6"}, section).jobs.size(), 4u);
}

TEST(Sweep, EveryJobComposes) {
  for (const auto& job : plan({"model=glob(*)", "trainer.max_epochs=range(1,3)"}).jobs)
    EXPECT_NO_THROW(compose({{kBasic}, "config", job}));
  EXPECT_TRUE(has_sweep({"a=1", "b=1,2"}));
  EXPECT_FALSE(has_sweep({"a=1", "b=[1,2]", "c=a\\,b"}));
}

TEST(Sweep, FormattedValuesParseBack) {
  for (const char* text : {"x=3", "x=1.5", "x=abc", "x='3'", "x='a,b'", "x=''", "x=null", "x='null'",
                                  "x=[1,'a b',{k:2}]", "x='it\\'s'", "x=true", "x='True'", "x=-inf", "x=1e-08"}) {
    const Override o = parse_override(text);
    const std::string again = "x=" + format_override_value(*o.value);
    EXPECT_EQ(*parse_override(again).value, *o.value) << text << " -> " << again;
  }
}

}  // namespace
}  // namespace wavetrain::config
