// The amp run report (report.h).
#include "experiments/amp/report.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <sstream>
#include <vector>

#include "data/hdf5_store.h"
#include "experiments/amp/amp_task.h"
#include "experiments/amp/capture.h"
#include "losses/audio_losses.h"
#include "trainer/serialization/atomic_file.h"
#include "trainer/checkpoint.h"
#include "trainer/plot/svg_plot.h"
#include "trainer/weights.h"

namespace fs = std::filesystem;

namespace wavetrain::experiments::amp {
namespace {

using plot::escape;
using plot::line_plot;
using plot::number;
using plot::read_metrics_csv;
using plot::read_text;
using plot::Series;

// A spectrogram (dB, [frames][bins]) as grey levels, black at `hi`, white at `lo` and below.
std::string spectrogram_plot(const std::string& title, const at::Tensor& db, double lo, double hi, double seconds, double nyquist) {
  const at::Tensor d = db.to(at::kDouble).contiguous();
  const double* v = d.data_ptr<double>();
  const int64_t bins = d.size(1);
  std::vector<std::vector<double>> frames;
  for (int64_t f = 0; f < d.size(0); ++f) frames.emplace_back(v + f * bins, v + (f + 1) * bins);
  plot::HeatmapOptions options;
  options.lo = lo, options.hi = hi;
  options.css_class = "spectrogram";
  options.y_top_label = number(nyquist / 1000, 3) + " kHz";
  options.x_left_label = "0 s";
  options.x_right_label = number(seconds, 3) + " s";
  return plot::heatmap(title, frames, options);
}

// Log-magnitude spectrogram in dB, pooled to about 100 frames x 48 bins.
at::Tensor spectrogram_db(const at::Tensor& x, int64_t fft = 1024) {
  const at::Tensor s = at::stft(x, fft, fft / 4, fft, at::hann_window(fft), true, "reflect", false, true, true).abs();  // [bins][frames]
  const int64_t frames = s.size(1), bins = s.size(0) - 1;
  const int64_t tf = std::max<int64_t>(1, frames / 100), tb = std::max<int64_t>(1, bins / 48);
  const at::Tensor pooled = s.narrow(0, 0, bins / tb * tb).narrow(1, 0, frames / tf * tf)
                                .reshape({bins / tb, tb, frames / tf, tf}).mean(at::IntArrayRef{1, 3});
  return (20 * (pooled + 1e-9).log10()).t();
}

}  // namespace

std::string esr_verdict(double esr) {
  if (esr < 0.01) return "Great!";
  if (esr < 0.035) return "Not bad!";
  if (esr < 0.1) return "This might sound ok";
  if (esr < 0.3) return "This probably won't sound great";
  return "Something seems to have gone wrong";
}

std::pair<std::string, std::string> write_amp_report(const std::string& run_dir, const std::string& checkpoint,
                                                     const config::Config& cfg) {
  // The model and the validation audio.
  const TrainingState state = Checkpoint::load(checkpoint);
  const data::DatasetReader store = open_capture_store(cfg);
  AmpModel model = amp_model_from_config(cfg, &store);
  load_state_dict(model.module(), state.model, /*strict=*/true, checkpoint);
  const CaptureData capture = read_capture(store);  // float32, whatever type the store holds
  const double rate = model.sample_rate;
  const at::Tensor input = capture.valid_input, target = capture.valid_target;
  const at::Tensor prediction = process(model, input);
  // Scored after the model's context, as in training.
  const int64_t skip = std::min<int64_t>(model.receptive_field() - 1, input.numel() / 2);
  const at::Tensor p = prediction.narrow(0, skip, prediction.numel() - skip).view({1, 1, -1});
  const at::Tensor t = target.narrow(0, skip, target.numel() - skip).view({1, 1, -1});
  const double esr = losses::esr(p, t).item<double>();
  const double mrstft = losses::MultiResolutionStftLoss()(p, t).item<double>();
  // As the NAM plugin plays the exported file: its core's fast tanh, 64-sample buffers. The gap to
  // the ESR above is what the approximation costs this model (none without a tanh).
  ProcessOptions as_plugin;
  as_plugin.fast_tanh = true;
  as_plugin.mode = "stream";
  as_plugin.chunk = 64;
  const at::Tensor played = process(model, input, as_plugin);
  const double plugin_esr = losses::esr(played.narrow(0, skip, played.numel() - skip).view({1, 1, -1}), t).item<double>();
  const std::string verdict = esr_verdict(esr);

  // Plots: the loudest 30 ms, spectrograms of the first 8 s, training curves.
  const int64_t window = static_cast<int64_t>(0.03 * rate);
  const at::Tensor energy = at::avg_pool1d(t.square(), {window}, {window / 2});
  const int64_t start = std::min<int64_t>(energy.argmax().item<int64_t>() * (window / 2), t.numel() - window);
  Series sp{"prediction", "#d62728", {}, {}}, st{"target", "#1f77b4", {}, {}};
  for (int64_t i = 0; i < window; ++i) {
    const double ms = 1000.0 * static_cast<double>(i) / rate;
    st.x.push_back(ms);
    st.y.push_back(t.view({-1})[start + i].item<double>());
    sp.x.push_back(ms);
    sp.y.push_back(p.view({-1})[start + i].item<double>());
  }
  const std::string waveform = line_plot("Prediction and target, loudest 30 ms of the validation audio", {st, sp}, "ms");
  const int64_t spec_len = std::min<int64_t>(t.numel(), static_cast<int64_t>(8 * rate));
  const at::Tensor tdb = spectrogram_db(t.view({-1}).narrow(0, 0, spec_len)), pdb = spectrogram_db(p.view({-1}).narrow(0, 0, spec_len));
  const double hi = std::max(tdb.max().item<double>(), pdb.max().item<double>());
  const double seconds = static_cast<double>(spec_len) / rate;
  const std::string spec_t = spectrogram_plot("Target spectrogram", tdb, hi - 90, hi, seconds, rate / 2);
  const std::string spec_p = spectrogram_plot("Prediction spectrogram", pdb, hi - 90, hi, seconds, rate / 2);
  std::map<std::string, Series> metrics = read_metrics_csv(fs::path(run_dir) / "metrics.csv");
  std::vector<Series> curves;
  const std::pair<const char*, const char*> wanted[] = {{"train/loss", "#1f77b4"}, {"val/esr", "#d62728"}};
  for (const auto& [name, colour] : wanted)
    if (metrics.count(name)) {
      metrics[name].colour = colour;
      curves.push_back(metrics[name]);
    }
  const std::string training = curves.empty() ? "<p>No metrics.csv in this run.</p>" : line_plot("Training", curves, "step", true);

  // Device and precision from the run's log; the resolved config.
  std::string device = "not recorded";
  std::istringstream log(read_text(fs::path(run_dir) / "wavetrain.log"));
  for (std::string line; std::getline(log, line);)
    if (line.find("] device ") != std::string::npos) device = line.substr(line.find("] device ") + 2);
  const std::string config_text = read_text(fs::path(run_dir) / ".wavetrain/config.resolved.yaml");

  std::ostringstream html;
  html << "<!doctype html><html><head><meta charset='utf-8'><title>wavetrain amp report</title><style>"
          "body{font-family:sans-serif;max-width:720px;margin:2em auto;color:#222}"
          "td{padding:2px 12px 2px 0}pre{background:#f4f4f4;padding:8px;overflow:auto;font-size:12px}"
          ".verdict{font-size:20px;font-weight:bold}</style></head><body>";
  html << "<h1>Amp model report</h1><p>Run <code>" << escape(run_dir) << "</code>, checkpoint <code>" << escape(checkpoint)
       << "</code> (step " << state.global_step << ").</p>";
  html << "<p class='verdict' id='verdict'>" << escape(verdict) << "</p><table id='metrics'>"
       << "<tr><td>Validation ESR</td><td id='esr'>" << number(esr, 6) << "</td></tr>"
       << "<tr><td>Validation ESR as the NAM plugin plays it (its fast tanh)</td><td id='plugin_esr'>" << number(plugin_esr, 6) << "</td></tr>"
       << "<tr><td>Validation MRSTFT</td><td id='mrstft'>" << number(mrstft, 5) << "</td></tr>"
       << "<tr><td>Model</td><td>" << escape(model.architecture) << ", " << model.parameters() << " parameters, receptive field "
       << model.receptive_field() << "</td></tr><tr><td>Validation audio</td><td>" << number(static_cast<double>(t.numel()) / rate, 4)
       << " s at " << rate << " Hz</td></tr><tr><td>Device and precision</td><td>" << escape(device) << "</td></tr></table>";
  html << "<h2>Waveform</h2>" << waveform << "<h2>Spectrograms</h2>" << spec_t << spec_p << "<h2>Training</h2>" << training;
  html << "<h2>Config</h2><pre>" << escape(config_text) << "</pre></body></html>\n";

  std::ostringstream md;
  md << "# Amp model report\n\nRun `" << run_dir << "`, checkpoint `" << checkpoint << "` (step " << state.global_step << ").\n\n"
     << "**" << verdict << "**\n\n| | |\n|---|---|\n| Validation ESR | " << number(esr, 6) << " |\n"
     << "| Validation ESR as the NAM plugin plays it (its fast tanh) | " << number(plugin_esr, 6) << " |\n| Validation MRSTFT | "
     << number(mrstft, 5) << " |\n| Model | " << model.architecture << ", " << model.parameters() << " parameters |\n"
     << "| Device and precision | " << device << " |\n\nPlots: report.html.\n\n## Config\n\n```yaml\n" << config_text << "```\n";

  const std::string html_path = (fs::path(run_dir) / "report.html").string(), md_path = (fs::path(run_dir) / "report.md").string();
  write_file_atomic(html_path, html.str());
  write_file_atomic(md_path, md.str());
  return {html_path, md_path};
}

}  // namespace wavetrain::experiments::amp
