// The evaluation report of an ASR run: RUN/report.html (self-contained: inline SVG, the worst
// utterances' audio inlined as WAV data URLs, no scripts or network) and RUN/report.md, rewritten by
// every `wavetrain eval` of the run from what its evaluations left in the run directory.
//
// Contents: WER of every split and decoding method evaluated so far (table and bar chart, from
// wer-summary-*.txt), WER per voice (from asr-eval-*.json), the latest evaluation's error
// breakdown, its most frequent substitutions, deletions and insertions, its worst utterances with
// the alignment coloured (deleted, inserted, substituted) and a player for each, the training
// curves from metrics.csv (log axis for the loss), the resolved config and the device/precision.
#pragma once

#include <string>
#include <utility>

#include "experiments/asr/asr_eval.h"
#include "experiments/asr/asr_task.h"

namespace wavetrain::experiments::asr {

struct AsrReportOptions {
  int worst_utterances = 8;
  int top_words = 10;
};

// `result` is the evaluation just made (of task's validation split, whose audio the players use).
// Returns the paths of report.html and report.md.
std::pair<std::string, std::string> write_asr_report(const std::string& run_dir, const std::string& checkpoint, int64_t step,
                                                     const AsrEvalResult& result, const AsrEvaluation& task,
                                                     const AsrReportOptions& options = {});

}  // namespace wavetrain::experiments::asr
