// The amp-modeling commands:
//   wavetrain data amp --input DRY --output AMP -o STORE   capture data, checked and aligned
//   wavetrain export nam CHECKPOINT -o MODEL.nam            for the NAM plugin
//   wavetrain import nam MODEL.nam -o MODEL.ckpt            a .nam file as a wavetrain checkpoint
//   wavetrain infer MODEL IN.wav -o OUT.wav                 any length, chunked (MODEL: .ckpt or .nam)
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "trainer/serialization/atomic_file.h"
#include "data/audio_io.h"
#include "experiments/amp/amp_task.h"
#include "experiments/amp/capture.h"
#include "experiments/amp/synth.h"
#include "trainer/checkpoint.h"
#include "trainer/config/yaml_io.h"
#include "trainer/weights.h"

namespace wavetrain::cli {
namespace {

namespace amp = experiments::amp;

amp::AmpModel load_model_unchecked(const std::string& path);

// A model from a wavetrain checkpoint (its recorded config says which) or a .nam file. Its rate is
// checked: a checkpoint trained with amp.sample_rate 0 would otherwise be exported as it is, and
// played at 1 Hz would write a file of a few samples.
amp::AmpModel load_model(const std::string& path) {
  amp::AmpModel m = load_model_unchecked(path);
  if (!amp::nam_sample_rate_supported(m.sample_rate))
    throw std::runtime_error(path + ": amp.sample_rate: " + amp::nam_sample_rate_problem(m.sample_rate));
  return m;
}

// A JSON value a checkpoint recorded (nam.file, nam.metadata, ...): one line naming the checkpoint
// and the key when it is not JSON (nlohmann's message without its "[json.exception...]" tag).
nlohmann::json recorded_json(const config::Config& cfg, const std::string& key, const std::string& path) {
  try {
    return nlohmann::json::parse(cfg.get_string(key));
  } catch (const nlohmann::json::exception& e) {
    const std::string what = e.what();
    throw std::runtime_error(path + ": the recorded " + key + " is not JSON: " + what.substr(what.find("] ") + 2));
  }
}

amp::AmpModel load_model_unchecked(const std::string& path) {
  if (path.size() > 4 && path.compare(path.size() - 4, 4, ".nam") == 0) return amp::read_nam(path);
  const TrainingState s = Checkpoint::load(path);
  const config::Config cfg(config::load_yaml_string(s.config_yaml, path + " (recorded config)"));
  if (cfg.has("nam.file")) {  // an imported model the trainer does not build: its file as read
    const nlohmann::json file = recorded_json(cfg, "nam.file", path);
    try {
      return amp::amp_model_of(amp::nam_model_from_json(file));
    } catch (const std::exception& e) {
      throw std::runtime_error(path + ": the recorded nam.file is not a .nam model: " + e.what());
    }
  }
  amp::AmpModel m = amp::amp_model_from_config(cfg);
  load_state_dict(m.module(), s.model, /*strict=*/true, path);
  if (cfg.has("nam.version")) m.nam_version = cfg.get_string("nam.version");  // an imported .nam file's
  if (cfg.has("nam.metadata")) m.metadata = recorded_json(cfg, "nam.metadata", path);
  if (cfg.has("nam.extra")) m.nam_extra = recorded_json(cfg, "nam.extra", path);
  if (cfg.has("nam.config") && m.wavenet) m.nam_config = recorded_json(cfg, "nam.config", path);
  if (cfg.has("nam.sample_rate_in_file")) m.sample_rate_in_file = cfg.get_bool("nam.sample_rate_in_file");
  for (const auto& [name, value] : s.metrics)
    if (name == "val/esr") m.metadata["training"]["validation_esr"] = value;
  return m;
}

std::string preset_of(const amp::AmpModel& m) {
  if (!m.trainable()) return "";
  if (m.wavenet) {
    // head_scale comes back from the file's float32 weights: compare it to float precision.
    const std::optional<amp::WaveNetConfig> classic = m.wavenet->classic_config();
    if (!classic) return "";
    const amp::WaveNetConfig& c = *classic;
    for (const std::string& p : amp::wavenet_preset_names()) {
      const amp::WaveNetConfig preset = amp::wavenet_preset(p);
      if (amp::wavenet_config_to_json(preset)["layers"] == amp::wavenet_config_to_json(c)["layers"] &&
          std::abs(preset.head_scale - c.head_scale) <= 1e-6 * preset.head_scale)
        return p;
    }
  } else if (m.lstm) {  // a ConvNet or Linear model is recorded by its config (model.nam_config)
    for (const std::string& p : amp::lstm_preset_names())
      if (amp::lstm_config_to_json(amp::lstm_preset(p)) == amp::lstm_config_to_json(m.lstm->config())) return p;
  }
  return "";
}

}  // namespace

void add_amp_commands(CLI::App& app) {
  // data amp
  CLI::App* data = app.add_subcommand("data", "Build datasets");
  data->require_subcommand(1);
  auto capture = std::make_shared<amp::CaptureOptions>();
  CLI::App* amp_data = data->add_subcommand("amp", "Capture data for amp modeling: dry input and amp output, checked and aligned");
  amp_data->add_option("--input", capture->input, "The dry signal sent to the amp (mono WAV/FLAC)")->required();
  amp_data->add_option("--output", capture->output, "The amp's recorded output (mono, same rate)")->required();
  amp_data->add_option("-o,--store", capture->store, "The HDF5 store to write")->required();
  amp_data->add_option("--delay", capture->delay, "Output latency in samples (default: estimated)");
  amp_data->add_option("--valid-seconds", capture->valid_seconds, "Seconds at the end kept for validation")->capture_default_str();
  amp_data->callback([capture] {
    capture->command = "wavetrain data amp --input " + capture->input + " --output " + capture->output + " -o " + capture->store;
    const amp::CaptureReport r = amp::build_capture(*capture);
    std::printf("capture: %s\n  %d Hz, %.2f s aligned (train %.2f s, validation %.2f s)\n", capture->store.c_str(), r.sample_rate,
                static_cast<double>(r.samples) / r.sample_rate, static_cast<double>(r.train_samples) / r.sample_rate,
                static_cast<double>(r.valid_samples) / r.sample_rate);
    if (r.delay_estimated)
      std::printf("  latency: %lld samples detected (%.2f ms); aligned at %lld (%lld early, for safety); override with --delay N\n",
                  static_cast<long long>(r.detected_delay), 1000.0 * static_cast<double>(r.detected_delay) / r.sample_rate,
                  static_cast<long long>(r.delay), static_cast<long long>(r.detected_delay - r.delay));
    else
      std::printf("  latency: %lld samples (given)\n", static_cast<long long>(r.delay));
    if (r.trimmed_output_samples > 0)
      std::printf("  the output's last %lld samples (past the input's end) were cut\n", static_cast<long long>(r.trimmed_output_samples));
  });

  auto synth_dir = std::make_shared<std::string>();
  auto synth_seconds = std::make_shared<double>(60.0);
  auto synth_seed = std::make_shared<uint64_t>(0);
  CLI::App* synth = data->add_subcommand("amp-synth", "Write a built-in capture: a dry test signal and its render through a sox 'amp'");
  synth->add_option("-o,--output", *synth_dir, "Directory for dry.wav and amp.wav")->required();
  synth->add_option("--seconds", *synth_seconds, "Approximate length")->capture_default_str();
  synth->add_option("--seed", *synth_seed, "Seed of the dry signal")->capture_default_str();
  synth->callback([synth_dir, synth_seconds, synth_seed] {
    const amp::SynthResult r = amp::synth_capture(*synth_dir, *synth_seconds, *synth_seed);
    std::printf("wrote %s and %s (%.1f s at 48 kHz)\n  amp: %s\n", r.dry.c_str(), r.amp.c_str(), r.seconds, r.sox_command.c_str());
  });

  // export nam / import nam
  auto source = std::make_shared<std::string>(), target = std::make_shared<std::string>();
  CLI::App* exp = app.add_subcommand("export", "Export a trained model");
  exp->require_subcommand(1);
  CLI::App* exp_nam = exp->add_subcommand("nam", "Write a .nam file for the NAM plugin");
  exp_nam->add_option("checkpoint", *source, "A checkpoint of an amp run")->required();
  exp_nam->add_option("-o,--output", *target, "The .nam file")->required();
  exp_nam->callback([source, target] {
    amp::AmpModel m = load_model(*source);
    remove_stale_temporaries_of(*target);  // what an export killed while writing this file left
    write_nam(*target, m);
    std::printf("wrote %s (%s, %lld parameters)\n", target->c_str(), m.architecture.c_str(), static_cast<long long>(m.parameters()));
  });
  CLI::App* imp = app.add_subcommand("import", "Import a model");
  imp->require_subcommand(1);
  CLI::App* imp_nam = imp->add_subcommand("nam", "Read a .nam file into a wavetrain checkpoint");
  imp_nam->add_option("model", *source, "A .nam file")->required();
  imp_nam->add_option("-o,--output", *target, "The checkpoint to write")->required();
  imp_nam->callback([source, target] {
    amp::AmpModel m = amp::read_nam(*source);
    TrainingState s;
    if (!m.trainable()) {
      // The trainer does not build it: the checkpoint keeps the file whole, for infer and export.
      config::Node cfg = config::Node::mapping();
      cfg.set_path("model.architecture", config::Node::string("nam_file"));
      cfg.set_path("amp.sample_rate", config::Node::floating(m.sample_rate));
      cfg.set_path("nam.file", config::Node::string(amp::nam_model_to_json(*m.file).dump()));
      s.config_yaml = config::to_yaml(cfg);
      Checkpoint::save(*target, s);
      std::printf("wrote %s (%s, kept whole for infer and export nam; the trainer does not build it)\n", target->c_str(),
                  m.architecture.c_str());
      return;
    }
    s.model = module_state_dict(m.module());
    const std::string preset = preset_of(m);
    // The recorded config says how to rebuild the model, and keeps the file's version and
    // metadata (name, modeled_by, gear, loudness, ...) so that `export nam` writes them back.
    config::Node cfg = config::Node::mapping();
    cfg.set_path("model.architecture", config::Node::string(m.is_wavenet() ? "wavenet" : m.convnet ? "convnet" : m.linear ? "linear" : "lstm"));
    if (!preset.empty()) cfg.set_path("model.preset", config::Node::string(preset));
    else
      cfg.set_path("model.nam_config", config::Node::string(
                                           (m.wavenet   ? amp::nam_wavenet_to_json(m.wavenet->exported_spec())
                                            : m.convnet ? amp::convnet_config_to_json(m.convnet->config())
                                            : m.linear  ? amp::linear_config_to_json(m.linear->config())
                                                        : amp::lstm_config_to_json(m.lstm->config()))
                                               .dump()));
    cfg.set_path("amp.sample_rate", config::Node::floating(m.sample_rate));
    cfg.set_path("nam.version", config::Node::string(m.nam_version));
    cfg.set_path("nam.metadata", config::Node::string(m.metadata.dump()));
    if (!m.nam_extra.empty()) cfg.set_path("nam.extra", config::Node::string(m.nam_extra.dump()));
    // A preset rebuilt from its name has no file config of its own: the file's goes apart.
    if (m.wavenet && !preset.empty() && !m.wavenet->spec().source.is_null())
      cfg.set_path("nam.config", config::Node::string(m.wavenet->spec().source.dump()));
    if (!m.sample_rate_in_file) cfg.set_path("nam.sample_rate_in_file", config::Node::boolean(false));
    s.config_yaml = config::to_yaml(cfg);
    Checkpoint::save(*target, s);
    std::printf("wrote %s (%s%s)\n", target->c_str(), m.architecture.c_str(), preset.empty() ? "" : (", preset " + preset).c_str());
  });

  // infer
  auto in = std::make_shared<std::string>(), out = std::make_shared<std::string>();
  auto options = std::make_shared<amp::ProcessOptions>();
  CLI::App* infer = app.add_subcommand("infer", "Run an amp model over an audio file of any length");
  infer->add_option("model", *source, "A checkpoint or a .nam file")->required();
  infer->add_option("input", *in, "Input audio (mono)")->required();
  infer->add_option("-o,--output", *out, "Output WAV (float32)")->required();
  infer->add_option("--chunk", options->chunk, "Samples per chunk")->capture_default_str();
  infer->add_option("--mode", options->mode, "exact (carry context/state), stream (real-time buffers of --chunk) or crossfade")
      ->capture_default_str();
  infer->add_option("--overlap", options->overlap, "Crossfade length (crossfade mode)")->capture_default_str();
  infer->add_flag("!--no-prewarm", options->prewarm,
                  "Start an LSTM from its stored state (as NAM's Python does), not after the plugin's half second of zeros");
  auto rate = std::make_shared<int>(0);
  infer->add_option("--rate", *rate, "Sample rate of the output WAV (default: the input's)");
  auto tanh = std::make_shared<std::string>("exact");
  infer->add_option("--tanh", *tanh,
                    "exact, or fast: tanh as the NAM plugin plays it (its core's fast approximation, which the plugin turns on)")
      ->check(CLI::IsMember({"exact", "fast"}))
      ->capture_default_str();
  infer->callback([source, in, out, options, rate, tanh] {
    options->fast_tanh = *tanh == "fast";
    amp::AmpModel m = load_model(*source);
    // Streamed, a block of the input at a time (read, resampled, processed, resampled, written), so
    // that memory does not grow with the file's length; the output is the same as processing the
    // whole file at once (amp::AmpStream, data::StreamResampler).
    data::AudioFileReader reader(*in);
    if (reader.channels() != 1)
      throw data::AudioError(*in + ": expected 1 channel, found " + std::to_string(reader.channels()));
    // The model plays at its own rate: a file at another rate is resampled in, and the output
    // written at the file's rate (or --rate), with a note either way: never silently.
    const int model_rate = static_cast<int>(std::lround(m.sample_rate));
    const int out_rate = *rate > 0 ? *rate : reader.sample_rate();
    std::unique_ptr<data::StreamResampler> to_model, to_output;
    if (reader.sample_rate() != model_rate) {
      std::fprintf(stderr, "wavetrain: note: %s is at %d Hz and the model at %d Hz: resampling the input to %d Hz\n", in->c_str(),
                   reader.sample_rate(), model_rate, model_rate);
      to_model = std::make_unique<data::StreamResampler>(reader.sample_rate(), model_rate);
    }
    if (out_rate != model_rate) {
      std::fprintf(stderr, "wavetrain: note: writing %s at %d Hz (resampled from the model's %d Hz)\n", out->c_str(), out_rate, model_rate);
      to_output = std::make_unique<data::StreamResampler>(model_rate, out_rate);
    }
    const auto t0 = std::chrono::steady_clock::now();
    amp::AmpStream stream(m, *options);
    data::WavFileWriter writer(*out, out_rate, 1, data::WavSubtype::kFloat32);
    constexpr int64_t kBlock = 65536;
    std::vector<float> block(kBlock), at_model, played, written;
    int64_t model_samples = 0;
    // One step of the chain; `end`: the input is over, everything still held comes out.
    auto step = [&](const float* x, int64_t n, bool end) {
      const float* model_in = x;
      int64_t model_n = n;
      if (to_model) {
        at_model.clear();
        to_model->push(x, n, at_model);
        if (end) to_model->finish(at_model);
        model_in = at_model.data(), model_n = static_cast<int64_t>(at_model.size());
      }
      played.clear();
      stream.push(model_in, model_n, played);
      if (end) stream.finish(played);
      model_samples += static_cast<int64_t>(played.size());
      const std::vector<float>* result = &played;
      if (to_output) {
        written.clear();
        to_output->push(played.data(), static_cast<int64_t>(played.size()), written);
        if (end) to_output->finish(written);
        result = &written;
      }
      writer.write(result->data(), static_cast<int64_t>(result->size()));
    };
    while (const int64_t n = reader.read(block.data(), kBlock)) step(block.data(), n, false);
    step(block.data(), 0, true);
    writer.commit();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double duration = static_cast<double>(model_samples) / model_rate;
    std::printf("%s: %.2f s of audio in %.2f s: %.1fx real time (chunk %lld, %s%s)\n", out->c_str(), duration, seconds,
                duration / std::max(seconds, 1e-9), static_cast<long long>(options->chunk), options->mode.c_str(),
                options->fast_tanh ? ", fast tanh" : "");
  });
}

}  // namespace wavetrain::cli
