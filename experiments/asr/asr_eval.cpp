// Decoding a split and writing icefall's result files (asr_eval.h).
#include "experiments/asr/asr_eval.h"

#include <torch/nn/module.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <sstream>
#include <cstdlib>
#include <stdexcept>
#include <tuple>

#include "experiments/asr/asr_task.h"
#include "trainer/serialization/atomic_file.h"

namespace wavetrain::experiments::asr {

AsrEvalResult evaluate_asr(Task& task, const at::Device& device, const AmpPolicy& amp, const AsrEvalOptions& options) {
  auto* asr = dynamic_cast<AsrEvaluation*>(&task);
  if (asr == nullptr) throw std::invalid_argument("evaluate_asr: the run's task is not an ASR task");
  options.decoding.validate();
  DecodingOptions decoding = options.decoding;
  decoding.unk_id = asr->tokenizer().unk_id();  // whatever the caller set: the tokenizer decides
  AsrEvalResult out;
  out.split = asr->validation_split();
  out.method = decoding.settings_label();
  out.decoding = decoding;
  const int64_t n = task.size(Split::Validation);
  out.results.resize(static_cast<size_t>(n));
  out.speakers.resize(static_cast<size_t>(n));
  out.samples.resize(static_cast<size_t>(n));
  out.hypotheses.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const AsrEvaluation::Utterance u = asr->validation_utterance(i);
    out.results[static_cast<size_t>(i)] = {u.id, split_words(u.text), {}};
    // Grouped by voice where the store has voices (the built-in corpus), else by speaker.
    out.speakers[static_cast<size_t>(i)] = u.voice.empty() ? u.speaker : u.voice;
    out.samples[static_cast<size_t>(i)] = u.samples;
    out.audio_seconds += static_cast<double>(u.samples) / 16000.0;
  }
  // Batches of similar length (less padding); results go back to the store's order.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return out.samples[static_cast<size_t>(a)] < out.samples[static_cast<size_t>(b)]; });
  task.model().eval();
  at::NoGradGuard no_grad;
  const auto start = std::chrono::steady_clock::now();
  for (int64_t first = 0; first < n; first += options.batch_size) {
    const std::vector<int64_t> indices(order.begin() + first, order.begin() + std::min(n, first + options.batch_size));
    const Batch batch = task.make_batch(Split::Validation, indices, device);
    at::Tensor encoded;
    {
      AutocastGuard autocast(amp);
      encoded = task.forward(batch);
    }
    const std::vector<Hypothesis> hyps = decode(asr->transducer(), encoded.to(at::kFloat), asr->encoder_lengths(batch), decoding);
    for (size_t k = 0; k < indices.size(); ++k) {
      const size_t i = static_cast<size_t>(indices[k]);
      out.results[i].hyp = split_words(asr->tokenizer().decode(hyps[k].tokens));
      out.hypotheses[i] = hyps[k];
    }
  }
  out.decode_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.stats = error_stats(out.results);
  for (size_t i = 0; i < out.results.size(); ++i) {
    out.errors.push_back(word_errors(out.results[i].ref, out.results[i].hyp));
    out.by_speaker[out.speakers[i]] += out.errors.back();
  }
  return out;
}

namespace {

// wer-summary-{split}.txt: the methods evaluated so far, lowest WER first (icefall sorts them so).
std::string summary_with(const std::string& path, const std::string& method, const std::string& wer) {
  std::vector<std::tuple<double, std::string, std::string>> rows;  // WER, method, as written
  std::ifstream in(path);
  std::string line;
  for (bool header = true; std::getline(in, line); header = false) {
    const size_t tab = line.find('\t');
    char* end = nullptr;
    const double value = tab == std::string::npos ? 0 : std::strtod(line.c_str() + tab + 1, &end);
    // Rows that are not "method<TAB>number" (a file edited by hand) are dropped, not fatal.
    if (header || tab == std::string::npos || end == line.c_str() + tab + 1 || line.substr(0, tab) == method) continue;
    rows.emplace_back(value, line.substr(0, tab), line.substr(tab + 1));
  }
  rows.emplace_back(std::strtod(wer.c_str(), nullptr), method, wer);
  std::stable_sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return std::get<0>(a) < std::get<0>(b); });
  std::string out = "settings\tWER\n";
  for (const auto& [value, m, w] : rows) out += m + "\t" + w + "\n";
  return out;
}

}  // namespace

std::vector<std::string> write_asr_eval_files(const std::string& dir, const AsrEvalResult& result) {
  namespace fs = std::filesystem;
  const std::string suffix = result.split + "-" + result.method + ".txt";
  const std::string recogs = (fs::path(dir) / ("recogs-" + suffix)).string(), errs = (fs::path(dir) / ("errs-" + suffix)).string(),
                    summary = (fs::path(dir) / ("wer-summary-" + result.split + ".txt")).string();
  std::ostringstream r, e;
  write_recogs(r, result.results);
  write_errs(e, result.results, result.stats);
  const std::string wer_line = e.str().substr(7, e.str().find('\n') - 7);  // "%WER = x.xx"
  const std::string summary_text = summary_with(summary, result.method, wer_line);
  nlohmann::json j;
  const WordErrors& t = result.stats.total;
  j["split"] = result.split;
  j["method"] = result.method;
  j["decoding"] = {{"method", result.decoding.method}, {"beam", result.decoding.beam},
                   {"max_sym_per_frame", result.decoding.max_symbols_per_frame}};
  j["wer"] = 100.0 * t.rate();
  j["errors"] = {{"insertions", t.insertions}, {"deletions", t.deletions}, {"substitutions", t.substitutions}, {"words", t.reference_words}};
  for (const auto& [speaker, w] : result.by_speaker)
    j["by_speaker"][speaker.empty() ? "(none)" : speaker] = {{"wer", 100.0 * w.rate()}, {"errors", w.errors()}, {"words", w.reference_words}};
  j["audio_seconds"] = result.audio_seconds;
  j["decode_seconds"] = result.decode_seconds;
  j["real_time_factor"] = result.real_time_factor();
  const std::string json_path = (fs::path(dir) / ("asr-eval-" + result.split + "-" + result.method + ".json")).string();
  write_file_atomic(recogs, r.str());
  write_file_atomic(errs, e.str());
  write_file_atomic(summary, summary_text);
  write_file_atomic(json_path, j.dump(2) + "\n");
  return {recogs, errs, summary, json_path};
}

}  // namespace wavetrain::experiments::asr
