// Search beyond grids: the search space's parsing and draws (trainer/sweep/search_space.h) and
// ASHA's decisions (trainer/sweep/asha.h), without processes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "trainer/config/yaml_io.h"
#include "trainer/sweep/asha.h"
#include "trainer/sweep/search_space.h"

namespace wavetrain::sweep {
namespace {

std::vector<SearchDimension> space_of(const std::string& yaml) {
  const config::Node n = config::load_yaml_string(yaml, "space.yaml");
  return parse_search_space(&n);
}

std::string error_of(const std::string& yaml) {
  try {
    space_of(yaml);
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(SweepSearch, SpaceEntriesParseWithTheirKeys) {
  const auto dims = space_of(
      "optimizer.lr: loguniform(1e-4, 1e-1)\nwd: uniform(0, 0.5)\nmodel:\n  hidden: int(8, 64)\nname: choice(adam, sgd)\n"
      "depth: [2, 3]\n");
  ASSERT_EQ(dims.size(), 5u);
  EXPECT_EQ(dims[0].key, "optimizer.lr");
  EXPECT_EQ(dims[0].kind, SearchDimension::Kind::LogUniform);
  EXPECT_DOUBLE_EQ(dims[0].low, 1e-4);
  EXPECT_DOUBLE_EQ(dims[0].high, 0.1);
  EXPECT_EQ(dims[2].key, "model.hidden");  // nested mappings give dotted keys
  EXPECT_EQ(dims[2].kind, SearchDimension::Kind::Int);
  EXPECT_EQ(dims[3].choices.size(), 2u);
  EXPECT_EQ(dims[3].choices[1].string_value(), "sgd");
  EXPECT_EQ(dims[4].kind, SearchDimension::Kind::Choice);
  EXPECT_EQ(dims[4].choices[1].int_value(), 3);
}

TEST(SweepSearch, ASpaceWithNoValuesIsAnErrorNamingTheKey) {
  EXPECT_NE(error_of("lr: choice()").find("sweep.space.lr=choice(): Error parsing override 'x=choice()': choice() needs at least one value"),
            std::string::npos) << error_of("lr: choice()");
  EXPECT_NE(error_of("lr: uniform(1, 1)").find("sweep.space.lr=uniform(1, 1): the range holds no values"), std::string::npos);
  EXPECT_NE(error_of("lr: uniform(2, 1)").find("low must be below high"), std::string::npos);
  EXPECT_NE(error_of("lr: loguniform(0, 1)").find("loguniform needs low > 0"), std::string::npos);
  EXPECT_NE(error_of("lr: normal(0, 1)").find("unknown distribution 'normal'"), std::string::npos);
  EXPECT_NE(error_of("lr: []").find("sweep.space.lr: the list of values is empty"), std::string::npos);
  EXPECT_NE(error_of("lr: 0.1").find("expected uniform(low, high)"), std::string::npos);
  EXPECT_NE(error_of("n: int(1.5, 3)").find("int() takes integer bounds"), std::string::npos);
}

TEST(SweepSearch, DiscreteSpacesAreDrawnWithoutReplacementAndSeeded) {
  const std::vector<std::vector<std::string>> grid = {{"a=1"}, {"a=2"}, {"a=3"}};
  const auto dims = space_of("b: choice(x, y)\nn: int(0, 1)\n");
  const auto all = draw_trials(grid, dims, 0, 7);
  ASSERT_EQ(all.size(), 12u);  // 3 x 2 x 2, each once
  std::set<std::vector<std::string>> distinct(all.begin(), all.end());
  EXPECT_EQ(distinct.size(), 12u);
  EXPECT_EQ(draw_trials(grid, dims, 0, 7), all);  // the seed decides
  EXPECT_NE(draw_trials(grid, dims, 0, 8), all);
  const auto five = draw_trials(grid, dims, 5, 7);
  EXPECT_EQ(std::vector<std::vector<std::string>>(all.begin(), all.begin() + 5), five);
  EXPECT_THROW(draw_trials(grid, dims, 13, 7), config::ConfigError);
}

TEST(SweepSearch, ContinuousDrawsStayInRangeAndLogUniformIsUniformInTheLog) {
  const auto dims = space_of("lr: loguniform(1e-4, 1e-0)\nw: uniform(-1, 1)\n");
  EXPECT_THROW(draw_trials({}, dims, 0, 1), config::ConfigError);  // trials needed
  const auto trials = draw_trials({}, dims, 2000, 3);
  ASSERT_EQ(trials.size(), 2000u);
  int below_1e2 = 0, negative = 0;
  for (const auto& t : trials) {
    ASSERT_EQ(t.size(), 2u);
    ASSERT_EQ(t[0].rfind("lr=", 0), 0u);
    const double lr = std::stod(t[0].substr(3)), w = std::stod(t[1].substr(2));
    ASSERT_GE(lr, 1e-4);
    ASSERT_LE(lr, 1.0);
    ASSERT_GE(w, -1.0);
    ASSERT_LE(w, 1.0);
    below_1e2 += lr < 1e-2;  // half of the log range
    negative += w < 0;
  }
  EXPECT_NEAR(below_1e2 / 2000.0, 0.5, 0.05);
  EXPECT_NEAR(negative / 2000.0, 0.5, 0.05);
}

TEST(Asha, RungsGrowByEtaUpToTheMaximum) {
  EXPECT_EQ(Asha(1, {30, 270, 3, "min"}).budgets(), (std::vector<int64_t>{30, 90, 270}));
  EXPECT_EQ(Asha(1, {10, 100, 3, "min"}).budgets(), (std::vector<int64_t>{10, 30, 90, 100}));
  EXPECT_EQ(Asha(1, {5, 5, 2, "min"}).budgets(), (std::vector<int64_t>{5}));
  EXPECT_THROW(Asha(1, {0, 10, 3, "min"}), std::invalid_argument);
  EXPECT_THROW(Asha(1, {20, 10, 3, "min"}), std::invalid_argument);
  EXPECT_THROW(Asha(1, {1, 10, 1, "min"}), std::invalid_argument);
}

// One worker, trials' objectives known: a trial's objective at every rung is its own value (the
// ranking does not change with the budget), so ASHA must carry the best trial to the top rung,
// promote no trial outside the best third of a rung, and spend far less than the full grid.
TEST(Asha, OneWorkerPromotesTheBestThirdAndFindsTheBest) {
  const std::vector<double> value = {0.5, 0.2, 0.9, 0.1, 0.7, 0.3, 0.8, 0.05, 0.6};
  Asha asha(value.size(), {10, 90, 3, "min"});
  int64_t spent = 0;
  std::map<size_t, int64_t> trained;  // resource each trial has trained to
  std::vector<std::pair<size_t, size_t>> launches;
  while (const auto l = asha.next()) {
    launches.emplace_back(l->trial, l->rung);
    EXPECT_EQ(l->resume, l->rung > 0);
    spent += l->budget - trained[l->trial];
    trained[l->trial] = l->budget;
    asha.report(l->trial, l->rung, value[l->trial]);
  }
  EXPECT_TRUE(asha.finished());
  EXPECT_EQ(asha.status(7), "done");  // 0.05, the best
  EXPECT_EQ(asha.rung(7), 2);
  for (size_t t : {2u, 4u, 6u, 8u}) EXPECT_EQ(asha.status(t), "stopped") << t;  // never in a best third
  // Budget: every trial 10, promotions to 30 and 90; the grid would spend 9 x 90 = 810.
  EXPECT_LE(spent, 810 * 40 / 100) << spent;
  // Trials start in order, and a promotion comes as soon as a rung's best third allows it.
  EXPECT_EQ(launches[0], (std::pair<size_t, size_t>{0, 0}));
  EXPECT_EQ(launches[3], (std::pair<size_t, size_t>{1, 1}));  // after 3 at rung 0, the best of them
}

TEST(Asha, AFailedTrialIsNeverPromotedAndMaxModeFlipsTheOrder) {
  Asha asha(3, {1, 9, 3, "max"});
  for (int i = 0; i < 3; ++i) {
    const auto l = asha.next();
    ASSERT_TRUE(l);
    asha.report(l->trial, 0, l->trial == 2 ? std::nullopt : std::optional<double>(static_cast<double>(l->trial)));
  }
  const auto promoted = asha.next();  // floor(2 / 3) = 0 of two finished: nothing yet
  EXPECT_FALSE(promoted);
  EXPECT_EQ(asha.status(2), "failed");
  EXPECT_TRUE(asha.finished());

  Asha more(4, {1, 9, 3, "max"});
  for (int i = 0; i < 3; ++i) {
    const auto l = more.next();
    more.report(l->trial, 0, static_cast<double>(l->trial));
  }
  const auto p = more.next();
  ASSERT_TRUE(p);
  EXPECT_EQ(p->trial, 2u);  // the largest objective goes on in max mode
  EXPECT_EQ(p->rung, 1u);
  EXPECT_EQ(p->budget, 3);
}

TEST(Asha, AResumedSweepReplaysItsRungsAndContinuesRunningTrials) {
  Asha asha(4, {1, 9, 3, "min"});
  asha.report(0, 0, 0.3);
  asha.report(1, 0, 0.1);
  asha.report(2, 0, 0.2);
  asha.resume_running(1);  // it was promoted and running when the driver stopped
  EXPECT_EQ(asha.status(1), "running");
  const auto l = asha.next();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->trial, 3u);  // the next new trial, not a second run of trial 1
  EXPECT_EQ(l->rung, 0u);
}

}  // namespace
}  // namespace wavetrain::sweep
