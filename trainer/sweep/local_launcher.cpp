// The local launcher: each job a child process of the sweep's own process; see launcher.h.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <stdexcept>
#include <thread>
#include <utility>

#include "trainer/sweep/launcher.h"
#include "trainer/sweep/run_directory.h"
#include "trainer/sweep/stop_protocol.h"

namespace fs = std::filesystem;

namespace wavetrain::sweep {

std::vector<std::string> job_arguments(const std::vector<std::string>& command, const fs::path& sweep_dir,
                                       const JobLaunch& launch) {
  const fs::path run_dir = sweep_dir / std::to_string(launch.job);
  std::vector<std::string> args = command;
  args.insert(args.end(), launch.overrides.begin(), launch.overrides.end());
  args.push_back("++run.dir=" + run_dir.string());
  if (const std::optional<long> holder = run_directory_holder(run_dir))
    throw std::runtime_error("multirun: job " + std::to_string(launch.job) + "'s directory '" + run_dir.string() +
                             "' is in use by process " + std::to_string(*holder) + ": it is not started again");
  if (launch.resume && fs::exists(run_dir / "checkpoints" / "last.ckpt")) {
    args.push_back("++trainer.resume=last");
  } else if (fs::exists(run_dir)) {
    // A fresh start: the earlier attempt's files (and its log) are kept beside the new run.
    int attempt = 1;
    while (fs::exists(run_dir.string() + ".attempt-" + std::to_string(attempt))) ++attempt;
    const std::string suffix = ".attempt-" + std::to_string(attempt);
    fs::rename(run_dir, run_dir.string() + suffix);
    const fs::path log = sweep_dir / "logs" / (std::to_string(launch.job) + ".log");
    if (fs::exists(log)) fs::rename(log, sweep_dir / "logs" / (std::to_string(launch.job) + suffix + ".log"));
  }
  return args;
}

namespace {

using Clock = std::chrono::steady_clock;

class LocalLauncher : public Launcher {
 public:
  LocalLauncher(fs::path dir, std::vector<std::string> command, int parallel)
      : dir_(std::move(dir)), command_(std::move(command)), parallel_(std::max(1, parallel)) {}

  std::string name() const override { return "local"; }

  void submit(const std::vector<JobLaunch>& launches) override {
    queue_.insert(queue_.end(), launches.begin(), launches.end());
    start_queued();
  }

  std::vector<JobEnd> wait(double max_seconds) override {
    const auto deadline = Clock::now() + std::chrono::duration<double>(max_seconds);
    std::vector<JobEnd> ended;
    while (true) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno != ECHILD && errno != EINTR)
        throw std::runtime_error(std::string("multirun: waitpid failed: ") + std::strerror(errno));
      if (pid > 0) {
        auto it = running_.find(pid);
        if (it == running_.end()) continue;  // not one of ours
        JobEnd end;
        end.job = it->second.first;
        end.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        end.seconds = std::chrono::duration<double>(Clock::now() - it->second.second).count();
        if (WIFSIGNALED(status)) end.note = std::string("killed by signal ") + std::to_string(WTERMSIG(status));
        running_.erase(it);
        ended.push_back(end);
        start_queued();
        continue;  // collect every job that has ended by now
      }
      if (!ended.empty() || running_.empty() || Clock::now() >= deadline) return ended;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  size_t active() const override { return running_.size() + queue_.size(); }

  bool reports_starts() const override { return true; }
  std::vector<size_t> take_started() override { return std::exchange(started_, {}); }

  bool stop(int /*signal*/, std::vector<size_t>& dropped) override {
    for (const JobLaunch& l : queue_) dropped.push_back(l.job);
    queue_.clear();
    // SIGUSR1 whatever the launcher was sent: a job still starting (loading data, building its
    // model) remembers it and stops at its first step with a checkpoint, where SIGTERM would end it
    // before it has one. To the job and whatever it started (its ranks).
    for (const auto& [pid, job] : running_) ::killpg(pid, SIGUSR1);
    return true;
  }

 private:
  void start_queued() {
    while (!queue_.empty() && static_cast<int>(running_.size()) < parallel_) {
      const JobLaunch launch = queue_.front();
      queue_.pop_front();
      std::vector<std::string> args = job_arguments(command_, dir_, launch);
      std::vector<char*> argv;
      for (std::string& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      fs::create_directories(dir_ / "logs");
      const std::string log = (dir_ / "logs" / (std::to_string(launch.job) + ".log")).string();
      posix_spawn_file_actions_t actions;
      posix_spawn_file_actions_init(&actions);
      // A continued run's output goes on after its earlier part (a fresh start's old log was moved aside).
      posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
      posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
      // Its own process group; the stop signals blocked until its handlers are in place; and it
      // dies with this process (stop_protocol.h).
      posix_spawnattr_t attr;
      posix_spawnattr_init(&attr);
      posix_spawnattr_setpgroup(&attr, 0);
      posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
      block_stop_signals(attr);
      ChildEnvironment env;
      pid_t pid = 0;
      const int rc = posix_spawn(&pid, argv[0], &actions, &attr, argv.data(), env.envp());
      posix_spawn_file_actions_destroy(&actions);
      posix_spawnattr_destroy(&attr);
      if (rc != 0) throw std::runtime_error("multirun: cannot start '" + args[0] + "': " + std::strerror(rc));
      running_[pid] = {launch.job, Clock::now()};
      started_.push_back(launch.job);
    }
  }

  fs::path dir_;
  std::vector<std::string> command_;
  int parallel_;
  std::deque<JobLaunch> queue_;
  std::vector<size_t> started_;  // since the last take_started()
  std::map<pid_t, std::pair<size_t, Clock::time_point>> running_;
};

}  // namespace

std::unique_ptr<Launcher> make_local_launcher(const fs::path& sweep_dir, std::vector<std::string> command, int parallel) {
  return std::make_unique<LocalLauncher>(sweep_dir, std::move(command), parallel);
}

}  // namespace wavetrain::sweep
