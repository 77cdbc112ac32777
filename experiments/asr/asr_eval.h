// Evaluating an ASR model on one split of its store (`wavetrain eval RUN --split NAME`): decode
// every utterance (decode.h), score it as sclite does (wer.h), and write icefall's files to the
// run directory, where {settings} is the method and its setting (DecodingOptions::settings_label:
// greedy_search-max-sym-per-frame-2, modified_beam_search-beam-size-4; an average adds -avg-N):
//   recogs-{split}-{settings}.txt   every utterance's reference and hypothesis words
//   errs-{split}-{settings}.txt     WER, error counts, per-utterance alignment, top errors, per word
//   wer-summary-{split}.txt         "settings\tWER", one line per settings evaluated, best first
//   asr-eval-{split}-{settings}.json the counts, WER per voice (by_speaker: the store's voice, else speaker), decoding speed
// Each file is written whole (atomic rename); an evaluation that fails writes nothing.
#pragma once

#include <ATen/ATen.h>

#include <map>
#include <string>
#include <vector>

#include "experiments/asr/decode.h"
#include "experiments/asr/wer.h"
#include "trainer/amp.h"
#include "trainer/task.h"

namespace wavetrain::experiments::asr {

struct AsrEvalOptions {
  DecodingOptions decoding;
  int64_t batch_size = 32;
};

struct AsrEvalResult {
  std::string split;
  std::string method;        // the settings label the files are named by (see above)
  DecodingOptions decoding;  // what decoded it
  std::vector<Recognition> results;  // in the store's order
  std::vector<std::string> speakers;  // per result: its voice ("engine:voice"), else its speaker; "" where the store has neither
  std::vector<int64_t> samples;       // per result, 16 kHz
  std::vector<Hypothesis> hypotheses;  // per result: tokens and their frames
  std::vector<WordErrors> errors;      // per result
  ErrorStats stats;
  std::map<std::string, WordErrors> by_speaker;
  double audio_seconds = 0;
  double decode_seconds = 0;  // features, encoder and search, wall clock
  double real_time_factor() const { return decode_seconds > 0 ? audio_seconds / decode_seconds : 0; }
};

// Decodes the task's validation split (an "asr" task: asr.valid_split names the split).
// Throws std::invalid_argument when the task is not an ASR task.
AsrEvalResult evaluate_asr(Task& task, const at::Device& device, const AmpPolicy& amp, const AsrEvalOptions& options);

// Writes the four files into `dir`; returns their paths (recogs, errs, summary, json).
std::vector<std::string> write_asr_eval_files(const std::string& dir, const AsrEvalResult& result);

}  // namespace wavetrain::experiments::asr
