// `wavetrain train [OVERRIDES...]`: composes the config (Hydra's rules, see trainer/config/compose.h),
// then either prints it (--cfg job [--resolve], --info defaults, --info jobs) or runs: one run in
// a fresh run directory, or with -m one job per point of the sweep, each as a child process.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <thread>

#include <algorithm>
#include <cstdlib>
#include <iostream>

#include "cli/commands.h"
#include "experiments/amp/amp_task.h"
#include "experiments/asr/asr_task.h"
#include "experiments/common/data_config.h"
#include "trainer/config/compose.h"
#include "trainer/config/config.h"
#include "trainer/config/sweep.h"
#include "trainer/config/yaml_io.h"
#include "trainer/amp.h"
#include "trainer/checkpoint.h"
#include "trainer/device.h"
#include "trainer/distributed.h"
#include "trainer/distributed_env.h"
#include "trainer/sweep/multirun.h"
#include "trainer/sweep/search_space.h"
#include "trainer/config/known_keys.h"
#include "trainer/stop_signal.h"
#include "trainer/plugin.h"
#include "trainer/task.h"
#include "trainer/callback.h"
#include "trainer/threads.h"
#include "trainer/torch_compat.h"
#include "trainer/trainer.h"
#include "trainer/sweep/run_directory.h"
#include "wavetrain_build_config.h"

namespace wavetrain::cli {
namespace {

struct TrainOptions {
  std::vector<std::string> overrides;
  std::vector<std::string> config_dirs;
  std::string config_name = "config";
  std::string cfg;   // "job": print the composed config
  bool resolve = false;
  std::string info;  // "defaults" or "jobs"
  bool multirun = false;
  int parallel = 1;
  std::string resume;
};

// The built-in configs: an installed binary's (PREFIX/share/wavetrain/configs, beside its bin/),
// else the source tree's this binary was built from.
std::string builtin_config_dir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  const std::filesystem::path installed = exe.parent_path().parent_path() / "share" / "wavetrain" / "configs";
  if (!ec && std::filesystem::is_regular_file(installed / "config.yaml", ec)) return installed.string();
  return WAVETRAIN_BUILTIN_CONFIG_DIR;
}

std::vector<std::string> search_path(const TrainOptions& opt) {
  std::vector<std::string> dirs = opt.config_dirs;
  const char* env = std::getenv("WAVETRAIN_CONFIG_DIR");
  dirs.push_back(env && *env ? env : builtin_config_dir());
  return dirs;
}

// The argv a multirun job starts with: this binary, `train`, and the same config location.
std::vector<std::string> job_command(const TrainOptions& opt) {
  std::vector<std::string> cmd = {"/proc/self/exe", "train"};
  char self[4096];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) cmd[0] = std::string(self, static_cast<size_t>(n));
  for (const std::string& d : opt.config_dirs) {
    cmd.push_back("--config-dir");
    cmd.push_back(d);
  }
  cmd.push_back("--config-name");
  cmd.push_back(opt.config_name);
  return cmd;
}

std::string command_line_text(const TrainOptions& opt) {
  std::string s = "wavetrain train";
  for (const std::string& o : opt.overrides) s += " " + o;
  return s;
}

// .wavetrain/environment.yaml and the log: what this run runs on, and every warning about it.
void record_environment(const RunDirectory& run, const DeviceChoice& device, const AmpPolicy& amp) {
  using config::Node;
  const ThreadSettings threads = current_thread_settings();
  Node env = Node::mapping();
  env.set("device", Node::string(device.device.str()));
  env.set("precision", Node::string(precision_name(amp.requested)));
  env.set("amp", Node::string(amp.describe()));
  env.set("autocast", Node::boolean(amp.autocast));
  env.set("grad_scaler", Node::boolean(amp.grad_scaler));
  env.set("threads", Node::integer(threads.intra_op));
  env.set("omp_wait_policy", Node::string(threads.omp_wait_policy));
  env.set("wavetrain_version", Node::string(WAVETRAIN_VERSION));
  env.set("torch_version", Node::string(compat::torch_version()));
  Node warnings = Node::sequence();
  for (const std::string& w : device.warnings) warnings.push_back(Node::string(w));
  for (const std::string& w : amp.warnings) warnings.push_back(Node::string(w));
  env.set("warnings", warnings);
  run.write_meta("environment", env);
  run.log("device " + device.device.str() + "; " + amp.describe() + "; " + std::to_string(threads.intra_op) +
          " CPU threads");
  for (const Node& w : warnings.items()) {
    run.log("warning: " + w.string_value());
    std::cerr << "warning: " << w.string_value() << "\n";
  }
}

// A free TCP port on the loopback interface for a local group's rendezvous.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error(std::string("cannot find a free port for the ranks: ") + std::strerror(errno));
  ::close(fd);
  return ntohs(addr.sin_port);
}

// trainer.devices=N without a launcher: N ranks of this same command on this machine, each told
// its place through torchrun's variables. When one fails, the others stop by themselves (their
// next collective fails); any still running after `grace` are killed. Exit 1 if any rank failed.
int spawn_local_ranks(const TrainOptions& opt, int ranks, std::chrono::seconds grace) {
  std::vector<std::string> args = job_command(opt);
  args.insert(args.end(), opt.overrides.begin(), opt.overrides.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int port = free_port();
  std::cerr << "starting " << ranks << " ranks on 127.0.0.1:" << port << "\n";

  std::map<pid_t, int> rank_of;
  for (int r = 0; r < ranks; ++r) {
    // Each rank dies with this process (stop_protocol.h): a killed launcher leaves no rank behind.
    ChildEnvironment env({"RANK=" + std::to_string(r), "WORLD_SIZE=" + std::to_string(ranks), "LOCAL_RANK=" + std::to_string(r),
                          "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(port), "WAVETRAIN_LOCAL_RANKS=1"});
    // The ranks start with the stop signals blocked (trainer/sweep/stop_protocol.h).
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    block_stop_signals(attr);
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, argv[0], nullptr, &attr, argv.data(), env.envp());
    posix_spawnattr_destroy(&attr);
    if (rc != 0) throw std::runtime_error("cannot start rank " + std::to_string(r) + ": " + std::strerror(rc));
    rank_of[pid] = r;
  }

  // A stop request (stop_signal.h) to this process goes on to every rank; they stop at the same
  // step, rank 0 saves the checkpoint, and the run ends as interrupted when every rank says so.
  const StopSignalScope stop_scope;
  bool forwarded = false;
  int interrupted = 0;
  bool failed = false;
  auto deadline = std::chrono::steady_clock::time_point::max();
  while (!rank_of.empty()) {
    if (const int sig = stop_signal_received(); sig != 0 && !forwarded) {
      for (const auto& [p, r] : rank_of) ::kill(p, sig);
      forwarded = true;
    }
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid > 0 && rank_of.count(pid)) {
      const int r = rank_of[pid];
      rank_of.erase(pid);
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) continue;
      if (WIFEXITED(status) && WEXITSTATUS(status) == kExitInterrupted) {
        ++interrupted;
        continue;
      }
      failed = true;
      std::cerr << "rank " << r << (WIFSIGNALED(status) ? " was killed by signal " + std::to_string(WTERMSIG(status))
                                                         : " exited with code " + std::to_string(WEXITSTATUS(status)))
                << "\n";
      if (deadline == std::chrono::steady_clock::time_point::max()) deadline = std::chrono::steady_clock::now() + grace;
      continue;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      for (const auto& [p, r] : rank_of) {
        std::cerr << "rank " << r << " still running after another rank failed: stopping it\n";
        ::kill(p, SIGKILL);
      }
      deadline = std::chrono::steady_clock::time_point::max();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (failed) return kExitFailure;
  return interrupted == ranks ? kExitInterrupted : kExitOk;
}

}  // namespace

DeviceRequest device_request_of(const config::Config& cfg) {
  const std::string text = cfg.get_string("trainer.device", "auto");
  try {
    return DeviceRequest::parse(text);
  } catch (const DeviceError& e) {
    throw config::ConfigError("trainer.device=" + text + " (" + cfg.tree().find_path("trainer.device")->origin().str() + "): " + e.what());
  }
}

namespace {

// A composed config's keys that no part of the run reads (a file's `trainer.max_epoch`) are refused
// before anything is written, as an unknown command-line key is (trainer/config/known_keys.h).
void check_config_keys(const config::Node& composed, const std::vector<std::string>& dirs) {
  // The config's plugins first: their tasks, callbacks and keys are known like the built-in ones.
  load_plugins(config::Config(composed));
  config::KnownKeys known;
  known.add("plugins");
  known.add("callbacks");
  for (const std::string& name : configured_callback_names(config::Config(composed)))
    for (const std::string& key : callback_config_keys(name)) known.add(key);
  known.add_config_dir(dirs.back());  // the built-in configs/ (or WAVETRAIN_CONFIG_DIR in its place)
  std::string task;
  try {
    task = config::Config(composed).get_string("task", "");  // resolved: `task: ${my.task}` names one too
  } catch (const std::exception&) {  // `???` or a broken interpolation: the run says so where it reads it
  }
  for (const std::string& key : task_config_keys(task)) known.add(key);
  config::check_known_keys(composed, known);
  // And the types of every component's keys (trainer, data loader, amp, asr), whether or not this
  // task reads them; and what the amp task can check without its capture.
  const config::Config cfg(composed);
  cfg.check(trainer_config_keys());
  cfg.check(experiments::data_config_keys());
  cfg.check(experiments::amp::amp_config_keys());
  cfg.check(experiments::asr::asr_config_keys());
  if (task == "amp") {
    try {
      experiments::amp::check_amp_config(cfg);
    } catch (const std::invalid_argument& e) {  // a loss term: the loss's own words
      throw config::ConfigError(e.what());
    }
  }
}

// sweep.* and launcher.* of a composed config, checked.
MultirunOptions multirun_options(const config::Config& cfg) {
  MultirunOptions m;
  m.objective = cfg.get_string("sweep.objective", "");
  m.mode = cfg.get_string("sweep.mode", "min");
  if (m.mode != "min" && m.mode != "max") throw UsageError("sweep.mode must be min or max, got '" + m.mode + "'");
  m.strategy = cfg.get_string("sweep.strategy", "grid");
  if (m.strategy != "grid" && m.strategy != "random" && m.strategy != "asha")
    throw config::ConfigError("sweep.strategy='" + m.strategy + "': expected grid, random or asha");
  if (m.strategy == "asha") {
    if (m.objective.empty()) throw config::ConfigError("sweep.strategy=asha needs sweep.objective, the metric that ranks trials");
    m.asha_resource = cfg.get_string("sweep.asha.resource", "trainer.max_steps");
    if (m.asha_resource != "trainer.max_steps" && m.asha_resource != "trainer.max_epochs")
      throw config::ConfigError("sweep.asha.resource='" + m.asha_resource + "': expected trainer.max_steps or trainer.max_epochs "
                                "(a limit that a resumed run trains on to)");
    m.asha.min_resource = cfg.get_int("sweep.asha.min_resource", 1);
    m.asha.max_resource = cfg.get_int("sweep.asha.max_resource", 0);
    m.asha.eta = cfg.get_float("sweep.asha.eta", 3.0);
    m.asha.mode = m.mode;
    try {
      sweep::Asha check(1, m.asha);
    } catch (const std::invalid_argument& e) {
      throw config::ConfigError(e.what());
    }
  }
  if (cfg.tree().find("launcher")) m.launcher = *config::resolve_all(cfg.tree(), cfg.context()).find("launcher");
  return m;
}

// The objective must be a metric the jobs report: the validation metrics of the first job's task
// (one batch on the CPU), or train/loss.
void check_objective(const config::Config& cfg, const std::string& objective) {
  if (objective == "train/loss") return;
  std::unique_ptr<Task> task = make_task(cfg.get_string("task"), cfg);
  const c10::Device cpu(c10::kCPU);
  const AmpPolicy fp32 = resolve_amp_policy(parse_precision("32"), false, cpu.type(), probe_amp_capabilities(cpu));
  const Metrics metrics = evaluate(*task, Split::Validation, cpu, fp32, cfg.get_int("trainer.batch_size", 32), 1);
  std::string names = "train/loss";
  for (const auto& [name, value] : metrics) {
    if (name == objective) return;
    names += ", " + name;
  }
  throw config::ConfigError("sweep.objective='" + objective + "' is not a metric that task " + cfg.get_string("task") +
                            " reports; it reports: " + names);
}

int run_train(const TrainOptions& opt) {
  const std::vector<std::string> dirs = search_path(opt);
  auto options_of = [&](const std::string& group) { return config::group_options(dirs, group); };

  if (!opt.resume.empty()) {
    if (!opt.overrides.empty())
      throw UsageError("--resume continues a multirun with its own recorded overrides; drop '" + opt.overrides.front() + "'");
    MultirunOptions m;
    m.dir = opt.resume;
    m.parallel = opt.parallel;
    const RunDirectory sweep_dir = RunDirectory::lock_existing(opt.resume);  // one launcher per sweep
    const StopSignalScope stop_scope;  // SIGTERM stops the sweep in order (multirun.h)
    m.stop_requested = stop_signal_received;
    const MultirunSummary s = resume_multirun(m, std::cout);
    return s.stopped_by ? kExitInterrupted : s.failed ? kExitFailure : kExitOk;
  }

  if (opt.multirun || opt.info == "jobs") {
    // The sweep section comes from the config composed with the overrides that are not sweeps.
    config::SweepPlan probe = config::plan_sweep(opt.overrides, nullptr, options_of);
    const config::Composition base = config::compose({dirs, opt.config_name, probe.fixed});
    const config::Config cfg(base.config);
    const config::SweepPlan plan = config::plan_sweep(opt.overrides, base.config.find("sweep"), options_of);
    MultirunOptions m = multirun_options(cfg);
    const std::vector<sweep::SearchDimension> space = sweep::parse_search_space(cfg.tree().find_path("sweep.space"));
    std::vector<std::vector<std::string>> trials = plan.jobs;
    if (m.strategy == "grid") {
      if (!space.empty())
        throw config::ConfigError("sweep.space is searched by sweep.strategy=random or asha, not grid (the grid is "
                                  "sweep.params and the command line's sweeps)");
    } else {
      trials = sweep::draw_trials(plan.jobs, space, cfg.get_int_at_most("sweep.trials", 0, 1000000),
                                  static_cast<uint64_t>(cfg.get_int("sweep.seed", 0)));
    }
    if (opt.info == "jobs") {
      for (const auto& job : trials) {
        std::string line;
        for (const std::string& o : job) line += (line.empty() ? "" : " ") + o;
        std::cout << line << "\n";
      }
      return kExitOk;
    }
    // Everything that can be checked is checked before anything is written or submitted: every
    // job composes, the launcher's options and programs are there, the objective is a metric.
    for (const auto& job : trials) check_config_keys(config::compose({dirs, opt.config_name, job}).config, dirs);
    if (m.strategy == "asha") {
      std::vector<std::string> first = trials.front();
      first.push_back("++" + m.asha_resource + "=" + std::to_string(m.asha.max_resource));
      config::compose({dirs, opt.config_name, first});  // the resource key takes a number
    }
    m.parallel = check_launcher(m.launcher, opt.parallel);
    if (!m.objective.empty()) check_objective(config::Config(config::compose({dirs, opt.config_name, trials.front()}).config), m.objective);
    const std::string pattern =
        cfg.has("run.multirun_dir") ? cfg.get_string("run.multirun_dir") : "multirun/" + std::string("default");
    const RunDirectory dir = RunDirectory::create(pattern);
    m.dir = dir.path();
    m.command = job_command(opt);
    const StopSignalScope stop_scope;  // SIGTERM stops the sweep in order (multirun.h)
    m.stop_requested = stop_signal_received;
    const MultirunSummary s = run_multirun(trials, m, std::cout);
    return s.stopped_by ? kExitInterrupted : s.failed ? kExitFailure : kExitOk;
  }

  config::Composition composition = config::compose({dirs, opt.config_name, opt.overrides});
  make_plugin_paths_absolute(composition.config);  // the recorded config finds them from anywhere
  const config::Config cfg(composition.config);
  if (opt.cfg == "job") {
    std::cout << config::to_yaml(opt.resolve ? config::resolve_all(cfg.tree(), cfg.context()) : cfg.tree());
    return kExitOk;
  }
  if (opt.info == "defaults") {
    std::cout << config::format_defaults_tree(composition.defaults);
    return kExitOk;
  }

  const std::string task = cfg.get_string("task");  // ??? fails here, naming the key
  check_config_keys(composition.config, dirs);
  const std::optional<DistributedEnv> dist = distributed_env([](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    return v ? std::optional<std::string>(v) : std::nullopt;
  });
  // Local ranks are processes (cast to int); the timeout becomes milliseconds: both bounded.
  const int64_t devices = cfg.get_int_at_most("trainer.devices", 1, 4096);
  const auto timeout = std::chrono::seconds(cfg.get_int_at_most("trainer.dist_timeout", 300, 365 * 86400));
  if (devices < 1) throw config::ConfigError("trainer.devices must be >= 1");
  // Resuming a run that is already over does nothing and writes nothing (no resume-N record, no
  // log line, no re-validation): its result.json and the rest stay as the run left them.
  const std::string resume = cfg.get_string("trainer.resume", "");
  if (!resume.empty()) {
    const bool in_run_dir = resume == "last" || resume == "best";
    const std::string run_dir = in_run_dir ? cfg.get_string("run.dir") : "";
    const std::string ckpt = resume_checkpoint(cfg, run_dir);
    // Checked before any rank starts (with trainer.devices=N each would say it again). A run killed
    // before its first checkpoint has nothing to continue from: said before the run directory is
    // opened, which would add a resume-N record for an attempt that cannot start. A run that a live
    // process holds may not have saved one yet: opening it says who holds it.
    if (in_run_dir) RunDirectory::require_run_directory(run_dir);
    if (in_run_dir && !std::filesystem::exists(ckpt) && !run_directory_holder(run_dir)) {
      const bool has_last = std::filesystem::exists(std::filesystem::path(run_dir) / "checkpoints" / "last.ckpt");
      if (resume == "best" && has_last)
        throw std::runtime_error("Cannot resume run '" + run_dir + "' from its best checkpoint: there is no " + ckpt +
                                 " (no validation has ranked one yet, or trainer.monitor is not set); continue with trainer.resume=last");
      throw std::runtime_error("Nothing to resume in run '" + run_dir + "': it stopped before its first checkpoint (there is no " + ckpt +
                               "). Start it over: the same command without trainer.resume makes a new run beside it (or remove '" +
                               run_dir + "' first to reuse its name)");
    }
    const bool judge = !in_run_dir || std::filesystem::exists(ckpt);
    if (const std::optional<Finished> finished = judge ? finished_at(cfg, Checkpoint::load(ckpt)) : std::nullopt) {
      if (!dist || dist->rank == 0)
        std::cerr << (in_run_dir ? "run " + cfg.get_string("run.dir") : "checkpoint " + ckpt) << " is already complete: "
                  << finished->reason << "; nothing to do"
                  << (finished->raise.empty() ? "" : " (raise " + finished->raise + " to train further)") << "\n";
      return kExitOk;
    }
  }
  if (!dist && devices > 1) {
    FitOptions::from(cfg);  // the trainer's settings checked once here, not once per rank
    return spawn_local_ranks(opt, static_cast<int>(devices), timeout);
  }
  {
    const std::vector<std::string> known = task_names();
    if (std::find(known.begin(), known.end(), task) == known.end()) make_task(task, cfg);  // throws, listing them
  }
  // trainer.threads (docs/threads.md: WAVETRAIN_THREADS wins over it, and 0 is every usable core).
  if (cfg.has("trainer.threads")) {
    try {
      configure_threads(static_cast<int>(cfg.get_int_at_most("trainer.threads", 0, 4096)));
    } catch (const std::invalid_argument& e) {
      throw config::ConfigError(e.what());
    }
  }
  // Device and precision are decided before anything is written, so a run that cannot start
  // (bf16 on a GPU without it, cuda:3 on a 1-GPU machine) fails at once.
  DeviceChoice device = choose_device(device_request_of(cfg),
                                      probe_availability());
  const AmpPolicy amp = resolve_amp_policy(parse_precision(cfg.get_string("trainer.precision", "32")),
                                           cfg.get_bool("trainer.amp_on_mps", false), device.device.type(),
                                           probe_amp_capabilities(device.device));
  std::unique_ptr<ProcessGroup> group;
  if (dist) {
    // One GPU per local rank.
    if (device.device.is_cuda()) {
      const int count = probe_availability().cuda_device_count;
      if (dist->local_rank >= count)
        throw std::runtime_error("local rank " + std::to_string(dist->local_rank) + " has no GPU of its own (" +
                                 std::to_string(count) + " visible)");
      device.device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(dist->local_rank));
    }
    group = std::make_unique<ProcessGroup>(*dist, std::chrono::duration_cast<std::chrono::milliseconds>(timeout),
                                           device.device);
  }
  // Rank 0 (or the only process) makes the run directory and tells the others where it is.
  // Resuming `last` or `best` continues in the run's own directory; a path starts a new one.
  // trainer.cuda_memory_fraction caps the CUDA caching allocator (1.0 = no cap); elsewhere it is ignored.
  const double memory_fraction = cfg.get_float("trainer.cuda_memory_fraction", 1.0);
  std::string memory_warning;
  try {
    memory_warning = check_cuda_memory_fraction(memory_fraction, device.device);
  } catch (const DeviceError& e) {
    throw config::ConfigError(std::string("trainer.cuda_memory_fraction: ") + e.what());
  }
  if (!memory_warning.empty()) device.warnings.push_back(memory_warning);
  apply_cuda_memory_fraction(memory_fraction, device.device);
  const RunDirectory run = [&] {
    if (group && group->rank() != 0) return RunDirectory::attach(group->get("wavetrain/run_dir"));
    RunDirectory r = resume == "last" || resume == "best" ? RunDirectory::open_existing(cfg.get_string("run.dir"))
                                                          : RunDirectory::create_for(cfg);
    // A taken run.dir is never written into: the run goes beside it, and says so first thing.
    const std::string moved = r.requested() == r.path() ? ""
                              : "note: run.dir '" + r.requested().string() + "' is taken by an earlier run; this run writes to '" +
                                    r.path().string() + "' (continue the earlier one with trainer.resume=last)";
    if (!moved.empty()) std::cerr << "wavetrain: " << moved << "\n";
    r.record(cfg, opt.overrides, command_line_text(opt));
    if (!moved.empty()) r.log(moved);
    record_environment(r, device, amp);
    if (group) {
      r.log("distributed: " + std::to_string(group->size()) + " ranks (" + dist->launcher + "), master " +
            dist->master_addr + ":" + std::to_string(dist->master_port));
      group->set("wavetrain/run_dir", r.path().string());
    }
    std::cerr << "run directory: " << r.path().string() << "\n";
    return r;
  }();
  // A run's failure (a full disk, a bad batch) is in its log too, not only on the terminal.
  const FitResult fitted = [&] {
    try {
      return Trainer(cfg, run, device, amp, group.get()).fit();
    } catch (const std::exception& e) {
      if (!group || group->rank() == 0) try {
          run.log(std::string("error: ") + e.what());
        } catch (const std::exception&) {  // the log itself cannot be written: the terminal has it
        }
      throw;
    }
  }();
  if (fitted.interrupted_by != 0) {
    if (!group || group->rank() == 0)
      std::cerr << "stopped by " << stop_signal_name(fitted.interrupted_by) << " at step " << fitted.global_step
                << "; checkpoint saved: continue with trainer.resume=last run.dir=" << run.path().string() << "\n";
    return kExitInterrupted;
  }
  if (group && group->rank() != 0) return kExitOk;
  std::cerr << "done: " << (run.path() / "result.json").string() << "\n";
  return kExitOk;
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto opt = std::make_shared<TrainOptions>();
  CLI::App* cmd = app.add_subcommand("train", "Compose a config from configs/ and overrides, and run it");
  cmd->add_option("overrides", opt->overrides,
                  "Overrides in Hydra's grammar: key=value, +key=value, ++key=value, ~key, group=option; "
                  "with -m also sweeps: a=1,2  choice(..)  range(..)  glob(..)  zip(a=[..],b=[..])");
  // One folder per -cd: a vector option would otherwise swallow the overrides that follow it.
  cmd->add_option("--config-dir", opt->config_dirs, "A config folder searched before the built-in configs/ (-cd)")
      ->allow_extra_args(false);
  cmd->add_option("--config-name", opt->config_name, "The primary config, without .yaml (-cn)")->capture_default_str();
  cmd->add_option("--cfg", opt->cfg, "Print the composed config and exit")->check(CLI::IsMember({"job"}));
  cmd->add_flag("--resolve", opt->resolve, "With --cfg: resolve interpolations");
  cmd->add_option("--info", opt->info, "Print the defaults tree (defaults) or the jobs of a sweep (jobs) and exit")
      ->check(CLI::IsMember({"defaults", "jobs"}));
  cmd->add_flag("-m,--multirun", opt->multirun, "Run one job per point of the sweep");
  cmd->add_option("-j,--jobs", opt->parallel, "Multirun jobs at a time")->check(CLI::PositiveNumber);
  cmd->add_option("--resume", opt->resume, "Re-run the jobs of this multirun directory that did not finish");
  cmd->callback([opt] {
    const int rc = run_train(*opt);
    if (rc != kExitOk) throw ExitCode{rc};
  });
}

}  // namespace wavetrain::cli
