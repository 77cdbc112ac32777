// Atomic file writes; see atomic_file.h.
#include "trainer/serialization/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <stdexcept>

namespace wavetrain {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path, int err) {
  throw std::runtime_error("Cannot " + what + " '" + path + "': " + std::strerror(err));
}

}  // namespace

void write_file_atomic(const std::string& path, const std::string& content) {
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0) fail("create a temporary file for", path, errno);
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      fail("write", path, err);
    }
    written += static_cast<size_t>(n);
  }
  // Fault injection for the tests of stale temporaries: WAVETRAIN_FAULT_KILL_IN_WRITE=NAME:N kills
  // the process (SIGKILL, no cleanup) while it writes a file named NAME for the N-th time.
  if (const char* fault = std::getenv("WAVETRAIN_FAULT_KILL_IN_WRITE")) {
    static int writes = 0;
    const std::string spec = fault, name = spec.substr(0, spec.rfind(':'));
    const size_t slash = path.rfind('/');
    if (path.substr(slash == std::string::npos ? 0 : slash + 1) == name && ++writes == std::atoi(spec.c_str() + spec.rfind(':') + 1))
      ::raise(SIGKILL);
  }
  // The data must be on disk before the rename makes it visible under the final name.
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("flush", path, err);
  }
  ::chmod(tmp.c_str(), 0644);  // mkstemp creates 0600; these are ordinary result files
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail("rename a temporary file onto", path, err);
  }
}

bool is_atomic_temporary(const std::string& name) {
  const std::string marker = ".tmp.";
  if (name.size() <= marker.size() + 6 || name.compare(name.size() - 6 - marker.size(), marker.size(), marker) != 0) return false;
  for (size_t i = name.size() - 6; i < name.size(); ++i) {
    const char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) return false;
  }
  return true;
}

namespace {

// Removes the temporaries in `dir` whose name starts with `target` + ".tmp." (any, when empty).
int remove_temporaries(const std::string& dir, const std::string& target) {
  DIR* d = ::opendir(dir.c_str());
  if (!d) return 0;
  int removed = 0;
  while (const dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (!is_atomic_temporary(name)) continue;
    if (!target.empty() && name.size() != target.size() + 11) continue;  // ".tmp." and six characters
    if (!target.empty() && name.compare(0, target.size(), target) != 0) continue;
    struct stat st {};
    const std::string path = dir + "/" + name;
    if (::lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::unlink(path.c_str()) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

}  // namespace

int remove_stale_temporaries(const std::string& dir) { return remove_temporaries(dir, ""); }

int remove_stale_temporaries_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  return remove_temporaries(dir, slash == std::string::npos ? path : path.substr(slash + 1));
}

}  // namespace wavetrain
