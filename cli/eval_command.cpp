// `wavetrain eval CHECKPOINT_OR_RUN_DIR [OVERRIDES]`: a trained model's metrics on a split, from the
// run's own config (with overrides), written to the run directory as eval-N.json.
#include <filesystem>
#include <optional>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <torch/nn/module.h>

#include "cli/commands.h"
#include "data/hdf5_store.h"
#include "experiments/amp/report.h"
#include "experiments/asr/asr_eval.h"
#include "experiments/asr/asr_report.h"
#include "trainer/amp.h"
#include "trainer/serialization/atomic_file.h"
#include "trainer/checkpoint.h"
#include "trainer/checkpoint_average.h"
#include "trainer/config/compose.h"
#include "trainer/config/yaml_io.h"
#include "trainer/device.h"
#include "trainer/plugin.h"
#include "trainer/sweep/run_directory.h"
#include "trainer/trainer.h"
#include "trainer/weights.h"

namespace fs = std::filesystem;

namespace wavetrain::cli {
namespace {

struct EvalOptions {
  std::string target;
  std::vector<std::string> overrides;
  std::string split = "val";
  int64_t avg = 1;  // > 1: the weights of that many epoch checkpoints up to the target, averaged
};

// An ASR run's config, for evaluation: a named split becomes the validation split; CMVN is not
// recomputed (the checkpoint holds the statistics the model was trained with); decoding keys that
// runs from before they existed lack get their defaults, so that overrides can set them.
void prepare_asr_eval_config(config::Node& tree, const std::string& split) {
  if (split == "train") {
    const config::Node* train = tree.find_path("asr.train_split");
    tree.set_path("asr.valid_split", train ? *train : config::Node::string("train"));
  }
  else if (split != "val") tree.set_path("asr.valid_split", config::Node::string(split));
  tree.set_path("asr.features.cmvn", config::Node::boolean(false));
  if (!tree.find_path("decoding.method")) tree.set_path("decoding.method", config::Node::string("greedy_search"));
  if (!tree.find_path("decoding.beam")) tree.set_path("decoding.beam", config::Node::integer(4));
  if (!tree.find_path("decoding.max_sym_per_frame")) tree.set_path("decoding.max_sym_per_frame", config::Node::integer(1));
  // Test conditions (asr.eval.*), for runs from before they existed.
  if (!tree.find_path("asr.eval.sample_rate")) tree.set_path("asr.eval.sample_rate", config::Node::integer(0));
  if (!tree.find_path("asr.eval.lead_silence")) tree.set_path("asr.eval.lead_silence", config::Node::integer(0));
  if (!tree.find_path("asr.eval.snr_db")) tree.set_path("asr.eval.snr_db", config::Node::null());
  if (!tree.find_path("asr.eval.noise")) tree.set_path("asr.eval.noise", config::Node::string("white"));
}

void run_asr_eval(Task& task, const config::Config& cfg, const at::Device& device, const AmpPolicy& amp, const std::string& checkpoint,
                  int64_t step, const std::string& run_dir, int64_t avg) {
  namespace asr = experiments::asr;
  const auto& asr_task = dynamic_cast<const asr::AsrEvaluation&>(task);
  asr::AsrEvalOptions options;
  options.decoding = asr_task.decoding();  // decoding.* as the task read and checked them
  options.batch_size = cfg.get_int("trainer.batch_size", 32);
  asr::AsrEvalResult r = asr::evaluate_asr(task, device, amp, options);
  // An average's files beside the single checkpoint's, as icefall names them (greedy_search-max-sym-per-frame-2-avg-5).
  if (avg > 1) r.method += "-avg-" + std::to_string(avg);
  const std::vector<std::string> files = asr::write_asr_eval_files(run_dir, r);
  std::cout << checkpoint << " (step " << step << "), split " << r.split << ", " << r.method
            << (options.decoding.method == "modified_beam_search" ? " (beam " + std::to_string(options.decoding.beam) + ")" : "") << ":\n";
  std::cout << asr::kaldi_wer_line(r.stats.total) << "\n";
  std::cout << std::fixed << std::setprecision(1) << "decoded " << r.audio_seconds << " s of audio in " << r.decode_seconds << " s: "
            << r.real_time_factor() << "x real time\n";
  for (const std::string& f : files) std::cout << "written: " << f << "\n";
  const auto [html, md] = asr::write_asr_report(run_dir, checkpoint, step, r, asr_task);
  std::cout << "report: " << html << " (and " << md << ")\n";
}

void run_eval(const EvalOptions& opt) {
  // A run directory means its best checkpoint (else its last); a file is a checkpoint.
  const fs::path checkpoint = Checkpoint::of_target(opt.target);
  fs::path run_dir;
  if (fs::is_directory(opt.target)) run_dir = opt.target;
  else if (fs::exists(checkpoint.parent_path().parent_path() / ".wavetrain")) run_dir = checkpoint.parent_path().parent_path();
  TrainingState state = Checkpoint::load(checkpoint.string());
  std::string label = checkpoint.string();  // what the output and the report say was evaluated
  if (opt.avg > 1) {
    std::vector<std::string> used;
    state.model = averaged_model(checkpoint.parent_path().string(), state.global_step, opt.avg, &used);
    label = "the average of " + std::to_string(used.size()) + " checkpoints, " + fs::path(used.front()).filename().string() + " to " +
            fs::path(used.back()).filename().string() + " (up to " + checkpoint.string() + ")";
  }
  config::Node tree = config::load_yaml_string(state.config_yaml, checkpoint.string() + " (its config)");
  const config::Node* task_name = tree.find_path("task");
  const bool asr = task_name != nullptr && task_name->kind() == config::Node::Kind::String && task_name->string_value() == "asr";
  if (asr) prepare_asr_eval_config(tree, opt.split);
  else if (opt.split != "val" && opt.split != "train")
    throw std::runtime_error("--split " + opt.split + ": this run's task has the splits val and train (named splits are for ASR runs)");
  for (const std::string& o : opt.overrides) config::apply_value_override(tree, o);
  const config::Config cfg(tree);
  load_plugins(cfg);  // a plugin's task, as the run's recorded config names it
  if (asr && opt.split != "val" && opt.split != "train") {
    // Named here as the user named it: the task would report asr.valid_split, a key they never set.
    const std::string store = cfg.get_string("asr.data", "");
    const std::vector<std::string> splits = data::DatasetReader(store).splits();
    if (std::find(splits.begin(), splits.end(), opt.split) == splits.end()) {
      std::string have;
      for (const std::string& x : splits) have += (have.empty() ? "" : ", ") + x;
      throw std::runtime_error("--split " + opt.split + ": the run's store " + store + " has no such split; it has " +
                               (have.empty() ? "none" : have) + " (and val, train)");
    }
  }

  const DeviceChoice device = choose_device(device_request_of(cfg),
                                            probe_availability());
  for (const std::string& w : device.warnings) std::cerr << "warning: " << w << "\n";
  const AmpPolicy amp = resolve_amp_policy(parse_precision(cfg.get_string("trainer.precision", "32")),
                                           cfg.get_bool("trainer.amp_on_mps", false), device.device.type(),
                                           probe_amp_capabilities(device.device));
  std::unique_ptr<Task> task = make_task(cfg.get_string("task"), cfg);
  task->model().to(device.device);
  load_state_dict(task->model(), state.model, /*strict=*/true, checkpoint.string());
  if (asr) {
    std::optional<RunDirectory> created;  // held (with its lock) while the evaluation writes into it
    if (run_dir.empty()) run_dir = created.emplace(RunDirectory::create_for(cfg)).path();
    run_asr_eval(*task, cfg, device.device, amp, label, state.global_step, run_dir.string(), opt.avg);
    return;
  }
  const Metrics metrics = evaluate(*task, opt.split == "train" ? Split::Train : Split::Validation, device.device, amp,
                                   cfg.get_int("trainer.batch_size", 32));

  std::optional<RunDirectory> created;  // held (with its lock) while the evaluation writes into it
  if (run_dir.empty()) run_dir = created.emplace(RunDirectory::create_for(cfg)).path();
  nlohmann::json j;
  j["checkpoint"] = checkpoint.string();
  if (opt.avg > 1) j["averaged"] = label;
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

  std::cout << label << " (step " << state.global_step << "), split " << opt.split << ":\n";
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
  cmd->add_option("--split", opt->split, "val or train; for an ASR run, also any split of its store (test-unseen-voices)")
      ->capture_default_str();
  cmd->add_option("--avg", opt->avg,
                  "Average the weights of this many epoch checkpoints (epoch=E-step=S.ckpt) ending at the target's step, "
                  "as icefall's --avg (train with trainer.checkpoint.every_n_epochs=1)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))
      ->capture_default_str();
  cmd->callback([opt] { run_eval(*opt); });
}

}  // namespace wavetrain::cli
