// Importing Kaldi and LibriSpeech data into an ASR store (corpus_import.h).
#include "experiments/asr/corpus_import.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "data/audio_io.h"
#include "data/hdf5_store.h"
#include "experiments/asr/corpus_synth.h"

namespace wavetrain::experiments::asr {
namespace {

namespace fs = std::filesystem;

// One utterance to import: all of a recording, or a segment of it.
struct ImportedUtterance {
  std::string id, speaker, text;
  double start = 0, end = -1;  // seconds; end < 0: to the end
  std::string where;           // the line that made it ("segments:4"), for errors about its audio
};

// One audio file and the utterances cut from it.
struct Recording {
  std::string path, where;
  std::vector<ImportedUtterance> utterances;
};

struct Problems {
  explicit Problems(const ImportOptions& o) : options(o) {}
  const ImportOptions& options;
  int64_t count = 0;
  std::mutex mutex;
  void operator()(const std::string& where, const std::string& what) {
    const std::string message = where + ": " + what;
    if (options.strict) throw std::runtime_error(message + " (without --strict such entries are skipped)");
    std::lock_guard<std::mutex> lock(mutex);
    ++count;
    if (options.warn) options.warn(message);
    else std::cerr << "warning: " << message << ": skipped\n";
  }
};

std::string collapse_spaces(const std::string& s) {
  std::istringstream in(s);
  std::string out;
  for (std::string w; in >> w;) out += (out.empty() ? "" : " ") + w;
  return out;
}

// "<key> <rest of the line>" per line, with each line's "file:N".
struct KeyedLine {
  std::string key, rest, where;
};
std::vector<KeyedLine> keyed_lines(const fs::path& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file.string() + ": cannot open");
  std::vector<KeyedLine> lines;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = file.string() + ":" + std::to_string(n);
    const size_t start = line.find_first_not_of(" \t");
    if (start == std::string::npos) continue;  // blank line
    const size_t space = line.find_first_of(" \t", start);
    const std::string key = line.substr(start, space == std::string::npos ? std::string::npos : space - start);
    const std::string rest = space == std::string::npos ? "" : collapse_spaces(line.substr(space));
    lines.push_back({key, rest, where});
  }
  return lines;
}

std::string resolve(const std::string& path, const fs::path& dir) {
  if (fs::path(path).is_absolute() || fs::exists(path)) return path;
  const fs::path beside = dir / path;  // relative to the data directory, when not to where we run
  return fs::exists(beside) ? beside.string() : path;
}

std::vector<Recording> read_kaldi(const fs::path& dir, Problems& bad) {
  std::map<std::string, std::pair<std::string, std::string>> wavs;  // recording -> (path, where)
  for (const KeyedLine& l : keyed_lines(dir / "wav.scp")) {
    if (l.rest.empty()) bad(l.where, "'" + l.key + "' has no path");
    else if (l.rest.back() == '|') bad(l.where, "'" + l.key + "' is a command (" + l.rest + "); only plain file paths are read");
    else wavs[l.key] = {resolve(l.rest, dir), l.where};
  }
  if (!fs::exists(dir / "text")) throw std::runtime_error((dir / "text").string() + ": no transcripts (a Kaldi data directory has a text file)");
  std::map<std::string, std::pair<std::string, std::string>> texts;  // utterance -> (text, where)
  for (const KeyedLine& l : keyed_lines(dir / "text")) texts[l.key] = {l.rest, l.where};
  std::map<std::string, std::string> speakers;
  if (fs::exists(dir / "utt2spk"))
    for (const KeyedLine& l : keyed_lines(dir / "utt2spk")) speakers[l.key] = l.rest;

  std::map<std::string, Recording> recordings;
  std::map<std::string, bool> has_audio;
  const auto add = [&](const std::string& utt, const std::string& rec, double start, double end, const std::string& where) {
    has_audio[utt] = true;
    auto t = texts.find(utt);
    if (t == texts.end()) return bad(where, "no transcript for '" + utt + "' in " + (dir / "text").string());
    if (t->second.first.empty()) return bad(t->second.second, "the transcript of '" + utt + "' is empty");
    Recording& r = recordings[rec];
    r.path = wavs[rec].first;
    r.where = wavs[rec].second;
    auto s = speakers.find(utt);
    r.utterances.push_back({utt, s != speakers.end() ? s->second : rec, t->second.first, start, end, where});
  };
  if (fs::exists(dir / "segments")) {
    for (const KeyedLine& l : keyed_lines(dir / "segments")) {
      std::istringstream fields(l.rest);
      std::string rec;
      double start = 0, end = 0;
      if (!(fields >> rec >> start >> end)) {
        bad(l.where, "expected '<utterance> <recording> <start> <end>'");
        continue;
      }
      if (!wavs.count(rec)) bad(l.where, "recording '" + rec + "' is not in wav.scp");
      else if (!(end > start) || start < 0) bad(l.where, "segment '" + l.key + "' has start " + std::to_string(start) + " and end " + std::to_string(end));
      else add(l.key, rec, start, end, l.where);
    }
  } else {
    for (const auto& [rec, wav] : wavs) add(rec, rec, 0, -1, wav.second);
  }
  for (const auto& [utt, t] : texts)
    if (!has_audio.count(utt)) bad(t.second, "'" + utt + "' has a transcript but no audio (not in " + (fs::exists(dir / "segments") ? "segments" : "wav.scp") + ")");
  std::vector<Recording> out;
  for (auto& [rec, r] : recordings) out.push_back(std::move(r));
  return out;
}

std::vector<Recording> read_librispeech(const fs::path& dir, Problems& bad) {
  std::vector<fs::path> transcripts;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().string().size() > 10 && e.path().string().compare(e.path().string().size() - 10, 10, ".trans.txt") == 0)
      transcripts.push_back(e.path());
  std::sort(transcripts.begin(), transcripts.end());
  std::vector<Recording> out;
  for (const fs::path& t : transcripts)
    for (const KeyedLine& l : keyed_lines(t)) {
      const fs::path audio = t.parent_path() / (l.key + ".flac");
      if (l.rest.empty()) bad(l.where, "the transcript of '" + l.key + "' is empty");
      else if (!fs::exists(audio)) bad(l.where, "no audio file " + audio.string());
      else out.push_back({audio.string(), l.where, {{l.key, l.key.substr(0, l.key.find('-')), l.rest, 0, -1, l.where}}});
    }
  return out;
}

bool is_librispeech(const fs::path& dir) {
  if (fs::exists(dir / "wav.scp")) return false;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.path().filename().string().find(".trans.txt") != std::string::npos) return true;
  return false;
}

}  // namespace

ImportReport import_asr_data(const ImportOptions& o) {
  if (o.sources.empty()) throw std::invalid_argument("asr-import: nothing to import (give SPLIT=DIR, e.g. train=data/train)");
  Problems bad(o);
  data::DatasetWriter writer(o.store, o.command);
  ImportReport report;
  nlohmann::json record = nlohmann::json::array();
  const int jobs = o.jobs > 0 ? o.jobs : std::max(1u, std::thread::hardware_concurrency());
  for (const ImportSource& source : o.sources) {
    const fs::path dir(source.dir);
    if (!fs::is_directory(dir)) throw std::runtime_error(source.dir + ": not a directory");
    ImportReport::Split r;
    r.split = source.split;
    r.dir = source.dir;
    const int64_t skipped_before = bad.count;
    const bool libri = is_librispeech(dir);
    if (!libri && !fs::exists(dir / "wav.scp"))
      throw std::runtime_error(source.dir + ": neither a Kaldi data directory (no wav.scp) nor LibriSpeech (no */*/*.trans.txt)");
    r.layout = libri ? "librispeech" : "kaldi";
    const std::vector<Recording> recordings = libri ? read_librispeech(dir, bad) : read_kaldi(dir, bad);

    // Decoded `jobs` at a time, written in order, a chunk at a time (a large corpus never sits in memory).
    const size_t chunk = static_cast<size_t>(jobs) * 16;
    for (size_t first = 0; first < recordings.size(); first += chunk) {
      const size_t last = std::min(recordings.size(), first + chunk);
      std::vector<std::vector<at::Tensor>> cut(last - first);
      std::atomic<size_t> next{first};
      std::exception_ptr failure;
      std::mutex failure_mutex;
      std::vector<std::thread> threads;
      for (int j = 0; j < jobs; ++j)
        threads.emplace_back([&] {
          for (size_t i; (i = next++) < last;) {
            const Recording& rec = recordings[i];
            try {
              at::Tensor audio;
              try {
                data::ReadOptions read;
                read.sample_rate = kCorpusSampleRate;
                audio = data::read_audio(rec.path, read).samples.mean(0);
              } catch (const data::AudioError& e) {
                bad(rec.where, e.what());
                continue;
              }
              const double seconds = static_cast<double>(audio.numel()) / kCorpusSampleRate;
              for (const ImportedUtterance& u : rec.utterances) {
                if (u.end > seconds + 0.01) {
                  char text[160];
                  std::snprintf(text, sizeof text, "segment '%s' ends at %.2f s, past the end of its recording (%.2f s)", u.id.c_str(), u.end, seconds);
                  bad(u.where, text);
                  cut[i - first].push_back(at::Tensor());
                  continue;
                }
                const int64_t a = static_cast<int64_t>(std::llround(u.start * kCorpusSampleRate));
                const int64_t b = u.end < 0 ? audio.numel() : std::min<int64_t>(audio.numel(), std::llround(u.end * kCorpusSampleRate));
                if (b <= a) {
                  bad(u.where, "'" + u.id + "' has no audio");
                  cut[i - first].push_back(at::Tensor());
                  continue;
                }
                cut[i - first].push_back(audio.narrow(0, a, b - a).clone());
              }
            } catch (...) {  // a strict failure
              std::lock_guard<std::mutex> lock(failure_mutex);
              if (!failure) failure = std::current_exception();
              next = last;
            }
          }
        });
      for (std::thread& t : threads) t.join();
      if (failure) std::rethrow_exception(failure);
      for (size_t i = first; i < last; ++i)
        for (size_t k = 0; k < cut[i - first].size(); ++k) {
          const at::Tensor& audio = cut[i - first][k];
          if (!audio.defined()) continue;
          const ImportedUtterance& u = recordings[i].utterances[k];
          writer.add(source.split, asr_store_item(audio, u.text, u.speaker), u.id);
          ++r.utterances;
          r.seconds += static_cast<double>(audio.numel()) / kCorpusSampleRate;
        }
    }
    r.skipped = bad.count - skipped_before;
    if (r.utterances == 0) throw std::runtime_error(source.dir + ": no utterance could be imported");
    record.push_back({{"split", r.split}, {"source", r.dir}, {"layout", r.layout}, {"utterances", r.utterances},
                      {"skipped", r.skipped}, {"seconds", r.seconds}});
    report.splits.push_back(r);
  }
  writer.set_attribute("sample_rate", int64_t{kCorpusSampleRate});
  writer.set_attribute("import", record.dump());
  writer.finish();
  return report;
}

}  // namespace wavetrain::experiments::asr
