// The sweep report: what it reads from a sweep directory (summary.json, metrics.csv, logs) and
// from plain run directories, the numbers it computes (best job, log axes, parameter importance),
// and the page: one line per job in the plots, one row per job in the table, the failed jobs' logs
// escaped, and (when Debian's chromium is installed) the page rendered headless with its table
// sorted by a click.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/run_process.h"
#include "trainer/sweep/sweep_report.h"

namespace fs = std::filesystem;

namespace wavetrain::sweep {
namespace {

fs::path fresh_report_dir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("wavetrain_sweep_report_" + name + "_" + std::to_string(::getpid()));
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

size_t count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t p = text.find(part); p != std::string::npos; p = text.find(part, p + 1)) ++n;
  return n;
}

// The markup of the first <svg> whose class list starts with `css_class`.
std::string svg_of(const std::string& html, const std::string& css_class) {
  const size_t start = html.find("<svg xmlns='http://www.w3.org/2000/svg' class='" + css_class);
  if (start == std::string::npos) return "";
  return html.substr(start, html.find("</svg>", start) - start);
}

// Eight jobs: lr decides the objective (lower lr, lower loss), width is shuffled against it,
// optimizer is categorical; job 6 stopped early with an objective, job 7 failed without one, and
// a pending job 8 has none either.
ReportInput hand_made_input(const fs::path& dir) {
  ReportInput in;
  in.title = dir.string();
  in.objective = "val/mse";
  in.mode = "min";
  const char* const lrs[] = {"0.0001", "0.0003", "0.001", "0.003", "0.01", "0.03", "0.1", "0.3", "0.5"};
  const int widths[] = {32, 64, 16, 48, 24, 8, 40, 56, 12};
  for (int i = 0; i < 9; ++i) {
    ReportJob j;
    j.name = std::to_string(i);
    j.run_dir = dir / j.name;
    j.params = {{"optimizer.lr", lrs[i]}, {"model.width", std::to_string(widths[i])}, {"optimizer.name", i % 2 ? "sgd" : "adam"}};
    j.status = i < 6 ? "done" : i == 6 ? "stopped" : i == 7 ? "failed" : "pending";
    if (i <= 6) j.objective = 0.01 + 0.1 * i;  // rises with lr
    j.seconds = 10.5 * i;
    j.steps = 100 * i;
    if (i == 7) j.error_tail = "Traceback\n<script>alert('x')</script> & NaN loss\n";
    in.jobs.push_back(j);
  }
  return in;
}

TEST(SweepReport, LogAxisRule) {
  EXPECT_TRUE(log_axis({1e-4, 1e-3, 1e-2}));
  EXPECT_TRUE(log_axis({1, 21}));
  EXPECT_FALSE(log_axis({1, 20}));  // more than a factor of 20, not 20 itself
  EXPECT_FALSE(log_axis({8, 16, 64}));
  EXPECT_FALSE(log_axis({0, 1, 100}));
  EXPECT_FALSE(log_axis({-1, 100}));
  EXPECT_FALSE(log_axis({}));
  EXPECT_TRUE(log_axis({1, 11}, 10));  // the learning curves' rule
}

TEST(SweepReport, BestJobIsTheBestDoneOne) {
  ReportInput in = hand_made_input(fresh_report_dir("best"));
  EXPECT_EQ(best_job(in), 0u);
  in.jobs[6].objective = 0.001;  // a stopped job's better value does not make it the best
  EXPECT_EQ(best_job(in), 0u);
  in.mode = "max";
  EXPECT_EQ(best_job(in), 5u);
  for (ReportJob& j : in.jobs) j.objective.reset();
  EXPECT_EQ(best_job(in), std::nullopt);
}

TEST(SweepReport, ImportanceOfAMonotonicParameterIsOne) {
  const ReportInput in = hand_made_input(fresh_report_dir("importance"));
  const std::vector<ParamImportance> imp = parameter_importance(in);
  ASSERT_EQ(imp.size(), 3u);
  EXPECT_EQ(imp[0].param, "optimizer.lr");
  EXPECT_TRUE(imp[0].numeric);
  EXPECT_EQ(imp[0].jobs, 7u);
  EXPECT_NEAR(imp[0].value, 1.0, 1e-12);
  EXPECT_EQ(imp[1].param, "model.width");
  EXPECT_LT(imp[1].value, 0.9);
  EXPECT_GE(imp[1].value, 0.0);
  EXPECT_EQ(imp[2].param, "optimizer.name");
  EXPECT_FALSE(imp[2].numeric);
  // adam: jobs 0, 2, 4, 6; sgd: 1, 3, 5: means 0.31 and 0.31 apart by 0 -> spread 0.
  EXPECT_NEAR(imp[2].value, 0.0, 1e-12);

  // Falling with the parameter counts as much as rising.
  ReportInput falling = in;
  for (ReportJob& j : falling.jobs)
    if (j.objective) j.objective = 1.0 - *j.objective;
  EXPECT_NEAR(parameter_importance(falling)[0].value, 1.0, 1e-12);
}

TEST(SweepReport, PageHasALinePerJobWithAnObjectiveAndARowPerJob) {
  const fs::path dir = fresh_report_dir("page");
  const ReportInput in = hand_made_input(dir);
  const fs::path path = write_sweep_report(in, dir / "out");
  EXPECT_EQ(path, dir / "out" / "report.html");
  const std::string html = read(path);

  const std::string pc = svg_of(html, "parallel-coordinates");
  EXPECT_EQ(count(pc, "<polyline class='job"), 7u);  // jobs 0-6
  EXPECT_EQ(count(pc, "<polyline class='job best' data-job='0'"), 1u);
  EXPECT_NE(pc.find("optimizer.lr (log)"), std::string::npos);  // 1e-4 .. 0.5
  EXPECT_EQ(pc.find("model.width (log)"), std::string::npos);    // 8 .. 64: a factor of 8
  EXPECT_NE(pc.find(">adam<"), std::string::npos);               // the categorical axis's ticks
  EXPECT_NE(pc.find(">sgd<"), std::string::npos);

  const size_t table = html.find("<table id='jobs'");
  ASSERT_NE(table, std::string::npos);
  const std::string rows = html.substr(table, html.find("</table>", table) - table);
  EXPECT_EQ(count(rows, "<tr data-job="), 9u);
  EXPECT_EQ(count(rows, "<tr data-job='0' class='best'>"), 1u);
  EXPECT_EQ(count(html, "class='param-scatter'"), 3u);
  EXPECT_EQ(count(html, "<circle class='point"), 3u * 7u);

  // The failed job's log, escaped; the stopped job is listed too.
  EXPECT_NE(html.find("<pre>Traceback\n&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; NaN loss\n</pre>"), std::string::npos);
  EXPECT_EQ(html.find("<script>alert"), std::string::npos);
  EXPECT_NE(html.find("<div class='failure' data-job='6'><h3>job 6: stopped</h3>"), std::string::npos);
  EXPECT_EQ(html.find("<div class='failure' data-job='8'"), std::string::npos);  // pending

  EXPECT_NE(html.find("9 jobs: 6 done, 1 failed, 1 stopped, 1 pending."), std::string::npos);
  EXPECT_NE(html.find("<b id='best-job' data-job='0'>job 0</b> (val/mse 0.01)"), std::string::npos);
  EXPECT_NE(html.find("<tr data-param='optimizer.lr'><td>optimizer.lr</td><td>|Spearman &#961;|</td><td class='importance' data-value='1'>1</td>"),
            std::string::npos);
  EXPECT_EQ(html.find("http"), html.find("http://www.w3.org/2000/svg"));  // nothing fetched
  EXPECT_EQ(count(html, "<script"), 1u);                                 // the table sorter only
  EXPECT_EQ(html.find("<a href"), std::string::npos);  // no job has a report.html
}

TEST(SweepReport, WriteFailureNamesThePath) {
  const fs::path dir = fresh_report_dir("unwritable");
  fs::create_directories(dir / "report.html");  // a directory where the file should go
  try {
    write_sweep_report(hand_made_input(dir), dir);
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "report.html").string()), std::string::npos) << e.what();
  }
}

// A sweep directory as the multirun driver leaves it: summary.json (one job in the older format,
// with its objective only among its metrics), each job's metrics.csv, logs/N.log.
fs::path fake_sweep(const std::string& name) {
  const fs::path dir = fresh_report_dir(name);
  nlohmann::json jobs = nlohmann::json::array();
  const double lrs[] = {0.1, 0.01, 0.001, 0.0001};
  for (int i = 0; i < 4; ++i) {
    const std::string lr = std::to_string(lrs[i]).substr(0, 3 + i);
    nlohmann::json j = {{"job", i}, {"overrides", {"optimizer.lr=" + lr, "trainer.seed=1", "++model.width=" + std::to_string(16 << (i % 2))}},
                        {"status", i == 2 ? "failed" : "done"}, {"exit_code", i == 2 ? 1 : 0}, {"seconds", 1.5 + i}, {"rung", 0},
                        {"unknown_field", {{"ignored", true}}}};
    fs::create_directories(dir / std::to_string(i));
    if (i != 2) {
      const double final_mse = 0.5 / (i + 1);
      j["metrics"] = {{"best.val/mse", final_mse}, {"global_step", 30}};
      if (i != 3) j["objective"] = final_mse, j["steps"] = 30;  // job 3: the older format
      std::ofstream csv(dir / std::to_string(i) / "metrics.csv");
      csv << "step,epoch,train/loss,val/mse\n";
      for (int s = 10; s <= 30; s += 10) csv << s << ",0," << 1.0 / s << "," << final_mse * 30 / s << "\n";
      csv << "30,1,0.01,\n";
    } else {
      j["objective"] = nullptr;
    }
    jobs.push_back(j);
  }
  const nlohmann::json summary = {{"objective", "val/mse"}, {"mode", "min"}, {"strategy", "grid"}, {"launcher", "local"},
                                  {"best_job", 3}, {"jobs", jobs}};
  std::ofstream(dir / "summary.json") << summary.dump(2);
  fs::create_directories(dir / "logs");
  std::ofstream log(dir / "logs" / "2.log");
  for (int i = 0; i < 40; ++i) log << "line " << i << "\n";
  log << "error: loss is <nan> at step 3\n";
  log.close();
  std::ofstream(dir / "1" / "report.html") << "<!doctype html><title>job 1</title>";
  return dir;
}

TEST(SweepReport, ReadsASweepDirectory) {
  const fs::path dir = fake_sweep("sweepdir");
  const ReportInput in = report_input_from_sweep(dir);
  EXPECT_EQ(in.objective, "val/mse");
  EXPECT_EQ(in.mode, "min");
  ASSERT_EQ(in.jobs.size(), 4u);
  // trainer.seed is the same in every job: not a parameter; the ++ of an override is not part of its key.
  const std::vector<std::pair<std::string, std::string>> params0 = {{"optimizer.lr", "0.1"}, {"model.width", "16"}};
  EXPECT_EQ(in.jobs[0].params, params0);
  EXPECT_EQ(in.jobs[1].name, "1");
  EXPECT_EQ(in.jobs[1].run_dir, dir / "1");
  EXPECT_EQ(in.jobs[0].objective, 0.5);
  EXPECT_EQ(in.jobs[2].objective, std::nullopt);
  EXPECT_EQ(in.jobs[3].objective, 0.125);  // from its metrics
  EXPECT_EQ(in.jobs[3].steps, 30);
  EXPECT_EQ(in.jobs[1].seconds, 2.5);
  EXPECT_EQ(in.jobs[2].status, "failed");
  EXPECT_EQ(in.jobs[2].error_tail.find("line 25\n"), std::string::npos);  // the last 15 lines only
  EXPECT_NE(in.jobs[2].error_tail.find("line 26\nline 27"), std::string::npos);
  EXPECT_NE(in.jobs[2].error_tail.find("error: loss is <nan> at step 3\n"), std::string::npos);

  const std::string html = read(write_sweep_report(in, dir));
  EXPECT_EQ(count(svg_of(html, "parallel-coordinates"), "<polyline class='job"), 3u);
  const std::string curves = svg_of(html, "plot curves");
  EXPECT_EQ(count(curves, "<polyline"), 3u);  // the jobs with a metrics.csv
  EXPECT_EQ(count(curves, "<polyline class='job best' data-job='3'"), 1u);
  EXPECT_NE(curves.find("job 3 (best)"), std::string::npos);
  EXPECT_NE(html.find("<a href='1/report.html'>report</a>"), std::string::npos);
  EXPECT_EQ(count(html, "<a href"), 1u);
  EXPECT_NE(html.find("error: loss is &lt;nan&gt; at step 3"), std::string::npos);
  EXPECT_NE(html.find("optimizer.lr (log)"), std::string::npos);  // 1e-4 .. 0.1

  // With the "params" objects the driver writes, they are taken as they are.
  nlohmann::json summary = nlohmann::json::parse(read(dir / "summary.json"));
  for (auto& j : summary["jobs"]) j["params"] = {{"optimizer.lr", j["overrides"][0].get<std::string>().substr(13)}, {"trainer.seed", 1}};
  std::ofstream(dir / "summary.json") << summary.dump();
  const ReportInput with_params = report_input_from_sweep(dir);
  const std::vector<std::pair<std::string, std::string>> given = {{"optimizer.lr", "0.1"}, {"trainer.seed", "1"}};
  EXPECT_EQ(with_params.jobs[0].params, given);

  EXPECT_THROW(report_input_from_sweep(dir / "missing"), std::runtime_error);
}

TEST(SweepReport, ReadsRunDirectories) {
  const fs::path dir = fresh_report_dir("runs");
  std::vector<fs::path> runs;
  for (int i = 0; i < 3; ++i) {
    const fs::path run = dir / "outputs" / ("run" + std::to_string(i));
    fs::create_directories(run / ".wavetrain");
    std::ofstream(run / ".wavetrain/overrides.yaml") << "- optimizer.lr=" << (i + 1) * 0.01 << "\n- trainer.max_epochs=3\n- ++run.dir=" << run.string()
                                                     << "\n";
    std::ofstream(run / ".wavetrain/config.yaml") << "trainer:\n  monitor: val/esr\n  mode: min\n";
    if (i < 2)
      std::ofstream(run / "result.json") << nlohmann::json{{"best", {{"val/esr", 0.1 * (i + 1)}}}, {"last", {{"val/esr", 0.5}}},
                                                           {"global_step", 40}, {"seconds", 12.5}}.dump();
    else
      std::ofstream(run / "wavetrain.log") << "starting\nerror: out of memory\n";
    runs.push_back(run);
  }
  const ReportInput in = report_input_from_runs(runs, "", "");
  EXPECT_EQ(in.title, (dir / "outputs").string());
  EXPECT_EQ(in.objective, "val/esr");
  EXPECT_EQ(in.mode, "min");
  ASSERT_EQ(in.jobs.size(), 3u);
  EXPECT_EQ(in.jobs[1].name, "run1");
  const std::vector<std::pair<std::string, std::string>> params1 = {{"optimizer.lr", "0.02"}};
  EXPECT_EQ(in.jobs[1].params, params1);  // max_epochs does not vary, run.dir is no parameter
  EXPECT_EQ(in.jobs[1].objective, 0.2);   // at the best checkpoint
  EXPECT_EQ(in.jobs[1].steps, 40);
  EXPECT_EQ(in.jobs[1].status, "done");
  EXPECT_EQ(in.jobs[2].status, "unfinished");
  EXPECT_EQ(in.jobs[2].error_tail, "starting\nerror: out of memory\n");

  const ReportInput last = report_input_from_runs(runs, "val/esr", "max");
  EXPECT_EQ(last.mode, "max");
  EXPECT_EQ(best_job(last), 1u);
  const std::string html = read(write_sweep_report(in, dir));
  EXPECT_NE(html.find("<div class='failure' data-job='run2'><h3>job run2: unfinished</h3>"), std::string::npos);
}

// Chromium renders the page; a copy with a probe script counts the elements with the page's own
// selectors and clicks the objective's header twice, recording the first row after each click.
TEST(SweepReport, RendersAndSortsInChromium) {
  if (wavetrain::testing::run_shell("command -v chromium").exit_code != 0) GTEST_SKIP() << "chromium is not installed";
  const fs::path dir = fresh_report_dir("chromium");
  const std::string html = read(write_sweep_report(hand_made_input(dir), dir));
  std::ofstream(dir / "probe.html")
      << html.substr(0, html.rfind("</body>"))
      << "<script>const b = document.body, q = s => document.querySelectorAll(s).length;"
         "b.dataset.pc = q('svg.parallel-coordinates polyline.job'); b.dataset.rows = q('table#jobs tbody tr');"
         "b.dataset.importance = q('#importance rect.bar'); b.dataset.failures = q('#failures .failure');"
         "const head = document.querySelector('#jobs th.objective'); head.click();"
         "b.dataset.first = document.querySelector('#jobs tbody tr').dataset.job; head.click();"
         "b.dataset.firstDown = document.querySelector('#jobs tbody tr').dataset.job;"
         "b.dataset.last = document.querySelector('#jobs tbody tr:last-child').dataset.job;</script></body></html>";
  const auto dom = wavetrain::testing::run_shell("timeout 60 chromium --headless --no-sandbox --disable-gpu --dump-dom file://" +
                                                 (dir / "probe.html").string());
  ASSERT_EQ(dom.exit_code, 0) << dom.err;
  auto attribute = [&](const std::string& name) {
    const std::string key = "data-" + name + "=\"";
    const size_t at = dom.out.find(key);
    return at == std::string::npos ? std::string("(missing)") : dom.out.substr(at + key.size(), dom.out.find('"', at + key.size()) - at - key.size());
  };
  EXPECT_EQ(attribute("pc"), "7");
  EXPECT_EQ(attribute("rows"), "9");
  EXPECT_EQ(attribute("importance"), "3");  // optimizer.name's 0 too, as a bar of height 0
  EXPECT_EQ(attribute("failures"), "2");    // the stopped and the failed job
  EXPECT_EQ(attribute("first"), "0");       // ascending: the lowest val/mse
  EXPECT_EQ(attribute("first-down"), "6");  // descending: the highest
  EXPECT_EQ(attribute("last"), "8");        // jobs without an objective stay last both ways
}

}  // namespace
}  // namespace wavetrain::sweep
