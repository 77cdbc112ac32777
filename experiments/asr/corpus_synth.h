// The built-in speech corpus (`wavetrain data asr-synth -o DIR`), so that a new user needs no
// recordings: sentences (sentences.h, or the user's own) spoken by three synthesisers of Debian's
// (espeak-ng, flite, festival), resampled to 16 kHz, optionally with reverb (sox) and noise,
// written as an ASR store.
//
// Splits are by speaker, never by sentence, so that the test sets measure voices the model has not
// heard; a speaker is the person recorded for a voice (flite's slt and festival's us-slt-hts are
// both CMU ARCTIC's slt), or for espeak-ng, which records nobody, its voice variant:
//   train, dev            espeak-ng: eight English accents x 10 "training" variants; flite: rms, awb
//   test-unseen-voices    espeak-ng: the same accents x 7 variants no training utterance uses;
//                         flite: slt, kal16, kal (kal is an 8 kHz voice)
//   test-held-out-engine  festival: kal_diphone, ked_diphone, cmu_us_slt_arctic_hts, an engine no
//                         training utterance comes from
// Each utterance draws an engine of its split (equal shares), a voice, speed (espeak-ng: 130-210
// words per minute; flite and festival: duration stretched by 0.85-1.2), pitch (espeak-ng: 20-80;
// flite and festival: shifted by sox within +-250 cents), level, reverb and noise (SNR 5-30 dB)
// from a generator seeded by (seed, split, index): the same seed gives the same corpus whatever
// the thread count, and a split does not change when another split's size does.
//
// The store (docs/asr.md): per split, fields "audio" (float32 [samples] at 16 kHz), "text",
// "speaker" and "voice" ("engine:voice"; UTF-8 bytes, uint8 [bytes]), "duration" (float64 [1],
// seconds); root attributes sample_rate (16000) and corpus (JSON: the options, the voices and
// speakers of every split, program versions).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/hdf5_store.h"

namespace wavetrain::experiments::asr {

inline constexpr int kCorpusSampleRate = 16000;

// One utterance as the store holds it (above); audio float32 [samples] at 16 kHz. Shared by
// asr-synth and asr-import, so both write the same fields ("voice" only when given).
data::Item asr_store_item(const at::Tensor& audio, const std::string& text, const std::string& speaker,
                          const std::string& voice = "");
// A UTF-8 field ("text", "speaker") back as a string.
std::string utf8_field(const at::Tensor& bytes);

struct SynthOptions {
  std::string dir;              // DIR: DIR/corpus.h5 is written
  uint64_t seed = 0;
  int64_t train = 4000, dev = 200, test = 300;  // utterances; `test` for each of the two test splits
  std::string text_file;        // one sentence a line instead of the generator; empty: the generator
  bool noise = false;           // additive noise at a random SNR in [5, 30] dB
  bool reverb = false;          // sox's reverb with random room settings
  int jobs = 0;                 // synthesiser processes at once; 0: the number of cores
  std::string command;          // recorded in the store
};

struct Voice {
  std::string engine;   // "espeak-ng", "flite" or "festival"
  std::string name;     // "en-gb-scotland+m3", "slt", "kal_diphone"
  std::string speaker;  // who was recorded: "arctic:slt", "diphone:kal"; "espeak-ng:m3"
  std::string id() const { return engine + ":" + name; }
};

// The voices of a split ("train", "dev", "test-unseen-voices", "test-held-out-engine"); throws
// std::invalid_argument for another name.
std::vector<Voice> split_voices(const std::string& split);
std::vector<std::string> corpus_splits();

struct SplitReport {
  std::string split;
  int64_t utterances = 0;
  double seconds = 0;  // of audio
  std::vector<std::string> voices;  // those used
};

struct SynthReport {
  std::string store;
  std::vector<SplitReport> splits;
  double wall_seconds = 0, cpu_seconds = 0;  // cpu: this process and the synthesisers it ran
};

// Checks that espeak-ng, flite, festival and sox are installed with the voices above, and throws
// std::runtime_error naming every missing program and the Debian package that has it.
void check_synth_programs(bool reverb);

// The sentences of a user's text file: normalised (sentences.h). Throws std::runtime_error naming
// the file and line of a line with digits; lines without words are skipped; a file without any
// sentence is an error.
std::vector<std::string> read_sentence_file(const std::string& path);

SynthReport synthesize_corpus(const SynthOptions& options);

}  // namespace wavetrain::experiments::asr
