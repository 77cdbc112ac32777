// The directory of one run: outputs/YYYY-MM-DD/HH-MM-SS/ by default (config key `run.dir`).
// Two runs never share one, even when started in the same second: the directory is claimed with
// mkdir, which fails for all but one process, and a taken name gets a suffix (_1, _2, ...).
// The process's working directory is not changed.
//
//   RUN/.wavetrain/config.yaml           the composed config, as written (interpolations kept)
//   RUN/.wavetrain/config.resolved.yaml  the same with interpolations resolved
//   RUN/.wavetrain/overrides.yaml        the command-line overrides, as typed
//   RUN/.wavetrain/environment.yaml      device, precision policy, threads and versions of the run
//   RUN/wavetrain.log                    the run's log
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "trainer/config/config.h"

namespace wavetrain {

inline constexpr const char* kDefaultRunDir = "outputs/${now:%Y-%m-%d}/${now:%H-%M-%S}";

class RunDirectory {
 public:
  // Claims a new directory named `dir` (or `dir`_N if taken). Throws std::runtime_error.
  static RunDirectory create(const std::filesystem::path& dir);

  // Claims the directory given by `run.dir` in `config` (default kDefaultRunDir), resolved with
  // the config's own interpolation context (so ${now:...} is the run's start time).
  static RunDirectory create_for(const config::Config& config);

  // Reopens the directory of an earlier run to continue it (trainer.resume=last|best): this
  // attempt's files go to .wavetrain/resume-N/, so the first attempt's record stays as it was.
  static RunDirectory open_existing(const std::filesystem::path& dir);

  // The directory another process (rank 0 of a distributed run) created; nothing is written.
  static RunDirectory attach(const std::filesystem::path& dir) { return RunDirectory(dir); }

  const std::filesystem::path& path() const { return path_; }
  const std::filesystem::path& meta_dir() const { return meta_; }
  std::filesystem::path log_path() const { return path_ / "wavetrain.log"; }

  // Writes the three config files under .wavetrain/ (each atomically) and starts wavetrain.log.
  void record(const config::Config& config, const std::vector<std::string>& overrides,
              const std::string& command_line) const;

  // Writes .wavetrain/<name>.yaml atomically.
  void write_meta(const std::string& name, const config::Node& content) const;

  // Appends a timestamped line to wavetrain.log.
  void log(const std::string& line) const;

 private:
  explicit RunDirectory(std::filesystem::path p) : path_(std::move(p)), meta_(path_ / ".wavetrain") {}
  std::filesystem::path path_;
  std::filesystem::path meta_;
};

}  // namespace wavetrain
