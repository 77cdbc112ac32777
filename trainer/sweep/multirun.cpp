// Multirun, the sweep's driver; see multirun.h.
#include "trainer/sweep/multirun.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iomanip>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "trainer/config/config.h"
#include "trainer/config/node.h"
#include "trainer/config/yaml_io.h"
#include "trainer/serialization/atomic_file.h"
#include "trainer/sweep/stop_protocol.h"
#include "trainer/sweep/run_directory.h"
#include "trainer/sweep/run_files.h"
#include "trainer/sweep/slurm_launcher.h"
#include "trainer/sweep/sweep_report.h"

namespace fs = std::filesystem;

namespace wavetrain {
namespace {

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

std::string indent(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out += "    " + line + "\n";
  return out;
}

std::string format_seconds(double s) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << s << " s";
  return out.str();
}

nlohmann::json swept_params(const std::vector<JobOutcome>& jobs, size_t index) {
  std::map<std::string, std::set<std::string>> values;
  for (const JobOutcome& j : jobs)
    for (const std::string& o : j.overrides)
      if (const auto kv = sweep::override_key_value(o)) values[kv->first].insert(kv->second);
  nlohmann::json params = nlohmann::json::object();
  for (const std::string& o : jobs[index].overrides)
    if (const auto kv = sweep::override_key_value(o); kv && (jobs.size() == 1 || values[kv->first].size() > 1))
      params[kv->first] = kv->second;
  return params;
}

config::Node strings_node(const std::vector<std::string>& items) {
  config::Node n = config::Node::sequence();
  for (const std::string& s : items) n.push_back(config::Node::string(s));
  return n;
}

std::string launcher_name(const config::Node& launcher) {
  const config::Node* name = launcher.is_mapping() ? launcher.find("name") : nullptr;
  const std::string kind = name && name->kind() == config::Node::Kind::String ? name->string_value() : "local";
  if (kind != "local" && kind != "slurm")
    throw config::ConfigError("launcher.name='" + kind + "': expected local or slurm (launcher=local or launcher=slurm)");
  return kind;
}

std::unique_ptr<sweep::Launcher> make_launcher(const MultirunOptions& opt) {
  check_launcher(opt.launcher, opt.parallel);
  if (launcher_name(opt.launcher) == "local") return sweep::make_local_launcher(opt.dir, opt.command, opt.parallel);
  return sweep::make_slurm_launcher(opt.dir, opt.command, sweep::parse_slurm_options(opt.launcher));
}

class Driver {
 public:
  Driver(const MultirunOptions& opt, std::ostream& out) : opt_(opt), out_(out), launcher_(make_launcher(opt)) {
    if (opt_.strategy == "asha") {
      if (opt_.objective.empty()) throw config::ConfigError("sweep.strategy=asha needs sweep.objective (the metric to compare trials by)");
      sweep::AshaOptions a = opt_.asha;
      a.mode = opt_.mode;
      asha_options_ = a;
    }
  }

  MultirunSummary run(std::vector<JobOutcome> jobs) {
    summary_.jobs = std::move(jobs);
    fs::create_directories(opt_.dir / "logs");
    const bool asha = opt_.strategy == "asha";
    std::optional<sweep::Asha> scheduler;
    if (asha) scheduler.emplace(summary_.jobs.size(), *asha_options_);

    // What an earlier launcher left: finished jobs stay, jobs still on the cluster are watched again.
    std::vector<std::pair<size_t, nlohmann::json>> records;
    for (const JobOutcome& j : summary_.jobs)
      if (j.status == "running" && !j.launcher_record.is_null()) records.emplace_back(j.index, j.launcher_record);
    const std::vector<size_t> adopted_list = launcher_->adopt(records);
    const std::set<size_t> adopted(adopted_list.begin(), adopted_list.end());
    for (JobOutcome& j : summary_.jobs)
      if (!adopted.count(j.index) && (j.status == "running" || j.status == "pending") && summary_.stopped_by == 0)
        settle_earlier_attempt(j, asha);
    if (summary_.stopped_by != 0) {  // stopped while waiting: nothing was started
      save();
      return summary_;
    }
    std::vector<sweep::JobLaunch> relaunch;  // ASHA: runs cut short by the launcher's end, continued
    for (JobOutcome& j : summary_.jobs) {
      if (scheduler) {
        for (size_t k = 0; k < j.rung_objectives.size(); ++k) scheduler->report(j.index, k, j.rung_objectives[k]);
        if (j.status == "failed") scheduler->report(j.index, j.rung_objectives.size(), std::nullopt);
        if (j.status == "running" || adopted.count(j.index)) {
          const size_t rung = j.rung_objectives.size();
          scheduler->resume_running(j.index);
          running_rung_[j.index] = rung;
          if (!adopted.count(j.index))
            relaunch.push_back({j.index, with_budget(j, scheduler->budgets()[rung]), /*resume=*/true});
        }
      }
      if (adopted.count(j.index)) j.status = "running";
      else if (j.status == "running") j.status = "pending";
    }
    size_t todo = 0;
    for (const JobOutcome& j : summary_.jobs) todo += j.status == "pending" ? 1 : 0;
    const size_t done_before = summary_.jobs.size() - todo - adopted.size();
    out_ << (asha ? "ASHA over " : "Launching ") << (asha ? summary_.jobs.size() : todo)
         << (asha ? " trials" : (todo == 1 ? " job" : " jobs"))
         << (done_before > 0 ? " (" + std::to_string(done_before) + " already done)" : "")
         << (adopted.empty() ? "" : " (" + std::to_string(adopted.size()) + " still on the cluster, watched again)")
         << ", " << std::max(1, opt_.parallel) << " at a time, " << launcher_->name() << " launcher, in " << opt_.dir.string()
         << "\n";
    if (scheduler) {
      out_ << "  rungs (" << opt_.asha_resource << "):";
      for (int64_t b : scheduler->budgets()) out_ << " " << b;
      out_ << "\n";
    }
    save();

    if (scheduler) {
      if (!relaunch.empty()) submit(relaunch);
      fill_asha(*scheduler);
    } else {
      std::vector<sweep::JobLaunch> launches;
      for (const JobOutcome& j : summary_.jobs)
        if (j.status == "pending") launches.push_back({j.index, j.overrides, j.continue_run});
      submit(launches);
    }
    auto next_refresh = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (launcher_->active() > 0) {
      if (summary_.stopped_by == 0 && opt_.stop_requested) {
        if (const int signal = opt_.stop_requested(); signal != 0) {
          summary_.stopped_by = signal;
          std::vector<size_t> dropped;
          const bool wait_for_jobs = launcher_->stop(signal, dropped);
          for (size_t d : dropped) summary_.jobs.at(d).status = "pending";
          out_ << "stop requested (" << (signal == SIGTERM ? "SIGTERM" : signal == SIGUSR1 ? "SIGUSR1" : "signal " + std::to_string(signal)) << "): "
               << (wait_for_jobs ? "the running jobs save their checkpoints and stop"
                                 : "the running jobs go on without this launcher")
               << "; `wavetrain train -m --resume " << opt_.dir.string() << "` continues the sweep\n" << std::flush;
          save();
          if (!wait_for_jobs) break;
        }
      }
      const std::vector<sweep::JobEnd> ended = launcher_->wait(1.0);  // a second: stop requests are looked at between waits
      for (const sweep::JobEnd& e : ended) {
        JobOutcome& j = summary_.jobs.at(e.job);
        if (summary_.stopped_by != 0 && e.exit_code == kExitInterrupted) {
          // Stopped with the sweep: to be continued from its checkpoint, as a job that was running.
          j.seconds += e.seconds;
          j.status = "running";
          out_ << "[" << j.index << "] stopped with the sweep, its checkpoint saved\n" << std::flush;
          continue;
        }
        finish(j, e);
        if (scheduler) {
          const size_t rung = running_rung_[j.index];
          std::optional<double> objective = e.exit_code == 0 ? j.objective : std::nullopt;
          // A run that another limit ended short of the rung's budget (trainer.max_epochs, max_time,
          // early stopping) did not train what the rung compares.
          const int64_t budget = scheduler->budgets()[rung];
          const int64_t reached = opt_.asha_resource == "trainer.max_epochs" ? j.metrics.value("epochs", int64_t{0}) : j.steps;
          if (e.exit_code == 0 && reached < budget) {
            objective.reset();
            j.note = "trained to " + std::to_string(reached) + " of the rung's " + opt_.asha_resource + "=" + std::to_string(budget) +
                     ": another limit ended it first (raise trainer.max_epochs or max_time)";
          } else if (e.exit_code == 0 && (!objective || std::isnan(*objective))) {
            j.note = "reported no " + opt_.objective;
          }
          scheduler->report(j.index, rung, objective);
          j.rung_objectives = scheduler->objectives(j.index);
          j.rung = scheduler->rung(j.index);
          if (scheduler->status(j.index) == "failed" && j.status == "done") {
            j.status = "failed";
            out_ << "[" << j.index << "] " << j.note << ": it is not promoted\n";
          }
        }
      }
      report_started();
      if (scheduler && summary_.stopped_by == 0) fill_asha(*scheduler);
      if (ended.empty() && std::chrono::steady_clock::now() < next_refresh) continue;
      next_refresh = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      if (ended.empty()) refresh_running();
      save();
    }
    if (summary_.stopped_by != 0) {
      save();
      return summary_;
    }
    if (scheduler)
      for (JobOutcome& j : summary_.jobs) {
        const std::string s = scheduler->status(j.index);
        if (s == "stopped" || (s == "done" && j.status == "done")) j.status = s;
      }
    pick_best();
    save();
    print_table();
    if (opt_.write_report) {
      try {
        const fs::path report = sweep::write_sweep_report(sweep::report_input_from_sweep(opt_.dir), opt_.dir);
        out_ << "report: " << report.string() << "\n";
      } catch (const std::exception& e) {
        out_ << "warning: the sweep report could not be written: " << e.what() << "\n";
      }
    }
    return summary_;
  }

 private:
  std::vector<std::string> with_budget(const JobOutcome& j, int64_t budget) const {
    std::vector<std::string> o = j.overrides;
    o.push_back("++" + opt_.asha_resource + "=" + std::to_string(budget));
    return o;
  }

  void fill_asha(sweep::Asha& scheduler) {
    while (static_cast<int>(launcher_->active()) < std::max(1, opt_.parallel)) {
      const std::optional<sweep::Asha::Launch> l = scheduler.next();
      if (!l) break;
      JobOutcome& j = summary_.jobs[l->trial];
      running_rung_[l->trial] = l->rung;
      if (l->resume)
        out_ << "[" << j.index << "] promoted to rung " << l->rung << " (" << opt_.asha_resource << "=" << l->budget << ")\n";
      submit({{l->trial, with_budget(j, l->budget), l->resume}});
    }
  }

  // Each job's line says what happened to it: started (its process runs), queued (it waits for a
  // free slot: its "started" line comes later), or submitted (to a cluster that starts it when it will).
  void submit(const std::vector<sweep::JobLaunch>& launches) {
    if (launches.empty()) return;
    launcher_->submit(launches);
    const std::vector<size_t> started = launcher_->take_started();
    for (const sweep::JobLaunch& l : launches) {
      JobOutcome& j = summary_.jobs[l.job];
      j.status = "running";
      j.launcher_record = launcher_->job_record(l.job);
      const char* what = !launcher_->reports_starts()                                            ? "submitted"
                         : std::find(started.begin(), started.end(), l.job) != started.end() ? "started"
                                                                                                : "queued";
      out_ << "[" << j.index << "] " << what << ": " << join(l.overrides, " ") << "\n" << std::flush;
    }
    for (size_t job : started)  // earlier queued jobs that this submission's wait let start
      if (std::none_of(launches.begin(), launches.end(), [job](const sweep::JobLaunch& l) { return l.job == job; }))
        out_ << "[" << job << "] started\n" << std::flush;
    save();
  }

  // Queued jobs that a free slot has started since.
  void report_started() {
    for (size_t job : launcher_->take_started()) out_ << "[" << job << "] started\n" << std::flush;
  }

  // A job of a resumed sweep that an earlier launcher started: if a process (an orphan of a killed
  // launcher) still holds its directory, wait for it to end; if its run then has a result.json, it
  // finished while no launcher watched, and its result is kept (ASHA's trials go on from their
  // checkpoints instead, since result.json may be an earlier rung's).
  void settle_earlier_attempt(JobOutcome& j, bool asha) {
    const fs::path run_dir = opt_.dir / std::to_string(j.index);
    bool told = false;
    while (const std::optional<long> holder = run_directory_holder(run_dir)) {
      if (opt_.stop_requested) {
        if (const int signal = opt_.stop_requested(); signal != 0) {
          summary_.stopped_by = signal;
          out_ << "stop requested while waiting for job " << j.index << ": nothing was started\n" << std::flush;
          return;
        }
      }
      if (!told)
        out_ << "[" << j.index << "] is still running in " << run_dir.string() << " (pid " << *holder
             << ", started by an earlier launcher): waiting for it to end\n" << std::flush;
      told = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (asha || !fs::is_regular_file(run_dir / "result.json")) return;
    j.metrics = sweep::read_result_metrics(run_dir / "result.json");
    if (j.metrics.empty()) return;  // cut short while being written: the run goes on from its checkpoint
    j.status = "done";
    j.exit_code = 0;
    j.error.clear();
    j.steps = j.metrics.value("global_step", int64_t{0});
    j.seconds = j.metrics.value("seconds", 0.0);
    j.objective = objective_of(j);
    out_ << "[" << j.index << "] finished while no launcher watched it: its result.json is kept\n" << std::flush;
  }

  std::optional<double> objective_of(const JobOutcome& j) const {
    if (opt_.objective.empty()) return std::nullopt;
    if (const auto v = objective_value(j, opt_.objective)) return v;
    return sweep::latest_metric(opt_.dir / std::to_string(j.index) / "metrics.csv", opt_.objective);
  }

  // The objectives of running jobs, as their metrics.csv has them now.
  void refresh_running() {
    for (JobOutcome& j : summary_.jobs)
      if (j.status == "running" && !opt_.objective.empty())
        if (const auto v = sweep::latest_metric(opt_.dir / std::to_string(j.index) / "metrics.csv", opt_.objective)) j.objective = v;
  }

  void finish(JobOutcome& job, const sweep::JobEnd& end) {
    job.seconds += end.seconds;  // ASHA's rungs add up
    job.exit_code = end.exit_code;
    job.note = end.note;
    job.launcher_record = launcher_->job_record(job.index);
    job.metrics = sweep::read_result_metrics(opt_.dir / std::to_string(job.index) / "result.json");
    job.steps = job.metrics.value("global_step", int64_t{0});
    job.objective = objective_of(job);
    const fs::path log = opt_.dir / "logs" / (std::to_string(job.index) + ".log");
    if (end.exit_code == 0) {
      job.status = "done";
      job.error.clear();
      out_ << "[" << job.index << "] done in " << format_seconds(end.seconds)
           << (job.objective ? ", " + opt_.objective + " " + config::format_float(*job.objective) : "")
           << (end.note.empty() ? "" : " (" + end.note + ")") << "\n" << std::flush;
      return;
    }
    job.status = "failed";
    job.error = sweep::log_tail(log, opt_.log_tail_lines);
    if (end.exit_code == kExitInterrupted) {
      // Not a failure: stopped (scancel, a stop signal) with its checkpoint, to be continued. The
      // summary says so too (it said "failed" below a line that said STOPPED).
      job.status = "interrupted";
      out_ << "[" << job.index << "] STOPPED by a signal after " << format_seconds(end.seconds)
           << ", its checkpoint saved (exit 75): `wavetrain train -m --resume " << opt_.dir.string() << "` continues it\n"
           << std::flush;
      return;
    }
    out_ << "[" << job.index << "] FAILED with exit code " << end.exit_code << " after " << format_seconds(end.seconds)
         << (end.note.empty() ? "" : " (" + end.note + ")") << ": " << join(job.overrides, " ") << "\n  last lines of "
         << log.string() << ":\n" << indent(job.error) << std::flush;
  }

  void pick_best() {
    summary_.failed = 0;
    summary_.best.reset();
    for (const JobOutcome& j : summary_.jobs)
      if (j.status == "failed" || j.status == "interrupted") ++summary_.failed;  // the sweep is not complete
    if (opt_.objective.empty()) return;
    for (const JobOutcome& j : summary_.jobs) {
      if (j.status != "done" || !j.objective || std::isnan(*j.objective)) continue;
      const std::optional<double> best = summary_.best ? summary_.jobs[*summary_.best].objective : std::nullopt;
      if (!best || (opt_.mode == "max" ? *j.objective > *best : *j.objective < *best)) summary_.best = j.index;
    }
  }

  void save() const {
    nlohmann::json j;
    j["strategy"] = opt_.strategy;
    j["launcher"] = launcher_->name();
    j["jobs"] = nlohmann::json::array();
    for (const JobOutcome& job : summary_.jobs) {
      nlohmann::json r = {{"job", job.index}, {"overrides", job.overrides}, {"params", swept_params(summary_.jobs, job.index)},
                          {"status", job.status}, {"exit_code", job.exit_code}, {"seconds", job.seconds}, {"steps", job.steps},
                          {"objective", job.objective ? nlohmann::json(*job.objective) : nlohmann::json(nullptr)},
                          {"metrics", job.metrics}};
      if (opt_.strategy == "asha") {
        r["rung"] = job.rung;
        r["rung_objectives"] = job.rung_objectives;
      }
      if (!job.note.empty()) r["note"] = job.note;
      if (!job.error.empty()) r["error"] = job.error;
      if (!job.launcher_record.is_null()) r["launcher"] = job.launcher_record;
      j["jobs"].push_back(r);
    }
    j["failed"] = summary_.failed;
    if (!opt_.objective.empty()) {
      j["objective"] = opt_.objective;
      j["mode"] = opt_.mode;
      j["best_job"] = summary_.best ? nlohmann::json(*summary_.best) : nlohmann::json(nullptr);
    }
    write_file_atomic((opt_.dir / "summary.json").string(), j.dump(2) + "\n");

    // summary.csv: the fixed columns, then every metric of result.json that is not one of them.
    const std::vector<std::string> fixed = {"job", "overrides", "status", "exit_code", "seconds", "steps"};
    std::vector<std::string> metric_names;
    for (const JobOutcome& job : summary_.jobs)
      for (auto it = job.metrics.begin(); it != job.metrics.end(); ++it)
        if (std::find(metric_names.begin(), metric_names.end(), it.key()) == metric_names.end() &&
            std::find(fixed.begin(), fixed.end(), it.key()) == fixed.end() && it.key() != "global_step")
          metric_names.push_back(it.key());
    auto csv_field = [](const std::string& s) {
      if (s.find_first_of(",\"\n") == std::string::npos) return s;
      std::string q = "\"";
      for (char c : s) q += (c == '"' ? std::string("\"\"") : std::string(1, c));
      return q + "\"";
    };
    std::string csv = join(fixed, ",");
    for (const std::string& m : metric_names) csv += "," + csv_field(m);
    csv += "\n";
    for (const JobOutcome& job : summary_.jobs) {
      std::ostringstream row;
      row << job.index << "," << csv_field(join(job.overrides, " ")) << "," << job.status << "," << job.exit_code << ","
          << std::setprecision(4) << job.seconds << "," << job.steps;
      for (const std::string& m : metric_names) row << "," << (job.metrics.contains(m) ? job.metrics[m].dump() : "");
      csv += row.str() + "\n";
    }
    write_file_atomic((opt_.dir / "summary.csv").string(), csv);
  }

  void print_table() const {
    const bool asha = opt_.strategy == "asha";
    out_ << "\n" << std::left << std::setw(5) << "job" << std::setw(13) << "status" << std::setw(10) << "duration";
    if (asha) out_ << std::setw(6) << "rung";
    if (!opt_.objective.empty()) out_ << std::setw(14) << opt_.objective;
    out_ << "overrides\n";
    std::map<std::string, size_t> counts;
    for (const JobOutcome& j : summary_.jobs) {
      ++counts[j.status];
      out_ << std::setw(5) << j.index << std::setw(13) << j.status << std::setw(10) << format_seconds(j.seconds);
      if (asha) out_ << std::setw(6) << j.rung;
      if (!opt_.objective.empty()) {
        std::ostringstream s;
        if (j.objective) s << std::setprecision(6) << *j.objective;
        out_ << std::setw(14) << (j.objective ? s.str() : "-");
      }
      out_ << join(j.overrides, " ") << "\n";
    }
    out_ << "\n";
    bool first = true;
    for (const std::string s : {"done", "stopped", "interrupted", "failed", "pending", "running"})
      if (counts[s] > 0 || s == "done" || s == "failed") {
        out_ << (first ? "" : ", ") << counts[s] << " " << s;
        first = false;
      }
    int64_t steps = 0;
    for (const JobOutcome& j : summary_.jobs) steps += j.steps;
    out_ << "; " << steps << " training steps in all; summary in " << (opt_.dir / "summary.csv").string() << "\n";
    if (summary_.best)
      out_ << "best (" << opt_.mode << " " << opt_.objective << "): job " << *summary_.best << ": "
           << join(summary_.jobs[*summary_.best].overrides, " ") << "\n";
  }

  const MultirunOptions& opt_;
  std::ostream& out_;
  std::unique_ptr<sweep::Launcher> launcher_;
  std::optional<sweep::AshaOptions> asha_options_;
  std::map<size_t, size_t> running_rung_;  // ASHA: the rung each running trial is on
  MultirunSummary summary_;
};

}  // namespace

int check_launcher(const config::Node& launcher, int local_parallel) {
  if (launcher_name(launcher) == "local") {
    for (const auto& [key, value] : launcher.is_mapping() ? launcher.entries() : std::vector<config::Node::Entry>{})
      if (key != "name")
        throw config::ConfigError("launcher." + key + " (" + value.origin().str() +
                                  "): the local launcher takes no options (-j N sets how many jobs run at once); "
                                  "Slurm's options need launcher=slurm");
    return local_parallel;
  }
  const sweep::SlurmOptions options = sweep::parse_slurm_options(launcher);
  sweep::check_slurm_client();
  return static_cast<int>(options.array_parallelism);
}

std::optional<double> objective_value(const JobOutcome& job, const std::string& objective) {
  return sweep::objective_from(job.metrics, objective);
}

MultirunSummary run_multirun(const std::vector<std::vector<std::string>>& trials, const MultirunOptions& options,
                             std::ostream& out) {
  if (options.strategy != "grid" && options.strategy != "random" && options.strategy != "asha")
    throw config::ConfigError("sweep.strategy='" + options.strategy + "': expected grid, random or asha");
  Driver driver(options, out);  // checks the launcher and ASHA's options before anything is written
  config::Node record = config::Node::mapping();
  record.set("command", strings_node(options.command));
  config::Node list = config::Node::sequence();
  std::vector<JobOutcome> outcomes;
  for (size_t i = 0; i < trials.size(); ++i) {
    list.push_back(strings_node(trials[i]));
    JobOutcome j;
    j.index = i;
    j.overrides = trials[i];
    outcomes.push_back(j);
  }
  record.set("jobs", list);
  record.set("objective", config::Node::string(options.objective));
  record.set("mode", config::Node::string(options.mode));
  record.set("strategy", config::Node::string(options.strategy));
  record.set("parallel", config::Node::integer(options.parallel));
  if (options.strategy == "asha") {
    config::Node a = config::Node::mapping();
    a.set("resource", config::Node::string(options.asha_resource));
    a.set("min_resource", config::Node::integer(options.asha.min_resource));
    a.set("max_resource", config::Node::integer(options.asha.max_resource));
    a.set("eta", config::Node::floating(options.asha.eta));
    record.set("asha", a);
  }
  record.set("launcher", options.launcher.is_null() ? config::Node::mapping() : options.launcher);
  write_file_atomic((options.dir / "multirun.yaml").string(), config::to_yaml(record));
  return driver.run(std::move(outcomes));
}

MultirunSummary resume_multirun(const MultirunOptions& options, std::ostream& out) {
  const fs::path yaml = options.dir / "multirun.yaml";
  if (!fs::is_regular_file(yaml))
    throw std::runtime_error("Cannot resume '" + options.dir.string() + "': it holds no multirun.yaml");
  const config::Node record = config::load_yaml_file(yaml.string());
  MultirunOptions opt = options;
  auto text = [&](const char* key, const std::string& fallback) {
    const config::Node* n = record.find(key);
    return n && n->kind() == config::Node::Kind::String ? n->string_value() : fallback;
  };
  if (opt.command.empty() && record.find("command"))
    for (const config::Node& c : record.find("command")->items()) opt.command.push_back(c.string_value());
  if (opt.objective.empty()) opt.objective = text("objective", "");
  opt.mode = text("mode", opt.mode);
  opt.strategy = text("strategy", "grid");
  if (options.parallel <= 1 && record.find("parallel")) opt.parallel = static_cast<int>(record.find("parallel")->int_value());
  if (const config::Node* a = record.find("asha")) {
    auto field = [&](const char* key) -> const config::Node& {
      const config::Node* n = a->is_mapping() ? a->find(key) : nullptr;
      if (!n) throw std::runtime_error("Cannot resume '" + opt.dir.string() + "': " + yaml.string() + " has no asha." + key);
      return *n;
    };
    opt.asha_resource = field("resource").string_value();
    opt.asha.min_resource = config::to_int(field("min_resource"), "asha.min_resource");
    opt.asha.max_resource = config::to_int(field("max_resource"), "asha.max_resource");
    opt.asha.eta = config::to_float(field("eta"), "asha.eta");
  }
  if (const config::Node* l = record.find("launcher")) opt.launcher = *l;

  std::vector<JobOutcome> outcomes;
  const config::Node* jobs = record.find("jobs");
  for (size_t i = 0; jobs && i < jobs->items().size(); ++i) {
    JobOutcome j;
    j.index = i;
    for (const config::Node& o : jobs->items()[i].items()) j.overrides.push_back(o.string_value());
    outcomes.push_back(j);
  }
  // Keep what finished (and, for ASHA, every rung a trial finished); jobs that were running may
  // still be on a cluster; everything else runs again.
  std::ifstream in(opt.dir / "summary.json");
  if (in) {
    const nlohmann::json s = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (s.is_object() && s.contains("jobs") && s["jobs"].is_array())
      for (const nlohmann::json& j : s["jobs"]) try {
        const size_t i = j.value("job", outcomes.size());
        if (i >= outcomes.size()) continue;
        JobOutcome& o = outcomes[i];
        const std::string status = j.value("status", "");
        o.launcher_record = j.value("launcher", nlohmann::json(nullptr));
        if (j.contains("rung_objectives") && j["rung_objectives"].is_array())
          o.rung_objectives = j["rung_objectives"].get<std::vector<double>>();
        o.rung = j.value("rung", -1);
        const bool keep = status == "done" || status == "stopped" || (status == "failed" && opt.strategy == "asha");
        if (keep) {
          o.status = status;
          o.seconds = j.value("seconds", 0.0);
          o.steps = j.value("steps", int64_t{0});
          o.metrics = j.value("metrics", nlohmann::json::object());
          if (j.contains("objective") && j["objective"].is_number()) o.objective = j["objective"].get<double>();
        } else if (status == "running") {
          o.status = "running";  // on a cluster it may still be; else it goes on from its checkpoint
          o.continue_run = true;
        } else if (status == "pending") {
          o.continue_run = true;  // a queued job that a stop dropped may have a checkpoint from before
        } else if (status == "interrupted" || (status == "failed" && j.value("exit_code", 0) == kExitInterrupted)) {
          o.continue_run = true;  // stopped by a signal with its checkpoint saved: it goes on from there
        }
      } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error("Cannot resume '" + opt.dir.string() + "': " + (opt.dir / "summary.json").string() +
                                 " has a job record that is not what a multirun writes (" + e.what() + ")");
      }
  }
  // Failed grid and random jobs run again; an ASHA trial that failed stays out of the race.
  return Driver(opt, out).run(std::move(outcomes));
}

}  // namespace wavetrain
