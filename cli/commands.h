// The wavetrain subcommands. Each add_*_command registers its options on the app and runs from
// the returned callback after parsing; errors propagate as exceptions that main() reports.
#pragma once

#include <CLI/CLI.hpp>

#include "trainer/config/config.h"
#include "trainer/device.h"

namespace wavetrain::cli {

// Exit codes shared by every subcommand.
inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;  // the command ran and failed
inline constexpr int kExitUsage = 2;    // bad command line or environment: nothing was run

// An error the user caused by what they typed; main() prints it and exits with kExitUsage.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Thrown by a command that has already reported its failure (a multirun with failed jobs) and
// only needs main() to exit with `code`.
struct ExitCode {
  int code;
};

// trainer.device of a run's config, parsed; a bad one is an error naming the key and where it was
// set: "trainer.device=1.5 (exp.yaml:3): Unknown device '1.5'. Expected one of: ...".
DeviceRequest device_request_of(const config::Config& cfg);

void add_amp_commands(CLI::App& app);  // data amp, export nam, import nam, infer
void add_asr_commands(CLI::App& app);  // data asr-synth, asr-bpe (after add_amp_commands, which makes `data`)
void add_ckpt_command(CLI::App& app);
void add_devices_command(CLI::App& app);
void add_eval_command(CLI::App& app);
void add_train_command(CLI::App& app);
void add_sweep_commands(CLI::App& app);  // report, sweep-job

}  // namespace wavetrain::cli
