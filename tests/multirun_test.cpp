// Run directories and the multirun launcher. The jobs are a small shell script standing in for
// `wavetrain train`: it reads its overrides, writes result.json, and fails when told to.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "trainer/config/config.h"
#include "trainer/config/yaml_io.h"
#include "trainer/sweep/multirun.h"
#include "trainer/sweep/run_directory.h"

namespace fs = std::filesystem;

namespace wavetrain {
namespace {

fs::path fresh_multirun_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(RunDirectory, TwoRunsInTheSameSecondGetTheirOwn) {
  const fs::path base = fresh_multirun_dir("rundir");
  const RunDirectory a = RunDirectory::create(base / "outputs/2026-11-21/12-00-00");
  const RunDirectory b = RunDirectory::create(base / "outputs/2026-11-21/12-00-00");
  const RunDirectory c = RunDirectory::create(base / "outputs/2026-11-21/12-00-00");
  EXPECT_EQ(a.path(), base / "outputs/2026-11-21/12-00-00");
  EXPECT_EQ(b.path(), base / "outputs/2026-11-21/12-00-00_1");
  EXPECT_EQ(c.path(), base / "outputs/2026-11-21/12-00-00_2");
}

TEST(RunDirectory, RecordsConfigsThatReloadToTheSameValues) {
  const fs::path base = fresh_multirun_dir("record");
  config::Node tree = config::load_yaml_string(
      "run: {dir: '" + (base / "r").string() + "'}\nlr: 0.1\nname: run_${lr}\ns: '3'\nt: 'true'\ntask: ???\n", "t.yaml");
  const config::Config cfg(tree);
  const RunDirectory run = RunDirectory::create_for(cfg);
  EXPECT_EQ(run.path(), base / "r");
  run.record(cfg, {"lr=0.1", "+x='a b'"}, "wavetrain train lr=0.1");
  EXPECT_EQ(config::load_yaml_file((run.meta_dir() / "config.yaml").string()), tree);
  const config::Node resolved = config::load_yaml_file((run.meta_dir() / "config.resolved.yaml").string());
  EXPECT_EQ(resolved.find("name")->string_value(), "run_0.1");
  EXPECT_EQ(resolved.find("s")->string_value(), "3");
  EXPECT_TRUE(resolved.find("task")->is_missing());
  const config::Node overrides = config::load_yaml_file((run.meta_dir() / "overrides.yaml").string());
  EXPECT_EQ(overrides.items().at(1).string_value(), "+x='a b'");
  EXPECT_NE(read(run.log_path()).find("command: wavetrain train lr=0.1"), std::string::npos);
  EXPECT_NE(read(run.meta_dir() / "config.yaml").find("lr: 0.1\n"), std::string::npos);  // not 0.10000000000000001
}

// A stand-in job: `fake_job lr=X ... ++run.dir=DIR`. Fails with exit 3 when lr=0.5 (unless the
// file DIR/../heal exists), else writes result.json with val/esr = lr * 10.
fs::path write_fake_job(const fs::path& dir) {
  const fs::path script = dir / "fake_job.sh";
  std::ofstream out(script);
  out << "#!/bin/sh\n"
         "lr=''; run=''\n"
         "for a in \"$@\"; do case \"$a\" in lr=*) lr=${a#lr=};; ++run.dir=*) run=${a#++run.dir=};; esac; done\n"
         "mkdir -p \"$run\"\n"
         "echo \"job with lr=$lr\"\n"
         "if [ \"$lr\" = 0.5 ] && [ ! -e \"$run/../heal\" ]; then echo 'diverged: loss is nan' >&2; exit 3; fi\n"
         "esr=$(awk -v x=\"$lr\" 'BEGIN { print x * 10 }')\n"
         "printf '{\"best\": {\"val/esr\": %s}, \"last\": {\"val/esr\": %s}}' \"$esr\" \"$esr\" > \"$run/result.json\"\n";
  out.close();
  fs::permissions(script, fs::perms::owner_all);
  return script;
}

TEST(Multirun, FailedJobIsReportedAndTheOthersGoOnThenResumeRerunsOnlyIt) {
  const fs::path dir = fresh_multirun_dir("multirun");
  MultirunOptions opt;
  opt.dir = dir;
  opt.command = {write_fake_job(dir).string()};
  opt.parallel = 2;
  opt.objective = "val/esr";
  const std::vector<std::vector<std::string>> jobs = {{"lr=0.2"}, {"lr=0.5"}, {"lr=0.1"}, {"lr=0.3"}};

  std::ostringstream out;
  const MultirunSummary s = run_multirun(jobs, opt, out);
  EXPECT_EQ(s.failed, 1u);
  ASSERT_EQ(s.jobs.size(), 4u);
  EXPECT_EQ(s.jobs[1].status, "failed");
  EXPECT_EQ(s.jobs[1].exit_code, 3);
  EXPECT_EQ(s.jobs[0].status, "done");
  EXPECT_EQ(s.jobs[3].status, "done");
  ASSERT_TRUE(s.best.has_value());
  EXPECT_EQ(*s.best, 2u);  // lr=0.1 -> val/esr 1, the minimum
  EXPECT_DOUBLE_EQ(*objective_value(s.jobs[3], "val/esr"), 3.0);
  const std::string log = out.str();
  EXPECT_NE(log.find("Launching 4 jobs, 2 at a time"), std::string::npos) << log;
  // Two start at once; the other two say they are queued, and that they started when they do
  // (after a running job ended).
  EXPECT_NE(log.find("[0] started: lr=0.2\n"), std::string::npos) << log;
  EXPECT_NE(log.find("[1] started: lr=0.5\n"), std::string::npos) << log;
  EXPECT_NE(log.find("[2] queued: lr=0.1\n"), std::string::npos) << log;
  EXPECT_NE(log.find("[3] queued: lr=0.3\n"), std::string::npos) << log;
  const size_t first_end = std::min(log.find("[0] done"), log.find("[1] FAILED"));
  EXPECT_GT(log.find("[2] started\n"), first_end) << log;
  EXPECT_NE(log.find("[3] started\n"), std::string::npos) << log;
  EXPECT_NE(log.find("[1] FAILED with exit code 3"), std::string::npos) << log;
  EXPECT_NE(log.find("    diverged: loss is nan\n"), std::string::npos) << log;  // the tail of its output
  EXPECT_NE(log.find("best (min val/esr): job 2: lr=0.1"), std::string::npos) << log;
  EXPECT_NE(read(dir / "summary.csv").find("1,lr=0.5,failed,3,"), std::string::npos) << read(dir / "summary.csv");
  EXPECT_EQ(read(dir / "summary.csv").substr(0, 71), "job,overrides,status,exit_code,seconds,steps,best.val/esr,last.val/esr\n");

  // Resume: only the failed job runs again (it now succeeds); the first attempt is kept.
  std::ofstream(dir / "heal").put('\n');
  MultirunOptions again;
  again.dir = dir;
  std::ostringstream out2;
  const MultirunSummary r = resume_multirun(again, out2);
  EXPECT_EQ(r.failed, 0u);
  EXPECT_NE(out2.str().find("Launching 1 job (3 already done)"), std::string::npos) << out2.str();
  EXPECT_EQ(out2.str().find("[0] started"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / "1.attempt-1"));
  EXPECT_DOUBLE_EQ(*objective_value(r.jobs[1], "val/esr"), 5.0);
  EXPECT_EQ(*r.best, 2u);
}

TEST(Multirun, ResumeOfADirectoryWithoutAMultirunIsAnError) {
  MultirunOptions opt;
  opt.dir = fresh_multirun_dir("not_a_multirun");
  std::ostringstream out;
  EXPECT_THROW(resume_multirun(opt, out), std::runtime_error);
}

}  // namespace
}  // namespace wavetrain
