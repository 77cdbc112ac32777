// `wavetrain eval CHECKPOINT_OR_RUN_DIR [OVERRIDES]`: a trained model's metrics on a split, from the
// run's own config (with overrides), written to the run directory as eval-N.json.
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "cli/commands.h"
#include "experiments/amp/report.h"
#include "trainer/amp.h"
#include "trainer/atomic_file.h"
#include "trainer/checkpoint.h"
#include "trainer/config/compose.h"
#include "trainer/config/yaml_io.h"
#include "trainer/device.h"
#include "trainer/run_directory.h"
#include "trainer/trainer.h"
#include "trainer/weights.h"

namespace fs = std::filesystem;

namespace wavetrain::cli {
namespace {

struct EvalOptions {
  std::string target;
  std::vector<std::string> overrides;
  std::string split = "val";
};

void run_eval(const EvalOptions& opt) {
  // A run directory means its best checkpoint (else its last); a file is a checkpoint.
  fs::path checkpoint = opt.target, run_dir;
  if (fs::is_directory(opt.target)) {
    run_dir = opt.target;
    checkpoint = run_dir / "checkpoints/best.ckpt";
    if (!fs::exists(checkpoint)) checkpoint = run_dir / "checkpoints/last.ckpt";
    if (!fs::exists(checkpoint))
      throw std::runtime_error(opt.target + ": no checkpoints/best.ckpt or checkpoints/last.ckpt in this directory");
  } else if (fs::exists(checkpoint.parent_path().parent_path() / ".wavetrain")) {
    run_dir = checkpoint.parent_path().parent_path();
  }
  const TrainingState state = Checkpoint::load(checkpoint.string());
  config::Node tree = config::load_yaml_string(state.config_yaml, checkpoint.string() + " (its config)");
  for (const std::string& o : opt.overrides) config::apply_value_override(tree, o);
  const config::Config cfg(tree);

  const DeviceChoice device = choose_device(DeviceRequest::parse(cfg.get_string("trainer.device", "auto")),
                                            probe_availability());
  for (const std::string& w : device.warnings) std::cerr << "warning: " << w << "\n";
  const AmpPolicy amp = resolve_amp_policy(parse_precision(cfg.get_string("trainer.precision", "32")),
                                           cfg.get_bool("trainer.amp_on_mps", false), device.device.type(),
                                           probe_amp_capabilities(device.device));
  std::unique_ptr<Task> task = make_task(cfg.get_string("task"), cfg);
  task->model().to(device.device);
  load_state_dict(task->model(), state.model, /*strict=*/true, checkpoint.string());
  const Metrics metrics = evaluate(*task, opt.split == "train" ? Split::Train : Split::Validation, device.device, amp,
                                   cfg.get_int("trainer.batch_size", 32));

  if (run_dir.empty()) run_dir = RunDirectory::create_for(cfg).path();
  nlohmann::json j;
  j["checkpoint"] = checkpoint.string();
  j["split"] = opt.split;
  j["global_step"] = state.global_step;
  j["overrides"] = opt.overrides;
  for (const auto& [k, v] : metrics) j["metrics"][k] = v;
  fs::path out;
  for (int n = 1;; ++n) {  // never overwrite an earlier evaluation
    out = run_dir / ("eval-" + std::to_string(n) + ".json");
    if (!fs::exists(out)) break;
  }
  write_file_atomic(out.string(), j.dump(2) + "\n");

  std::cout << checkpoint.string() << " (step " << state.global_step << "), split " << opt.split << ":\n";
  for (const auto& [k, v] : metrics) std::cout << "  " << std::left << std::setw(24) << k << config::format_float(v) << "\n";
  std::cout << "written to " << out.string() << "\n";
  if (cfg.get_string("task") == "amp") {  // amp runs also get a report a person would rather look at
    const auto [html, md] = experiments::amp::write_amp_report(run_dir.string(), checkpoint.string(), cfg);
    std::cout << "report: " << html << " (and " << md << ")\n";
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto opt = std::make_shared<EvalOptions>();
  CLI::App* cmd = app.add_subcommand("eval", "Metrics of a trained model on a split, from a checkpoint or a run directory");
  cmd->add_option("target", opt->target, "A run directory (its best, else last checkpoint) or a checkpoint file")->required();
  cmd->add_option("overrides", opt->overrides, "Value overrides on the run's config, e.g. trainer.batch_size=256");
  cmd->add_option("--split", opt->split, "Which split")->check(CLI::IsMember({"val", "train"}))->capture_default_str();
  cmd->callback([opt] { run_eval(*opt); });
}

}  // namespace wavetrain::cli
