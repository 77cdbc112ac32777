// Stopping together; see stop_protocol.h.
#include "trainer/sweep/stop_protocol.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>

extern char** environ;

namespace wavetrain {

ChildEnvironment::ChildEnvironment(const std::vector<std::string>& set) {
  std::vector<std::string> all = set;
  all.push_back(std::string(kParentPidVariable) + "=" + std::to_string(::getpid()));
  auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  for (char** e = environ; e && *e; ++e) {
    const std::string entry = *e;
    bool replaced = false;
    for (const std::string& s : all) replaced = replaced || name_of(s) == name_of(entry);
    if (!replaced) entries_.push_back(entry);
  }
  entries_.insert(entries_.end(), all.begin(), all.end());
  for (std::string& e : entries_) pointers_.push_back(e.data());
  pointers_.push_back(nullptr);
}

void die_with_parent() {
  const char* value = std::getenv(kParentPidVariable);
  if (!value) return;
  const long parent = std::strtol(value, nullptr, 10);
  ::unsetenv(kParentPidVariable);
  if (parent <= 1) return;
  if (::getppid() != static_cast<pid_t>(parent)) {
    // Either the launcher died before we got here (we were handed to init), or something that did
    // not exec stands between us (`sh -c` without exec, a profiler): only the first ends us.
    if (::kill(static_cast<pid_t>(parent), 0) != 0 && errno == ESRCH) ::raise(SIGTERM);
    return;
  }
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  // The parent may have died between the check above and the line before: then nobody will send it.
  if (::getppid() != static_cast<pid_t>(parent)) ::raise(SIGTERM);
}

}  // namespace wavetrain
