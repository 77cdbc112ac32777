// Run directories; see run_directory.h.
#include "trainer/sweep/run_directory.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "trainer/serialization/atomic_file.h"
#include "trainer/config/yaml_io.h"
#include "wavetrain_build_config.h"

namespace fs = std::filesystem;

namespace wavetrain {
namespace {

fs::path lock_path(const fs::path& dir) { return dir / ".wavetrain" / "lock"; }

// Takes `dir`'s lock or throws naming the process that holds it. `what` starts the message.
std::shared_ptr<const int> take_lock(const fs::path& dir, const std::string& what) {
  std::error_code ec;
  fs::create_directories(dir / ".wavetrain", ec);
  if (ec) throw std::runtime_error(what + ": cannot create '" + (dir / ".wavetrain").string() + "': " + ec.message());
  const fs::path path = lock_path(dir);
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error(what + ": cannot open '" + path.string() + "': " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      const std::optional<long> pid = run_directory_holder(dir);
      throw std::runtime_error(what + ": another wavetrain process" + (pid ? " (pid " + std::to_string(*pid) + ")" : std::string()) +
                               " is running in it; wait for it to end or stop it first");
    }
    // A file system without locks (Lustre without -o flock, some FUSE and SMB mounts): the run goes
    // on, unprotected from a second process, and says so.
    std::cerr << "wavetrain: warning: cannot lock '" << path.string() << "' (" << std::strerror(err)
              << "): nothing stops a second process from writing in " << dir.string() << "\n";
    return nullptr;
  }
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    // The lock holds without the pid; messages then just do not name it.
  }
  return std::shared_ptr<const int>(new int(fd), [](const int* p) {
    ::close(*p);
    delete p;
  });
}

}  // namespace

std::optional<long> run_directory_holder(const fs::path& dir) {
  const int fd = ::open(lock_path(dir).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return std::nullopt;
  std::optional<long> holder;
  if (::flock(fd, LOCK_SH | LOCK_NB) == 0) {
    ::flock(fd, LOCK_UN);
  } else {
    char text[32] = {};
    const ssize_t n = ::pread(fd, text, sizeof text - 1, 0);
    holder = n > 0 ? std::strtol(text, nullptr, 10) : 0;
  }
  ::close(fd);
  return holder;
}

RunDirectory RunDirectory::create(const fs::path& dir) {
  std::error_code ec;
  if (dir.has_parent_path()) {
    fs::create_directories(dir.parent_path(), ec);
    if (ec) throw std::runtime_error("Cannot create run directory parent '" + dir.parent_path().string() + "': " + ec.message());
  }
  for (int n = 0; n < 10000; ++n) {
    const fs::path candidate = n == 0 ? dir : fs::path(dir.string() + "_" + std::to_string(n));
    if (::mkdir(candidate.c_str(), 0755) == 0) {
      RunDirectory run(candidate);
      run.requested_ = dir;
      run.lock_ = take_lock(candidate, "Cannot use run directory '" + candidate.string() + "'");
      return run;
    }
    if (errno != EEXIST)
      throw std::runtime_error("Cannot create run directory '" + candidate.string() + "': " + std::strerror(errno));
  }
  throw std::runtime_error("Cannot create run directory '" + dir.string() + "': 10000 names taken");
}

void RunDirectory::require_run_directory(const fs::path& dir) {
  if (!fs::is_regular_file(dir / ".wavetrain" / "config.yaml"))
    throw std::runtime_error("Cannot resume in '" + dir.string() + "': it is not a wavetrain run directory (no .wavetrain/config.yaml)");
}

RunDirectory RunDirectory::open_existing(const fs::path& dir) {
  require_run_directory(dir);
  RunDirectory run(dir);
  run.lock_ = take_lock(dir, "Cannot resume in '" + dir.string() + "'");
  // What a killed earlier attempt was writing when it died is of no use to anyone.
  for (const fs::path& d : {dir, dir / "checkpoints", dir / ".wavetrain"}) remove_stale_temporaries(d);
  for (int n = 1;; ++n) {
    const fs::path meta = dir / ".wavetrain" / ("resume-" + std::to_string(n));
    if (::mkdir(meta.c_str(), 0755) == 0) {
      run.meta_ = meta;
      return run;
    }
    if (errno != EEXIST) throw std::runtime_error("Cannot create '" + meta.string() + "': " + std::strerror(errno));
  }
}

RunDirectory RunDirectory::lock_existing(const fs::path& dir) {
  if (!fs::is_directory(dir)) throw std::runtime_error("Cannot resume '" + dir.string() + "': no such directory");
  RunDirectory run(dir);
  run.lock_ = take_lock(dir, "Cannot resume '" + dir.string() + "'");
  remove_stale_temporaries(dir);
  return run;
}

RunDirectory RunDirectory::create_for(const config::Config& config) {
  config::Node pattern = config.has("run.dir") ? config.value("run.dir") : config::Node::string(kDefaultRunDir);
  if (!config.has("run.dir")) {
    // Resolve the default the same way as a configured value, with the run's own clock.
    config::Node tree = config::Node::mapping();
    tree.set_path("run.dir", pattern);
    pattern = config::resolve_path(tree, "run.dir", config.context());
  }
  return create(config::to_string(pattern, "run.dir"));
}

void RunDirectory::record(const config::Config& config, const std::vector<std::string>& overrides,
                          const std::string& command_line) const {
  std::error_code ec;
  fs::create_directories(meta_dir(), ec);
  if (ec) throw std::runtime_error("Cannot create '" + meta_dir().string() + "': " + ec.message());

  write_file_atomic((meta_dir() / "config.yaml").string(), config::to_yaml(config.tree()));
  write_file_atomic((meta_dir() / "config.resolved.yaml").string(),
                    config::to_yaml(config::resolve_all(config.tree(), config.context())));
  config::Node list = config::Node::sequence();
  for (const std::string& o : overrides) list.push_back(config::Node::string(o));
  write_file_atomic((meta_dir() / "overrides.yaml").string(), config::to_yaml(list));

  log("wavetrain " + std::string(WAVETRAIN_VERSION) + " run in " + path_.string());
  log("command: " + command_line);
}

void RunDirectory::write_meta(const std::string& name, const config::Node& content) const {
  std::error_code ec;
  fs::create_directories(meta_dir(), ec);
  if (ec) throw std::runtime_error("Cannot create '" + meta_dir().string() + "': " + ec.message());
  write_file_atomic((meta_dir() / (name + ".yaml")).string(), config::to_yaml(content));
}

void RunDirectory::log(const std::string& line) const {
  std::ofstream out(log_path(), std::ios::app);
  if (!out) throw std::runtime_error("Cannot open '" + log_path().string() + "' for writing");
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  localtime_r(&now, &tm);
  std::strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm);
  out << "[" << when << "] " << line << "\n";
}

}  // namespace wavetrain
