// `wavetrain report SWEEP_DIR | RUN_DIR...`: the sweep report (trainer/sweep/sweep_report.h) of a
// multirun directory, or of any set of run directories; and `wavetrain sweep-job DIR N`, what a
// Slurm array task of a sweep runs (trainer/sweep/slurm_launcher.h; not for typing by hand).
#include <filesystem>
#include <iostream>

#include "cli/commands.h"
#include "trainer/sweep/slurm_launcher.h"
#include "trainer/sweep/sweep_report.h"

namespace wavetrain::cli {

void add_sweep_commands(CLI::App& app) {
  struct ReportArgs {
    std::vector<std::string> dirs;
    std::string objective, mode = "min", out;
  };
  auto args = std::make_shared<ReportArgs>();
  CLI::App* report = app.add_subcommand("report", "The sweep report (report.html) of a multirun directory or of several run directories");
  report->add_option("dirs", args->dirs, "A multirun directory (holds summary.json), or run directories to compare")->required();
  report->add_option("--objective", args->objective, "Run directories: the metric to compare them by (default: their trainer.monitor)");
  report->add_option("--mode", args->mode, "Run directories: min or max")->check(CLI::IsMember({"min", "max"}));
  report->add_option("-o,--out", args->out, "Where report.html goes (default: the multirun directory, or the current one)");
  report->callback([args] {
    namespace fs = std::filesystem;
    for (const std::string& d : args->dirs)
      if (!fs::is_directory(d)) throw UsageError("report: '" + d + "' is not a directory");
    const bool sweep_dir = args->dirs.size() == 1 && fs::is_regular_file(fs::path(args->dirs[0]) / "summary.json");
    sweep::ReportInput input;
    if (sweep_dir) {
      // A sweep is ranked by its own sweep.objective and mode, as its summary was.
      if (!args->objective.empty())
        throw UsageError("report: --objective is for run directories; " + args->dirs[0] + " is a sweep, reported by its sweep.objective");
      input = sweep::report_input_from_sweep(args->dirs[0]);
    } else {
      std::vector<fs::path> runs(args->dirs.begin(), args->dirs.end());
      input = sweep::report_input_from_runs(runs, args->objective, args->mode);
    }
    const fs::path out = !args->out.empty() ? fs::path(args->out) : sweep_dir ? fs::path(args->dirs[0]) : fs::current_path();
    fs::create_directories(out);
    std::cout << "report: " << sweep::write_sweep_report(input, out).string() << "\n";
  });

  auto job = std::make_shared<std::pair<std::string, size_t>>();
  CLI::App* sweep_job = app.add_subcommand("sweep-job", "Run job N of the sweep in DIR (what a Slurm array task of launcher=slurm runs)");
  sweep_job->group("");  // internal: not listed in --help
  sweep_job->add_option("dir", job->first, "The sweep's directory")->required();
  sweep_job->add_option("job", job->second, "The job's number")->required();
  sweep_job->callback([job] {
    const int rc = sweep::run_sweep_job(job->first, job->second);
    if (rc != kExitOk) throw ExitCode{rc};
  });
}

}  // namespace wavetrain::cli
