// The ASR run report (asr_report.h).
#include "experiments/asr/asr_report.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>

#include "experiments/common/report_html.h"
#include "trainer/plot/svg_plot.h"
#include "trainer/serialization/atomic_file.h"

namespace fs = std::filesystem;

namespace wavetrain::experiments::asr {
namespace {

using plot::bar_chart;
using plot::escape;
using plot::line_plot;
using plot::number;
using plot::read_metrics_csv;
using plot::read_text;
using plot::Series;
using report_html::wav_data_url;

// Columns: greedy search's settings first, then beam search's, then anything else a summary names
// (an average: greedy_search-max-sym-per-frame-2-avg-5 sorts with greedy search).
int column_rank(const std::string& settings) {
  if (settings.rfind("greedy_search", 0) == 0) return 0;
  if (settings.rfind("modified_beam_search", 0) == 0) return 1;
  return 2;
}
const std::vector<std::string> kPalette = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"};

// split -> method -> WER, from every wer-summary-{split}.txt in the run directory.
std::map<std::string, std::map<std::string, double>> summaries(const std::string& run_dir) {
  std::map<std::string, std::map<std::string, double>> out;
  for (const auto& e : fs::directory_iterator(run_dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("wer-summary-", 0) != 0 || e.path().extension() != ".txt") continue;
    const std::string split = name.substr(12, name.size() - 12 - 4);
    std::istringstream in(read_text(e.path()));
    std::string line;
    std::getline(in, line);  // settings\tWER
    while (std::getline(in, line)) {
      const size_t tab = line.find('\t');
      if (tab != std::string::npos) out[split][line.substr(0, tab)] = std::atof(line.c_str() + tab + 1);
    }
  }
  return out;
}

// The alignment of one utterance as HTML: deleted words struck through in red, inserted ones
// underlined in green, substitutions as the reference struck and the hypothesis after it.
std::string coloured_alignment(const Recognition& r) {
  std::string o;
  for (const AlignedPair& p : align_words(r.ref, r.hyp)) {
    if (!o.empty()) o += " ";
    if (p.hyp < 0) o += "<del class='del'>" + escape(r.ref[static_cast<size_t>(p.ref)]) + "</del>";
    else if (p.ref < 0) o += "<ins class='ins'>" + escape(r.hyp[static_cast<size_t>(p.hyp)]) + "</ins>";
    else if (r.ref[static_cast<size_t>(p.ref)] != r.hyp[static_cast<size_t>(p.hyp)])
      o += "<span class='sub'><del>" + escape(r.ref[static_cast<size_t>(p.ref)]) + "</del>&#8594;" + escape(r.hyp[static_cast<size_t>(p.hyp)]) + "</span>";
    else o += escape(r.ref[static_cast<size_t>(p.ref)]);
  }
  return o;
}

std::string plain_alignment(const Recognition& r) {
  std::string o;
  for (const AlignedPair& p : align_words(r.ref, r.hyp)) {
    if (!o.empty()) o += " ";
    if (p.hyp < 0) o += "(" + r.ref[static_cast<size_t>(p.ref)] + "->*)";
    else if (p.ref < 0) o += "(*->" + r.hyp[static_cast<size_t>(p.hyp)] + ")";
    else if (r.ref[static_cast<size_t>(p.ref)] != r.hyp[static_cast<size_t>(p.hyp)])
      o += "(" + r.ref[static_cast<size_t>(p.ref)] + "->" + r.hyp[static_cast<size_t>(p.hyp)] + ")";
    else o += r.ref[static_cast<size_t>(p.ref)];
  }
  return o;
}

std::string percent(double v) { return number(std::round(v * 100) / 100, 6) + "%"; }

}  // namespace

std::pair<std::string, std::string> write_asr_report(const std::string& run_dir, const std::string& checkpoint, int64_t step,
                                                     const AsrEvalResult& result, const AsrEvaluation& task, const AsrReportOptions& options) {
  // WER per split and method, and per voice, over every evaluation so far.
  const auto by_split = summaries(run_dir);
  std::vector<std::string> columns;  // every settings label evaluated, greedy search's first
  for (const auto& [split, methods] : by_split)
    for (const auto& [method, wer] : methods)
      if (std::find(columns.begin(), columns.end(), method) == columns.end()) columns.push_back(method);
  std::stable_sort(columns.begin(), columns.end(), [](const std::string& a, const std::string& b) {
    return column_rank(a) != column_rank(b) ? column_rank(a) < column_rank(b) : a < b;
  });
  std::vector<std::string> colours;
  for (size_t m = 0; m < columns.size(); ++m) colours.push_back(kPalette[m % kPalette.size()]);
  std::vector<std::string> splits;
  for (const auto& [split, methods] : by_split) splits.push_back(split);
  std::vector<std::vector<double>> split_values(columns.size(), std::vector<double>(splits.size(), NAN));
  for (size_t m = 0; m < columns.size(); ++m)
    for (size_t s = 0; s < splits.size(); ++s) {
      const auto& methods = by_split.at(splits[s]);
      if (methods.count(columns[m])) split_values[m][s] = methods.at(columns[m]);
    }
  // Per voice (the store's speaker, "engine:voice") and per engine, from every asr-eval-*.json:
  // split -> voice -> method -> (errors, words).
  std::map<std::string, std::map<std::string, std::map<std::string, std::pair<double, double>>>> by_voice;
  for (const auto& e : fs::directory_iterator(run_dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("asr-eval-", 0) != 0 || e.path().extension() != ".json") continue;
    const nlohmann::json j = nlohmann::json::parse(read_text(e.path()), nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("by_speaker") || !j["by_speaker"].is_object()) continue;
    for (const auto& [speaker, w] : j["by_speaker"].items())
      by_voice[j.value("split", "?")][speaker][j.value("method", "?")] = {w.value("errors", 0.0), w.value("words", 0.0)};
  }
  std::vector<std::string> engines;  // "split: engine"
  std::map<std::string, std::map<std::string, std::pair<double, double>>> engine_counts;
  for (const auto& [split, voices] : by_voice)
    for (const auto& [voice, methods] : voices)
      for (const auto& [method, counts] : methods) {
        auto& c = engine_counts[split + ": " + voice.substr(0, voice.find(':'))][method];
        c.first += counts.first, c.second += counts.second;
      }
  for (const auto& [engine, methods] : engine_counts) engines.push_back(engine);
  std::vector<std::vector<double>> engine_values(columns.size(), std::vector<double>(engines.size(), NAN));
  for (size_t m = 0; m < columns.size(); ++m)
    for (size_t k = 0; k < engines.size(); ++k)
      if (engine_counts[engines[k]].count(columns[m]) && engine_counts[engines[k]][columns[m]].second > 0)
        engine_values[m][k] = 100.0 * engine_counts[engines[k]][columns[m]].first / engine_counts[engines[k]][columns[m]].second;
  std::vector<std::string> voices;  // of the split just evaluated
  for (const auto& [voice, methods] : by_voice[result.split]) voices.push_back(voice);
  std::vector<std::vector<double>> voice_values(columns.size(), std::vector<double>(voices.size(), NAN));
  for (size_t m = 0; m < columns.size(); ++m)
    for (size_t v = 0; v < voices.size(); ++v) {
      const auto& methods = by_voice[result.split][voices[v]];
      if (methods.count(columns[m]) && methods.at(columns[m]).second > 0)
        voice_values[m][v] = 100.0 * methods.at(columns[m]).first / methods.at(columns[m]).second;
    }

  // The latest evaluation: its worst utterances (most errors, then highest WER).
  std::vector<size_t> worst(result.results.size());
  std::iota(worst.begin(), worst.end(), 0);
  const std::vector<WordErrors>& errors = result.errors;
  std::stable_sort(worst.begin(), worst.end(), [&](size_t a, size_t b) {
    return errors[a].errors() != errors[b].errors() ? errors[a].errors() > errors[b].errors() : errors[a].rate() > errors[b].rate();
  });
  worst.resize(std::min<size_t>(worst.size(), static_cast<size_t>(options.worst_utterances)));
  while (!worst.empty() && errors[worst.back()].errors() == 0) worst.pop_back();

  const ErrorStats& stats = result.stats;
  const WordErrors& t = stats.total;
  std::map<std::string, Series> metrics = read_metrics_csv(fs::path(run_dir) / "metrics.csv");
  std::vector<Series> loss_curves, wer_curves;
  for (const auto& [name, colour] : std::vector<std::pair<std::string, std::string>>{{"train/loss", "#1f77b4"}, {"val/loss", "#d62728"}})
    if (metrics.count(name)) metrics[name].colour = colour, loss_curves.push_back(metrics[name]);
  if (metrics.count("val/wer")) metrics["val/wer"].colour = "#2ca02c", wer_curves.push_back(metrics["val/wer"]);
  std::string device = "not recorded";
  std::istringstream log(read_text(fs::path(run_dir) / "wavetrain.log"));
  for (std::string line; std::getline(log, line);)
    if (line.find("] device ") != std::string::npos) device = line.substr(line.find("] device ") + 9);
  const std::string config_text = read_text(fs::path(run_dir) / ".wavetrain/config.resolved.yaml");

  auto top = [&](const auto& counts) {
    std::vector<std::pair<int64_t, std::string>> v;
    for (const auto& [k, n] : counts) {
      if constexpr (std::is_same_v<std::decay_t<decltype(k)>, std::string>) v.emplace_back(n, k);
      else v.emplace_back(n, k.first + " \u2192 " + k.second);
    }
    std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    v.resize(std::min<size_t>(v.size(), static_cast<size_t>(options.top_words)));
    return v;
  };
  const auto subs = top(stats.substitutions), dels = top(stats.deletions), ins = top(stats.insertions);

  std::ostringstream html;
  html << "<!doctype html><html><head><meta charset='utf-8'><title>wavetrain ASR report</title><style>"
          "body{font-family:sans-serif;max-width:820px;margin:2em auto;color:#222}"
          "td,th{padding:2px 12px 2px 0;text-align:left}pre{background:#f4f4f4;padding:8px;overflow:auto;font-size:12px}"
          ".del{color:#c00}.ins{color:#080;text-decoration:underline}.sub{color:#a50}.sub del{color:#c00}"
          ".chart{overflow-x:auto}.utt{margin:10px 0;padding:6px;border-left:3px solid #ccc}.utt audio{display:block;margin-top:4px;height:28px}</style></head><body>";
  html << "<h1>ASR report</h1><p>Run <code>" << escape(run_dir) << "</code>, checkpoint <code>" << escape(checkpoint) << "</code> (step "
       << step << "). Device and precision: " << escape(device) << ".</p>";
  html << "<h2>Word error rate</h2><table id='wer-table'><tr><th>split</th>";
  for (const std::string& m : columns) html << "<th>" << m << "</th>";
  html << "</tr>";
  for (size_t s = 0; s < splits.size(); ++s) {
    html << "<tr><td>" << escape(splits[s]) << "</td>";
    for (size_t m = 0; m < columns.size(); ++m)
      html << "<td class='wer' data-split='" << escape(splits[s]) << "' data-method='" << columns[m] << "'>"
           << (std::isfinite(split_values[m][s]) ? percent(split_values[m][s]) : "") << "</td>";
    html << "</tr>";
  }
  html << "</table><div class='chart'>" << bar_chart("WER per split (%)", splits, columns, colours, split_values, "%") << "</div>";
  html << "<div class='chart'>" << bar_chart("WER per engine (%)", engines, columns, colours, engine_values, "%") << "</div>";
  html << "<div class='chart'>" << bar_chart("WER per voice, " + result.split + " (%)", voices, columns, colours, voice_values, "%")
       << "</div>";
  html << "<h2>Latest evaluation: " << escape(result.split) << ", " << escape(result.method) << "</h2><table id='latest'>"
       << "<tr><td>WER</td><td id='latest-wer'>" << percent(100.0 * t.rate()) << "</td></tr><tr><td>Errors</td><td>" << t.errors() << " of "
       << t.reference_words << " reference words: " << t.substitutions << " substitutions, " << t.deletions << " deletions, " << t.insertions
       << " insertions</td></tr><tr><td>Utterances</td><td>" << result.results.size() << ", " << number(result.audio_seconds, 4)
       << " s of audio</td></tr><tr><td>Decoding speed</td><td>" << number(result.real_time_factor(), 4) << "x real time</td></tr></table>";
  html << "<h3>Most frequent errors</h3><table><tr><th>substitutions</th><th>deletions</th><th>insertions</th></tr>";
  for (size_t i = 0; i < std::max({subs.size(), dels.size(), ins.size()}); ++i) {
    auto cell = [&](const auto& v) { return i < v.size() ? std::to_string(v[i].first) + " &times; " + escape(v[i].second) : std::string(); };
    html << "<tr><td>" << cell(subs) << "</td><td>" << cell(dels) << "</td><td>" << cell(ins) << "</td></tr>";
  }
  html << "</table><h3>Worst utterances</h3>";
  if (worst.empty()) html << "<p>Every utterance was recognised without an error.</p>";
  for (size_t i : worst) {
    const Recognition& r = result.results[i];
    html << "<div class='utt'><b>" << escape(r.id) << "</b> " << (result.speakers[i].empty() ? "" : "(" + escape(result.speakers[i]) + ") ")
         << errors[i].errors() << " errors in " << r.ref.size() << " words<br>" << coloured_alignment(r)
         << "<audio controls preload='auto' src='" << wav_data_url(task.validation_audio(static_cast<int64_t>(i)), 16000) << "'></audio></div>";
  }
  html << "<h2>Training</h2>" << (loss_curves.empty() ? "<p>No metrics.csv in this run.</p>" : line_plot("Loss", loss_curves, "step", true))
       << (wer_curves.empty() ? "" : line_plot("Validation WER (%)", wer_curves, "step", true));
  html << "<h2>Config</h2><pre>" << escape(config_text) << "</pre></body></html>\n";

  std::ostringstream md;
  md << "# ASR report\n\nRun `" << run_dir << "`, checkpoint `" << checkpoint << "` (step " << step << "). Device and precision: " << device
     << ".\n\n## Word error rate\n\n| split |";
  for (const std::string& m : columns) md << " " << m << " |";
  md << "\n|---|---|---|\n";
  for (size_t s = 0; s < splits.size(); ++s) {
    md << "| " << splits[s] << " |";
    for (size_t m = 0; m < columns.size(); ++m) md << " " << (std::isfinite(split_values[m][s]) ? percent(split_values[m][s]) : "") << " |";
    md << "\n";
  }
  md << "\n## Latest evaluation: " << result.split << ", " << result.method << "\n\n" << kaldi_wer_line(t) << " over " << result.results.size()
     << " utterances (" << number(result.audio_seconds, 4) << " s of audio, decoded at " << number(result.real_time_factor(), 4)
     << "x real time).\n\nWorst utterances:\n\n";
  for (size_t i : worst) md << "- `" << result.results[i].id << "`: " << plain_alignment(result.results[i]) << "\n";
  md << "\nPlots and audio: report.html.\n\n## Config\n\n```yaml\n" << config_text << "```\n";

  const std::string html_path = (fs::path(run_dir) / "report.html").string(), md_path = (fs::path(run_dir) / "report.md").string();
  write_file_atomic(html_path, html.str());
  write_file_atomic(md_path, md.str());
  return {html_path, md_path};
}

}  // namespace wavetrain::experiments::asr
