// Multirun; see multirun.h.
#include "trainer/multirun.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <cmath>
#include <deque>
#include <fstream>
#include <iomanip>
#include <map>
#include <ostream>
#include <sstream>
#include <stdexcept>

#include "trainer/atomic_file.h"
#include "trainer/config/node.h"
#include "trainer/config/yaml_io.h"

extern char** environ;

namespace fs = std::filesystem;

namespace wavetrain {
namespace {

using Clock = std::chrono::steady_clock;

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? sep : "") + parts[i];
  return out;
}

void flatten(const nlohmann::json& j, const std::string& prefix, nlohmann::json& out) {
  if (j.is_number()) {
    out[prefix] = j;
  } else if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) flatten(it.value(), prefix.empty() ? it.key() : prefix + "." + it.key(), out);
  }
}

nlohmann::json read_metrics(const fs::path& result_json) {
  nlohmann::json flat = nlohmann::json::object();
  std::ifstream in(result_json);
  if (!in) return flat;
  try {
    flatten(nlohmann::json::parse(in), "", flat);
  } catch (const nlohmann::json::exception&) {
    // A job that died while writing it has no usable metrics; its status says what happened.
  }
  return flat;
}

std::string tail(const fs::path& file, int lines) {
  std::ifstream in(file);
  std::deque<std::string> last;
  for (std::string line; std::getline(in, line);) {
    last.push_back(line);
    if (static_cast<int>(last.size()) > lines) last.pop_front();
  }
  std::string out;
  for (const std::string& l : last) out += "    " + l + "\n";
  return out;
}

nlohmann::json to_json(const JobOutcome& j) {
  return {{"job", j.index}, {"overrides", j.overrides}, {"status", j.status}, {"exit_code", j.exit_code},
          {"seconds", j.seconds}, {"metrics", j.metrics}};
}

std::string format_seconds(double s) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << s << " s";
  return out.str();
}

class Launcher {
 public:
  Launcher(const MultirunOptions& opt, std::ostream& out) : opt_(opt), out_(out) {}

  MultirunSummary run(std::vector<JobOutcome> jobs) {
    summary_.jobs = std::move(jobs);
    std::vector<size_t> todo;
    for (const JobOutcome& j : summary_.jobs)
      if (j.status != "done") todo.push_back(j.index);
    fs::create_directories(opt_.dir / "logs");
    out_ << "Launching " << todo.size() << " job" << (todo.size() == 1 ? "" : "s")
         << (todo.size() < summary_.jobs.size() ? " (" + std::to_string(summary_.jobs.size() - todo.size()) + " already done)" : "")
         << ", " << std::max(1, opt_.parallel) << " at a time, in " << opt_.dir.string() << "\n";
    save();

    std::map<pid_t, std::pair<size_t, Clock::time_point>> running;
    size_t next = 0;
    while (next < todo.size() || !running.empty()) {
      while (next < todo.size() && static_cast<int>(running.size()) < std::max(1, opt_.parallel)) {
        const size_t index = todo[next++];
        running[start(summary_.jobs[index])] = {index, Clock::now()};
      }
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, 0);
      if (pid < 0) {
        if (errno == EINTR) continue;
        throw std::runtime_error(std::string("multirun: waitpid failed: ") + std::strerror(errno));
      }
      auto it = running.find(pid);
      if (it == running.end()) continue;
      finish(summary_.jobs[it->second.first], status,
             std::chrono::duration<double>(Clock::now() - it->second.second).count());
      running.erase(it);
      save();
    }
    pick_best();
    save();
    print_table();
    return summary_;
  }

 private:
  pid_t start(JobOutcome& job) {
    const fs::path job_dir = opt_.dir / std::to_string(job.index);
    // A resumed job runs again in a fresh directory; the failed attempt's files are kept beside it.
    if (fs::exists(job_dir)) {
      int attempt = 1;
      while (fs::exists(job_dir.string() + ".attempt-" + std::to_string(attempt))) ++attempt;
      fs::rename(job_dir, job_dir.string() + ".attempt-" + std::to_string(attempt));
    }
    std::vector<std::string> args = opt_.command;
    args.insert(args.end(), job.overrides.begin(), job.overrides.end());
    args.push_back("++run.dir=" + job_dir.string());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);

    const std::string log = (opt_.dir / "logs" / (std::to_string(job.index) + ".log")).string();
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    if (rc != 0) throw std::runtime_error("multirun: cannot start '" + args[0] + "': " + std::strerror(rc));
    out_ << "[" << job.index << "] started: " << join(job.overrides, " ") << "\n" << std::flush;
    job.status = "running";
    return pid;
  }

  void finish(JobOutcome& job, int status, double seconds) {
    job.seconds = seconds;
    job.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    job.metrics = read_metrics(opt_.dir / std::to_string(job.index) / "result.json");
    if (job.exit_code == 0) {
      job.status = "done";
      out_ << "[" << job.index << "] done in " << format_seconds(seconds) << "\n" << std::flush;
      return;
    }
    job.status = "failed";
    ++summary_.failed;
    const fs::path log = opt_.dir / "logs" / (std::to_string(job.index) + ".log");
    out_ << "[" << job.index << "] FAILED with exit code " << job.exit_code << " after " << format_seconds(seconds)
         << ": " << join(job.overrides, " ") << "\n  last lines of " << log.string() << ":\n"
         << tail(log, opt_.log_tail_lines) << std::flush;
  }

  void pick_best() {
    summary_.failed = 0;
    for (const JobOutcome& j : summary_.jobs)
      if (j.status == "failed") ++summary_.failed;
    if (opt_.objective.empty()) return;
    for (const JobOutcome& j : summary_.jobs) {
      if (j.status != "done") continue;
      const auto v = objective_value(j, opt_.objective);
      if (!v || std::isnan(*v)) continue;
      const auto best = summary_.best ? objective_value(summary_.jobs[*summary_.best], opt_.objective) : std::nullopt;
      if (!best || (opt_.mode == "max" ? *v > *best : *v < *best)) summary_.best = j.index;
    }
  }

  void save() const {
    nlohmann::json j;
    j["jobs"] = nlohmann::json::array();
    for (const JobOutcome& job : summary_.jobs) j["jobs"].push_back(to_json(job));
    j["failed"] = summary_.failed;
    if (!opt_.objective.empty()) {
      j["objective"] = opt_.objective;
      j["mode"] = opt_.mode;
      j["best_job"] = summary_.best ? nlohmann::json(*summary_.best) : nlohmann::json(nullptr);
    }
    write_file_atomic((opt_.dir / "summary.json").string(), j.dump(2) + "\n");

    std::vector<std::string> metric_names;
    for (const JobOutcome& job : summary_.jobs)
      for (auto it = job.metrics.begin(); it != job.metrics.end(); ++it)
        if (std::find(metric_names.begin(), metric_names.end(), it.key()) == metric_names.end())
          metric_names.push_back(it.key());
    auto csv_field = [](const std::string& s) {
      if (s.find_first_of(",\"\n") == std::string::npos) return s;
      std::string q = "\"";
      for (char c : s) q += (c == '"' ? std::string("\"\"") : std::string(1, c));
      return q + "\"";
    };
    std::string csv = "job,overrides,status,exit_code,seconds";
    for (const std::string& m : metric_names) csv += "," + csv_field(m);
    csv += "\n";
    for (const JobOutcome& job : summary_.jobs) {
      std::ostringstream row;
      row << job.index << "," << csv_field(join(job.overrides, " ")) << "," << job.status << "," << job.exit_code << ","
          << std::setprecision(4) << job.seconds;
      for (const std::string& m : metric_names)
        row << "," << (job.metrics.contains(m) ? job.metrics[m].dump() : "");
      csv += row.str() + "\n";
    }
    write_file_atomic((opt_.dir / "summary.csv").string(), csv);
  }

  void print_table() const {
    out_ << "\n" << std::left << std::setw(5) << "job" << std::setw(8) << "status" << std::setw(10) << "duration";
    if (!opt_.objective.empty()) out_ << std::setw(14) << opt_.objective;
    out_ << "overrides\n";
    for (const JobOutcome& j : summary_.jobs) {
      out_ << std::setw(5) << j.index << std::setw(8) << j.status << std::setw(10) << format_seconds(j.seconds);
      if (!opt_.objective.empty()) {
        const auto v = objective_value(j, opt_.objective);
        std::ostringstream s;
        if (v) s << std::setprecision(6) << *v;
        out_ << std::setw(14) << (v ? s.str() : "-");
      }
      out_ << join(j.overrides, " ") << "\n";
    }
    out_ << "\n" << summary_.jobs.size() - summary_.failed << " done, " << summary_.failed << " failed; summary in "
         << (opt_.dir / "summary.csv").string() << "\n";
    if (summary_.best)
      out_ << "best (" << opt_.mode << " " << opt_.objective << "): job " << *summary_.best << ": "
           << join(summary_.jobs[*summary_.best].overrides, " ") << "\n";
  }

  const MultirunOptions& opt_;
  std::ostream& out_;
  MultirunSummary summary_;
};

}  // namespace

std::optional<double> objective_value(const JobOutcome& job, const std::string& objective) {
  for (const std::string& key : {"best." + objective, "last." + objective, objective})
    if (job.metrics.contains(key) && job.metrics[key].is_number()) return job.metrics[key].get<double>();
  return std::nullopt;
}

MultirunSummary run_multirun(const std::vector<std::vector<std::string>>& jobs, const MultirunOptions& options,
                             std::ostream& out) {
  config::Node record = config::Node::mapping();
  config::Node command = config::Node::sequence();
  for (const std::string& c : options.command) command.push_back(config::Node::string(c));
  record.set("command", command);
  config::Node list = config::Node::sequence();
  std::vector<JobOutcome> outcomes;
  for (size_t i = 0; i < jobs.size(); ++i) {
    config::Node job = config::Node::sequence();
    for (const std::string& o : jobs[i]) job.push_back(config::Node::string(o));
    list.push_back(job);
    outcomes.push_back(JobOutcome{i, jobs[i], "pending", 0, 0, nlohmann::json::object()});
  }
  record.set("jobs", list);
  record.set("objective", config::Node::string(options.objective));
  record.set("mode", config::Node::string(options.mode));
  write_file_atomic((options.dir / "multirun.yaml").string(), config::to_yaml(record));
  return Launcher(options, out).run(std::move(outcomes));
}

MultirunSummary resume_multirun(const MultirunOptions& options, std::ostream& out) {
  const fs::path yaml = options.dir / "multirun.yaml";
  if (!fs::is_regular_file(yaml))
    throw std::runtime_error("Cannot resume '" + options.dir.string() + "': it holds no multirun.yaml");
  const config::Node record = config::load_yaml_file(yaml.string());
  MultirunOptions opt = options;
  if (opt.command.empty())
    for (const config::Node& c : record.find("command")->items()) opt.command.push_back(c.string_value());
  if (opt.objective.empty() && record.find("objective")) opt.objective = record.find("objective")->string_value();
  if (record.find("mode")) opt.mode = record.find("mode")->string_value();

  std::vector<JobOutcome> outcomes;
  const config::Node* jobs = record.find("jobs");
  for (size_t i = 0; jobs && i < jobs->items().size(); ++i) {
    JobOutcome j;
    j.index = i;
    for (const config::Node& o : jobs->items()[i].items()) j.overrides.push_back(o.string_value());
    outcomes.push_back(j);
  }
  // Keep what finished; everything else (failed, pending, or running when interrupted) runs again.
  std::ifstream in(opt.dir / "summary.json");
  if (in) {
    const nlohmann::json s = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (s.is_object() && s.contains("jobs"))
      for (const nlohmann::json& j : s["jobs"]) {
        const size_t i = j.value("job", outcomes.size());
        if (i < outcomes.size() && j.value("status", "") == "done") {
          outcomes[i].status = "done";
          outcomes[i].seconds = j.value("seconds", 0.0);
          outcomes[i].metrics = j.value("metrics", nlohmann::json::object());
        }
      }
  }
  return Launcher(opt, out).run(std::move(outcomes));
}

}  // namespace wavetrain
