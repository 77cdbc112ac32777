// `wavetrain ckpt info FILE`: what a checkpoint (or a PyTorch state dict) holds.
#include <iostream>

#include "cli/commands.h"
#include "trainer/checkpoint.h"

namespace wavetrain::cli {

void add_ckpt_command(CLI::App& app) {
  CLI::App* ckpt = app.add_subcommand("ckpt", "Inspect checkpoints");
  ckpt->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  CLI::App* info = ckpt->add_subcommand("info", "Print a checkpoint's versions, step, metrics and tensors");
  info->add_option("file", *file, "A wavetrain checkpoint or a PyTorch state dict (.pt)")->required();
  info->callback([file] { std::cout << Checkpoint::info(*file); });
}

}  // namespace wavetrain::cli
