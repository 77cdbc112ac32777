// The speech-recognition data commands:
//   wavetrain data asr-synth -o DIR          the built-in corpus (DIR/corpus.h5), spoken by espeak-ng and flite
//   wavetrain data asr-import -o STORE SPLIT=DIR ...   Kaldi data directories or LibriSpeech folders
//   wavetrain data asr-bpe STORE --vocab N   a sentencepiece tokenizer from STORE's training transcripts
// and transcription with a trained run:
//   wavetrain transcribe RUN_OR_CKPT audio... [-o out.txt] [--format json] [--method modified_beam_search]
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "experiments/asr/corpus_import.h"
#include "experiments/asr/corpus_synth.h"
#include "experiments/asr/tokenizer.h"
#include "experiments/asr/transcribe.h"
#include "trainer/serialization/atomic_file.h"
#include "trainer/device.h"

namespace wavetrain::cli {

void add_asr_commands(CLI::App& app) {
  namespace asr = experiments::asr;
  CLI::App* data = app.get_subcommand("data");  // made by add_amp_commands

  auto synth = std::make_shared<asr::SynthOptions>();
  CLI::App* s = data->add_subcommand("asr-synth", "Write the built-in speech corpus: sentences spoken by espeak-ng and flite voices, split by voice");
  s->add_option("-o,--output", synth->dir, "Directory for corpus.h5")->required();
  s->add_option("--seed", synth->seed, "Seed: the same seed gives the same corpus")->capture_default_str();
  s->add_option("--train", synth->train, "Training utterances")->capture_default_str();
  s->add_option("--dev", synth->dev, "Development utterances (the training voices)")->capture_default_str();
  s->add_option("--test", synth->test, "Utterances of each test split (unseen espeak-ng voices; flite)")->capture_default_str();
  s->add_option("--text", synth->text_file, "Sentences to speak, one a line, numbers in words (default: the built-in generator)");
  s->add_flag("--noise", synth->noise, "Add noise at a random SNR of 5-30 dB");
  s->add_flag("--reverb", synth->reverb, "Add reverb through sox, random room per utterance");
  s->add_option("-j,--jobs", synth->jobs, "Synthesisers running at once (default: the number of cores)");
  s->callback([synth] {
    synth->command = "wavetrain data asr-synth -o " + synth->dir + " --seed " + std::to_string(synth->seed) + " --train " +
                     std::to_string(synth->train) + " --dev " + std::to_string(synth->dev) + " --test " + std::to_string(synth->test) +
                     (synth->text_file.empty() ? "" : " --text " + synth->text_file) + (synth->noise ? " --noise" : "") +
                     (synth->reverb ? " --reverb" : "");
    const asr::SynthReport r = asr::synthesize_corpus(*synth);
    double total = 0;
    std::printf("wrote %s\n", r.store.c_str());
    for (const asr::SplitReport& split : r.splits) {
      std::printf("  %-19s %6lld utterances %8.1f min  %zu voices\n", split.split.c_str(), static_cast<long long>(split.utterances),
                  split.seconds / 60, split.voices.size());
      total += split.seconds;
    }
    std::printf("  %.2f h of audio in %.1f s (%.1f s of CPU: %.1f s per hour of audio)\n", total / 3600, r.wall_seconds, r.cpu_seconds,
                total > 0 ? r.cpu_seconds / (total / 3600) : 0.0);
  });

  auto import = std::make_shared<asr::ImportOptions>();
  auto pairs = std::make_shared<std::vector<std::string>>();
  CLI::App* im = data->add_subcommand("asr-import", "Import speech: Kaldi data directories (wav.scp, text, segments, utt2spk) or LibriSpeech folders");
  im->add_option("sources", *pairs, "SPLIT=DIR, e.g. train=data/train dev=LibriSpeech/dev-clean")->required();
  im->add_option("-o,--output", import->store, "The ASR store to write")->required();
  im->add_flag("--strict", import->strict, "A bad entry is an error (default: named in a warning and skipped)");
  im->add_option("-j,--jobs", import->jobs, "Audio files decoded at once (default: the number of cores)");
  im->callback([import, pairs] {
    import->command = "wavetrain data asr-import -o " + import->store + (import->strict ? " --strict" : "");
    import->sources.clear();
    for (const std::string& p : *pairs) {
      const size_t eq = p.find('=');
      if (eq == std::string::npos || eq == 0 || eq + 1 == p.size())
        throw UsageError("asr-import: expected SPLIT=DIR (e.g. train=data/train), got '" + p + "'");
      import->sources.push_back({p.substr(0, eq), p.substr(eq + 1)});
      import->command += " " + p;
    }
    const asr::ImportReport r = asr::import_asr_data(*import);
    std::printf("wrote %s\n", import->store.c_str());
    for (const auto& s : r.splits)
      std::printf("  %-12s %7lld utterances %8.1f min  from %s (%s)%s\n", s.split.c_str(), static_cast<long long>(s.utterances), s.seconds / 60,
                  s.dir.c_str(), s.layout.c_str(), s.skipped ? (", " + std::to_string(s.skipped) + " skipped").c_str() : "");
  });

  auto bpe = std::make_shared<asr::TokenizerTraining>();
  CLI::App* b = data->add_subcommand("asr-bpe", "Train a sentencepiece tokenizer on a store's training transcripts (icefall's conventions)");
  b->add_option("store", bpe->store, "An ASR store (asr-synth, asr-import)")->required();
  b->add_option("--vocab", bpe->vocab_size, "Pieces, <blk> <sos/eos> <unk> included")->capture_default_str();
  b->add_option("--type", bpe->model_type, "unigram or bpe")->capture_default_str();
  b->add_option("-o,--output", bpe->output_dir, "Directory for bpe.model and tokens.txt (default: the store's)");
  b->callback([bpe] {
    const asr::TokenizerFiles f = asr::train_tokenizer(*bpe);
    std::printf("wrote %s and %s (%d pieces, from %lld transcripts)\n", f.model.c_str(), f.tokens.c_str(), f.vocab_size,
                static_cast<long long>(f.sentences));
  });

  struct TranscribeCommand {
    std::string model, tokenizer, output, format = "text", device = "auto";
    int64_t avg = 1;
    std::vector<std::string> files;
    asr::TranscribeOptions options;
  };
  auto tr = std::make_shared<TranscribeCommand>();
  CLI::App* t = app.add_subcommand("transcribe", "Transcribe audio files of any length and format with a trained ASR run");
  t->add_option("model", tr->model, "An ASR run directory (its best, else last checkpoint) or a checkpoint")->required();
  t->add_option("audio", tr->files, "Audio files (any format libsndfile reads; resampled to 16 kHz, mixed to mono)")->required();
  t->add_option("-o,--output", tr->output, "Write the transcripts here instead of stdout");
  t->add_option("--format", tr->format, "text, or json with each token's time")->check(CLI::IsMember({"text", "json"}))->capture_default_str();
  t->add_option("--method", tr->options.decoding.method, "greedy_search or modified_beam_search")
      ->check(CLI::IsMember({"greedy_search", "modified_beam_search"}))
      ->capture_default_str();
  t->add_option("--beam", tr->options.decoding.beam, "Hypotheses kept by modified beam search")->capture_default_str();
  t->add_option("--avg", tr->avg, "Average the weights of this many epoch checkpoints ending at the model's step (as eval --avg)")
      ->check(CLI::Range(int64_t{1}, int64_t{1000}))
      ->capture_default_str();
  t->add_option("--tokenizer", tr->tokenizer, "The tokenizer (default: the run's)");
  t->add_option("--device", tr->device, "auto, cpu, cuda, cuda:N or mps")->capture_default_str();
  // Under a second a piece is shorter than most words (the cutter would lengthen it anyway).
  t->add_option("--max-piece", tr->options.max_piece_seconds, "Long audio is cut into pieces of at most this many seconds (1 to 600)")
      ->check(CLI::Range(1.0, 600.0))
      ->capture_default_str();
  t->callback([tr] {
    const DeviceChoice device = choose_device(DeviceRequest::parse(tr->device), probe_availability());
    for (const std::string& w : device.warnings) std::cerr << "warning: " << w << "\n";
    asr::Recognizer recognizer(tr->model, tr->tokenizer, device.device, tr->avg);
    // Every file is transcribed before anything is written: a bad file leaves no partial output.
    std::vector<asr::Transcript> transcripts;
    double audio = 0, spent = 0;
    for (const std::string& f : tr->files) {
      transcripts.push_back(recognizer.transcribe_file(f, tr->options));
      audio += transcripts.back().audio_seconds;
      spent += transcripts.back().decode_seconds;
    }
    std::ostringstream out;
    if (tr->format == "json") {
      nlohmann::json j = nlohmann::json::array();
      for (size_t i = 0; i < transcripts.size(); ++i) {
        const asr::Transcript& x = transcripts[i];
        nlohmann::json tokens = nlohmann::json::array();
        for (const asr::TimedToken& k : x.tokens) tokens.push_back({{"token", k.piece}, {"time", k.seconds}});
        j.push_back({{"file", tr->files[i]}, {"text", x.text}, {"duration", x.audio_seconds}, {"pieces", x.pieces},
                     {"real_time_factor", x.decode_seconds > 0 ? x.audio_seconds / x.decode_seconds : 0.0}, {"tokens", tokens}});
      }
      out << j.dump(2) << "\n";
    } else {
      for (size_t i = 0; i < transcripts.size(); ++i)
        out << (transcripts.size() > 1 ? tr->files[i] + "\t" : "") << transcripts[i].text << "\n";
    }
    if (tr->output.empty()) std::cout << out.str();
    else write_file_atomic(tr->output, out.str());
    std::fprintf(stderr, "transcribed %.1f s of audio in %.2f s (%.0fx real time) with %s\n", audio, spent,
                 spent > 0 ? audio / spent : 0.0, recognizer.checkpoint().c_str());
  });
}

}  // namespace wavetrain::cli
