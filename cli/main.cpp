// The wavetrain binary: sets the process-wide defaults (OpenMP wait policy, threads), parses the
// command line and runs one subcommand. Exit codes: 0 success, 1 the command failed, 2 usage error.
#include <alloca.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <set>

#include "cli/commands.h"
#include "experiments/register.h"
#include "trainer/distributed.h"
#include "trainer/stop_signal.h"
#include "trainer/threads.h"
#include "trainer/torch_compat.h"

// libgomp (LibTorch's OpenMP) reads OMP_WAIT_POLICY once, in its load-time constructor, before
// main(). Setting the variable in-process is too late, and even from .preinit_array it is lost:
// glibc's own initializer resets `environ` to the original block afterwards (seen on Debian 12).
// So when the user has not chosen a policy, the process re-executes itself with wavetrain's
// default added. .preinit_array runs before every shared library's initializer, so the discarded
// first start costs only the dynamic loading.
// Only the arguments and raw system calls are safe here: libc's `environ` is not yet set up
// (getenv() finds nothing), and no C++ runtime or library initializer has run.
extern "C" {
static void wavetrain_preinit(int, char** argv, char** envp) {
  static const char kPrefix[] = "OMP_WAIT_POLICY=";
  size_t count = 0;
  for (; envp != nullptr && envp[count] != nullptr; ++count)
    if (strncmp(envp[count], kPrefix, sizeof(kPrefix) - 1) == 0) return;  // the user's choice stands

  static char assignment[64];
  snprintf(assignment, sizeof(assignment), "%s%s", kPrefix, wavetrain::kDefaultOmpWaitPolicy);
  char** env = static_cast<char**>(alloca((count + 2) * sizeof(char*)));
  for (size_t i = 0; i < count; ++i) env[i] = envp[i];
  env[count] = assignment;
  env[count + 1] = nullptr;
  execve("/proc/self/exe", argv, env);  // returns only on failure: carry on with libgomp's default
}
__attribute__((section(".preinit_array"), used)) static void (*const wavetrain_preinit_entry)(int, char**,
                                                                                               char**) = wavetrain_preinit;
}

namespace {

std::string version_text() {
  return std::string("wavetrain ") + WAVETRAIN_VERSION + " (LibTorch " + wavetrain::compat::torch_version() +
         (wavetrain::compat::cuda_built() ? ", CUDA" : ", CPU only") + ")";
}

int usage_error(const std::string& message) {
  std::cerr << "wavetrain: error: " << message << "\nRun 'wavetrain --help' for the commands and options.\n";
  return wavetrain::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace wavetrain::cli;
  wavetrain::install_stop_signal_handlers();  // before anything slow: a sweep's job may be signalled at once
  wavetrain::die_with_parent();               // a launcher's child stops when the launcher dies (stop_protocol.h)

  CLI::App app{"wavetrain: train and evaluate audio models on LibTorch", "wavetrain"};
  app.set_version_flag("--version", version_text());
  app.require_subcommand(1);
  app.fallthrough(false);
  wavetrain::experiments::register_tasks();
  add_amp_commands(app);
  add_asr_commands(app);
  add_ckpt_command(app);
  add_devices_command(app);
  add_eval_command(app);
  add_train_command(app);
  add_sweep_commands(app);

  // Hydra's short forms -cd/-cn are two letters, which CLI11 does not allow for short options.
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& a : args) {
    if (a == "-cd") a = "--config-dir";
    if (a == "-cn") a = "--config-name";
  }

  // CLI11 reports an unknown command as an unexpected argument, and an unknown option before the
  // command as a missing command; name each as what it is.
  if (argc > 1) {
    const std::string first = argv[1];
    if (first[0] != '-') {
      std::set<std::string> names, listed;
      for (const CLI::App* sub : app.get_subcommands({})) {
        names.insert(sub->get_name());
        if (!sub->get_group().empty()) listed.insert(sub->get_name());  // an empty group: internal (sweep-job)
      }
      if (!names.count(first)) {
        std::string list;
        for (const std::string& n : listed) list += (list.empty() ? "" : ", ") + n;
        return usage_error("unknown command '" + first + "'. Commands: " + list);
      }
    } else if (app.get_option_no_throw(first.substr(0, first.find('='))) == nullptr) {
      return usage_error("unknown option '" + first + "' (options go after the command: wavetrain COMMAND [OPTIONS])");
    }
  }

  try {
    wavetrain::configure_threads();
  } catch (const std::exception& e) {
    return usage_error(e.what());
  }

  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend() - 1);  // CLI11 takes them reversed, without argv[0]
    app.parse(reversed);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what());
  } catch (const UsageError& e) {
    return usage_error(e.what());
  } catch (const ExitCode& e) {
    return e.code;
  } catch (const std::exception& e) {
    // A rank other than 0 says which it is. One that `train trainer.devices=N` started stays quiet
    // about what rank 0 reports too (another rank went away; a checkpoint that does not fit): rank
    // 0's error and the launcher's line for each rank say it (a second error said nothing more).
    const char* rank = std::getenv("RANK");
    const bool other_rank = rank != nullptr && std::string(rank) != "0";
    if (other_rank && std::getenv("WAVETRAIN_LOCAL_RANKS") && dynamic_cast<const wavetrain::RankZeroReportsError*>(&e)) return kExitFailure;
    std::cerr << "wavetrain: error: " << (other_rank ? "rank " + std::string(rank) + ": " : std::string()) << e.what() << "\n";
    return kExitFailure;
  }
  return kExitOk;
}
