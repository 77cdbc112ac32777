// Atomic file writes; see atomic_file.h.
#include "trainer/serialization/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
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

}  // namespace wavetrain
