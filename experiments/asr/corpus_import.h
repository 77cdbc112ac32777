// Bring your own speech (`wavetrain data asr-import -o STORE SPLIT=DIR ...`): a Kaldi data directory
// or the LibriSpeech layout into the same ASR store as the built-in corpus (corpus_synth.h),
// resampled to 16 kHz by libsoxr, several channels averaged to one.
//
// Kaldi data directory (recognised by its wav.scp):
//   wav.scp    <recording-id> <path>          plain paths (a command ending in '|' is refused)
//   text       <utterance-id> <transcript>
//   segments   <utterance-id> <recording-id> <start s> <end s>     optional
//   utt2spk    <utterance-id> <speaker>                            optional (else the recording id)
// LibriSpeech (recognised by */*/*.trans.txt): SPEAKER/CHAPTER/SPEAKER-CHAPTER-NNNN.flac and
// SPEAKER/CHAPTER/SPEAKER-CHAPTER.trans.txt ("<utterance-id> <TRANSCRIPT>" per line).
//
// Transcripts are kept as written (whitespace collapsed). A bad entry (a missing or unreadable
// audio file, an empty or missing transcript, a segment past the end of its recording or with
// end <= start, a malformed line) is named with its file and line: skipped with a warning, or
// fatal with `strict`. Utterances are written in the order of their recordings (sorted ids).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace wavetrain::experiments::asr {

struct ImportSource {
  std::string split;  // the store's split name
  std::string dir;
};

struct ImportOptions {
  std::vector<ImportSource> sources;
  std::string store;
  bool strict = false;  // a bad entry is an error instead of a warning
  int jobs = 0;         // audio files decoded at once; 0: the number of cores
  std::string command;
  std::function<void(const std::string&)> warn;  // skipped entries; stderr when unset
};

struct ImportReport {
  struct Split {
    std::string split, dir, layout;  // layout: "kaldi" or "librispeech"
    int64_t utterances = 0, skipped = 0;
    double seconds = 0;
  };
  std::vector<Split> splits;
};

ImportReport import_asr_data(const ImportOptions& options);

}  // namespace wavetrain::experiments::asr
