// The directory of one run: outputs/YYYY-MM-DD/HH-MM-SS/ by default (config key `run.dir`).
// Two runs never share one, even when started in the same second: the directory is claimed with
// mkdir, which fails for all but one process, and a taken name gets a suffix (_1, _2, ...) that
// the caller is told of (requested() differs from path()).
// The process's working directory is not changed.
//
// The process that writes a run holds an exclusive lock on RUN/.wavetrain/lock (flock, released by
// the kernel when the process ends however it ends; the file holds its pid). Resuming a run that a
// live process holds is refused, and a sweep's launcher never moves or restarts a held job.
//
//   RUN/.wavetrain/config.yaml           the composed config, as written (interpolations kept)
//   RUN/.wavetrain/config.resolved.yaml  the same with interpolations resolved
//   RUN/.wavetrain/overrides.yaml        the command-line overrides, as typed
//   RUN/.wavetrain/environment.yaml      device, precision policy, threads and versions of the run
//   RUN/wavetrain.log                    the run's log
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
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
  // Refused while another process holds the run; temporaries that a killed earlier attempt left
  // (atomic_file.h) are removed.
  static RunDirectory open_existing(const std::filesystem::path& dir);
  // What open_existing checks first, alone: throws "Cannot resume in 'DIR': it is not a wavetrain
  // run directory (no .wavetrain/config.yaml)". For a launcher that checks before its ranks start.
  static void require_run_directory(const std::filesystem::path& dir);

  // Takes the lock of an existing directory (a multirun's, to resume it) without a resume record.
  static RunDirectory lock_existing(const std::filesystem::path& dir);

  // The directory another process (rank 0 of a distributed run) created; nothing is written.
  static RunDirectory attach(const std::filesystem::path& dir) { return RunDirectory(dir); }

  const std::filesystem::path& path() const { return path_; }
  // The name asked for; differs from path() when that was taken and a suffix was added.
  const std::filesystem::path& requested() const { return requested_; }
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
  explicit RunDirectory(std::filesystem::path p) : path_(std::move(p)), requested_(path_), meta_(path_ / ".wavetrain") {}
  std::filesystem::path path_;
  std::filesystem::path requested_;
  std::filesystem::path meta_;
  std::shared_ptr<const int> lock_;  // the open lock file, closed (and so released) with the last copy
};

// The pid of the live process that holds `dir`'s lock, or nullopt when none does (or there is no
// lock file: a directory that no wavetrain run has claimed).
std::optional<long> run_directory_holder(const std::filesystem::path& dir);

}  // namespace wavetrain
