// Outside programs by argument vector (run_program.h).
#include "trainer/sweep/run_program.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

extern char** environ;

namespace wavetrain::sweep {

ProgramResult run_program(const std::vector<std::string>& argv, bool capture_stdout) {
  if (argv.empty()) throw std::invalid_argument("run_program: no program given");
  int out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1};
  if (pipe2(err_pipe, O_CLOEXEC) != 0 || (capture_stdout && pipe2(out_pipe, O_CLOEXEC) != 0))
    throw std::runtime_error(std::string("run_program: pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  if (capture_stdout) posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  else posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(err_pipe[1]);
  if (capture_stdout) close(out_pipe[1]);
  ProgramResult result;
  if (rc != 0) {
    close(err_pipe[0]);
    if (capture_stdout) close(out_pipe[0]);
    result.exit_code = 127;
    result.errors = std::string("cannot start ") + argv[0] + ": " + std::strerror(rc);
    return result;
  }
  // Both pipes drained together: a program that fills one while we block on the other would hang.
  std::vector<pollfd> fds = {{err_pipe[0], POLLIN, 0}};
  if (capture_stdout) fds.push_back({out_pipe[0], POLLIN, 0});
  char buffer[65536];
  for (size_t open = fds.size(); open > 0;) {
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (pollfd& f : fds) {
      if (f.fd < 0 || !(f.revents & (POLLIN | POLLHUP | POLLERR))) continue;
      const ssize_t n = read(f.fd, buffer, sizeof buffer);
      if (n > 0) {
        std::string& into = f.fd == err_pipe[0] ? result.errors : result.output;
        into.append(buffer, static_cast<size_t>(n));
        if (f.fd == err_pipe[0] && into.size() > 8192) into.erase(0, into.size() - 4096);
      } else if (n == 0 || errno != EINTR) {
        close(f.fd);
        f.fd = -1;
        --open;
      }
    }
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (result.errors.size() > 4096) result.errors.erase(0, result.errors.size() - 4096);
  return result;
}

bool program_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    const std::string file = (end > start ? dirs.substr(start, end - start) : ".") + "/" + name;
    struct stat st {};
    if (stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(file.c_str(), X_OK) == 0) return true;
    start = end + 1;
  }
  return false;
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string out;
  for (const std::string& a : argv) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./+=:,@") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += '\'';
  }
  return out;
}

}  // namespace wavetrain::sweep
