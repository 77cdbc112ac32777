// Run directories; see run_directory.h.
#include "trainer/sweep/run_directory.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>

#include "trainer/serialization/atomic_file.h"
#include "trainer/config/yaml_io.h"
#include "wavetrain_build_config.h"

namespace fs = std::filesystem;

namespace wavetrain {

RunDirectory RunDirectory::create(const fs::path& dir) {
  std::error_code ec;
  if (dir.has_parent_path()) {
    fs::create_directories(dir.parent_path(), ec);
    if (ec) throw std::runtime_error("Cannot create run directory parent '" + dir.parent_path().string() + "': " + ec.message());
  }
  for (int n = 0; n < 10000; ++n) {
    const fs::path candidate = n == 0 ? dir : fs::path(dir.string() + "_" + std::to_string(n));
    if (::mkdir(candidate.c_str(), 0755) == 0) return RunDirectory(candidate);
    if (errno != EEXIST)
      throw std::runtime_error("Cannot create run directory '" + candidate.string() + "': " + std::strerror(errno));
  }
  throw std::runtime_error("Cannot create run directory '" + dir.string() + "': 10000 names taken");
}

RunDirectory RunDirectory::open_existing(const fs::path& dir) {
  if (!fs::is_directory(dir / ".wavetrain"))
    throw std::runtime_error("Cannot resume in '" + dir.string() + "': it is not a wavetrain run directory (no .wavetrain/)");
  RunDirectory run(dir);
  for (int n = 1;; ++n) {
    const fs::path meta = dir / ".wavetrain" / ("resume-" + std::to_string(n));
    if (::mkdir(meta.c_str(), 0755) == 0) {
      run.meta_ = meta;
      return run;
    }
    if (errno != EEXIST) throw std::runtime_error("Cannot create '" + meta.string() + "': " + std::strerror(errno));
  }
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
