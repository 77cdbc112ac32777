// Running outside programs (Slurm's sbatch, squeue and scontrol for the sweep launcher; sox, espeak-ng
// and flite for the experiments' data): by argument vector, never through a shell, so that text and
// file names need no quoting.
#pragma once

#include <string>
#include <vector>

namespace wavetrain::sweep {

struct ProgramResult {
  int exit_code = -1;  // the program's exit status; 128 + the signal when one ended it; 127 when it could not start
  std::string output;  // stdout, when asked for
  std::string errors;  // stderr (its last 4 KiB)
};

// Runs argv[0] (searched on PATH) with argv and waits for it. stdin is /dev/null.
ProgramResult run_program(const std::vector<std::string>& argv, bool capture_stdout = false);

// Whether `name` is an executable on PATH.
bool program_on_path(const std::string& name);

// "espeak-ng -v en-us+m3 -w '/tmp/x y.wav' 'set an alarm'": argv as a shell would need it, for
// error messages and records.
std::string command_line(const std::vector<std::string>& argv);

}  // namespace wavetrain::sweep
