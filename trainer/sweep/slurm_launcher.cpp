// The Slurm launcher and the job side of it; see slurm_launcher.h.
#include "trainer/sweep/slurm_launcher.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <utility>

#include "trainer/config/config.h"
#include "trainer/serialization/atomic_file.h"
#include "trainer/sweep/stop_protocol.h"
#include "trainer/sweep/run_program.h"

extern char** environ;

namespace fs = std::filesystem;

namespace wavetrain::sweep {
namespace {

using config::ConfigError;
using config::Node;
using Clock = std::chrono::steady_clock;

const std::vector<std::string> kSlurmKeys = {
    "name", "partition", "qos", "account", "time", "cpus_per_task", "gpus_per_node", "tasks_per_node", "nodes", "mem",
    "array_parallelism", "signal_delay_s", "max_requeue", "additional", "setup", "poll_interval_s"};

std::string text_value(const Node& v, const std::string& key) {
  if (v.is_null()) return "";
  if (!v.is_scalar() || v.is_missing()) throw ConfigError("launcher." + key + " must be a single value, found " + v.to_display());
  return v.kind() == Node::Kind::String ? v.string_value() : v.to_display();
}

int64_t count_value(const Node& v, const std::string& key, int64_t minimum) {
  const int64_t n = config::to_int(v, "launcher." + key);
  if (n < minimum) throw ConfigError("launcher." + key + " must be >= " + std::to_string(minimum) + ", got " + std::to_string(n));
  return n;
}

std::vector<std::string> lines_value(const Node& v, const std::string& key) {
  std::vector<std::string> out;
  if (v.is_null()) return out;
  if (!v.is_sequence()) throw ConfigError("launcher." + key + " must be a list of strings, found " + v.to_display());
  for (const Node& item : v.items()) {
    const std::string s = text_value(item, key);
    if (s.find('\n') != std::string::npos) throw ConfigError("launcher." + key + ": an entry holds a line break");
    out.push_back(s);
  }
  return out;
}

nlohmann::json read_json(const fs::path& p) {
  std::ifstream in(p);
  if (!in) return nullptr;
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// A shell word: single quotes, with any single quote in it closed, escaped and reopened.
std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

class SlurmLauncher : public Launcher {
 public:
  SlurmLauncher(fs::path dir, std::vector<std::string> command, SlurmOptions options)
      : dir_(std::move(dir)), command_(std::move(command)), opt_(std::move(options)) {
    // A resumed sweep's scripts go after the earlier launcher's, which stay as they were submitted.
    while (fs::exists(dir_ / "slurm" / ("array-" + std::to_string(submissions_) + ".sbatch"))) ++submissions_;
  }

  std::string name() const override { return "slurm"; }

  void submit(const std::vector<JobLaunch>& launches) override {
    if (launches.empty()) return;
    fs::create_directories(dir_ / "jobs");
    fs::create_directories(dir_ / "logs");
    fs::create_directories(dir_ / "slurm");
    std::string indices;
    for (const JobLaunch& l : launches) {
      nlohmann::json spec = {{"command", command_}, {"overrides", l.overrides}, {"resume", l.resume},
                             {"srun", opt_.ddp()}, {"max_requeue", opt_.max_requeue}};
      write_file_atomic((dir_ / "jobs" / (std::to_string(l.job) + ".json")).string(), spec.dump(2) + "\n");
      fs::remove(dir_ / "jobs" / (std::to_string(l.job) + ".status.json"));
      indices += (indices.empty() ? "" : ",") + std::to_string(l.job);
    }
    const fs::path script = dir_ / "slurm" / ("array-" + std::to_string(submissions_++) + ".sbatch");
    write_file_atomic(script.string(), script_text(indices));
    const ProgramResult r = run_program({"sbatch", "--parsable", script.string()}, /*capture_stdout=*/true);
    // --parsable prints "ID" or "ID;cluster".
    const std::string id = r.output.substr(0, r.output.find_first_of(";\n"));
    if (r.exit_code != 0 || id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
      throw std::runtime_error("sbatch " + script.string() + " failed (exit " + std::to_string(r.exit_code) + "): " +
                               (r.errors.empty() ? r.output : r.errors));
    for (const JobLaunch& l : launches) tracked_[l.job] = id + "_" + std::to_string(l.job);
  }

  std::vector<JobEnd> wait(double max_seconds) override {
    if (!ended_away_.empty()) return std::exchange(ended_away_, {});
    const auto deadline = Clock::now() + std::chrono::duration<double>(max_seconds);
    while (true) {
      std::vector<JobEnd> ended = poll();
      if (!ended.empty() || tracked_.empty() || Clock::now() >= deadline) return ended;
      std::this_thread::sleep_for(std::chrono::duration<double>(opt_.poll_interval_s));
    }
  }

  size_t active() const override { return tracked_.size() + ended_away_.size(); }

  nlohmann::json job_record(size_t job) const override {
    auto it = tracked_.find(job);
    if (it == tracked_.end()) {
      auto done = finished_ids_.find(job);
      return done == finished_ids_.end() ? nlohmann::json(nullptr) : nlohmann::json{{"slurm_job", done->second}};
    }
    return {{"slurm_job", it->second}};
  }

  // Jobs of an earlier launcher: those Slurm still holds are watched again; those that ended while
  // no launcher watched (their status file says so) are reported by the next wait().
  std::vector<size_t> adopt(const std::vector<std::pair<size_t, nlohmann::json>>& records) override {
    const std::map<std::string, std::string> queued = queue_states();
    std::vector<size_t> adopted;
    for (const auto& [job, record] : records) {
      if (!record.is_object() || !record.contains("slurm_job") || !record["slurm_job"].is_string()) continue;
      const std::string id = record["slurm_job"];
      const nlohmann::json status = read_json(dir_ / "jobs" / (std::to_string(job) + ".status.json"));
      if (queued.count(id)) {
        tracked_[job] = id;
      } else if (status.is_object() && status.value("state", "") == "ended" && status.value("slurm_job", "") == id) {
        ended_away_.push_back(outcome(job, id));
        finished_ids_[job] = id;
      } else {
        continue;
      }
      adopted.push_back(job);
    }
    return adopted;
  }

 private:
  std::string script_text(const std::string& indices) const {
    std::ostringstream s;
    s << "#!/bin/bash\n# Written by wavetrain train -m (launcher=slurm) for the sweep in " << dir_.string() << "\n";
    s << "#SBATCH --job-name=" << "wavetrain-" << dir_.filename().string() << "\n";
    s << "#SBATCH --array=" << indices << "%" << opt_.array_parallelism << "\n";
    s << "#SBATCH --output=" << (dir_ / "logs" / "%a.log").string() << "\n";
    s << "#SBATCH --open-mode=append\n";
    s << "#SBATCH --time=" << opt_.time << "\n";
    s << "#SBATCH --nodes=" << opt_.nodes << "\n";
    s << "#SBATCH --ntasks-per-node=" << opt_.tasks_per_node << "\n";
    s << "#SBATCH --cpus-per-task=" << opt_.cpus_per_task << "\n";
    if (opt_.gpus_per_node > 0) s << "#SBATCH --gpus-per-node=" << opt_.gpus_per_node << "\n";
    if (!opt_.partition.empty()) s << "#SBATCH --partition=" << opt_.partition << "\n";
    if (!opt_.qos.empty()) s << "#SBATCH --qos=" << opt_.qos << "\n";
    if (!opt_.account.empty()) s << "#SBATCH --account=" << opt_.account << "\n";
    if (!opt_.mem.empty()) s << "#SBATCH --mem=" << opt_.mem << "\n";
    // B: the batch shell, which `exec` makes wavetrain's job runner; it passes the signal on.
    s << "#SBATCH --signal=B:USR1@" << opt_.signal_delay_s << "\n";
    s << (opt_.max_requeue > 0 ? "#SBATCH --requeue\n" : "#SBATCH --no-requeue\n");
    for (const std::string& a : opt_.additional) s << "#SBATCH " << a << "\n";
    for (const std::string& line : opt_.setup) s << line << "\n";
    s << "exec " << shell_quote(command_.at(0)) << " sweep-job " << shell_quote(dir_.string()) << " \"$SLURM_ARRAY_TASK_ID\"\n";
    return s.str();
  }

  // Every array task of ours that Slurm still holds, with its state ("PD", "R", ...).
  std::map<std::string, std::string> queue_states() const {
    std::map<std::string, std::string> states;
    for (int attempt = 0;; ++attempt) {
      // --all: jobs in hidden partitions too, which squeue leaves out by default.
      const ProgramResult r = run_program({"squeue", "--me", "--all", "--noheader", "--array", "--format=%i %t"}, true);
      if (r.exit_code == 0) {
        std::istringstream lines(r.output);
        std::string id, state;
        while (lines >> id >> state) states[id] = state;
        return states;
      }
      // slurmctld restarting or busy: try again for a while before giving up on the sweep.
      if (attempt >= 20)
        throw std::runtime_error("squeue failed " + std::to_string(attempt + 1) + " times (exit " + std::to_string(r.exit_code) +
                                 "): " + r.errors);
      std::this_thread::sleep_for(std::chrono::seconds(1));
    }
  }

  std::vector<JobEnd> poll() {
    std::vector<JobEnd> ended;
    if (tracked_.empty()) return ended;
    const std::map<std::string, std::string> states = queue_states();
    for (auto it = tracked_.begin(); it != tracked_.end();) {
      if (states.count(it->second) || requeue_in_flight(it->first)) {
        ++it;
        continue;
      }
      ended.push_back(outcome(it->first, it->second));
      finished_ids_[it->first] = it->second;
      it = tracked_.erase(it);
    }
    return ended;
  }

  // A job that requeued itself leaves the queue for a moment before it is pending again (longer on a
  // busy controller): its status file says "requeued" until it runs again. Not taken for its end
  // unless that lasts 5 minutes (a job whose requeue was lost).
  bool requeue_in_flight(size_t job) const {
    const fs::path status_path = dir_ / "jobs" / (std::to_string(job) + ".status.json");
    const nlohmann::json status = read_json(status_path);
    if (!status.is_object() || status.value("state", "") != "requeued") return false;
    std::error_code ec;
    const auto written = fs::last_write_time(status_path, ec);
    return !ec && fs::file_time_type::clock::now() - written < std::chrono::minutes(5);
  }

  // A job that left the queue: its status file, else what scontrol still knows of it. On a shared
  // file system the file written on the compute node may show here a moment later: a few looks.
  JobEnd outcome(size_t job, const std::string& slurm_id) const {
    JobEnd end;
    end.job = job;
    const fs::path status_path = dir_ / "jobs" / (std::to_string(job) + ".status.json");
    nlohmann::json status = read_json(status_path);
    for (int look = 0; look < 5 && !(status.is_object() && status.value("state", "") == "ended"); ++look) {
      std::this_thread::sleep_for(std::chrono::seconds(1));
      status = read_json(status_path);
    }
    if (status.is_object() && status.value("state", "") == "ended") {
      end.exit_code = status.value("exit_code", 1);
      end.seconds = status.value("seconds", 0.0);
      const int restarts = status.value("restarts", 0);
      if (restarts > 0) end.note = "requeued " + std::to_string(restarts) + " time" + (restarts == 1 ? "" : "s");
      return end;
    }
    end.exit_code = 1;
    end.seconds = status.is_object() ? status.value("seconds", 0.0) : 0.0;
    const ProgramResult r = run_program({"scontrol", "--oneliner", "show", "job", slurm_id}, true);
    std::smatch m;
    static const std::regex state(R"(JobState=(\S+).*?(?:Reason=(\S+))?.*?ExitCode=(\d+):(\d+))");
    std::string why = "it ended without writing " + (dir_ / "jobs" / (std::to_string(job) + ".status.json")).string();
    if (r.exit_code == 0 && std::regex_search(r.output, m, state)) {
      why = "Slurm: " + m[1].str() + (m[2].matched && m[2] != "None" ? " (" + m[2].str() + ")" : "") + ", exit code " + m[3].str() +
            (m[4] != "0" ? ", signal " + m[4].str() : "");
      if (m[1] == "TIMEOUT") why += "; raise launcher.time, or launcher.signal_delay_s to save a checkpoint in time";
    }
    end.note = why;
    return end;
  }

  fs::path dir_;
  std::vector<std::string> command_;
  SlurmOptions opt_;
  int submissions_ = 0;
  std::map<size_t, std::string> tracked_;                    // job -> "ARRAYID_TASK", while queued or running
  std::map<size_t, std::string> finished_ids_;
  std::vector<JobEnd> ended_away_;                            // adopted jobs that had already ended
};

// ---- the job side ----

std::atomic<pid_t> g_child{0};
std::atomic<int> g_usr1{0};
std::atomic<int> g_term{0};

extern "C" void forward_signal(int sig) {
  (sig == SIGUSR1 ? g_usr1 : g_term).store(1);
  const pid_t child = g_child.load();
  if (child > 0) ::kill(child, sig);
}

}  // namespace

SlurmOptions parse_slurm_options(const Node& section) {
  SlurmOptions o;
  if (!section.is_mapping()) throw ConfigError("launcher must be a mapping (launcher=slurm), found " + section.to_display());
  for (const auto& [key, value] : section.entries()) {
    if (std::find(kSlurmKeys.begin(), kSlurmKeys.end(), key) == kSlurmKeys.end()) {
      std::string closest;
      size_t best = 3;  // only suggest what is close
      for (const std::string& k : kSlurmKeys)
        if (const size_t d = config::edit_distance(key, k); d < best) {
          best = d;
          closest = k;
        }
      std::string known;
      for (const std::string& k : kSlurmKeys) known += (known.empty() ? "" : ", ") + k;
      throw ConfigError("launcher." + key + " (" + value.origin().str() + "): not an option of the Slurm launcher" +
                        (closest.empty() ? "" : "; did you mean launcher." + closest + "?") + " Its options: " + known);
    }
    if (key == "name") continue;
    if (key == "partition") o.partition = text_value(value, key);
    else if (key == "qos") o.qos = text_value(value, key);
    else if (key == "account") o.account = text_value(value, key);
    else if (key == "mem") o.mem = text_value(value, key);
    else if (key == "time") o.time = text_value(value, key);
    else if (key == "cpus_per_task") o.cpus_per_task = count_value(value, key, 1);
    else if (key == "gpus_per_node") o.gpus_per_node = count_value(value, key, 0);
    else if (key == "tasks_per_node") o.tasks_per_node = count_value(value, key, 1);
    else if (key == "nodes") o.nodes = count_value(value, key, 1);
    else if (key == "array_parallelism") o.array_parallelism = count_value(value, key, 1);
    else if (key == "signal_delay_s") o.signal_delay_s = count_value(value, key, 1);
    else if (key == "max_requeue") o.max_requeue = count_value(value, key, 0);
    else if (key == "additional") o.additional = lines_value(value, key);
    else if (key == "setup") o.setup = lines_value(value, key);
    else if (key == "poll_interval_s") {
      o.poll_interval_s = config::to_float(value, "launcher.poll_interval_s");
      if (!(o.poll_interval_s >= 0.05 && o.poll_interval_s <= 600))
        throw ConfigError("launcher.poll_interval_s must be in [0.05, 600], got " + value.to_display());
    }
  }
  static const std::regex time_format(R"(^(\d+|(\d+-)?\d+(:\d+){0,2})$)");
  if (!std::regex_match(o.time, time_format))
    throw ConfigError("launcher.time='" + o.time + "': expected minutes or [D-]HH:MM:SS, as sbatch --time takes");
  for (const std::string* v : {&o.partition, &o.qos, &o.account, &o.mem})
    if (v->find_first_of(" \t\n'\"") != std::string::npos)
      throw ConfigError("launcher: '" + *v + "' is not a Slurm name (no spaces or quotes)");
  for (const std::string& a : o.additional) {
    if (a.rfind("-", 0) != 0)
      throw ConfigError("launcher.additional: '" + a + "' is not an sbatch option (they start with '-')");
    // The launcher follows its jobs with this cluster's squeue: jobs sent elsewhere would look ended.
    if (a.rfind("--clusters", 0) == 0 || a.rfind("-M", 0) == 0 || a.rfind("--array", 0) == 0 || a.rfind("--output", 0) == 0)
      throw ConfigError("launcher.additional: '" + a + "' is set by the launcher itself (or sends jobs where it cannot follow them)");
  }
  // A plain number of minutes can be checked against the signal's lead: a job signalled at its
  // start would requeue itself after every step.
  if (o.time.size() < 9 && o.time.find_first_not_of("0123456789") == std::string::npos && std::stoll(o.time) * 60 <= o.signal_delay_s)
    throw ConfigError("launcher.signal_delay_s=" + std::to_string(o.signal_delay_s) + " is not shorter than launcher.time=" + o.time +
                      " minutes: the job would be told to stop as it starts");
  return o;
}

void check_slurm_client() {
  std::string missing;
  for (const char* p : {"sbatch", "squeue", "scontrol"})
    if (!program_on_path(p)) missing += (missing.empty() ? "" : ", ") + std::string(p);
  if (!missing.empty())
    throw std::runtime_error("launcher=slurm: " + missing + " not found on PATH (run the sweep where Slurm's client is "
                             "installed, e.g. a login node; Debian's package is slurm-client)");
}

std::unique_ptr<Launcher> make_slurm_launcher(const fs::path& sweep_dir, std::vector<std::string> command, SlurmOptions options) {
  return std::make_unique<SlurmLauncher>(sweep_dir, std::move(command), std::move(options));
}

int run_sweep_job(const fs::path& dir, size_t job) {
  struct sigaction action {};
  action.sa_handler = forward_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR1, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);

  const fs::path spec_path = dir / "jobs" / (std::to_string(job) + ".json");
  const nlohmann::json spec = read_json(spec_path);
  if (!spec.is_object() || !spec.contains("command") || !spec.contains("overrides"))
    throw std::runtime_error("sweep job " + std::to_string(job) + ": " + spec_path.string() + " is missing or not a job's record");
  const char* restart_env = std::getenv("SLURM_RESTART_COUNT");
  const int restarts = restart_env ? std::atoi(restart_env) : 0;
  const int max_requeue = spec.value("max_requeue", 0);
  const fs::path status_path = dir / "jobs" / (std::to_string(job) + ".status.json");
  const nlohmann::json previous = read_json(status_path);
  const double earlier_seconds = restarts > 0 && previous.is_object() ? previous.value("seconds", 0.0) : 0.0;
  const char* array_id = std::getenv("SLURM_ARRAY_JOB_ID");
  const char* task_id = std::getenv("SLURM_ARRAY_TASK_ID");
  const char* job_id = std::getenv("SLURM_JOB_ID");
  const std::string slurm_id = array_id && task_id ? std::string(array_id) + "_" + task_id : (job_id ? job_id : "");

  // A requeued job continues its run (from last.ckpt, when it got as far as saving one).
  JobLaunch launch{job, spec["overrides"].get<std::vector<std::string>>(), spec.value("resume", false) || restarts > 0};
  std::vector<std::string> args = job_arguments(spec["command"].get<std::vector<std::string>>(), dir, launch);
  const bool srun = spec.value("srun", false);
  // Not --kill-on-bad-exit: ranks that stop on a signal exit 75 while rank 0 still saves the
  // checkpoint, and a rank that fails makes the others' next collective fail by itself.
  if (srun) args.insert(args.begin(), "srun");
  // Wall-clock times (seconds since the epoch) of this attempt, for the launcher's overhead and
  // the throttle's check; `seconds` adds up the attempts' run times.
  const auto wall_now = [] {
    return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  };
  const double started_at = wall_now();
  auto write_status = [&](const std::string& state, int exit_code, double seconds) {
    nlohmann::json s = {{"state", state}, {"restarts", restarts}, {"slurm_job", slurm_id}, {"seconds", seconds},
                        {"started_at", started_at}};
    if (state != "running") {
      s["exit_code"] = exit_code;
      s["ended_at"] = wall_now();
    }
    write_file_atomic(status_path.string(), s.dump(2) + "\n");
  };
  write_status("running", 0, earlier_seconds);
  std::cout << "wavetrain sweep-job: job " << job << " (" << slurm_id << ", restart " << restarts << "): ";
  for (const std::string& a : args) std::cout << a << " ";
  std::cout << std::endl;

  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // wavetrain starts with the two signals blocked (stop_protocol.h); srun keeps its own handling.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  if (!srun) block_stop_signals(attr);
  const auto start = Clock::now();
  pid_t pid = 0;
  // The run dies with this job step (stop_protocol.h); srun's tasks are children of slurmstepd,
  // which the cluster's own process tracking ends.
  ChildEnvironment env;
  const int rc = posix_spawnp(&pid, argv[0], nullptr, &attr, argv.data(), srun ? environ : env.envp());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    write_status("ended", 127, earlier_seconds);
    throw std::runtime_error("sweep job " + std::to_string(job) + ": cannot start " + args[0] + ": " + std::strerror(rc));
  }
  g_child.store(pid);
  if (g_usr1.load()) ::kill(pid, SIGUSR1);  // arrived before there was a child to pass it to
  if (g_term.load()) ::kill(pid, SIGTERM);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  g_child.store(0);
  const int exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  const double seconds = earlier_seconds + std::chrono::duration<double>(Clock::now() - start).count();

  if (exit_code == kExitInterrupted && g_usr1.load() && !g_term.load() && restarts < max_requeue && !slurm_id.empty()) {
    write_status("requeued", exit_code, seconds);
    std::cout << "wavetrain sweep-job: job " << job << " saved its checkpoint; requeueing " << slurm_id << " (requeue "
              << restarts + 1 << " of at most " << max_requeue << ")" << std::endl;
    const ProgramResult r = run_program({"scontrol", "requeue", slurm_id});
    // Slurm ends a job that requeues itself at once, with SIGTERM: scontrol may die of it (143)
    // after the requeue went through.
    if (r.exit_code == 0 || (g_term.load() && r.exit_code == 128 + SIGTERM)) return 0;
    std::cout << "wavetrain sweep-job: scontrol requeue " << slurm_id << " failed: " << r.errors << std::endl;
  }
  write_status("ended", exit_code, seconds);
  return exit_code;
}

}  // namespace wavetrain::sweep
