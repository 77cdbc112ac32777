// Multirun, the sweep's driver; see multirun.h. Here: the launcher and the running loop
// (launching, waiting, ASHA's promotions, what each job's end is reported as); the records the
// driver keeps (multirun.yaml, summary.json and summary.csv, the table) and resuming are in
// multirun_records.cpp.
#include "trainer/sweep/multirun.h"

#include <signal.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <ostream>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "trainer/config/config.h"
#include "trainer/config/node.h"
#include "trainer/sweep/multirun_internal.h"
#include "trainer/sweep/stop_protocol.h"
#include "trainer/sweep/run_directory.h"
#include "trainer/sweep/run_files.h"
#include "trainer/sweep/slurm_launcher.h"
#include "trainer/sweep/sweep_report.h"

namespace fs = std::filesystem;

namespace wavetrain {
namespace {

std::string indent(const std::string& text) {
  std::string out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out += "    " + line + "\n";
  return out;
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

}  // namespace

namespace sweep::detail {

Driver::Driver(const MultirunOptions& opt, std::ostream& out) : opt_(opt), out_(out), launcher_(make_launcher(opt)) {
  if (opt_.strategy == "asha") {
    if (opt_.objective.empty()) throw config::ConfigError("sweep.strategy=asha needs sweep.objective (the metric to compare trials by)");
    sweep::AshaOptions a = opt_.asha;
    a.mode = opt_.mode;
    asha_options_ = a;
  }
}

MultirunSummary Driver::run(std::vector<JobOutcome> jobs) {
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

std::vector<std::string> Driver::with_budget(const JobOutcome& j, int64_t budget) const {
  std::vector<std::string> o = j.overrides;
  o.push_back("++" + opt_.asha_resource + "=" + std::to_string(budget));
  return o;
}

void Driver::fill_asha(sweep::Asha& scheduler) {
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
void Driver::submit(const std::vector<sweep::JobLaunch>& launches) {
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
void Driver::report_started() {
  for (size_t job : launcher_->take_started()) out_ << "[" << job << "] started\n" << std::flush;
}

// A job of a resumed sweep that an earlier launcher started: if a process (an orphan of a killed
// launcher) still holds its directory, wait for it to end; if its run then has a result.json, it
// finished while no launcher watched, and its result is kept (ASHA's trials go on from their
// checkpoints instead, since result.json may be an earlier rung's).
void Driver::settle_earlier_attempt(JobOutcome& j, bool asha) {
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

std::optional<double> Driver::objective_of(const JobOutcome& j) const {
  if (opt_.objective.empty()) return std::nullopt;
  if (const auto v = objective_value(j, opt_.objective)) return v;
  return sweep::latest_metric(opt_.dir / std::to_string(j.index) / "metrics.csv", opt_.objective);
}

// The objectives of running jobs, as their metrics.csv has them now.
void Driver::refresh_running() {
  for (JobOutcome& j : summary_.jobs)
    if (j.status == "running" && !opt_.objective.empty())
      if (const auto v = sweep::latest_metric(opt_.dir / std::to_string(j.index) / "metrics.csv", opt_.objective)) j.objective = v;
}

void Driver::finish(JobOutcome& job, const sweep::JobEnd& end) {
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

}  // namespace sweep::detail

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

}  // namespace wavetrain
